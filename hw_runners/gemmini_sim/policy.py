"""Static checks on candidate C source before it reaches the compiler.

The sandbox is the real protection; these checks close the gaps it cannot:
the compiler runs before any seccomp filter exists, so an #include of an
arbitrary file (e.g. another process's /proc/<pid>/environ) or an assembler
.incbin could copy secrets into error messages, and code in constructors
would run before the harness locks the process down.
"""
from __future__ import annotations

import re

from autocomp_zmq.hw_runners.isa_check import strip_c_comments

MAX_SOURCE_BYTES = 256 * 1024

ALLOWED_HEADERS = frozenset({
    "gemmini.h", "include/gemmini.h", "gemmini_params.h", "include/gemmini_params.h",
    "gemmini_testutils.h", "include/gemmini_testutils.h", "gemmini_counter.h", "include/gemmini_counter.h",
    "stdint.h", "stdbool.h", "stddef.h", "stdio.h", "stdlib.h", "string.h", "limits.h",
    "math.h", "assert.h", "inttypes.h", "stdalign.h",
})

_FORBIDDEN = [
    (re.compile(r"##"), "token pasting (##) is not allowed: it can assemble forbidden names"),
    (re.compile(r"(?<![A-Za-z0-9])_*asm_*(?![A-Za-z0-9])"), "inline assembly is not allowed; use the Gemmini intrinsics"),
    (re.compile(r"constructor|destructor"), "constructors/destructors (code that runs outside solution()) are not allowed"),
    (re.compile(r"(init|fini)_array|_*section_*\s*\("), "placing code or data in ELF sections is not allowed"),
    (re.compile(r"incbin"), "including binary files is not allowed"),
    (re.compile(r"(#\s*pragma|_Pragma)[^\n]*\bdependency\b"), "#pragma GCC dependency is not allowed"),
    (re.compile(r"\b(main|autocomp_entry|harness_fail|sim_fail)\s*\("), "kernels may not define or call the harness's own functions"),
]


class PolicyError(ValueError):
    pass


def check_source(code: str) -> None:
    """Raise PolicyError with a clear reason if the kernel source is not acceptable."""
    if len(code.encode()) > MAX_SOURCE_BYTES:
        raise PolicyError(f"kernel source is larger than {MAX_SOURCE_BYTES // 1024} KiB")
    if "\0" in code:
        raise PolicyError("kernel source contains NUL bytes")
    if "void solution" not in code.replace("\n", " "):
        raise PolicyError("kernel defines no `void solution(...)` entry point")
    text = strip_c_comments(code.replace("\\\n", "")).replace("%:", "#").replace("??=", "#")
    for lineno, line in enumerate(text.splitlines(), 1):
        m = re.match(r"\s*#\s*(\w+)\s*(.*)", line)
        if not m or m.group(1) not in ("include", "include_next", "import", "embed"):
            continue
        if m.group(1) != "include":
            raise PolicyError(f"line {lineno}: #{m.group(1)} is not allowed")
        inc = re.fullmatch(r'[<"]([\w./]+)[>"]\s*', m.group(2))
        if not inc:
            raise PolicyError(f"line {lineno}: only literal #include \"file\" or <file> is allowed")
        if inc.group(1) not in ALLOWED_HEADERS:
            raise PolicyError(f"line {lineno}: #include of {inc.group(1)!r} is not allowed; kernels may include "
                              f"gemmini.h and these C headers: " +
                              ", ".join(sorted(h for h in ALLOWED_HEADERS if "gemmini" not in h)))
    for pattern, reason in _FORBIDDEN:
        m = pattern.search(text)
        if m:
            lineno = text.count("\n", 0, m.start()) + 1
            raise PolicyError(f"line {lineno}: {reason}")
