"""Live progress of a run: a rich table on a terminal, a plain line every few
seconds otherwise (CI logs, files)."""
from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from rich.live import Live
from rich.table import Table
from rich.text import Text

from autocomp_zmq.agents.console import latency_text, make_console

if TYPE_CHECKING:
    from autocomp_zmq.agents.coordinator import Coordinator


class Progress:
    def __init__(self, problem: str, live: bool | None = None, plain_every_s: float = 5.0) -> None:
        self.problem = problem
        self.console = make_console(stderr=True)
        self.live_mode = sys.stderr.isatty() if live is None else live
        self.plain_every_s = plain_every_s
        self._live: Live | None = None
        self._last_plain = 0.0
        self._snap: dict | None = None

    def __enter__(self) -> "Progress":
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
        return {"iteration": s.iteration, "iterations": s.iterations, "evals": s.evaluations,
                "beam": [k.latency for k in s.frontier], "unit": s.latency_unit, "speedup": s.speedup,
                "roofline": s.best.roofline_fraction if s.best else None,
                "evaluator_busy": coord.busy_fraction("evaluator"), "queued": coord.queued,
                "in_flight": len(coord.in_flight), "requeued": coord.stats.requeued,
                "cost": coord.spent, "cost_in_flight": sum(coord.reserved.values()),
                "cost_by": {k: v for k, v in coord.spent_by.items() if v},
                "agents": len(coord.router.alive()), "failures": coord.failures.top(3),
                "failed": sum(coord.failures.counts.values())}

    def update(self, coord: "Coordinator") -> None:
        snap = self._snap = self.snapshot(coord)
        if self._live:
            self._live.update(self._table(snap))
        elif time.monotonic() - self._last_plain >= self.plain_every_s:
            self._plain(snap)

    def _plain(self, snap: dict) -> None:
        self._last_plain = time.monotonic()
        speed = f"{snap['speedup']:.2f}x" if snap["speedup"] else "-"
        failed = f"  failed {snap['failed']} ({'; '.join(snap['failures'])})" if snap["failed"] else ""
        self.console.print(f"[{self.problem}] iteration {snap['iteration']}/{snap['iterations']}  "
                           f"evals {snap['evals']}  best speedup {speed}  beam {self._beam(snap)}  "
                           f"evaluators busy {snap['evaluator_busy']:.0%}  agents {snap['agents']}  "
                           f"cost ${snap['cost']:.2f}{failed}", markup=False, highlight=False)

    @staticmethod
    def _beam(snap: dict) -> str:
        return ", ".join(latency_text(c, snap["unit"]).rsplit(" ", 1)[0] for c in snap["beam"][:6]) or "-"

    def _table(self, snap: dict) -> Table:
        t = Table(title=Text(f"{self.problem}: beam search"), show_header=False, min_width=60)
        t.add_column(style="bold")
        t.add_column()
        t.add_row("iteration", f"{snap['iteration']} / {snap['iterations']}")
        t.add_row("best speedup", f"{snap['speedup']:.2f}x" if snap["speedup"] else "-")
        t.add_row("best % of roofline", f"{snap['roofline']:.1%}" if snap["roofline"] else "-")
        t.add_row(f"beam ({snap['unit']})", self._beam(snap))
        t.add_row("evaluations", str(snap["evals"]))
        t.add_row("evaluators busy", f"{snap['evaluator_busy']:.0%}")
        t.add_row("jobs queued / running", f"{snap['queued']} / {snap['in_flight']}")
        t.add_row("agents connected", str(snap["agents"]))
        t.add_row("jobs requeued", str(snap["requeued"]))
        t.add_row("cost (USD)", f"${snap['cost']:.2f} spent, ${snap['cost_in_flight']:.2f} reserved in flight")
        for (model, role), usd in sorted(snap["cost_by"].items(), key=lambda kv: -kv[1])[:6]:
            t.add_row(Text(f"  {role}"), Text(f"${usd:.2f}  {model}"))   # Text: model specs hold brackets
        t.add_row("failures", Text("\n".join(snap["failures"]) or "-"))   # Text: error text is not markup
        return t
