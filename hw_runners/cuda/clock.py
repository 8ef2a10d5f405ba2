"""Whether a child's timed runs can be what it says they were: its reported steps checked against the evaluator's own
clock and against the reference's same steps, and its latency against what the GPU's peaks allow.

Every timed run is a window on the evaluator's clock, from telling the child the run's seed (before which the run's
inputs do not exist) to receiving its outputs as sealed memory (after which they cannot change). Whatever a kernel did
for that run happened inside the window. The child reports four steps inside it: making the inputs (gen), evicting
the L2 cache (flush), forward between the events (bracket: the latency), and handing the outputs over (handover).
The reference child runs the same code for the same inputs just before, so:
  - no run's steps may add up to more than its window (reported times the evaluator did not see pass);
  - in the runs that make the latency (the candidate's fastest half: the median is among them, so a kernel that
    moves work out of its bracket must do so in all of them), the window outside the bracket, and each step around
    it, may exceed the reference's by at most a slack: work moved out of the bracket shows up there, in whichever
    step or between them. The least of those runs is compared with the reference's least: the machine's load only
    ever adds time, and it hardly spares none of a kernel's fastest runs and all of the reference's;
  - on a GPU whose peaks are known, the latency may not be below what its peak FLOP/s and DRAM bandwidth allow."""
import math
from dataclasses import dataclass

import numpy as np

STEPS = ("gen", "flush", "bracket", "handover")
STEP_NAMES = {"gen": "making each run's inputs", "flush": "evicting the L2 cache",
              "handover": "handing each run's outputs over", "outside": "each run's window outside the timed kernel"}


@dataclass(frozen=True)
class Slack:
    """How much more than the reference's a candidate's step may take: rel * the reference's + abs_ms for the steps
    the child times (gen, flush, handover), and window_rel, window_abs_ms for the whole window outside the bracket
    (those steps, the messages and the loop around them, where the machine's scheduling shows most); plus, for both,
    `share` of the candidate's own latency (a long run meets more of the machine's interruptions; a kernel claiming
    a short one gains nothing from it)."""
    rel: float
    abs_ms: float
    window_rel: float
    window_abs_ms: float
    share: float = 0.01

    def allowed(self, what: str, reference_ms: float, latency_ms: float) -> float:
        if what == "outside":
            return reference_ms * self.window_rel + self.window_abs_ms + self.share * latency_ms
        return reference_ms * self.rel + self.abs_ms + self.share * latency_ms


# On a GPU the steps are event-timed device work and the rest of the window a few messages on one host (not yet
# measured on a GPU). On the CPU check everything is host work on a shared, often loaded machine: set from what
# bench/bench_judge_noise.py measured for honest kernels on 2 cores, idle and busy, with room to spare.
SLACK = {"cuda": Slack(rel=0.25, abs_ms=0.02, window_rel=0.25, window_abs_ms=0.2),
         "cpu": Slack(rel=0.5, abs_ms=0.25, window_rel=0.5, window_abs_ms=1.0)}


def slack_of(opts) -> Slack:
    """The evaluation's slack: its own (--target-option slack=[...]), else its device's."""
    return Slack(*opts.slack) if opts.slack else SLACK[opts.device]


OVERLAP_TOLERANCE = (0.01, 0.05)      # a run's steps may exceed its window by this share + ms (clock granularity)
FLOOR_SHARE = 0.8                     # a latency below this share of the peaks' ideal time is refused


@dataclass(frozen=True)
class TimedRun:
    window_ms: float                  # the evaluator's clock
    steps: dict[str, float]           # the child's report, ms

    @property
    def outside_ms(self) -> float:
        """The window's time outside the bracket: the other steps, the messages, the loop."""
        return self.window_ms - self.steps["bracket"]


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
    return run.outside_ms if what == "outside" else run.steps[what]


def doubt(candidate: list[TimedRun], reference: list[TimedRun], slack: Slack) -> tuple[str | None, dict]:
    """(Why the candidate's measured runs cannot be what it reports, or None; what each check measured, in ms)."""
    share, floor = OVERLAP_TOLERANCE
    table: dict = {}
    for k, run in enumerate(candidate):
        claimed = sum(run.steps.values())
        if claimed > run.window_ms * (1 + share) + floor:
            return (f"timed run {k} reports {claimed:.3f} ms of steps, but the judge's clock saw the whole run take "
                    f"{run.window_ms:.3f} ms: the reported times are not the device's"), table
    if not candidate or not reference:
        return None, table
    latency = float(np.median([c.steps["bracket"] for c in candidate]))
    fastest = [c for c in candidate if c.steps["bracket"] <= latency]
    found = None
    for what in ("gen", "flush", "handover", "outside"):
        theirs, ours = min(_value(c, what) for c in fastest), min(_value(r, what) for r in reference)
        extra, allowed = theirs - ours, slack.allowed(what, ours, latency)
        table[what] = {"extra_ms": round(extra, 4), "reference_ms": round(ours, 4), "allowed_ms": round(allowed, 4)}
        if extra > allowed and found is None:
            found = (f"{STEP_NAMES[what]} took {extra:.3f} ms more than the reference's (the least over the runs that "
                     f"make the latency: {theirs:.3f} ms; the reference's least {ours:.3f} ms; at most {allowed:.3f} "
                     "ms more allowed): work was done outside the timed kernel, or the reported times are not the "
                     "device's")
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
