"""Model answers as real models write them (tests/llm/answers/, expectations in expected.toml), read by
agents/workers/llm/parse.py: reasoning blocks, markdown, several code blocks, cut-off and declined answers."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from autocomp_zmq.agents.workers.llm.parse import FENCE_TAGS, AnswerError, parse_code, parse_plan, strip_reasoning

HERE = Path(__file__).parent / "answers"
MANIFEST = tomllib.loads((HERE / "expected.toml").read_text())
ANSWERS = MANIFEST["answers"]
MENUS = MANIFEST["menus"]
KINDS = {"empty", "refusal", "no_code", "no_entry_point", "no_plan"}


def read(name: str, entry: dict):
    answer = (HERE / f"{name}.txt").read_text()
    if entry["kind"] == "plan":
        return parse_plan(answer, MENUS[entry["menu"]], MANIFEST.get("titles", {}), MENUS.get(entry.get("known"), []))
    return parse_code(answer, FENCE_TAGS[entry["language"]], "solution", entry["language"])


def test_every_answer_file_has_an_expectation():
    files = {p.stem for p in HERE.glob("*.txt")}
    assert files == set(ANSWERS), (files ^ set(ANSWERS))
    assert len(files) >= 24
    for entry in ANSWERS.values():
        assert entry["kind"] in ("plan", "code") and ("error" in entry or "option" in entry or
                                                      "contains" in entry or "exact" in entry), entry
        assert entry.get("error", "empty") in KINDS


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_corpus(name):
    entry = ANSWERS[name]
    if "error" in entry:
        with pytest.raises(AnswerError) as info:
            read(name, entry)
        assert info.value.kind == entry["error"], str(info.value)
        assert entry["message"] in str(info.value)
        return
    got = read(name, entry)
    if entry["kind"] == "plan":
        assert got.option_id == entry["option"]
        assert got.choice == entry.get("choice", got.choice)
        for part in entry.get("plan_contains", []):
            assert part in got.text, got.text
        for part in entry.get("plan_absent", []):
            assert part not in got.text, got.text
        return
    if "exact" in entry:
        assert got == (HERE / entry["exact"]).read_text()
    for part in entry.get("contains", []):
        assert part in got, got
    for part in entry.get("absent", []):
        assert part not in got, got


# ---------------------------------------------------------------- focused cases

C = FENCE_TAGS["c"]
KERNEL = "void solution(int8_t A[I][K]) {\n  fence();\n}\n"


def code(answer: str, tags=C, language="c") -> str:
    return parse_code(answer, tags, "solution", language)


def test_strip_reasoning_forms():
    assert strip_reasoning("<think>\nhmm\n</think>\n\nOPTION: a") == "OPTION: a"
    assert strip_reasoning("<THINK>x</THINK>answer") == "answer"                      # case, one line
    assert strip_reasoning("<Thinking>\nx\n</Thinking>\nanswer") == "answer"
    assert strip_reasoning("<reasoning>\nx\n</reasoning>\nanswer") == "answer"
    assert strip_reasoning("<|begin_of_thought|>\nx\n<|end_of_thought|>\nanswer") == "answer"
    assert strip_reasoning("[THINK]x[/THINK]answer") == "answer"
    assert strip_reasoning("reasoning without opening tag\n</think>\n\nanswer") == "answer"
    assert strip_reasoning("so that's it.</think>answer") == "answer"                 # closing tag mid-line
    assert strip_reasoning("<think>\nnever closed\nOPTION: a") == ""                   # unclosed: all reasoning
    assert strip_reasoning("plain answer\nwith two lines") == "plain answer\nwith two lines"
    assert strip_reasoning("the <think> tag mid-line is text") == "the <think> tag mid-line is text"


def test_tags_inside_code_blocks_are_code():
    src = 'def solution(x):\n    s = """\n<thinking>\n"""\n    return x\n'
    assert code(f"```python\n{src}```\n", FENCE_TAGS["python"], "python") == src
    assert strip_reasoning(f"```python\n{src}```") == f"```python\n{src}```"


def test_fence_forms():
    assert code(f"```C\n{KERNEL}```") == KERNEL
    assert code(f"  ```c\n  {KERNEL.replace(chr(10), chr(10) + '  ').rstrip()}\n  ```\n") == KERNEL
    assert code(f"~~~~\n{KERNEL}~~~~") == KERNEL                                     # untagged, tildes
    assert code(f"```c title=kernel.c\n{KERNEL}```") == KERNEL
    assert code(f"```c\n{KERNEL}```", tags=("C",)) == KERNEL                          # tags compared case-insensitively
    with pytest.raises(AnswerError) as info:
        code(f"```c\n{KERNEL}")
    assert info.value.kind == "no_code" and "not closed" in str(info.value)
    with pytest.raises(AnswerError) as info:
        code(f"    ```c\n{KERNEL}    ```\n")                                          # 4 spaces: not a fence
    assert info.value.kind == "no_code"


def test_line_endings_in_code_survive():
    src = '#include "include/gemmini.h"\n// note\r#include "/etc/passwd"\n' + KERNEL   # a lone CR stays
    assert code(f"```c\n{src}```\n") == src
    crlf = KERNEL.replace("\n", "\r\n")
    assert code(f"Kernel:\r\n```c\r\n{crlf}```\r\n") == crlf


def test_a_target_of_another_language_needs_only_its_entry_point_named():
    assert parse_code("```text\nsolution: width=4\n```\n", ("text",), "solution", "text") == "solution: width=4\n"


@pytest.mark.parametrize("src, defines", [
    (KERNEL, True),
    ("static inline void\nsolution(int8_t A[I][K])\n{\n}\n", True),                       # GNU style
    ("void solution(int8_t A[I][K]);\n", False),                                         # prototype
    ("int main(void) {\n  solution(A);\n  return 0;\n}\n", False),                       # call
    ("// void solution(int8_t A[I][K]) {\n", False),                                     # comment
    ("void solution_helper(int x) {\n}\n", False),
])
def test_c_entry_point_definitions(src, defines):
    if defines:
        assert code(f"```c\n{src}```") == src
    else:
        with pytest.raises(AnswerError) as info:
            code(f"```c\n{src}```")
        assert info.value.kind == "no_entry_point"


def test_python_entry_point_definitions():
    py = FENCE_TAGS["python"]
    src = "@nki.jit(mode='simulation')\ndef solution(x):\n    return x\n"
    assert code(f"```python\n{src}```", py, "python") == src
    for bad in ("out = solution(x)\n", "    def solution(x):\n        pass\n", "# def solution(x):\n"):
        with pytest.raises(AnswerError) as info:
            code(f"```python\n{bad}```", py, "python")
        assert info.value.kind == "no_entry_point"


def test_several_definitions_the_last_wins_and_helpers_are_not_duplicated():
    a, b = KERNEL.replace("fence", "first"), KERNEL.replace("fence", "second")
    assert code(f"```c\n{a}```\nrevised:\n```c\n{b}```\n") == b
    helper = "static int helper(void) { return 1; }\n"
    both = "static int helper(void) { return 1; }\n" + KERNEL.replace("fence()", "helper()")
    assert code(f"```c\n{helper}```\n```c\n{both}```\n") == both   # the kernel defines it
    uses = KERNEL.replace("fence()", "helper()")
    assert code(f"```c\n{helper}```\n```c\n{uses}```\n") == helper + "\n" + uses


@pytest.mark.parametrize("answer, option", [
    ("OPTION: a\nPLAN:\nthe plan for option a, in full detail", "a"),
    ("**Option**: `b`\n**Plan**: the plan for option b, in full detail", "b"),
    ("> OPTION: B\n> PLAN: the plan for option b, in full detail", "b"),               # case of the id
    ("OPTION: hoist_invariants\nPLAN:\nthe plan, written out in enough detail", "hoist-invariants"),
    ("OPTION - a.\n\nPLAN - the plan for option a, in full detail", "a"),
    ("PLAN:\nthe plan for option b, in full detail\n\nOPTION: b", "b"),                # option after the plan
    ("Chosen option: b\n\nthe plan for option b, in full detail", "b"),                # no PLAN header
])
def test_option_lines(answer, option):
    plan = parse_plan(answer, ["a", "b", "hoist-invariants"])
    assert plan.option_id == option and plan.text.startswith("the plan")
    assert not re.search(r"^\W*option\W", plan.text, re.I | re.M), plan.text


@pytest.mark.parametrize("answer, kind", [
    ("", "empty"), ("   \n\n", "empty"), ("<think>\nlong thoughts, then cut off", "empty"),
    ("I can't help with that.", "refusal"), ("Sorry, but I cannot do this.", "refusal"),
    ("I'm unable to complete this request.", "refusal"),
    ("I'm sorry, but the plan below... OPTION: a\nPLAN:\nthe plan for option a, in full detail", None),
])
def test_empty_and_declined_answers(answer, kind):
    if kind is None:
        assert parse_plan(answer.replace("... ", "...\n"), ["a"]).option_id == "a"   # an option line wins
        return
    for parse in (lambda: parse_plan(answer, ["a"]), lambda: code(answer)):
        with pytest.raises(AnswerError) as info:
            parse()
        assert info.value.kind == kind


ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted([*ROOT.glob("hw_runners/gemmini_sim/problems/*.c"), *ROOT.glob("prompts/gemmini-sim/examples/*.c"),
                  *ROOT.glob("hw_runners/trainium_sim/problems/*/naive.py"), *ROOT.glob("hw_runners/trainium_sim/problems/*/tuned.py"),
                  *ROOT.glob("prompts/trainium-sim/examples/*.py")])


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_kernel_reads_back_unchanged(path):
    language = "c" if path.suffix == ".c" else "python"
    src = path.read_text()
    fence = FENCE_TAGS[language][0]
    assert code(f"Here is the kernel.\n```{fence}\n{src}```\n", FENCE_TAGS[language], language) == src
    assert code(f"Before:\n```{fence}\n{src}```\nAfter:\n```{fence}\n{src}```", FENCE_TAGS[language], language) == src


def test_old_code_is_told_by_the_lines_that_introduce_it():
    new, old = KERNEL.replace("fence", "new_kernel"), KERNEL.replace("fence", "old_kernel")
    assert code(f"```c\n{new}```\nFor comparison, the current code:\n```c\n{old}```\n") == new
    assert code(f"## Before\n```c\n{old}```\n## After\n```c\n{new}```\n") == new
    assert code(f"Here's the original for reference; the rewritten kernel follows.\n```c\n{old}```\n"
                f"```c\n{new}```\n") == new                                           # mixed intro: the last
    assert code(f"The original kernel:\n```c\n{old}```\n") == old                    # the only one


def test_a_bare_closing_tag_ends_reasoning_even_after_a_draft_block():
    answer = f"draft:\n```c\n{KERNEL.replace('fence', 'draft')}\n</think>\n\n```c\n{KERNEL}```\n"
    assert code(answer) == KERNEL
