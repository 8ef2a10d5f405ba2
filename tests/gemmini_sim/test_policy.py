"""policy.check_source: the static checks applied before a kernel is compiled."""
from __future__ import annotations

import pytest

from autocomp_zmq.hw_runners.base import target_info
from autocomp_zmq.hw_runners.gemmini_sim.policy import ALLOWED_HEADERS, MAX_SOURCE_BYTES, PolicyError, check_source

PROBLEM_DIR = target_info("gemmini-sim").problems

ENTRY = "void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) { }\n"


def src(prelude: str = "", body: str = "") -> str:
    return prelude + "\nvoid solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) {\n" + body + "\n}\n"


@pytest.mark.parametrize("path", sorted(PROBLEM_DIR.glob("*.c")), ids=lambda p: p.name)
def test_shipped_kernels_are_accepted(path):
    check_source(path.read_text())


ACCEPTED = {
    "every_allowed_header": "".join(f"#include <{h}>\n" for h in sorted(ALLOWED_HEADERS)),
    "quoted_and_spaced_includes": '#include "gemmini.h"\n#  include   "stdio.h"  \n# include <math.h> // why not\n',
    "include_with_block_comment": "#include <stdlib.h> /* malloc */\n",
    "forbidden_words_in_comments": "// asm volatile, constructor, #include <unistd.h>, main(\n"
                                   "/* __asm__ incbin .init_array section( destructor\n   #include </etc/passwd> */\n",
    "identifiers_containing_words": "static int mainly, sections, plasma, asmb, remain_asm2;\n"
                                    "static int remain(int x) { return x; }\n",
    "stringizing": "#define STR(x) #x\nstatic const char *s = STR(hi);\n",
    "token_pasting_in_a_comment": "/* CAT(a, b) a ## b */\nstatic int x;\n",
}


@pytest.mark.parametrize("prelude", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_accepted(prelude):
    check_source(src(prelude))


def test_solution_split_across_lines_is_found():
    check_source("void\nsolution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) {}\n")


REJECTED = [
    # id, source, expected message fragment
    ("no_entry_point", "int main_like(void) { return 0; }\n", "kernel defines no `void solution(...)` entry point"),
    ("nul_byte", src("/* \0 */"), "NUL bytes"),
    ("too_large", src("/*" + "x" * MAX_SOURCE_BYTES + "*/"), "larger than 256 KiB"),
    ("unistd", src("#include <unistd.h>"), "line 1: #include of 'unistd.h' is not allowed; kernels may include gemmini.h"),
    ("absolute_path", src('#include "/etc/passwd"'), "#include of '/etc/passwd' is not allowed"),
    ("proc_environ", src("#include </proc/self/environ>"), "#include of '/proc/self/environ' is not allowed"),
    ("relative_escape", src('#include "../../../proc/1/environ"'), "is not allowed"),
    ("allowed_name_in_other_dir", src('#include "inc/../stdio.h"'), "is not allowed"),
    ("sys_header", src("#include <sys/syscall.h>"), "#include of 'sys/syscall.h' is not allowed"),
    ("line_number_reported", src("#include <stdio.h>\n\n#include <signal.h>"), "line 3: #include of 'signal.h'"),
    ("macro_include", src('#define H "/etc/passwd"\n#include H'), 'only literal #include "file" or <file> is allowed'),
    ("trailing_tokens", src("#include <stdio.h> extra"), "only literal #include"),
    ("include_next", src("#include_next <stdio.h>"), "#include_next is not allowed"),
    ("import", src("#import <stdio.h>"), "#import is not allowed"),
    ("embed", src('#embed "/etc/passwd"'), "#embed is not allowed"),
    ("digraph", src("%:include <unistd.h>"), "#include of 'unistd.h' is not allowed"),
    ("trigraph", src("??=include <unistd.h>"), "#include of 'unistd.h' is not allowed"),
    ("line_continuation", src("#inc\\\nlude <unistd.h>"), "#include of 'unistd.h' is not allowed"),
    ("comment_inside_directive", src("#/* x */include <unistd.h>"), "#include of 'unistd.h' is not allowed"),
    ("asm", src(body='asm("nop");'), "inline assembly is not allowed"),
    ("__asm__", src(body='__asm__ __volatile__("nop");'), "inline assembly is not allowed"),
    ("__asm", src(body='__asm("nop");'), "inline assembly is not allowed"),
    ("asm_in_string_literal", src(body='puts("asm");'), "inline assembly is not allowed"),
    ("constructor", src("__attribute__((constructor)) static void f(void) {}"), "constructors/destructors"),
    ("destructor", src("__attribute__((destructor)) static void f(void) {}"), "constructors/destructors"),
    ("init_array", src('static void f(void) {}\nvoid (*p)(void) __attribute__((used)) = f; /* */ const char *s = ".init_array";'),
     "placing code or data in ELF sections is not allowed"),
    ("section_attribute", src('__attribute__((section("foo"))) int x;'), "ELF sections"),
    ("incbin", src('const char *s = ".incbin";'), "including binary files is not allowed"),
    ("pragma_dependency", src('#pragma GCC dependency "/etc/passwd"'), "#pragma GCC dependency is not allowed"),
    ("_Pragma_dependency", src('_Pragma("GCC dependency \\"/etc/passwd\\"")'), "#pragma GCC dependency is not allowed"),
    ("define_main", src("int main(void) { return 0; }"), "kernels may not define or call the harness's own functions"),
    ("call_autocomp_entry", src(body="autocomp_entry(0);"), "harness's own functions"),
    ("call_harness_fail", src(body='harness_fail ("ok");'), "harness's own functions"),
    ("call_sim_fail", src(body='sim_fail("%d", 1);'), "harness's own functions"),
    ("token_pasting", src("#define CAT(a, b) a##b\nstatic int CAT(x, y);"),
     "line 1: token pasting (##) is not allowed: it can assemble forbidden names"),
    ("token_pasting_in_string_literal", src('const char *s = "a##b";'), "token pasting (##) is not allowed"),
    # The stricter policy also matches inside identifiers (documented in rules.md: "the words
    # constructor/destructor", "section(", "incbin" anywhere outside comments).
    ("asm_with_underscores_in_identifier", src("static int my_asm_free;"), "inline assembly is not allowed"),
    ("_asm", src("static int _asm;"), "inline assembly is not allowed"),
    ("constructor_inside_identifier", src("static int constructors_count;"), "constructors/destructors"),
    ("destructor_inside_identifier", src("static int n_destructors;"), "constructors/destructors"),
    ("section_call_inside_identifier", src("static int subsection(int x);"), "ELF sections"),
    ("fini_array_inside_identifier", src("static int fini_array_len;"), "ELF sections"),
    ("incbin_inside_identifier", src("static int incbinary;"), "including binary files is not allowed"),
]


@pytest.mark.parametrize("code,message", [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED])
def test_rejected(code, message):
    with pytest.raises(PolicyError) as info:
        check_source(code)
    assert message in str(info.value)


def test_line_numbers_count_lines_inside_comments():
    # lines 1-3 comment, 4 empty prelude, 5 signature, 6 body
    code = "/* one\n two\n three */\n" + src(body='__asm__("nop");')
    with pytest.raises(PolicyError, match=r"^line 6: inline assembly"):
        check_source(code)


def test_size_limit_is_in_bytes():
    # multi-byte characters count as bytes
    body = "/*" + "\u00e9" * (MAX_SOURCE_BYTES // 2) + "*/"
    assert len(body) < MAX_SOURCE_BYTES < len(body.encode())
    with pytest.raises(PolicyError, match="larger than"):
        check_source(src(body))


# Spellings that passed the regexes of the first policy.
BYPASSES = [
    ("__constructor__", src("__attribute__((__constructor__)) static void early(void) {}"),
     "constructors/destructors (code that runs outside solution()) are not allowed"),
    ("__destructor__", src("__attribute__((__destructor__)) static void late(void) {}"), "constructors/destructors"),
    ("token_pasted_asm", src('#define CAT(a, b) a##b\nCAT(__as, m__)(".globl x\\nx: .byte 1");'),
     "token pasting (##) is not allowed"),
    ("concatenated_init_array", src('static void f(void) {}\n'
                                    '__attribute__((used, __section__(".in" "it_array"))) static void (*p)(void) = f;'),
     "line 2: placing code or data in ELF sections is not allowed"),
    ("concatenated_incbin", src('#define CAT(a, b) a##b\n'
                                'CAT(__as, m__)(".section .rodata\\n.inc" "bin \\"/etc/passwd\\"\\n.text");'),
     "token pasting (##) is not allowed"),
    ("concatenated_incbin_without_pasting", src('__asm__(".inc" "bin \\"/etc/passwd\\"");'), "inline assembly is not allowed"),
]


@pytest.mark.parametrize("code,message", [c[1:] for c in BYPASSES], ids=[c[0] for c in BYPASSES])
def test_policy_bypasses_are_rejected(code, message):
    with pytest.raises(PolicyError) as info:
        check_source(code)
    assert message in str(info.value)
