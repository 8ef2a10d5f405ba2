"""Running a kernel the way Autocomp's harness does: Autocomp pastes only the body of a candidate's
solution() into its test harness (harnesses/<type>/testN.c, "SUBSTITUTE HERE"), so what stands before the
body, the signature included, never reaches the compiler. Some of Autocomp's own sols files rely on that
(a stray line above the function, a parameter list with a missing comma). with_problem_signature() does the
same: it keeps solution()'s body and puts it under the problem's own signature (`--target-option
autocomp_body=1`). Helper functions defined before solution() are dropped, as Autocomp drops them."""
from __future__ import annotations


class AutocompBodyError(ValueError):
    """The source has no solution() whose body can be found."""


def _skip(code: str, i: int) -> int:
    """The index after a comment or a string/char literal starting at i, else i."""
    if code.startswith("//", i):
        j = code.find("\n", i)
        return len(code) if j < 0 else j
    if code.startswith("/*", i):
        j = code.find("*/", i + 2)
        return len(code) if j < 0 else j + 2
    if code[i] in "\"'":
        q, j = code[i], i + 1
        while j < len(code) and code[j] != q:
            j += 2 if code[j] == "\\" else 1
        return j + 1
    return i


def _match(code: str, i: int, open_: str, close: str) -> int:
    """The index of the bracket closing the one at i (comments and literals skipped), or -1."""
    depth = 0
    while i < len(code):
        j = _skip(code, i)
        if j != i:
            i = j
            continue
        if code[i] == open_:
            depth += 1
        elif code[i] == close:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def solution_body(code: str) -> str:
    """The text between the braces of the first `solution(...) {`, comments and literals respected."""
    i = 0
    while True:
        i = code.find("solution", i)
        if i < 0:
            raise AutocompBodyError("no `void solution(...) { ... }` whose body could be taken")
        j = i + len("solution")
        while j < len(code) and code[j].isspace():
            j += 1
        if j < len(code) and code[j] == "(" and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_")):
            close = _match(code, j, "(", ")")
            k = close + 1
            while 0 < k < len(code) and code[k].isspace():
                k += 1
            if close > 0 and k < len(code) and code[k] == "{":
                end = _match(code, k, "{", "}")
                if end < 0:
                    raise AutocompBodyError("solution()'s body has no closing brace")
                return code[k + 1:end]
        i = j


def with_problem_signature(code: str, signature: str) -> str:
    """solution()'s body under `signature` (the problem's declaration, e.g. `void solution(float A[4][4])`)."""
    body = solution_body(code)
    return signature.strip().rstrip(";") + " {" + body + "}\n"
