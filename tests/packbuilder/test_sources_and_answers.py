"""Fast tier: documentation read into sourced chunks (and the files it cannot read named), answers read into
cited sections, and the size budgets held."""
from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from autocomp_zmq.packbuilder import compose, sources
from autocomp_zmq.packbuilder.sources import DocError, read_folder

DOCS = Path(__file__).parent / "docs"
ANSWERS = Path(__file__).parent / "answers"


def test_chunks_name_their_file_and_heading_or_lines():
    chunks = read_folder(DOCS)
    where = {c.source for c in chunks}
    assert "overview.md § Memory (lines 15-23)" in where
    assert "intrinsics.html § Horizontal sums" in where       # HTML headings kept, by the standard parser
    assert "timing.txt lines 1-15" in where
    assert [c.id for c in chunks] == [f"S{i}" for i in range(1, len(chunks) + 1)]
    html = next(c for c in chunks if c.source == "intrinsics.html § Loads and stores")
    assert "_mm256_maskload_ps" in html.text and "<li>" not in html.text
    assert not any("never part of the text" in c.text for c in chunks)     # scripts left out


def test_a_long_text_is_cut_at_blank_lines_into_line_ranges(tmp_path):
    (tmp_path / "long.txt").write_text("\n\n".join(f"paragraph {i} " + "x" * 300 for i in range(10)))
    chunks = read_folder(tmp_path, max_chunk_chars=1000)
    assert len(chunks) > 3 and all(len(c.text) <= 1000 for c in chunks)
    assert chunks[0].where == "lines 1-5" and chunks[1].where.startswith("lines 6-")


@pytest.mark.parametrize("name, content, why", [
    ("manual.docx", b"PK\x03\x04", ".docx is not a documentation format"),
    ("notes.md", b"caf\xe9\n", "not UTF-8 text"),
    ("manual.pdf", b"%PDF-1.4", "needs the pdftotext program"),
])
def test_a_file_it_cannot_read_is_named(tmp_path, monkeypatch, name, content, why):
    monkeypatch.setattr(sources.shutil, "which", lambda _: None)       # no pdftotext on this PATH
    (tmp_path / "ok.md").write_text("# Fine\ntext\n")
    (tmp_path / name).write_bytes(content)
    with pytest.raises(DocError, match=why) as err:
        read_folder(tmp_path)
    assert str(tmp_path / name) in str(err.value)


def test_the_command_names_the_unreadable_file_and_leaves_no_folder(tmp_path):
    from autocomp_zmq.launch import app
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "isa.md").write_bytes(b"\xff\xfe broken")
    out = tmp_path / "pack"
    result = CliRunner().invoke(app, ["build-target", str(docs), "--name", "x", "--model", "openai:gpt-5",
                                      "--out", str(out)])
    assert result.exit_code == 1
    assert f"cannot read {docs / 'isa.md'}: not UTF-8 text" in " ".join(result.output.split())
    assert not out.exists()


def chunks() -> dict:
    return {c.id: c for c in read_folder(DOCS)}


def test_recorded_answers_read_into_cited_sections():
    isa = compose.read_answer("isa", (ANSWERS / "isa.md").read_text(), chunks())
    assert [s.title for s in isa.sections][:2] == ["Registers", "Loads and stores"]
    assert isa.sections[1].sources == ["S2", "S8"]
    assert "Sources" not in isa.sections[1].body
    menu = compose.read_answer("menu", (ANSWERS / "menu.toml").read_text(), chunks())
    assert menu.sections[0].title == "vectorize" and menu.sections[0].label == "Vectorize with AVX2 intrinsics"
    text = compose.menu_file(menu, "m", chunks())
    assert "# sources: intrinsics.html § Loads and stores; intrinsics.html § Arithmetic" in text
    example = compose.example_files(compose.read_answer("examples", (ANSWERS / "examples.md").read_text(),
                                                        chunks()), chunks())
    assert list(example) == ["examples/sum_8acc.c"]
    assert example["examples/sum_8acc.c"].startswith("// Eight independent accumulators")
    assert "not yet verified" in example["examples/sum_8acc.c"]


@pytest.mark.parametrize("key, answer, why", [
    ("isa", "## Registers\nSixteen of them.\n", "cites no sources"),
    ("isa", "## Registers\nSixteen.\nSources: [S99]\n", "S99, which are not chunks"),
    ("isa", "Here is the reference, without headings.", "no sections"),
    ("menu", "[[option]]\nid = 'x'\ntitle = 'y'\n", "needs id, title and description"),
    ("menu", "[[option\n", "not valid TOML"),
    ("examples", "## sum.c\nA sum.\nSources: [S9]\nno code here\n", "no fenced code block"),
])
def test_an_unusable_answer_says_why(key, answer, why):
    with pytest.raises(compose.AnswerError, match=why):
        compose.read_answer(key, answer, chunks())


def test_over_budget_sections_are_trimmed_with_a_note_and_trailing_ones_left_out():
    part = compose.read_answer("isa", (ANSWERS / "isa.md").read_text(), chunks())
    budget = compose.Budget(section_chars=250, part_chars=600)
    assert compose.overruns(part, budget)
    trimmed = compose.trim(part, budget)
    assert not compose.overruns(trimmed, budget)
    assert all(len(s.body) <= 250 for s in trimmed.sections)
    assert any("trimmed:" in s.note for s in trimmed.sections)
    assert any(n.startswith("left out 'Memory'") for n in trimmed.notes)
    assert "(trimmed: " in compose.markdown_file(trimmed, "h", chunks())


def test_an_example_over_budget_is_left_out_not_cut():
    part = compose.read_answer("examples", (ANSWERS / "examples.md").read_text(), chunks())
    trimmed = compose.trim(part, compose.Budget(section_chars=300, part_chars=10_000))
    assert trimmed.sections == [] and trimmed.notes[0].startswith("left out example sum_8acc.c")
