"""The report's candidate details: every candidate of the run in a <details> element (closed; no scripts),
grouped by iteration, with its plan, its code diff against its parent, its evaluation feedback or error,
and the model calls that produced it; the best lineage's calls with their prompts and answers, the prompt
prefix they share printed once at the end of the page. Links (the beam tree's nodes, parents, repairs)
point at #cand-ID, an element inside the candidate's <details>: browsers open a closed <details> when a
link targets something inside it.

The page stays bounded for big runs (the paper's settings make about 1500 candidates): see RULE.
Everything that comes from the run is escaped.
"""
from __future__ import annotations

import difflib
from html import escape

from autocomp_zmq.agents.views.callview import Call, CandidateIndex, total
from autocomp_zmq.agents.views.runview import RunView, first_line, plural
from autocomp_zmq.agents.console import latency_text

PLAN_BG, FEEDBACK_BG, ERROR_BG = "#fff3bf", "#e7f5ff", "#fff0f6"
DIFF_ADD, DIFF_DEL = "#d3f9d8", "#ffe3e3"
LINEAGE_DIFF_LINES = 150    # a rewrite of the whole kernel is cut here
DIFF_LINE_BUDGET = 36000    # the other candidates share this many diff lines ...
MIN_DIFF_LINES = 24         # ... but each shows at least this many
MAX_TEXT = 3000             # characters of feedback or an error
MAX_PLAN = 64 * 1024        # a plan is shown whole (protocols.jobs.Plan.text holds at most this)
MAX_CALL_TEXT = 30000       # characters of a prompt, reasoning or answer (lineage only)
MAX_PREFIX = 300000         # characters of a shared prompt prefix

RULE = (f"Every candidate is listed. Diffs are cut at {LINEAGE_DIFF_LINES} lines on the best lineage and at "
        "{cap} lines elsewhere ({budget:,} lines shared by the {n} candidates, at least {floor} each); plans are "
        f"whole; feedback and errors are cut at {MAX_TEXT:,} characters. Prompts and answers are shown for the calls that "
        f"produced the kernels of the best lineage (each cut at {MAX_CALL_TEXT:,} characters; the prompt "
        "prefix they share once, at the end of the page). {command} prints any candidate in full, prompts and "
        "answers included.")

CSS = f"""
details.cand {{ border-bottom: 1px solid #e9ecef; padding: 2px 0; }}
details.cand > summary {{ cursor: pointer; font-size: 13px; font-family: monospace; }}
details.cand > div {{ padding: 4px 0 8px 18px; }}
.lin > summary {{ font-weight: bold; }}
pre.plan {{ background: {PLAN_BG}; white-space: pre-wrap; }}
pre.fb {{ background: {FEEDBACK_BG}; white-space: pre-wrap; }}
pre.err {{ background: {ERROR_BG}; white-space: pre-wrap; }}
pre.txt {{ white-space: pre-wrap; max-height: 600px; overflow-y: auto; }}
h4 {{ font-size: 13px; margin: 8px 0 2px; }}
.kv {{ font-size: 13px; }}
"""


def diff_html(before: str, after: str, max_lines: int, context: int = 2) -> str:
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=context))[2:]
    if not lines:
        return "<p class='note'>Same code as its parent.</p>"
    shown = []
    for line in lines[:max_lines]:
        cls = "hunk" if line.startswith("@@") else "add" if line[:1] == "+" else "del" if line[:1] == "-" else "ctx"
        shown.append(f"<span class='{cls}'>{escape(line) or ' '}</span>")
    if len(lines) > max_lines:
        shown.append(f"<span class='hunk'>... {len(lines) - max_lines} more lines</span>")
    return "<pre class='diff'>" + "".join(shown) + "</pre>"


def capped(text: str, limit: int) -> str:
    """Escaped text, cut at limit characters with a note saying how much was left out."""
    if len(text) <= limit:
        return escape(text)
    return escape(text[:limit]) + f"\n[… {len(text) - limit:,} more characters: show --candidate prints them]"


def _link(cid: str | None, label: str | None = None) -> str:
    if not cid:
        return "-"
    return f"<a href='#cand-{escape(cid)}'>{escape(label or cid[:12])}</a>"


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v else "-"


def _result(index: CandidateIndex, cid: str, unit: str) -> str:
    c = index.cands[cid]
    if c.correct == 1:
        vs_start, vs_parent = index.speedups(cid)
        over = f", {_x(vs_parent)} over its parent" if vs_parent and c.parent_id else ""
        return f"{latency_text(c.cycles, unit)} ({_x(vs_start)}{over})" if c.cycles is not None else "correct"
    if c.correct == 0:
        return f"failed: {c.error_kind or 'error'}"
    return "not evaluated"


def candidates_section(view: RunView) -> str:
    index = view.index
    if index is None:
        return "<p class='note'>Candidate details were not loaded (runview.load(RUN_DIR, details=True)).</p>"
    if not index.cands:
        return "<p class='note'>No candidates yet.</p>"
    lineage = {s.id for s in view.lineage}
    in_beam = {n.id for n in view.nodes if n.state == "in-beam"}
    n = len(index.cands)
    cap = max(MIN_DIFF_LINES, min(LINEAGE_DIFF_LINES, DIFF_LINE_BUDGET // n))
    rule = escape(RULE).format(cap=cap, budget=DIFF_LINE_BUDGET, n=n, floor=MIN_DIFF_LINES,
                               command="<code>launch.py show RUN_DIR --candidate ID</code>")
    out = [f"<p class='note'>{rule}</p>"]
    prefixes: dict[str, int] = {}
    iteration = None
    for c in index.cands.values():
        if c.iteration != iteration:
            iteration = c.iteration
            count = sum(x.iteration == iteration for x in index.cands.values())
            out.append(f"<h3 id='iteration-{iteration}'>Iteration {iteration} ({plural(count, 'candidate')})</h3>")
        out.append(_candidate(view, index, c.id, c.id in lineage, c.id in in_beam,
                              LINEAGE_DIFF_LINES if c.id in lineage else cap, prefixes))
    view_prefixes = _prefixes(index, prefixes)
    return "".join(out) + view_prefixes


def _candidate(view: RunView, index: CandidateIndex, cid: str, on_lineage: bool, in_beam: bool, diff_lines: int,
               prefixes: dict[str, int]) -> str:
    c = index.cands[cid]
    plan = index.plans.get(c.plan_job or "")
    option = plan.option_id if plan and plan.option_id else ("(start)" if c.origin == "initial" else "?")
    marks = [m for m, on in (("best lineage", on_lineage), ("in a beam", in_beam)) if on]
    summary = " · ".join([cid[:12], option, c.model or "-", _result(index, cid, view.unit)] + marks)
    body = [f"<div id='cand-{escape(cid)}'>"]
    parent = index.cands.get(c.parent_id or "")
    facts = [f"id {escape(cid)}", f"iteration {c.iteration}", f"origin {escape(c.origin)}",
             f"model {escape(c.model or '-')}", "parent " + (_link(c.parent_id) if c.parent_id else "none")]
    repaired = [r for r in index.repaired_into(cid) if r != cid]
    if repaired:
        facts.append("repaired into " + ", ".join(_link(r) for r in repaired))
    body.append("<p class='kv'>" + " · ".join(facts) + "</p>")
    if plan is not None:
        body.append(f"<h4>Plan: option {escape(plan.option_id or '(none)')}, by {escape(plan.model or '?')}</h4>"
                    f"<pre class='plan'>{capped(plan.text or '(empty plan text)', MAX_PLAN)}</pre>")
    elif c.origin != "initial":
        body.append("<h4>Plan</h4><p class='note'>not recorded</p>")
    if parent is not None:
        body.append("<h4>Code: diff against its parent</h4>" + diff_html(parent.code, c.code, diff_lines))
    else:
        body.append(f"<h4>Code</h4><pre>{capped(c.code, MAX_CALL_TEXT)}</pre>")
    if c.correct == 0:
        body.append(f"<h4>Error ({escape(c.error_kind or '-')})</h4>"
                    f"<pre class='err'>{capped(c.error or '(no error text)', MAX_TEXT)}</pre>")
    feedback = index.feedback_text(cid)
    if feedback:
        body.append(f"<h4>Evaluation feedback</h4><pre class='fb'>{capped(feedback, MAX_TEXT)}</pre>")
    elif c.correct is None:
        body.append("<h4>Evaluation feedback</h4><p class='note'>not evaluated</p>")
    body.append(_calls(index, cid, on_lineage, prefixes))
    body.append("</div>")
    cls = "cand lin" if on_lineage else "cand"
    return f"<details class='{cls}'><summary>{escape(summary)}</summary>{''.join(body)}</details>"


def _calls(index: CandidateIndex, cid: str, with_texts: bool, prefixes: dict[str, int]) -> str:
    producers = index.producers(cid)
    calls = [(p, c) for p in producers for c in p.calls]
    if not calls:
        return ("" if index.cands[cid].origin == "initial"
                else "<p class='note'>No model call recorded for this candidate.</p>")
    tot = total([c for _, c in calls])
    head = (f"Model calls that produced it: {len(calls)}, ${tot.cost:.4f}, {tot.tokens_in:,} tokens in, "
            f"{tot.tokens_out:,} out")
    rows = ["<table><tr><th>#</th><th>job</th><th>role</th><th>model</th><th>tokens in (cached)</th>"
            "<th>out (reasoning)</th><th>cost</th><th>latency</th><th>outcome / finish</th></tr>"]
    for p, c in calls:
        rows.append("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in (
            c.n, f"{p.kind}/{p.iteration}" + (f" ({p.why})" if p.why != p.kind else ""), c.role, c.model,
            f"{c.tokens_in:,} ({_n(c.tokens_cached)})",
            f"{c.tokens_out:,} ({_n(c.tokens_reasoning)})", f"${c.cost:.4f}" + ("*" if c.priced is False else ""),
            f"{c.latency:.2f} s" if c.latency is not None else "-", c.outcome + (f" / {c.finish}" if c.finish else ""))
        ) + "</tr>")
    rows.append("</table>")
    if with_texts:
        rows += [_call_texts(index, c, prefixes) for _, c in calls]
    elif any(c.texts_recorded for _, c in calls):
        rows.append(f"<p class='note'>Prompts and answers: <code>launch.py show RUN_DIR --candidate "
                    f"{escape(cid[:12])}</code></p>")
    return f"<details><summary>{escape(head)}</summary>{''.join(rows)}</details>"


def _n(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


def _call_texts(index: CandidateIndex, c: Call, prefixes: dict[str, int]) -> str:
    if not c.texts_recorded:
        return f"<p class='note'>Call {c.n}: prompt and answer not recorded.</p>"
    parts = [f"<details><summary>Call {c.n} ({escape(c.role)}): prompt and answer</summary>"]
    if c.prefix_id:
        number = prefixes.setdefault(c.prefix_id, len(prefixes) + 1)
        parts.append(f"<p class='note'>The prompt starts with <a href='#prefix-{number}'>shared prompt prefix "
                     f"{number}</a>; after it:</p>")
    for label, tid in (("Prompt", c.prompt_id), ("Reasoning", c.reasoning_id), ("Answer", c.answer_id)):
        if tid or label != "Reasoning":
            text = index.text(tid)
            parts.append(f"<h4>{label}</h4><pre class='txt'>{capped(text, MAX_CALL_TEXT) if tid else '(none)'}</pre>")
    return "".join(parts) + "</details>"


def _prefixes(index: CandidateIndex, prefixes: dict[str, int]) -> str:
    if not prefixes:
        return ""
    out = ["<h3 id='prefixes'>Shared prompt prefixes</h3>"]
    for tid, number in prefixes.items():
        text = index.text(tid)
        head = first_line(text)[:100]
        out.append(f"<details><summary>Prefix {number}: {len(text):,} characters, {len(text.splitlines()):,} "
                   f"lines ({escape(head)}…)</summary><div id='prefix-{number}'>"
                   f"<pre class='txt'>{capped(text, MAX_PREFIX)}</pre></div></details>")
    return "".join(out)
