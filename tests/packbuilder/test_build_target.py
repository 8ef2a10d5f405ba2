"""`build-target` against a local server that speaks the OpenAI wire format, answering with recorded answers
(tests/packbuilder/answers/) to the documentation of tests/packbuilder/docs/: the pack it writes loads as a run
loads a pack and cites its sources, a replay rebuilds it byte for byte without a server, the spending cap stops
a build, an unusable answer is asked again and then reported, and the built pack drives a run of hostcpu."""
from __future__ import annotations

import filecmp
import json
import re
import shutil
from pathlib import Path

import pytest

from autocomp_zmq.hw_runners.base import TargetInfo
from autocomp_zmq.hw_runners.pack import read_pack
from tests.llm.fake_servers import FakeLLM, Lost
from tests.system.runkit import finish, launch

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

HERE = Path(__file__).parent
DOCS, ANSWERS = HERE / "docs", HERE / "answers"
ROOT = HERE.parents[1]
PARTS = {"Write the programming reference": "isa.md", "Write the optimization menu": "menu.toml",
         "Write the rules": "rules.md", "example kernels": "examples.md",
         "Write the translation menu": "translation.md"}


def part_of(prompt: str) -> str:
    return next(f for mark, f in PARTS.items() if mark in prompt)


def recorded(prompt: str, n: int):
    return 200, {}, (ANSWERS / part_of(prompt)).read_text()


def build(tmp_path: Path, fake: FakeLLM | None, *flags: str, out: str = "pack",
          docs: Path = DOCS) -> tuple[int, str, Path]:
    """Run build-target on the test documentation into tmp_path/out, the fake's model priced at $1 / $4 per
    million tokens: (exit status, output, the output folder)."""
    folder = tmp_path / out
    args = ["build-target", str(docs), "--name", "avx2", "--like", "hostcpu", "--out", str(folder), *flags]
    if fake is not None:
        model = f"openai-compat@{fake.url}/v1:writer"
        prices = tmp_path / "prices.toml"
        prices.write_text(f'["{model}"]\ninput = 1.0\noutput = 4.0\n')
        args += ["--model", model, "--prices", str(prices)]
    proc = launch(*args)
    text = finish(proc)
    return proc.returncode, text, folder


def calls_of(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]


def built_from_recorded_answers(tmp_path: Path) -> tuple[FakeLLM, str, Path]:
    """A pack built from the test documentation by a server answering with the recorded answers: (the closed
    server, with the requests it got; build-target's output; the pack's folder). The build must succeed."""
    fake = FakeLLM(script=recorded, usage=None)
    try:
        code, out, pack = build(tmp_path, fake)
    finally:
        fake.close()
    assert code == 0, out
    return fake, out, pack


def test_a_pack_is_built_cited_checked_and_replayed_byte_for_byte(tmp_path):
    fake, out, pack = built_from_recorded_answers(tmp_path)
    assert len(fake.requests) == 5
    assert re.search(r"Spent \$0\.0\d+ on 5 model call\(s\)", out), out
    # the folder is a target: hostcpu's evaluation with this pack, loaded as a run loads it
    info = TargetInfo.load(pack, "avx2")
    view = read_pack(info)
    assert [o["id"] for o in view.menu][:2] == ["vectorize", "multiple-accumulators"]
    assert view.examples[0][0] == "sum_8acc.c" and "_mm256_add_ps" in view.examples[0][1]
    for name in ("isa.md", "rules.md", "translate.md"):
        text = (pack / name).read_text()
        sections = text.split("\n## ")[1:]
        assert sections and all("\nSources: " in s for s in sections), name
    assert "Sources: overview.md § Registers (lines 6-14)" in (pack / "isa.md").read_text()
    assert "# sources: timing.txt lines 1-15" in (pack / "menu.toml").read_text()
    calls = calls_of(pack)
    assert [c["finish"] for c in calls] == ["stop"] * 5 and all(c["cost"] > 0 and c["answer"] for c in calls)
    assert sum(c["cost"] for c in calls) == pytest.approx(float(re.search(r"\$(\d+\.\d+)", out).group(1)), abs=1e-4)

    # no server at all now: every answer comes from the recording, and the folder is the same, byte for byte
    code, out, again = build(tmp_path, None, "--replay", str(pack / "calls.jsonl"), out="again")
    assert code == 0, out
    compared = filecmp.dircmp(pack, again)
    assert not compared.diff_files and not compared.left_only and not compared.right_only
    assert all(filecmp.cmp(pack / f, again / f, shallow=False)
               for f in ("isa.md", "menu.toml", "rules.md", "translate.md", "calls.jsonl", "BUILD.md",
                         "target.toml", "examples/sum_8acc.c"))

    # documentation that changed since the recording: the replay says so rather than answer another question
    changed = tmp_path / "docs"
    shutil.copytree(DOCS, changed)
    (changed / "timing.txt").write_text((DOCS / "timing.txt").read_text().replace("4 cycles", "3 cycles"))
    code, out, _ = build(tmp_path, None, "--replay", str(pack / "calls.jsonl"), out="changed", docs=changed)
    assert code == 1 and "call 1 of the replay asks something else than the recorded one" in " ".join(out.split())


def test_the_budget_stops_the_build_before_a_call_could_pass_it(tmp_path):
    fake = FakeLLM(script=recorded, usage=(1000, 200))      # $0.0018 a call
    try:
        # a call's worst case is its prompt and 20,000 output tokens: about $0.085; two fit under $0.088, not three
        code, out, pack = build(tmp_path, fake, "--budget-usd", "0.088", "--max-tokens", "20000")
    finally:
        fake.close()
    assert code == 1, out
    text = " ".join(out.split())
    assert "stopped by --budget-usd 0.088: the next call could cost up to $0.08" in text
    assert len(fake.requests) == 2
    calls = calls_of(pack)
    assert len(calls) == 2 and sum(c["cost"] for c in calls) == pytest.approx(0.0036)
    assert "$0.0036 spent" in text and "every call kept in" in text
    assert not (pack / "isa.md").exists()     # nothing half-built is left as a pack


def test_an_unusable_answer_is_asked_again_then_reported(tmp_path):
    def script(prompt, n):
        part = part_of(prompt)
        if part == "isa.md" and n == 1:
            return 200, {}, Lost("malformed", (ANSWERS / part).read_text())    # a broken body: a lost answer
        if part == "menu.toml":
            return 200, {}, "Here are the options: vectorize, unroll."         # never TOML
        return recorded(prompt, n)

    fake = FakeLLM(script=script, usage=None)
    try:
        code, out, pack = build(tmp_path, fake, "--retries", "2")
    finally:
        fake.close()
    assert code == 1, out
    text = " ".join(out.split())
    assert "the menu part: 3 answers of openai-compat@" in text and "were unusable, the last because it is not " \
        "valid TOML" in text
    calls = calls_of(pack)
    # isa: the lost answer (billing unknown, counted at its worst case), then the good one; menu: three tries
    assert [c.get("outcome", "ok")[:16] for c in calls] == ["error: malformed", "ok", "ok", "ok", "ok"]
    assert calls[0]["billing"] == "unknown" and calls[0]["cost"] > 0
    assert "could not be used: it is not valid TOML" in calls[3]["prompt"]
    assert f"${sum(c['cost'] for c in calls):.4f} spent" in text
    assert not (pack / "menu.toml").exists()


def test_the_built_pack_drives_a_run_of_hostcpu(tmp_path):
    fake, out, pack = built_from_recorded_answers(tmp_path)
    kernel = (ROOT / "hw_runners/hostcpu/problems/sum-16m/variants/avx2_accumulators.c").read_text()
    prompts = []

    def agent(prompt, n):
        prompts.append(prompt)
        if "OPTION: <id" in prompt:
            offered = prompt.split("## Options offered in this step", 1)[1].split("\n## ", 1)[0]
            option = re.search(r"^(?:- |\d+\. )([\w.-]+): ", offered, re.M).group(1)
            return 200, {}, f"OPTION: {option}\nPLAN:\nEight AVX2 accumulators, the lanes summed once after the loop."
        return 200, {}, f"```c\n{kernel}```\n"

    llm = FakeLLM(script=agent, models=["m"])
    try:
        run = finish(launch("run", "--target", "avx2", "--problem", "sum-16m",
                            "--model", f"openai-compat@{llm.url}/v1:m", "-T", "2", "--beam", "1", "--plans", "1",
                            "--codes", "1", "--evaluators", "1", "--no-live",
                            "--out", str(tmp_path / "run"), env={"AUTOCOMP_TARGET_PATH": str(pack)}))
    finally:
        llm.close()
    assert "Speedup: " in run and float(re.search(r"Speedup: ([\d.]+)x", run).group(1)) > 1.0, run
    assert prompts and all("Sources: overview.md § Registers (lines 6-14)" in p for p in prompts)   # its isa.md
    menu_ids = {"vectorize", "multiple-accumulators", "unit-stride", "reciprocal", "horizontal-once"}
    planned = [p for p in prompts if "OPTION: <id" in p]
    assert planned and all(any(f"- {i}: " in p or f". {i}: " in p for i in menu_ids) for p in planned)


def test_a_part_over_budget_is_asked_once_to_be_shorter_then_trimmed_with_a_note(tmp_path):
    fake = FakeLLM(script=recorded, usage=None)       # the same, too long, answers every time
    try:
        code, out, pack = build(tmp_path, fake, "--section-chars", "200", "--pack-chars", "2000")
    finally:
        fake.close()
    assert code == 0, out
    shorter = [r for r in calls_of(pack) if "over its size budget" in r["prompt"]]
    assert len(shorter) == 5 and len(fake.requests) == 10          # each part asked again once, no more
    assert re.search(r"'Loads and stores' has \d+ characters \(budget 200\)", shorter[0]["prompt"])
    isa = (pack / "isa.md").read_text()
    assert "(trimmed: " in isa and "characters over the section budget of 200 were cut)" in isa
    assert "note: programming reference: trimmed 'Loads and stores' to the section budget" in out
    assert "note: examples: left out example sum_8acc.c" in out and not (pack / "examples").exists()
    assert "left out example sum_8acc.c" in (pack / "BUILD.md").read_text()
