"""Autocomp's search modes in whole runs whose models are a local server speaking the OpenAI wire format: one-phase
mode (one call chooses, plans and writes; every call stored and priced, the plan shown) and a run that continues
another run's final beam (its kernels evaluated again here; another problem refused before anything starts)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.llm.fake_servers import HWLOOP, FakeLLM, smart_answer
from tests.system.runkit import candidate_codes, finish, launch, plan_texts, query, summary, write_config

pytestmark = [pytest.mark.system, pytest.mark.timeout(400)]

PLAN = "Hand the whole GEMM to gemmini_loop_ws in blocks that fit half the scratchpad."


def one_phase_script(prompt, n):
    """A model that answers a one-phase prompt with its choice, its plan and the kernel."""
    if "# Your role: optimizer" not in prompt:
        return 200, {}, smart_answer(prompt)
    menu = prompt.split("## Options offered in this step", 1)[1].split("\n## ", 1)[0]
    option = re.search(r"^\d+\. ([\w.-]+): ", menu, re.M).group(1)
    return 200, {}, f"OPTION: {option}\nPLAN:\n{PLAN}\n\n```c\n{HWLOOP}```\n"


def run_with_model(tmp_path, fake: FakeLLM, **options) -> tuple[str, Path, list[str]]:
    """A gemm-256 run whose model is the fake server, with these config options: (its output, its directory,
    the prompts the server was sent); it must speed the kernel up more than 5x."""
    try:
        model = f"openai-compat@{fake.url}/v1:m"
        cfg = write_config(tmp_path / "cfg.toml", model=[model], **options)
        run = tmp_path / "run"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "2", "--out", str(run)))
    finally:
        fake.close()
    assert float(re.search(r"Speedup: ([0-9.]+)x", out).group(1)) > 5, out
    return out, run, [r["body"]["messages"][-1]["content"] for r in fake.requests
                      if r["path"].endswith("/chat/completions")]


def test_one_phase_run_makes_only_coding_calls_each_stored_and_priced_and_shows_their_plans(tmp_path):
    fake = FakeLLM(script=one_phase_script)
    try:
        model = f"openai-compat@{fake.url}/v1:m"
        prices = tmp_path / "prices.toml"
        prices.write_text(f'["{model}"]\ninput = 1.0\noutput = 2.0\n')
        cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=2, codes=2, model=[model],
                           one_phase=True, prices=str(prices))
        run = tmp_path / "run"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "2", "--out", str(run)))
        shown = finish(launch("show", str(run)))
        best = json.loads((run / "best.json").read_text())
        one = finish(launch("show", str(run), "--candidate", best["best_id"]))
        listed = finish(launch("show", str(run), "--calls"))
    finally:
        fake.close()
    assert float(re.search(r"Speedup: ([0-9.]+)x", out).group(1)) > 5, out
    prompts = [r["body"]["messages"][-1]["content"] for r in fake.requests if r["path"].endswith("/chat/completions")]
    assert len(prompts) == 4 and all("# Your role: optimizer" in p for p in prompts)   # N x K, no planner
    calls = query(run, "SELECT job_id, role, tokens_in, tokens_out, cost, outcome FROM model_calls")
    assert len(calls) == 4 and {c[1] for c in calls} == {"coder"}
    # priced like any call: 1000 tokens in at $1/M and 200 out at $2/M
    assert all(c[2:4] == (1000, 200) and c[4] == pytest.approx(0.0014) and c[5] == "ok" for c in calls)
    code_jobs = {row[0] for row in query(run, "SELECT id FROM jobs WHERE kind = 'code'")}
    plans = plan_texts(run)
    assert set(plans) == {c[0] for c in calls} <= code_jobs      # each call's plan, kept under its job
    assert all(text == PLAN and option for option, text in plans.values())
    assert not query(run, "SELECT 1 FROM jobs WHERE kind = 'plan'")
    assert PLAN[:40] in shown and "Search modes: one-phase" in shown, shown
    assert "Plan: option" in one and PLAN in one, one
    # a one-phase job is its kernel's code job and plan job: the kernel is listed once beside its call
    assert best["best_id"][:12] in listed and not re.search(r"\b([0-9a-f]{12}), \1\b", listed), listed
    config = json.loads((run / "config.json").read_text())
    assert config["search"]["options"]["one_phase"] is True


def test_one_phase_with_the_offline_heuristic_is_refused_before_anything_starts(tmp_path):
    run = tmp_path / "run"
    proc = launch("run", "--problem", "gemm-256x256x256", "--one-phase", "--out", str(run))
    out = finish(proc)
    assert proc.returncode == 2 and "error: --one-phase" in out and "heuristic" in out and not run.exists(), out


def test_a_run_continues_from_another_runs_final_beam_evaluated_again(tmp_path):
    first = tmp_path / "runs" / "first"
    cfg = write_config(tmp_path / "first.toml", iterations=2, beam=2, plans=2, codes=1)
    finish(launch("run", "--config", str(cfg), "--evaluators", "2", "--out", str(first)))
    final = [cid for cid, in query(first, "SELECT candidate_id FROM beams WHERE iteration = "
                                          "(SELECT MAX(iteration) FROM beams) ORDER BY rank")]
    first_codes = candidate_codes(first)
    final_codes = [first_codes[cid] for cid in final]
    start = json.loads(query(first, "SELECT value FROM meta WHERE key = 'initial_code'")[0][0])
    assert any(code != start for code in final_codes), "the first run found nothing to continue from"

    fake = FakeLLM()
    try:
        model = f"openai-compat@{fake.url}/v1:m"
        cfg = write_config(tmp_path / "second.toml", iterations=1, beam=2, plans=1, codes=1, model=[model])
        second = tmp_path / "second"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "2", "--out", str(second),
                            "--continue-from", str(first)))
        shown = finish(launch("show", str(second)))
        other = tmp_path / "other"
        refused = launch("run", "--config", str(cfg), "--problem", "gemm-512x512x512", "--out", str(other),
                         "--continue-from", str(first))
        refusal = finish(refused)
    finally:
        fake.close()
    assert "Speedup" in out, out
    # the first run's final beam entered as children of the same start, each evaluated by this run's evaluators
    continued = query(second, "SELECT c.id, e.job_id FROM candidates c JOIN evals e ON e.candidate_id = c.id "
                              "WHERE c.origin = 'continued'")
    codes = candidate_codes(second)
    assert sorted(codes[cid] for cid, _ in continued) == sorted(c for c in final_codes if c != start)
    evaluated = {row[0] for row in query(second, "SELECT id FROM jobs WHERE kind = 'eval' AND state = 'done'")}
    assert all(job in evaluated for _, job in continued)
    first_beam = [codes[cid] for cid, in query(second, "SELECT candidate_id FROM beams WHERE iteration = 0 "
                                                     "ORDER BY rank")]
    assert first_beam[0] == final_codes[0]          # the other run's best is this run's first parent
    assert json.loads(query(second, "SELECT value FROM meta WHERE key = 'initial_code'")[0][0]) == start
    assert summary(second)["speedup"] >= summary(first)["speedup"] * 0.999
    assert "Continued from" in shown and str(first) in shown, shown
    assert refused.returncode == 2 and "a run continues only a run of the same problem" in refusal, refusal
    assert not other.exists()


def edits_of(*pairs) -> str:
    return "The change as edits.\n```json\n" + json.dumps({"edits": [{"old": o, "new": n} for o, n in pairs]}) + \
        "\n```\n"


def current_code(prompt: str) -> str:
    return prompt.split("## Current code", 1)[1].split("```c\n", 1)[1].split("\n```", 1)[0]


def test_edits_that_apply_make_the_kernel_and_edits_that_do_not_are_given_back_for_the_whole_kernel(tmp_path):
    """Every second implementer answer quotes a line the kernel does not have: its job asks again for the whole
    kernel, with the reason; both calls are stored and priced, and the run still finds the FSM kernel."""
    implementer = iter(range(10_000))

    def script(prompt, n):
        if "# Your role: implementer" in prompt and "Your edits could not be applied" not in prompt:
            old = current_code(prompt) if next(implementer) % 2 == 0 else "no such line in the kernel;"
            return 200, {}, edits_of((old, HWLOOP))
        return 200, {}, smart_answer(prompt)

    fake = FakeLLM(script=script)
    try:
        model = f"openai-compat@{fake.url}/v1:m"
        cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=2, codes=2, model=[model],
                           code_edits=True)
        run = tmp_path / "run"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "2", "--out", str(run)))
    finally:
        fake.close()
    assert float(re.search(r"Speedup: ([0-9.]+)x", out).group(1)) > 5, out
    calls = query(run, "SELECT job_id, role, outcome, tokens_in FROM model_calls WHERE role = 'coder'")
    by_job: dict[str, list[str]] = {}
    for job, _, outcome, tokens_in in calls:
        assert tokens_in == 1000
        by_job.setdefault(job, []).append(outcome)
    assert len(by_job) == 4
    given_back = [o for o in by_job.values() if len(o) == 2]
    assert len(given_back) == 2 and all(o[0].startswith("unusable edits, the whole kernel asked for: edit 1: its old text")
                                        and o[1] == "ok" for o in given_back)
    assert all(o == ["ok"] for o in by_job.values() if len(o) == 1)
    fallbacks = [r["body"]["messages"][-1]["content"] for r in fake.requests
                 if "Your edits could not be applied" in r["body"]["messages"][-1]["content"]]
    assert len(fallbacks) == 2 and all("no such line in the kernel" in p and "matches nowhere" in p for p in fallbacks)
    assert all(code == HWLOOP for code in candidate_codes(run).values() if "gemmini_loop_ws" in code)


def _one_phase_edit_job(model: str):
    import msgspec

    from autocomp_zmq.protocols.jobs import CodeRequest
    return msgspec.convert({"problem": {"target": "gemmini-sim", "name": "gemm-256x256x256", "family": "gemm"},
                            "parent": {"id": "p", "code": "void solution() {\n  naive();\n}\n", "latency": 100.0},
                            "model": model, "seed": 1, "edits": True, "iteration": 1, "iterations": 2,
                            "menu": [{"id": "loop-ws", "title": "Use the hardware loop"}]}, CodeRequest)


def test_the_agent_applies_one_phase_edits_and_keeps_every_call_when_nothing_usable_comes_back():
    from autocomp_zmq.agents.workers.llm.agent import LLMAgent
    from autocomp_zmq.agents.workers.llm.providers import CallOptions
    from autocomp_zmq.agents.workers.worker import JobFailed

    answers = iter([f"OPTION: loop-ws\nPLAN:\n{PLAN}\n" + edits_of(("  naive();", "  gemmini_loop_ws_all();")),
                    "```json\n{\"edits\": [{\"old\": \"naive\"\n```", "Sorry, here is a description only."])
    fake = FakeLLM(script=lambda prompt, n: (200, {}, next(answers)))
    try:
        model = f"openai-compat@{fake.url}/v1:m"
        agent = LLMAgent([model], call_options=CallOptions(timeout_s=10, max_retries=0))
        done = agent.handle("code", _one_phase_edit_job(model))
        with pytest.raises(JobFailed) as failed:
            agent.handle("code", _one_phase_edit_job(model))
    finally:
        fake.close()
    assert done.code == "void solution() {\n  gemmini_loop_ws_all();\n}\n" and len(done.calls) == 1
    assert done.plan.option_id == "loop-ws" and done.plan.text.startswith(PLAN)
    calls = failed.value.calls
    assert [c.outcome.split(":")[0] for c in calls] == ["unusable edits, the whole kernel asked for",
                                                        "unusable answer"]
    assert "not valid JSON" in calls[0].outcome and "Your edits could not be applied" in calls[1].prompt
    assert all(c.tokens_in == 1000 and c.answer for c in calls)


def test_translation_iterations_write_the_kernel_from_the_reference_with_the_translation_menu(tmp_path):
    import tomllib

    from tests.system.runkit import ROOT
    translations = {o["id"] for o in tomllib.loads((ROOT / "prompts/gemmini-sim/translate.toml").read_text())["option"]}
    out, run, prompts = run_with_model(tmp_path, FakeLLM(), iterations=2, beam=2, plans=2, codes=1,
                                       translate_iters=1)
    step = lambda p: int(re.search(r"step (\d+) of", p).group(1))   # noqa: E731
    plans = [p for p in prompts if "# Your role: planner" in p]
    offered = lambda p: set(re.findall(r"^\d+\. ([\w.-]+): ", p.split("## Options offered", 1)[1], re.M))  # noqa
    first, second = [p for p in plans if step(p) == 1], [p for p in plans if step(p) == 2]
    assert first and second
    assert all("## Reference to translate" in p and "def reference(A: np.ndarray" in p for p in first)
    assert all(offered(p) <= translations for p in first)
    assert not any("Reference to translate" in p or offered(p) & translations for p in second)
    coders = [p for p in prompts if "# Your role: implementer" in p]
    assert any("## Reference to translate" in p for p in coders) and not all("Reference to" in p for p in coders)
    options = {row[0] for row in query(run, "SELECT option_id FROM plans WHERE iteration = 1")}
    assert options and options <= translations
    assert json.loads((run / "config.json").read_text())["search"]["options"]["translate_iters"] == 1


def test_translation_with_the_offline_heuristic_is_refused_before_anything_starts(tmp_path):
    run = tmp_path / "run"
    proc = launch("run", "--problem", "gemm-256x256x256", "--translate-iters", "1", "--out", str(run))
    out = finish(proc)
    assert proc.returncode == 2 and "error: --translate-iters" in out and not run.exists(), out


def test_model_proposed_options_are_offered_to_the_planners_and_chosen(tmp_path):
    def script(prompt, n):
        if "# Your role: strategist" in prompt:
            return 200, {}, ("- Hand it to the loop FSM: one gemmini_loop_ws call for the whole GEMM\n"
                             "- Keep B resident: load each B panel once")
        if "# Your role: planner" in prompt:
            menu = prompt.split("## Options offered in this step", 1)[1].split("\n## ", 1)[0]
            new = re.findall(r"^\d+\. (new-[0-9a-f]+): Hand it to the loop FSM", menu, re.M)
            if new:
                return 200, {}, f"OPTION: {new[0]}\nPLAN:\n{PLAN}"
        return 200, {}, smart_answer(prompt)

    out, run, prompts = run_with_model(tmp_path, FakeLLM(script=script), iterations=1, beam=1, plans=2, codes=1,
                                       propose_options=2, dropout=0.0)
    roles = [re.search(r"# Your role: (\w+)", p).group(1) for p in prompts]
    assert roles.count("strategist") == 1 and roles.count("planner") == 2
    assert roles.index("strategist") < roles.index("planner")       # the plans wait for the proposal
    chosen = {option for option, _ in plan_texts(run).values()}
    assert len(chosen) == 1 and chosen.pop().startswith("new-")
    calls = query(run, "SELECT role, outcome FROM model_calls")
    assert sorted(calls) == [("coder", "ok")] * 2 + [("planner", "ok")] * 3


def test_a_resumed_run_keeps_its_modes_and_never_reads_the_run_it_continued_again(tmp_path):
    first = tmp_path / "first"
    finish(launch("run", "--config", str(write_config(tmp_path / "first.toml", iterations=1, beam=2, plans=2, codes=1)),
                  "--evaluators", "2", "--out", str(first)))
    fake = FakeLLM(script=one_phase_script)
    try:
        model = f"openai-compat@{fake.url}/v1:m"
        cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=1, codes=1, model=[model],
                           one_phase=True, patience=5)
        run = tmp_path / "run"
        finish(launch("run", "--config", str(cfg), "--evaluators", "1", "--out", str(run),
                      "--continue-from", str(first)))
        taken = json.loads(query(run, "SELECT value FROM meta WHERE key = 'continued_from'")[0][0])
        (first / "run.db").rename(first / "moved.db")     # the other run is gone: resume needs nothing of it
        refused = launch("run", "--resume", str(run), "--no-one-phase")
        refusal = finish(refused)
        out = finish(launch("run", "--resume", str(run), "-T", "2"))
    finally:
        fake.close()
    assert refused.returncode == 2 and "cannot change on resume" in refusal and "one_phase" in refusal, refusal
    assert "Finished: 2 iterations" in out, out
    assert query(run, "SELECT MAX(iteration) FROM beams")[0][0] == 2
    assert not query(run, "SELECT 1 FROM jobs WHERE kind = 'plan'")                 # one-phase in both sessions
    assert {row[0] for row in query(run, "SELECT iteration FROM jobs WHERE kind = 'code'")} == {1, 2}
    assert taken["run_dir"] == str(first) and taken["kernels"]
    assert len(query(run, "SELECT 1 FROM candidates WHERE origin = 'continued'")) >= 1
