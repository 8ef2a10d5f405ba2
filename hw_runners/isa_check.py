"""ISA profiles' `forbid` lists, enforced for every target before its own evaluation: the first use of a
forbidden name in a kernel's source, found by the kernel language's own tokens (names inside comments and
string literals are not uses). A source check only fails fast with a clear message: a target whose kernels could
reach a forbidden operation some other way (Python's getattr, a macro) also checks what the kernel executed,
from its own trusted record (gemmini-sim: the loop FSMs' instruction count; trainium-sim: the replayed
instructions), since what a candidate writes can be disguised but what is replayed cannot."""
from __future__ import annotations

import io
import re
import tokenize


def first_use(code: str, forbid: tuple[str, ...], fence: str) -> tuple[int, str] | None:
    """(line, name) of the first use of a name in `forbid`, reading `code` as the language of its code fence
    (python; c, cpp, cuda; anything else as plain words); None if there is none."""
    if not forbid:
        return None
    names = set(forbid)
    if fence == "python":
        return _python(code, names)
    text = strip_c_comments(code.replace("\\\n", ""), blank_literals=True) if fence in ("c", "cpp", "cuda") else code
    for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_]*", text):
        if m.group(0) in names:
            return text.count("\n", 0, m.start()) + 1, m.group(0)
    return None


def _python(code: str, names: set[str]) -> tuple[int, str] | None:
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.NAME and tok.string in names:
                return tok.start[0], tok.string
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass   # code Python cannot read fails in the target with its own error
    return None


def strip_c_comments(src: str, blank_literals: bool = False) -> str:
    """C source with comments removed (line structure kept), and string/character literals blanked too if
    asked (a name inside one is not a use of it); gemmini-sim's #include check keeps the literals."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            out.append('""' if blank_literals else src[i:j + 1])
            i = j + 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            out.append(" " + "\n" * src[i:n if j < 0 else j + 2].count("\n"))
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def violation(code: str, forbid: tuple[str, ...], fence: str, profile: str, description: str) -> str | None:
    """The policy error for a kernel that uses a forbidden name, or None."""
    found = first_use(code, forbid, fence)
    if found is None:
        return None
    line, name = found
    return f"kernel rejected before compiling: line {line}: {name} is not available under --isa {profile}" + \
        (f" ({description})" if description else "")
