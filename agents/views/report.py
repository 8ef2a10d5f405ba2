"""One self-contained HTML report of a run: inline CSS and SVG drawn here, no
scripts, no fonts, no images, nothing fetched. Everything that comes from the
run (code, plans, errors, model names, paths) is untrusted and is escaped; the
page also carries a Content-Security-Policy that forbids loading anything.

Each plot has a stable element id and its own series colour (PLOT_COLOURS), so
a test can find it in a screenshot of the rendered page.
"""
from __future__ import annotations

import math
import time
from html import escape

from autocomp_zmq.agents.views.report_cands import (CSS as CANDIDATE_CSS, DIFF_ADD, DIFF_DEL, LINEAGE_DIFF_LINES,
                                                    candidates_section, diff_html)
from autocomp_zmq.agents.views.callprint import unpriced_note
from autocomp_zmq.agents.views.callview import combined
from autocomp_zmq.agents.views.runview import Node, RunView, clip, plural
from autocomp_zmq.agents.console import latency_number, latency_text

PLOT_COLOURS = {"plot-speedup": "#1c7ed6", "plot-cost": "#f08c00", "plot-tree": "#ae3ec9",
                "plot-options": "#0ca678"}
NODE_COLOURS = {"in-beam": "#3b5bdb", "correct": "#adb5bd", "incorrect": "#e03131", "pending": "#ffffff"}

CSS = f"""
body {{ font-family: sans-serif; margin: 24px; color: #212529; max-width: 1240px; }}
h1 {{ font-size: 22px; margin: 0 0 4px; }} h2 {{ font-size: 17px; margin: 22px 0 6px; }} h3 {{ font-size: 14px; }}
.sub {{ color: #495057; margin-bottom: 12px; }}
.row {{ display: flex; gap: 16px; }} .row section {{ flex: 1; }}
svg {{ background: #fff; border: 1px solid #dee2e6; }} svg text {{ font-family: sans-serif; fill: #343a40; }}
table {{ border-collapse: collapse; font-size: 13px; margin: 4px 0 10px; }}
td, th {{ border-bottom: 1px solid #e9ecef; padding: 3px 8px; text-align: left; vertical-align: top; }}
td.n {{ text-align: right; font-variant-numeric: tabular-nums; }}
pre {{ font-size: 12px; background: #f8f9fa; padding: 6px; overflow-x: auto; margin: 4px 0 14px; }}
pre span {{ display: block; white-space: pre; }}
.add {{ background: {DIFF_ADD}; }} .del {{ background: {DIFF_DEL}; }} .hunk {{ color: #868e96; }}
.note {{ color: #868e96; font-size: 13px; }}
""" + CANDIDATE_CSS


def render(view: RunView) -> str:
    title = f"{view.problem} on {view.target}: {view.run_dir.name}"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1><div class='sub'>{escape(_headline(view))}</div>",
        "<div class='row'>",
        f"<section><h2>Best speedup per iteration</h2>{speedup_plot(view)}</section>",
        f"<section><h2>Cost over time</h2>{cost_plot(view)}</section></div>",
        f"<section><h2>Beam tree</h2>{tree_plot(view)}<div class='note'>Each node links to its candidate in "
        "<a href='#candidates'>Candidates</a> below: plan, diff, feedback and model calls.</div></section>",
        f"<section><h2>Effect of each menu option on latency</h2>{options_plot(view)}</section>",
        f"<section><h2>Lineage of the best kernel</h2>{_lineage(view)}</section>",
        f"<section><h2>Failures</h2>{_failures_table(view)}</section>",
        f"<section><h2>Model calls</h2>{_usage_table(view)}</section>",
        f"<section id='candidates'><h2>Candidates</h2>{candidates_section(view)}</section>",
        "</body></html>"]
    return "\n".join(parts)


def _headline(view: RunView) -> str:
    parts = [view.summary.get("stop_reason") if view.summary and view.status == "finished" else view.status]
    parts.append(plural(view.evaluations, "evaluation"))
    if view.summary is None and (view.in_flight or view.queued):   # a live or crashed run
        parts.append(f"{plural(view.in_flight, 'job')} leased to agents, {view.queued} queued")
    if view.speedup:
        parts.append(f"best {latency_text(view.best_cycles, view.unit)} vs {latency_number(view.baseline, view.unit)} "
                     f"at the start "
                     f"({view.speedup:.2f}x)")
    parts.append(f"cost ${view.cost:.2f}")
    parts.append("models: " + ", ".join(dict.fromkeys(view.models("plan") + view.models("code"))))
    if view.started:
        parts.append("started " + time.strftime("%Y-%m-%d %H:%M", time.localtime(view.started)))
    return " · ".join(parts)


# -- SVG helpers --------------------------------------------------------------------------------
def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About n round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks within [lo, hi] on a log axis; only the powers of ten where that would be too many."""
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    inside = [(m, m * 10.0 ** e) for e in decades for m in (1, 2, 5) if lo <= m * 10.0 ** e <= hi]
    return [t for m, t in inside if len(inside) <= 8 or m == 1]


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


class Frame:
    """A plot area in an SVG of size w x h: maps data coordinates to pixels and draws the axes."""

    def __init__(self, w: int, h: int, xlim: tuple[float, float], ylim: tuple[float, float],
                 logx: bool = False, logy: bool = False, margin: tuple[int, int, int, int] = (64, 20, 16, 44)):
        self.w, self.h = w, h
        self.left, self.right, self.top, self.bottom = margin[0], w - margin[1], margin[2], h - margin[3]
        self._fx = math.log10 if logx else float
        self._fy = math.log10 if logy else float
        self.x0, self.x1 = self._fx(xlim[0]), self._fx(xlim[1])
        self.y0, self.y1 = self._fy(ylim[0]), self._fy(ylim[1])
        self.x1 = max(self.x1, self.x0 + 1e-9)   # a degenerate range still gets an axis, not a division by zero
        self.y1 = max(self.y1, self.y0 + 1e-9)

    def x(self, v: float) -> float:
        return self.left + (self._fx(v) - self.x0) / (self.x1 - self.x0) * (self.right - self.left)

    def y(self, v: float) -> float:
        return self.bottom - (self._fy(v) - self.y0) / (self.y1 - self.y0) * (self.bottom - self.top)

    def axes(self, xticks, yticks, xlabel: str, ylabel: str, xfmt=_num, yfmt=_num) -> list[str]:
        out = [f"<line x1='{self.left}' y1='{self.bottom}' x2='{self.right}' y2='{self.bottom}' stroke='#495057'/>",
               f"<line x1='{self.left}' y1='{self.top}' x2='{self.left}' y2='{self.bottom}' stroke='#495057'/>"]
        for t in xticks:
            x = self.x(t)
            out.append(f"<line x1='{x:.1f}' y1='{self.bottom}' x2='{x:.1f}' y2='{self.bottom + 4}' stroke='#495057'/>"
                       f"<text x='{x:.1f}' y='{self.bottom + 16}' font-size='11' text-anchor='middle'>"
                       f"{escape(xfmt(t))}</text>")
        for t in yticks:
            y = self.y(t)
            out.append(f"<line x1='{self.left}' y1='{y:.1f}' x2='{self.right}' y2='{y:.1f}' stroke='#f1f3f5'/>"
                       f"<text x='{self.left - 6}' y='{y + 4:.1f}' font-size='11' text-anchor='end'>"
                       f"{escape(yfmt(t))}</text>")
        mid_x, mid_y = (self.left + self.right) / 2, (self.top + self.bottom) / 2
        out.append(f"<text x='{mid_x:.0f}' y='{self.h - 8}' font-size='12' text-anchor='middle'>{escape(xlabel)}</text>")
        out.append(f"<text x='14' y='{mid_y:.0f}' font-size='12' text-anchor='middle' "
                   f"transform='rotate(-90 14 {mid_y:.0f})'>{escape(ylabel)}</text>")
        return out


def _svg(plot_id: str, w: int, h: int, body: list[str]) -> str:
    return (f"<svg id='{plot_id}' xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' "
            f"viewBox='0 0 {w} {h}'>" + "".join(body) + "</svg>")


def _note(x: float, y: float, text: str, anchor: str = "middle") -> str:
    return f"<text x='{x:.0f}' y='{y:.0f}' font-size='13' fill='#868e96' text-anchor='{anchor}'>{escape(text)}</text>"


# -- plots --------------------------------------------------------------------------------------
def speedup_plot(view: RunView, w: int = 600, h: int = 280) -> str:
    """(a) The best speedup over the starting kernel after each iteration, as a step line."""
    colour = PLOT_COLOURS["plot-speedup"]
    pts = [(b.iteration, b.speedup) for b in view.iterations if b.speedup]
    last_it = max([int(view.config.get("iterations") or 0)] + [p[0] for p in pts] + [1])
    top = max([p[1] for p in pts] + [1.0]) * 1.12
    fr = Frame(w, h, (0, last_it), (0, top))
    body = fr.axes(_ticks(0, last_it, min(last_it, 10)), _ticks(0, top), "iteration", "best speedup (x)",
                   xfmt=lambda t: f"{t:g}", yfmt=lambda t: f"{t:g}x")
    if not pts:
        body.append(_note(w / 2, h / 2, "no iteration finished yet"))
        return _svg("plot-speedup", w, h, body)
    path = [f"M{fr.x(pts[0][0]):.1f},{fr.y(pts[0][1]):.1f}"]
    for it, s in pts[1:]:
        path.append(f"H{fr.x(it):.1f}V{fr.y(s):.1f}")
    body.append(f"<path d='{''.join(path)}' fill='none' stroke='{colour}' stroke-width='3'/>")
    for it, s in pts:
        body.append(f"<circle cx='{fr.x(it):.1f}' cy='{fr.y(s):.1f}' r='4.5' fill='{colour}'/>")
    it, s = pts[-1]
    body.append(f"<text x='{fr.x(it) - 8:.1f}' y='{fr.y(s) - 10:.1f}' font-size='12' text-anchor='end'>"
                f"{s:.2f}x</text>")
    return _svg("plot-speedup", w, h, body)


def cost_plot(view: RunView, w: int = 600, h: int = 280) -> str:
    """(e) Cumulative USD over the run's wall time; cumulative model calls when no call was paid."""
    colour = PLOT_COLOURS["plot-cost"]
    start = view.started or (view.calls[0][0] if view.calls else 0)
    paid = any(cost > 0 for _, cost in view.calls)
    pts, total = [(0.0, 0.0)], 0.0
    for created, cost in view.calls:
        total += cost if paid else 1
        pts.append((max(created - start, 0.0), total))
    span = max(pts[-1][0], 1.0)
    scale = 60 if span > 120 else 1   # seconds, or minutes for longer runs
    top = max(total, 1e-9 if paid else 1) * 1.1
    fr = Frame(w, h, (0, span), (0, top))
    body = fr.axes([t * scale for t in _ticks(0, span / scale)], _ticks(0, top),
                   "minutes since start" if scale == 60 else "seconds since start",
                   "cumulative cost (USD)" if paid else "cumulative model calls",
                   xfmt=lambda t: f"{t / scale:g}", yfmt=(lambda t: f"${t:.2f}") if paid else (lambda t: f"{t:g}"))
    if len(pts) > 1:
        path = [f"M{fr.x(pts[0][0]):.1f},{fr.y(pts[0][1]):.1f}"]
        path += [f"H{fr.x(t):.1f}V{fr.y(v):.1f}" for t, v in pts[1:]]
        body.append(f"<path d='{''.join(path)}' fill='none' stroke='{colour}' stroke-width='3'/>")
    note = (f"${total:.2f} in {plural(len(view.calls), 'call')}" if paid else
            f"no paid calls ({plural(len(view.calls), 'unpaid call')})" if view.calls else "no model calls yet")
    body.append(_note(fr.left + 10, fr.top + 16, note, anchor="start"))
    return _svg("plot-cost", w, h, body)


def _tree_layout(nodes: list[Node]) -> dict[str, float]:
    """Horizontal offset of each node within its iteration's column, in [-0.35, 0.35], children of one
    parent side by side and in the order of their parents, so edges cross as little as possible."""
    order: dict[str, float] = {}
    for it in sorted({n.iteration for n in nodes}):
        col = sorted((n for n in nodes if n.iteration == it), key=lambda n: (order.get(n.parent_id, 0), n.id))
        for i, n in enumerate(col):
            order[n.id] = (i / (len(col) - 1) - 0.5) * 0.7 if len(col) > 1 else 0.0
    return order


def tree_plot(view: RunView, w: int = 1218, h: int = 430) -> str:
    """(b) Every candidate at (iteration, speedup over the start), edges from parent to child; failed
    candidates sit in a strip below the axis. The best kernel's lineage is drawn over the rest."""
    lineage_colour = PLOT_COLOURS["plot-tree"]
    nodes = view.nodes
    speed = {n.id: view.baseline / n.cycles for n in nodes if n.cycles and view.baseline}
    last_it = max([n.iteration for n in nodes] + [1])
    lo, hi = min(list(speed.values()) + [1.0]) / 1.3, max(list(speed.values()) + [1.0]) * 1.3
    fr = Frame(w, h, (-0.5, last_it + 0.5), (lo, hi), logy=True, margin=(64, 150, 16, 74))
    body = fr.axes(range(last_it + 1), _log_ticks(lo, hi), "iteration", "speedup over start (log)",
                   xfmt=lambda t: f"{t:g}", yfmt=lambda t: f"{t:g}x")
    fail_y = fr.bottom + 34
    if any(n.id not in speed for n in nodes):   # incorrect or not evaluated yet
        body.append(_note(fr.left - 6, fail_y + 4, "no cycles", anchor="end"))
    offset = _tree_layout(nodes)
    pos = {n.id: (fr.x(n.iteration + offset[n.id]), fr.y(speed[n.id]) if n.id in speed else fail_y) for n in nodes}
    lineage = [n for n in nodes if n.on_lineage]
    for n in nodes:
        if n.parent_id in pos:
            (x1, y1), (x2, y2) = pos[n.parent_id], pos[n.id]
            body.append(f"<line x1='{x1:.1f}' y1='{y1:.1f}' x2='{x2:.1f}' y2='{y2:.1f}' stroke='#ced4da'/>")
    for n in lineage:
        if n.parent_id in pos:
            (x1, y1), (x2, y2) = pos[n.parent_id], pos[n.id]
            body.append(f"<line x1='{x1:.1f}' y1='{y1:.1f}' x2='{x2:.1f}' y2='{y2:.1f}' stroke='{lineage_colour}' "
                        f"stroke-width='4'/>")
    for n in sorted(nodes, key=lambda n: n.on_lineage):
        x, y = pos[n.id]
        ring = f"stroke='{lineage_colour}' stroke-width='3'" if n.on_lineage else "stroke='#495057' stroke-width='1'"
        label = escape(f"{n.id} iteration {n.iteration} {n.state}" + (f" {latency_number(n.cycles, view.unit)}" if n.cycles else ""))
        body.append(f"<a href='#cand-{escape(n.id)}'><circle cx='{x:.1f}' cy='{y:.1f}' r='{7 if n.on_lineage else 5}' "
                    f"fill='{NODE_COLOURS[n.state]}' {ring}><title>{label}</title></circle></a>")
    if not nodes:
        body.append(_note(w / 2, h / 2, "no candidates yet"))
    legend = [(NODE_COLOURS["in-beam"], "entered a beam"), (NODE_COLOURS["correct"], "correct, not kept"),
              (NODE_COLOURS["incorrect"], "incorrect"), (NODE_COLOURS["pending"], "not evaluated yet")]
    lx = fr.right + 20
    for i, (fill, text) in enumerate(legend):
        body.append(f"<circle cx='{lx}' cy='{fr.top + 12 + i * 22}' r='5' fill='{fill}' stroke='#495057'/>"
                    f"<text x='{lx + 12}' y='{fr.top + 16 + i * 22}' font-size='12'>{text}</text>")
    y = fr.top + 12 + len(legend) * 22
    body.append(f"<line x1='{lx - 8}' y1='{y}' x2='{lx + 6}' y2='{y}' stroke='{lineage_colour}' stroke-width='4'/>"
                f"<text x='{lx + 12}' y='{y + 4}' font-size='12'>best lineage</text>")
    return _svg("plot-tree", w, h, body)


def options_plot(view: RunView, w: int = 1218) -> str:
    """(c) Per menu option, every correct child's latency relative to its parent (log scale; left of 1 is
    faster), its median, and how often the option was tried and accepted."""
    colour = PLOT_COLOURS["plot-options"]
    if not view.options:
        return _svg("plot-options", w, 60, [_note(w / 2, 35, "no plans yet")])
    rows = sorted(view.options, key=lambda o: (_median(o.ratios) if o.ratios else math.inf, o.option_id))
    ratios = [r for o in rows for r in o.ratios if r > 0]
    lo, hi = min(ratios + [0.5]) / 1.2, max(ratios + [1.5]) * 1.2
    row_h, h = 26, 60 + 26 * len(rows)
    fr = Frame(w, h, (lo, hi), (0, len(rows)), logx=True, margin=(190, 300, 10, 46))
    body = fr.axes(_log_ticks(lo, hi), [], "child latency / parent latency (log scale; left of 1 = faster)", "",
                   xfmt=lambda t: f"{t:g}")
    body.append(f"<line x1='{fr.x(1):.1f}' y1='{fr.top}' x2='{fr.x(1):.1f}' y2='{fr.bottom}' stroke='#868e96' "
                f"stroke-dasharray='4 3'/>")
    for i, o in enumerate(rows):
        y = fr.top + (i + 0.5) * row_h
        body.append(f"<text x='{fr.left - 8}' y='{y + 4:.1f}' font-size='12' text-anchor='end'>"
                    f"{escape(clip(o.option_id, 28))}</text>")
        for j, r in enumerate(sorted(o.ratios)):
            jitter = ((j * 7) % 5 - 2) * 2.2   # spread equal values a little, deterministically
            body.append(f"<circle cx='{fr.x(r):.1f}' cy='{y + jitter:.1f}' r='4' fill='{colour}' "
                        f"fill-opacity='0.55'/>")
        if o.ratios:
            m = fr.x(_median(o.ratios))
            body.append(f"<line x1='{m:.1f}' y1='{y - 10:.1f}' x2='{m:.1f}' y2='{y + 10:.1f}' stroke='{colour}' "
                        f"stroke-width='4'/>")
        gain = f", best {o.best_gain:.2f}x" if o.best_gain else ""
        body.append(f"<text x='{fr.right + 10}' y='{y + 4:.1f}' font-size='12'>{plural(o.plans, 'plan')}, "
                    f"{plural(o.candidates, 'kernel')}, {o.correct} correct, {o.accepted} accepted{gain}</text>")
    return _svg("plot-options", w, h, body)


def _median(values: list[float]) -> float:
    s = sorted(values)
    return (s[len(s) // 2] + s[(len(s) - 1) // 2]) / 2


# -- tables and diffs ---------------------------------------------------------------------------
def _table(head: list[str], rows: list[list], numeric: set[int] = frozenset()) -> str:
    out = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td{' class=n' if i in numeric else ''}>{escape(str(c))}</td>"
                                    for i, c in enumerate(row)) + "</tr>")
    return "".join(out) + "</table>"


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v else "-"


def _lineage(view: RunView) -> str:
    if not view.lineage:
        return "<p class='note'>No correct kernel yet.</p>"
    rows = [[s.iteration, s.option_id or "(start)", s.plan or "", s.model or "", latency_number(s.cycles, view.unit) if s.cycles else "-",
             _x(s.vs_start), _x(s.vs_parent)] for s in view.lineage]
    out = [_table(["iteration", "option", "plan", "model", view.unit, "vs start", "vs parent"], rows, {0, 4, 5, 6})]
    start = view.lineage[0]
    out.append(f"<details><summary>Starting kernel</summary><pre>{escape(start.code)}</pre></details>")
    for n, s in enumerate(view.lineage[1:], 1):
        out.append(f"<h3 id='diff-{n}'>Iteration {s.iteration}: "
                   f"{escape(s.option_id or '?')} ({_x(s.vs_parent)} over its parent) "
                   f"<a href='#cand-{escape(s.id)}'>{escape(s.id[:12])}</a></h3>")
        out.append(diff_html(s.parent_code or "", s.code, LINEAGE_DIFF_LINES))
    return "".join(out)


def _failures_table(view: RunView) -> str:
    if not view.failures:
        return "<p class='note'>No failed jobs and no incorrect kernels.</p>"
    rows = [[f.count, f.kind, f.error_kind, f.message, clip(f.example, 300)] for f in view.failures]
    return _table(["count", "job", "error kind", "error (normalised)", "example"], rows, {0})


def _usage_table(view: RunView) -> str:
    if not view.usage:
        return "<p class='note'>No model calls.</p>"
    def n(v: int | None) -> str:
        return "-" if v is None else f"{v:,}"
    rows = [[u.model, u.role, u.calls, f"{u.tokens_in:,}", n(u.tokens_cached), f"{u.tokens_out:,}",
             n(u.tokens_reasoning), f"${u.cost:.4f}" + ("*" if u.unpriced else "")] for u in view.usage]
    table = _table(["model", "role", "calls", "tokens in", "cached", "tokens out", "reasoning", "cost"], rows,
                   {2, 3, 4, 5, 6, 7})
    note = unpriced_note(combined(view.usage))
    return table + (f"<p class='note'>{escape(note)}</p>" if note else "") + _calls_without_candidates(view)


MAX_FAILED_CALLS = 200   # rows of the table of calls that produced no candidate


def _calls_without_candidates(view: RunView) -> str:
    """Every paid call whose answer led to no candidate (failed, lost, unusable, or a plan no kernel implemented):
    what it cost and how it ended; `show RUN --call N` prints its prompt and answer."""
    calls = [c for c in (view.index.calls if view.index else []) if not c.candidates]
    if not calls:
        return ""
    rows = [[c.n, c.role, c.model, f"{c.kind or '?'}/{'?' if c.iteration is None else c.iteration}",
             clip(c.outcome + (f" / {c.finish}" if c.finish else ""), 160),
             (f"up to ${c.cost:.4f}" if c.billing == "unknown" else f"${c.cost:.4f}")] for c in calls[:MAX_FAILED_CALLS]]
    more = f" (the first {MAX_FAILED_CALLS} of {len(calls)})" if len(calls) > MAX_FAILED_CALLS else ""
    return (f"<h3>Calls that produced no candidate{more}</h3>"
            + _table(["call", "role", "model", "job", "outcome / finish", "cost"], rows, {0, 5})
            + f"<p class='note'>{escape(f'launch.py show {view.run_dir} --call N')} prints a call's prompt and raw "
              "answer.</p>")
