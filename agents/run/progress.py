"""Live progress of a run: a compact table on a terminal, a short plain line every few seconds otherwise
(CI logs, files). Both say how long the run has taken, about how long it has left, and how far the running
iteration is (its evaluations done of those expected), and neither is wider than the terminal: every value
stays on one line, cut with an ellipsis, because a wrapped live table scrolls the terminal it redraws."""
from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from autocomp_zmq.agents.console import latency_text, make_console

if TYPE_CHECKING:
    from autocomp_zmq.agents.engine.coordinator import Coordinator

PLAIN_WIDTH = 120      # a plain line's length where there is no terminal to fit (a file, a pipe)


def clock_text(seconds: float) -> str:
    s = max(0, round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    def __init__(self, problem: str, live: bool | None = None, plain_every_s: float = 5.0,
                 clock=time.monotonic) -> None:
        self.problem = problem
        self.console = make_console(stderr=True)
        self.live_mode = sys.stderr.isatty() if live is None else live
        self.plain_every_s = plain_every_s
        self.clock = clock
        self.started = clock()
        self._first: tuple[int, int] | None = None    # (iteration, evaluations) when this session began
        self._live: Live | None = None
        self._last_plain = 0.0
        self._snap: dict | None = None

    def __enter__(self) -> "Progress":
        self.started = self.clock()
        if self.live_mode:
            self._live = Live(Table(), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live:
            self._live.__exit__(*exc)
        elif self._snap is not None and self.plain_every_s != float("inf"):
            self._plain(self._snap)   # the final state, however recently the last line was printed

    def snapshot(self, coord: "Coordinator") -> dict:
        s = coord.search.summary()
        if self._first is None:
            self._first = (s.iteration, s.evaluations)
        elapsed = self.clock() - self.started
        return {"iteration": s.iteration, "iterations": s.iterations, "evals": s.evaluations,
                "step": s.iteration_evals, "elapsed": elapsed, "left": self._left(s, elapsed), "done": s.done,
                "beam": [k.latency for k in s.frontier], "unit": s.latency_unit, "speedup": s.speedup,
                "roofline": s.best.roofline_fraction if s.best else None,
                "evaluator_busy": coord.busy_fraction("evaluator"), "queued": coord.queued,
                "in_flight": len(coord.in_flight), "requeued": coord.stats.requeued,
                "cost": coord.spent, "cost_in_flight": sum(coord.reserved.values()),
                "cost_by": {k: v for k, v in coord.spent_by.items() if v},
                "agents": len(coord.router.alive()), "failures": coord.failures.top(3),
                "failed": sum(coord.failures.counts.values()), "noops": sum(coord.failures.noops.values()),
                "not_billed": coord.call_faults.get("none", 0), "lost_calls": coord.call_faults.get("unknown", 0)}

    def _left(self, s, elapsed: float) -> float | None:
        """Seconds left if every planned iteration runs (a run that stops early takes less): the evaluations
        still expected, at the rate of this session's evaluations so far. None until there is a rate."""
        done_now = s.evaluations - self._first[1]
        if s.done:
            return 0.0
        if s.iteration_evals is None or done_now < 2 or s.iteration < 1:
            return None
        done, expected = s.iteration_evals
        # later iterations are taken to be like this one (the first has one parent, later ones the beam)
        to_come = (expected - done) + (s.iterations - s.iteration) * max(expected, 1)
        return to_come * elapsed / done_now

    def update(self, coord: "Coordinator") -> None:
        snap = self._snap = self.snapshot(coord)
        if self._live:
            self._live.update(self._table(snap))
        elif self.clock() - self._last_plain >= self.plain_every_s:
            self._plain(snap)

    # -- what is shown ------------------------------------------------------------------
    @staticmethod
    def _iteration(snap: dict) -> str:
        running = snap["step"] and snap["iteration"] and not snap["done"]
        step = f" ({snap['step'][0]}/{snap['step'][1]} evals)" if running else ""
        return f"iteration {snap['iteration']}/{snap['iterations']}{step}"

    @staticmethod
    def _time(snap: dict) -> str:
        left = "" if snap["left"] is None or snap["done"] else f", ~{clock_text(snap['left'])} left"
        return f"{clock_text(snap['elapsed'])} elapsed{left}"

    @staticmethod
    def _speed(snap: dict) -> str:
        return f"{snap['speedup']:.2f}x" if snap["speedup"] else "-"

    def _plain(self, snap: dict) -> None:
        self._last_plain = self.clock()
        parts = [f"[{self.problem}] {self._iteration(snap)}", f"best {self._speed(snap)}", f"evals {snap['evals']}",
                 self._time(snap)]
        if snap["noops"]:
            parts.append(f"no-ops {snap['noops']}")
        if snap["cost"]:
            parts.append(f"cost ${snap['cost']:.2f}")
        if snap["not_billed"] or snap["lost_calls"]:
            parts.append(f"calls retried {snap['not_billed']}, lost {snap['lost_calls']}")
        if snap["failed"]:
            parts.append(f"failed {snap['failed']} ({snap['failures'][0]})")
        width = self.console.width if self.console.is_terminal else PLAIN_WIDTH
        line = "  ".join(parts)
        self.console.print(line if len(line) <= width else line[:width - 1] + "…", markup=False, highlight=False,
                           crop=True)

    @staticmethod
    def _beam(snap: dict) -> str:
        return ", ".join(latency_text(c, snap["unit"]).rsplit(" ", 1)[0] for c in snap["beam"][:6]) or "-"

    def _table(self, snap: dict) -> Table:
        title = Text(f"{self.problem}: {self._time(snap)}", overflow="ellipsis", no_wrap=True)
        t = Table(title=title, title_justify="left", show_header=False, box=None, padding=(0, 1))
        t.add_column(style="bold", no_wrap=True, min_width=15)     # the labels stay whole; values are cut
        t.add_column(overflow="ellipsis", no_wrap=True)
        step = snap["step"] if snap["iteration"] and not snap["done"] else None
        bar = Table.grid(padding=(0, 1))
        bar.add_row(f"{snap['iteration']} / {snap['iterations']}", ProgressBar(total=max(step[1], 1) if step else 1,
                                                                              completed=step[0] if step else 0,
                                                                              width=16),
                    f"{step[0]}/{step[1]} evaluations" if step else "")
        t.add_row("iteration", bar)
        best = self._speed(snap)
        if snap["roofline"]:
            best += f"  ({snap['roofline']:.1%} of roofline)"
        t.add_row("best speedup", best)
        t.add_row(f"beam ({snap['unit']})", self._beam(snap))
        t.add_row("evaluations", f"{snap['evals']} done, evaluators {snap['evaluator_busy']:.0%} busy")
        jobs = f"{snap['queued']} queued, {snap['in_flight']} running, {snap['agents']} agents"
        t.add_row("jobs", jobs + (f", {snap['requeued']} requeued" if snap["requeued"] else ""))
        if snap["cost"] or snap["cost_in_flight"]:
            t.add_row("cost (USD)", f"${snap['cost']:.2f} spent, ${snap['cost_in_flight']:.2f} reserved in flight")
            for (model, role), usd in sorted(snap["cost_by"].items(), key=lambda kv: -kv[1])[:6]:
                t.add_row(Text(f"  {role}"), Text(f"${usd:.2f}  {model}"))   # Text: model specs hold brackets
        if snap["not_billed"] or snap["lost_calls"]:
            t.add_row("model calls", f"{snap['not_billed']} not billed (429, 5xx, no connection; tried again), "
                                     f"{snap['lost_calls']} lost after sending (counted at their worst case)")
        if snap["noops"]:
            t.add_row("no-op proposals", f"{snap['noops']} (plans that change nothing: not failures)")
        t.add_row("failures", Text(str(snap["failed"]) if snap["failed"] else "-"))
        for reason in snap["failures"]:
            t.add_row("", Text(reason))            # Text: error text is not markup
        return t
