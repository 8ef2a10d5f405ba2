"""ISA profiles' forbid lists, checked on the source by the kernel language's tokens for every target (fast:
no processes)."""
from __future__ import annotations

from autocomp_zmq.hw_runners.isa_check import first_use, violation

FORBID = ("nc_transpose", "gemmini_loop_ws")


def test_python_names_are_found_by_token_and_not_in_strings_or_comments():
    code = ('import neuronxcc.nki.isa as nisa\n# nc_transpose would be faster\ns = "nc_transpose"\n'
            'def solution(x):\n    return nisa.nc_transpose(x)\n')
    assert first_use(code, FORBID, "python") == (5, "nc_transpose")
    assert first_use('x = "nc_transpose"  # nc_transpose\n', FORBID, "python") is None
    assert first_use("nc_transposed = 1\n", FORBID, "python") is None       # whole names only


def test_c_names_are_found_outside_comments_and_literals():
    code = '/* gemmini_loop_ws */\n// gemmini_loop_ws\nchar *s = "gemmini_loop_ws";\nvoid solution() {\n' \
           '  gemmini_loop_ws(1);\n}\n'
    assert first_use(code, FORBID, "c") == (5, "gemmini_loop_ws")
    assert first_use(code.replace("  gemmini_loop_ws(1);", ""), FORBID, "c") is None


def test_other_languages_are_read_as_words_and_no_list_forbids_nothing():
    assert first_use("solution(tile=8, vectorize=1)", ("vectorize",), "text") == (1, "vectorize")
    assert first_use("anything at all", (), "python") is None


def test_the_violation_names_the_line_the_name_and_the_profile():
    why = violation("void solution() { gemmini_loop_ws(); }", FORBID, "c", "fine", "the paper's rules")
    assert why == ("kernel rejected before compiling: line 1: gemmini_loop_ws is not available under --isa fine "
                   "(the paper's rules)")
