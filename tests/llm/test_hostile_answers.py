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
