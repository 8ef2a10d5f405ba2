"""A model's answer is untrusted code: the whole path from the answer to the
evaluator must hold against it. The scripted model answers every coding
request with a kernel that hides an #include of a host file behind a lone
carriage return, which ends a // comment for gcc."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.llm.fake_servers import HWLOOP, FakeLLM, smart_answer
from tests.system.runkit import finish, launch, query, write_config

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def test_carriage_return_include_in_a_model_answer_leaks_nothing(tmp_path):
    # a host file every user can read, whose first line gcc would quote in its error message
    secret = Path("/etc/passwd")
    token = secret.read_text().splitlines()[0]
    hostile = HWLOOP.replace('#include "include/gemmini.h"',
                             f'#include "include/gemmini.h"\n// see notes\r#include "{secret}"', 1)
    assert hostile != HWLOOP

    def script(prompt, n):
        if "OPTION: <id" in prompt:
            return 200, {}, smart_answer(prompt)
        return 200, {}, f"Here is the kernel.\n```c\n{hostile}```\n"

    fake = FakeLLM(script)
    try:
        model = f"openai-compat@{fake.url}/v1:hostile"
        cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=1, codes=1, model=[model])
        run = tmp_path / "run"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "1", "--out", str(run)))
    finally:
        fake.close()
    evals = query(run, "SELECT e.error_kind, e.error FROM evals e JOIN candidates c ON c.id = e.candidate_id "
                       "WHERE c.origin != 'initial'")
    assert evals, out
    assert all(kind == "policy" and "is not allowed" in error for kind, error in evals), evals
    # nothing of the host file anywhere: not in the store, not in what the run printed, not in prompts
    dump = "\n".join(json.dumps(row) for table in ("evals", "jobs", "candidates")
                     for row in query(run, f"SELECT * FROM {table}"))
    assert token not in dump and token not in out
    assert all(token not in json.dumps(r["body"]) for r in fake.requests)


ESCAPES = ("\x1b]0;owned\x07", "\x1b[2J", "\x1b]52;c;cm0gLXJmIH4=\x07", "\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\")


def test_escape_sequences_in_answers_are_shown_not_obeyed(tmp_path):
    """Before, `show` printed plans, kernels and answers with their ESC sequences intact: a model could retitle the
    operator's window, clear the screen, plant a hyperlink or write the clipboard (OSC 52)."""
    def script(prompt, n):
        if "OPTION: <id" in prompt:
            return 200, {}, "OPTION: loop-ws\nPLAN:\nUse the loop " + "".join(ESCAPES) + " FSM.\n"
        return 200, {}, "Here it is " + ESCAPES[1] + f"\n```c\n{HWLOOP}```\n"

    fake = FakeLLM(script)
    try:
        model = f"openai-compat@{fake.url}/v1:escapes"
        cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=1, codes=1, model=[model])
        run = tmp_path / "run"
        finish(launch("run", "--config", str(cfg), "--evaluators", "1", "--out", str(run)))
    finally:
        fake.close()
    shown = [finish(launch("show", str(run), *args)) for args in (("--call", "1"), ("--call", "2"), ())]
    assert all("\x1b" not in out for out in shown), [out for out in shown if "\x1b" in out][0][:2000]
    assert "\u241b]0;owned" in shown[0] and "\u241b[2J" in shown[1]       # shown, as control pictures
