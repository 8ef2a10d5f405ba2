"""`show RUN_DIR --candidate ID` and `show RUN_DIR --calls`: one candidate in full, with the model calls
that produced it, and every model call of a run in one table.

As everywhere in `show`, every text from the run reaches rich as a rich.text.Text, never as markup.
"""
from __future__ import annotations

import json
import time

from rich.console import Console
from rich.table import Table
from rich.text import Text

from autocomp_zmq.agents.views.callview import Call, CandidateIndex, Usage, total, usage
from autocomp_zmq.agents.views.runview import first_line, plural

PREFIX_HEAD_LINES = 12   # lines of the shared prompt prefix printed without --full


def heading(title: str) -> Text:
    return Text(f"── {title} " + "─" * max(4, 76 - len(title)), style="bold")


def _n(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


def _cost(c: Call | Usage) -> str:
    if isinstance(c, Call) and c.billing == "unknown":      # lost after sending: the provider's count is unknown
        return f"unknown, up to ${c.cost:.4f}"
    unknown = c.priced is False if isinstance(c, Call) else bool(c.unpriced)
    tier = f" ({c.tier})" if isinstance(c, Call) and c.tier else ""      # flex, priority, batch prices
    return f"${c.cost:.4f}" + ("*" if unknown else "") + tier


def _secs(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} s"


def tokens_line(c: Call | Usage) -> str:
    """in N (cached N, cache write N), out N (reasoning N); '-' for counts the store did not record."""
    write = f", cache write {_n(c.tokens_cache_write)}" if c.tokens_cache_write else ""
    return (f"in {c.tokens_in:,} (cached {_n(c.tokens_cached)}{write}), "
            f"out {c.tokens_out:,} (reasoning {_n(c.tokens_reasoning)})")


def outcome(c: Call) -> str:
    return c.outcome + (f" / {c.finish}" if c.finish else "")


# -- one candidate --------------------------------------------------------------------------------
def print_candidate(console: Console, index: CandidateIndex, cid: str, unit: str, full: bool = False) -> None:
    c = index.cands[cid]
    out = console.print
    out(Text(f"Candidate {c.id}", style="bold"))
    parent = index.cands.get(c.parent_id or "")
    rows = [("iteration", str(c.iteration)), ("origin", c.origin), ("model", c.model or "-"),
            ("parent", (c.parent_id or "none (the starting kernel)")
             + (" (the starting kernel)" if parent and parent.origin == "initial" else ""))]
    vs_start, vs_parent = index.speedups(cid)
    if c.correct == 1:
        result = f"correct, {c.cycles:,.0f} {unit}" if c.cycles is not None else "correct"
        if vs_start:
            result += f", {vs_start:.2f}x over the start"
        if vs_parent:
            result += f", {vs_parent:.2f}x over its parent"
    elif c.correct == 0:
        result = f"incorrect ({c.error_kind or 'no error kind'}): {first_line(c.error) or '-'}"
    else:
        result = "not evaluated"
    rows.append(("result", result))
    repaired = index.repaired_into(cid)
    if repaired:
        rows.append(("repaired into", ", ".join(r if r != cid else "(the same code again)" for r in repaired)))
    for key, value in rows:
        out(Text.assemble((f"{key:>14}: ", "bold"), value))

    out(Text())
    plan = index.plans.get(c.plan_job or "")
    if plan is not None:
        out(heading(f"Plan: option {plan.option_id or '(none)'}, by {plan.model or '?'}, job {c.plan_job}"))
        out(Text(plan.text or "(empty plan text)"))
    elif c.origin == "initial":
        out(heading("Plan"))
        out(Text("none: the starting kernel"))
    elif c.origin == "continued":
        out(heading("Plan"))
        out(Text("none here: a kernel of the final beam of the run this one continued (--continue-from)"))
    else:
        out(heading("Plan"))
        out(Text(f"not recorded (plan job {c.plan_job or '-'})"))
    out(heading("Code"))
    out(Text(c.code))
    if c.correct == 0:
        out(heading(f"Error ({c.error_kind or '-'})"))
        out(Text(c.error or "(no error text)"))
    feedback = index.feedback_text(cid)
    out(heading("Evaluation feedback"))
    out(Text(feedback or {None: "none: not evaluated", 0: "none: the kernel failed (the error is above)"}.get(
        c.correct, "not recorded")))
    _print_producers(console, index, cid, full)


def _print_producers(console: Console, index: CandidateIndex, cid: str, full: bool) -> None:
    out = console.print
    producers = index.producers(cid)
    calls = [call for p in producers for call in p.calls]
    out(heading(f"Model calls that produced it ({len(calls)})"))
    if not calls:
        out(Text("none recorded" if producers or index.cands[cid].origin != "initial"
                 else "none: the starting kernel was given"))
        return
    prefixes = list(dict.fromkeys(call.prefix_id for call in calls if call.prefix_id))
    names = {tid: (f"#{i}" if len(prefixes) > 1 else "") for i, tid in enumerate(prefixes, 1)}
    for tid in prefixes:
        text = index.text(tid)
        users = sum(call.prefix_id == tid for call in calls)
        size = f"{len(text):,} characters, {len(text.splitlines()):,} lines"
        if full:
            out(heading(f"Shared prompt prefix{names[tid] and ' ' + names[tid]} ({size}; used by {users} of these "
                        f"calls)"))
            out(Text(text))
        else:
            head = "\n".join(text.splitlines()[:PREFIX_HEAD_LINES])
            out(heading(f"Shared prompt prefix{names[tid] and ' ' + names[tid]} ({size}; used by {users} of these "
                        f"calls): its first {PREFIX_HEAD_LINES} lines, --full prints it all"))
            out(Text(head + "\n[…]"))
    for p in producers:
        if not p.calls:
            out(heading(f"{p.kind} job {p.job_id} ({p.why}): no model call recorded"))
        for call in p.calls:
            out(Text())
            out(heading(f"Call {call.n}: {p.why}, {p.kind} job {p.job_id}, iteration {p.iteration}"))
            _print_call(console, index, call, names)


def print_one_call(console: Console, index: CandidateIndex, n: int, full: bool = False) -> None:
    """Call number n of `show --calls`, whatever came of it (a candidate, a failed job, a try lost or retried):
    its job, what the job led to, its figures, then its prompt and its raw answer."""
    if not 1 <= n <= len(index.calls):
        raise LookupError(f"no call {n}: this run has {plural(len(index.calls), 'call')} (show --calls lists them)")
    call = index.calls[n - 1]
    out = console.print
    out(heading(f"Call {call.n}: {call.role}, {call.kind or '?'} job {call.job_id or '-'}, iteration "
                f"{'?' if call.iteration is None else call.iteration}"))
    led = (f"candidates {', '.join(call.candidates)}" if call.candidates else
           f"no candidate: {index.job_error(call.job_id) or 'the job produced none'}")
    out(Text.assemble(("      led to: ", "bold"), led))
    names = {call.prefix_id: ""} if call.prefix_id else {}
    if call.prefix_id:
        text = index.text(call.prefix_id)
        shown = text if full else "\n".join(text.splitlines()[:PREFIX_HEAD_LINES]) + "\n[…]"
        out(heading(f"Shared prompt prefix ({len(text):,} characters)" + ("" if full else
                    f": its first {PREFIX_HEAD_LINES} lines, --full prints it all")))
        out(Text(shown))
    _print_call(console, index, call, names)


def _print_call(console: Console, index: CandidateIndex, call: Call, prefix_names: dict) -> None:
    out = console.print
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(call.created)) if call.created else "-"
    unknown = " (price unknown: as the agent reported it)" if call.priced is False else ""
    limit = f", max_tokens {call.max_tokens:,}" if call.max_tokens else ""
    for key, value in [("role", call.role), ("model", call.model), ("tokens", tokens_line(call) + limit),
                       ("cost", _cost(call) + unknown), ("latency", _secs(call.latency)),
                       ("outcome", outcome(call)), ("at", when)]:
        out(Text.assemble((f"{key:>14}: ", "bold"), value))
    if not call.texts_recorded:
        out(Text("prompt and answer: not recorded (the agent kept none, or the store predates them)", style="dim"))
        return
    if call.prefix_id:
        name = prefix_names.get(call.prefix_id)
        out(Text(f"prompt prefix: the shared prefix{' ' + name if name else ''} above", style="dim"))
    for label, tid in (("Prompt (after the prefix)" if call.prefix_id else "Prompt", call.prompt_id),
                       ("Reasoning", call.reasoning_id), ("Answer", call.answer_id)):
        if tid or label != "Reasoning":
            out(Text(f"{label}:", style="bold underline"))
            out(Text(index.text(tid) if tid else "(none)"))


# -- every call ---------------------------------------------------------------------------------
def print_calls(console: Console, index: CandidateIndex, title: str) -> None:
    calls = index.calls
    t = Table(title=Text(f"Model calls of {title}"), title_justify="left")
    for i, col in enumerate(["#", "role", "model", "job", "candidate", "tokens in (cached)", "out (reasoning)",
                             "cost", "latency", "outcome / finish"]):
        t.add_column(Text(col), justify="right" if i in (0, 5, 6, 7, 8) else "left")
    for c in calls:
        cands = c.candidates
        produced = ", ".join(x[:12] for x in cands[:2]) + (f" +{len(cands) - 2}" if len(cands) > 2 else "")
        t.add_row(*[Text(str(v)) for v in (
            c.n, c.role, c.model, f"{c.kind or '?'}/{'?' if c.iteration is None else c.iteration}", produced,
            f"{c.tokens_in:,} ({_n(c.tokens_cached)})", f"{c.tokens_out:,} ({_n(c.tokens_reasoning)})", _cost(c),
            _secs(c.latency), outcome(c))])
    tot = total(calls)
    t.add_section()
    t.add_row(*[Text(str(v), style="bold") for v in (
        "", "total", f"{len(calls)} calls", "", "", f"{tot.tokens_in:,} ({_n(tot.tokens_cached)})",
        f"{tot.tokens_out:,} ({_n(tot.tokens_reasoning)})", _cost(tot), _secs(tot.latency), "")])
    console.print(t)
    console.print(usage_table(usage(calls), "Per model and role"))
    notes = unpriced_note(tot)
    if notes:
        console.print(Text(notes))
    lost = [c for c in calls if c.billing == "unknown"]
    unbilled = sum(c.billing == "none" for c in calls)
    if lost or unbilled:
        console.print(Text(f"{plural(len(lost), 'call')} lost after the request was sent (timeout, reset, malformed "
                           f"answer): the provider may have billed them, so each counts at its worst case "
                           f"(${sum(c.cost for c in lost):.4f} in all). {plural(unbilled, 'call')} not billed "
                           "(429, 5xx, 529, no connection), each tried again after a wait."))


def usage_table(rows: list[Usage], title: str) -> Table:
    t = Table(title=Text(title), title_justify="left")
    for i, col in enumerate(["model", "role", "calls", "tokens in", "cached", "tokens out", "reasoning", "cost"]):
        t.add_column(Text(col), justify="right" if i >= 2 else "left")
    for u in rows:
        t.add_row(*[Text(str(v)) for v in (u.model, u.role, u.calls, f"{u.tokens_in:,}", _n(u.tokens_cached),
                                           f"{u.tokens_out:,}", _n(u.tokens_reasoning), _cost(u))])
    return t


def unpriced_note(tot: Usage) -> str:
    if tot.unpriced is None:
        return "Whether each call's price was known is not recorded in this store." if tot.calls else ""
    if tot.unpriced:
        return (f"* {tot.unpriced} of {tot.calls} calls had no known price (priced = 0): their cost is what "
                f"the agent reported, usually $0.")
    return f"Every call's price was known ({plural(tot.calls, 'call')}; none unpriced)." if tot.calls else ""


def calls_json(index: CandidateIndex, texts: bool = False) -> list[str]:
    """One JSON object per call, in time order; with `texts` its prefix, prompt, reasoning and raw answer too."""
    keys = ("n", "id", "job_id", "role", "model", "kind", "iteration", "tokens_in", "tokens_cached",
            "tokens_cache_write", "tokens_out", "tokens_reasoning", "max_tokens", "cost", "priced", "billing", "tier", "latency",
            "outcome", "finish", "created", "candidates")
    named = (("prefix", "prefix_id"), ("prompt", "prompt_id"), ("reasoning", "reasoning_id"), ("answer", "answer_id"))
    return [json.dumps({k: getattr(c, k) for k in keys}
                       | ({name: index.text(getattr(c, tid)) if getattr(c, tid) else None for name, tid in named}
                          if texts else {})) for c in index.calls]
