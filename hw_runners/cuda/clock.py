"""Whether a child's timed runs can be what it says they were: its reported steps checked against the evaluator's own
clock and against the reference's same steps, and its latency against what the GPU's peaks allow.

Every timed run is a window on the evaluator's clock, from telling the child the run's seed (before which the run's
inputs do not exist) to receiving its outputs as sealed memory (after which they cannot change). Whatever a kernel did
for that run happened inside the window. The child reports four steps inside it: making the inputs (gen), evicting
the L2 cache (flush), forward between the events (bracket: the latency), and handing the outputs over (handover).
The reference child runs the same code for the same runs, so:
  - no run's steps may add up to more than its window (reported times the evaluator did not see pass);
  - the part of the windows the steps do not account for (messages, the loop itself), and each step but the
    bracket, may exceed the reference's by at most a slack: work moved out of the bracket, into code the judge calls
    around it or between the steps, shows up there;
  - on a GPU whose peaks are known, the latency may not be below what its peak FLOP/s and DRAM bandwidth allow.
The medians of the measured runs are compared, so a run disturbed by the machine does not refuse an honest kernel."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

STEPS = ("gen", "flush", "bracket", "handover")
STEP_NAMES = {"gen": "making each run's inputs", "flush": "evicting the L2 cache",
              "handover": "handing each run's outputs over", "unexplained": "the rest of each run's window"}


@dataclass(frozen=True)
class Slack:
    """How much more than the reference's same step a candidate's step may take, in the median over the runs: rel *
    the reference's + abs_ms for the steps the child times (gen, flush, handover), and window_rel, window_abs_ms for
    the rest of the window (messages and the loop around the steps, where the machine's scheduling shows most); plus,
    for both, `share` of the candidate's own median latency (a long run meets more of the machine's interruptions;
    a kernel claiming a short one gains nothing from it)."""
    rel: float
    abs_ms: float
    window_rel: float
    window_abs_ms: float
    share: float = 0.01

    def allowed(self, what: str, reference_ms: float, latency_ms: float) -> float:
        if what == "unexplained":
            return reference_ms * self.window_rel + self.window_abs_ms + self.share * latency_ms
        return reference_ms * self.rel + self.abs_ms + self.share * latency_ms


# On a GPU the steps are event-timed device work and the windows a few messages on one host (not yet measured on a
# GPU: see docs/cuda-bench.md). On the CPU check the steps are host work on a shared, often loaded machine: what
# bench/bench_judge_noise.py measured for honest kernels on 2 busy cores, with room to spare.
SLACK = {"cuda": Slack(rel=0.25, abs_ms=0.02, window_rel=0.5, window_abs_ms=0.2),
         "cpu": Slack(rel=0.5, abs_ms=0.25, window_rel=1.0, window_abs_ms=5.0)}
OVERLAP_TOLERANCE = (0.01, 0.05)      # a run's steps may exceed its window by this share + ms (clock granularity)
FLOOR_SHARE = 0.8                     # a latency below this share of the peaks' ideal time is refused


@dataclass(frozen=True)
class TimedRun:
    window_ms: float                  # the evaluator's clock
    steps: dict[str, float]           # the child's report, ms

    @property
    def unexplained_ms(self) -> float:
        return self.window_ms - sum(self.steps.values())


def parse_steps(report) -> dict[str, float] | None:
    """The four steps of a child's run report, or None when they are not four finite non-negative numbers."""
    if not isinstance(report, dict):
        return None
    try:
        steps = {k: float(report[k]) for k in STEPS}
    except (KeyError, TypeError, ValueError):
        return None
    return steps if all(math.isfinite(v) and v >= 0 for v in steps.values()) else None


def _value(run: TimedRun, what: str) -> float:
    return run.unexplained_ms if what == "unexplained" else run.steps[what]


def doubt(candidate: list[TimedRun], reference: list[TimedRun], slack: Slack) -> tuple[str | None, dict]:
    """(Why the candidate's measured runs cannot be what it reports, or None; what each check measured, in ms).
    `reference[k]` is the reference's run on the same inputs, just before the candidate's run k: comparing each pair
    cancels what the machine's load does to both, and the median of the pairs ignores a run the machine disturbed."""
    share, floor = OVERLAP_TOLERANCE
    table: dict = {}
    for k, run in enumerate(candidate):
        claimed = sum(run.steps.values())
        if claimed > run.window_ms * (1 + share) + floor:
            return (f"timed run {k} reports {claimed:.3f} ms of steps, but the judge's clock saw the whole run take "
                    f"{run.window_ms:.3f} ms: the reported times are not the device's"), table
    found = None
    latency = float(np.median([c.steps["bracket"] for c in candidate])) if candidate else 0.0
    for what in ("gen", "flush", "handover", "unexplained"):
        extra = float(np.median([_value(c, what) - _value(r, what) for c, r in zip(candidate, reference)]))
        ours = float(np.median([_value(r, what) for r in reference]))
        allowed = slack.allowed(what, ours, latency)
        table[what] = {"extra_ms": round(extra, 4), "reference_ms": round(ours, 4), "allowed_ms": round(allowed, 4)}
        if extra > allowed and found is None:
            found = (f"{STEP_NAMES[what]} took {extra:.3f} ms more than the reference's same step in the same run "
                     f"(median; the reference's took {ours:.3f} ms, at most {allowed:.3f} ms more allowed): work was "
                     "done outside the timed kernel, or the reported times are not the device's")
    return found, table


def ideal_us(flops: float | None, input_bytes: float, output_bytes: float, peaks) -> tuple[float, str]:
    """The least time the GPU's peaks allow for one forward (us) and what bounds it: the FLOPs at the fastest
    tensor-core rate any precision reaches (FP8, twice FP16's dense rate: a kernel may choose its precision), or the
    inputs read from DRAM (the L2 was evicted) and the outputs that cannot stay in the L2."""
    compute = (flops or 0) / (2 * peaks.half_flops)
    memory = (input_bytes + max(0.0, output_bytes - peaks.l2_bytes)) / peaks.dram_bytes_s
    if compute >= memory:
        return compute * 1e6, f"{flops:,.0f} FLOPs at {2 * peaks.half_flops / 1e12:g} TFLOP/s"
    return memory * 1e6, f"{input_bytes + max(0.0, output_bytes - peaks.l2_bytes):,.0f} bytes at " \
                         f"{peaks.dram_bytes_s / 1e9:,.0f} GB/s"


def below_peaks(latency_us: float, flops: float | None, io: dict | None, peaks) -> str | None:
    """Why a latency is impossible on this GPU, or None (also when its peaks or the problem's sizes are unknown)."""
    if peaks is None or not io:
        return None
    ideal, what = ideal_us(flops, float(io.get("inputs", 0)) + float(io.get("weights", 0)),
                           float(io.get("outputs", 0)), peaks)
    if latency_us < FLOOR_SHARE * ideal:
        return (f"the timed runs claim {latency_us:.2f} us, below what the GPU's peaks allow for one forward "
                f"({ideal:.2f} us: {what}): the work was not all done between the events")
    return None
