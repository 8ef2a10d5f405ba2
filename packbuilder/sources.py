"""A folder of documentation as numbered, sourced chunks: Markdown split at its headings, HTML turned into text
(headings kept) by the standard library's parser and split the same way, plain text split at blank lines into
bounded line ranges, and PDF text (through a `pdftotext` binary, when one is on PATH) page by page. Each chunk
knows its file and its heading or lines, which is what the pack's citations name."""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

MARKDOWN = {".md", ".markdown"}
TEXT = {".txt", ".text", ".rst"}
HTML = {".html", ".htm"}
PDF = {".pdf"}
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


class DocError(ValueError):
    """A documentation file that cannot be read; the message names it."""


@dataclass(frozen=True)
class Chunk:
    id: str          # S1, S2, ...: how the model cites it
    file: str        # relative to the documentation folder
    where: str       # "§ Heading (lines 3-20)", "lines 1-40", "page 2"
    text: str

    @property
    def source(self) -> str:
        return f"{self.file} {self.where}"


def read_folder(folder: Path, max_chunk_chars: int = 4000, max_total_chars: int = 300_000) -> list[Chunk]:
    """Every readable file under `folder` (hidden ones skipped) as chunks, in path order. DocError for a file
    that cannot be read, a folder with none, or documentation too large to give a model whole."""
    if not folder.is_dir():
        raise DocError(f"{folder} is not a folder of documentation")
    files = sorted(p for p in folder.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    pieces: list[tuple[str, str, str]] = []
    for path in files:
        name = path.relative_to(folder).as_posix()
        pieces += [(name, where, text) for where, text in _pieces_of(path, max_chunk_chars)]
    if not pieces:
        raise DocError(f"{folder} holds no documentation (Markdown, HTML, text or PDF files)")
    total = sum(len(t) for _, _, t in pieces)
    if total > max_total_chars:
        raise DocError(f"{folder} holds {total:,} characters of documentation, more than the {max_total_chars:,} "
                       "a build gives the model; point it at a narrower folder")
    return [Chunk(f"S{i}", name, where, text) for i, (name, where, text) in enumerate(pieces, 1)]


def _pieces_of(path: Path, limit: int) -> list[tuple[str, str]]:
    suffix = path.suffix.lower()
    if suffix in PDF:
        return _pdf_pages(path, limit)
    if suffix not in MARKDOWN | TEXT | HTML:
        raise DocError(f"cannot read {path}: {suffix or 'a file without a suffix'} is not a documentation format "
                       "this reads (Markdown, HTML, plain text, PDF); convert it or move it out of the folder")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocError(f"cannot read {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DocError(f"cannot read {path}: {exc.strerror or exc}") from None
    if suffix in HTML:
        return markdown_sections(html_text(text), limit, lines=False)   # its text's lines are not the file's
    return markdown_sections(text, limit) if suffix in MARKDOWN else line_ranges(text, limit)


def markdown_sections(text: str, limit: int, lines: bool = True) -> list[tuple[str, str]]:
    """(where, text) per heading's section, with its lines (`lines`) or its part's number when a section over
    `limit` characters is cut at blank lines."""
    all_lines = text.splitlines()
    starts = [i for i, line in enumerate(all_lines) if _HEADING.match(line)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    out = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(all_lines)
        heading = _HEADING.match(all_lines[start])
        title = f"§ {heading.group(2)}" if heading else "§ (before the first heading)"
        blocks = list(_blocks(all_lines, start, end, limit))
        for part, (first, last, body) in enumerate(blocks, 1):
            where = f"(lines {first}-{last})" if lines else f"(part {part})" if len(blocks) > 1 else ""
            out.append((f"{title} {where}".strip(), body))
    return out


def line_ranges(text: str, limit: int, base: int = 0) -> list[tuple[str, str]]:
    lines = text.splitlines()
    return [(f"lines {first + base}-{last + base}", body) for first, last, body in _blocks(lines, 0, len(lines), limit)]


def _blocks(lines: list[str], start: int, end: int, limit: int):
    """(first line, last line, text) of lines[start:end], 1-based: cut at a blank line when the next line would
    pass `limit` characters (anywhere past twice that, for text without blank lines); blank blocks left out."""
    first, size = start, 0
    for i in range(start, end + 1):
        following = len(lines[i + 1]) if i + 1 < end else 0
        blank = i < end and not lines[i].strip()
        cut = i == end or (i > first and ((blank and size + following > limit) or size + len(lines[i]) > 2 * limit))
        if cut:
            body = "\n".join(lines[first:i]).strip()
            if body:
                yield first + 1, i, body
            first, size = i, 0
        if i < end:
            size += len(lines[i]) + 1


def _pdf_pages(path: Path, limit: int) -> list[tuple[str, str]]:
    tool = shutil.which("pdftotext")
    if tool is None:
        raise DocError(f"cannot read {path}: reading PDF needs the pdftotext program (poppler-utils) on PATH")
    done = subprocess.run([tool, "-layout", "-enc", "UTF-8", str(path), "-"], capture_output=True, timeout=120)
    if done.returncode != 0:
        raise DocError(f"cannot read {path}: pdftotext failed: {done.stderr.decode(errors='replace').strip()[:200]}")
    out = []
    for page, text in enumerate(done.stdout.decode("utf-8", errors="replace").split("\f"), 1):
        out += [(f"page {page}, {where}", body) for where, body in line_ranges(text, limit)]
    return out


class _TextOf(HTMLParser):
    """HTML as Markdown-ish text: headings as # lines, blocks on their own lines, scripts and styles left out."""
    BLOCKS = {"p", "div", "section", "article", "li", "tr", "br", "pre", "table", "ul", "ol", "dl", "dt", "dd",
              "blockquote"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0
        self.pre = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style", "head"):
            self.skip += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag in self.BLOCKS:
            self.out.append("\n- " if tag == "li" else "\n")
        if tag == "pre":
            self.pre += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style", "head"):
            self.skip = max(0, self.skip - 1)
        elif re.fullmatch(r"h[1-6]", tag) or tag in self.BLOCKS:
            self.out.append("\n")
        if tag == "pre":
            self.pre = max(0, self.pre - 1)

    def handle_data(self, data):
        if not self.skip:
            self.out.append(data if self.pre else re.sub(r"\s+", " ", data))


def html_text(html: str) -> str:
    parser = _TextOf()
    parser.feed(html)
    parser.close()
    lines = [line.rstrip() for line in "".join(parser.out).splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(line if line.strip() else "" for line in lines)).strip() + "\n"
