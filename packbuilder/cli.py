"""The `build-target` command (registered on launch.py's app)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

HELP = "\n\n".join(" ".join(paragraph.split()) for paragraph in """
Write a target's prompt pack from its documentation, for review.

Reads DOCS_DIR (Markdown, HTML, plain text; PDF when pdftotext is on PATH), splits it into chunks named by file
and heading or lines, and asks --model for each part of the pack: isa.md, menu.toml, rules.md, examples/ and
translate.md (how numpy or PyTorch code becomes the target's). Every section cites its chunks; sections and the
whole pack are held to the budgets (asked again once, then trimmed with a note). The pack is checked with the
pack loader a run uses, then written to --out with calls.jsonl (every call: prompt, answer, tokens, cost) and
BUILD.md. Nothing is installed.

With --like a command target (hostcpu), the folder also declares a target NAME with that target's evaluation:
AUTOCOMP_TARGET_PATH=OUT autocomp run --target NAME ... tries the pack.

--replay OUT/calls.jsonl rebuilds the same pack, byte for byte, without a model.
""".strip().split("\n\n"))


def register(app: typer.Typer, console, fail) -> None:
    @app.command("build-target", help=HELP)
    def build_target(
        docs: Annotated[Path, typer.Argument(help="Folder of the target's documentation.", metavar="DOCS_DIR")],
        name: Annotated[str, typer.Option(help="Name of the target the pack is for.", metavar="NAME")],
        model: Annotated[Optional[str], typer.Option(help="Model spec that writes the pack (as run's --model).",
                                                     metavar="SPEC", show_default="the replayed build's")] = None,
        out: Annotated[Optional[Path], typer.Option(help="New folder for the pack.", metavar="DIR",
                                                    show_default="packs/NAME")] = None,
        like: Annotated[Optional[str], typer.Option(help="Existing target whose language the pack is written for; "
                                                    "a command target's evaluation is reused by OUT/target.toml.",
                                                    metavar="TARGET", show_default="none")] = None,
        replay: Annotated[Optional[Path], typer.Option(help="Answer every call from this calls.jsonl (no model, no "
                                                       "cost).", metavar="FILE", show_default="none")] = None,
        budget_usd: Annotated[Optional[float], typer.Option(help="Spending cap: a call whose worst case would pass "
                                                            "it is not made.", metavar="USD", min=0,
                                                            show_default="none")] = None,
        prices: Annotated[Optional[Path], typer.Option(help="Prices file (as run's --prices).", metavar="FILE",
                                                       show_default="$AUTOCOMP_PRICES")] = None,
        section_chars: Annotated[int, typer.Option(help="Budget of one section, in characters.", min=200)] = 3000,
        pack_chars: Annotated[int, typer.Option(help="Budget of the whole pack, in characters.", min=2000)] = 40000,
        max_tokens: Annotated[int, typer.Option(help="Output limit of one call.", min=256)] = 16000,
        retries: Annotated[int, typer.Option(help="Further tries of a failed call, and of an unusable answer.",
                                             min=0, max=10)] = 2,
        call_timeout_s: Annotated[float, typer.Option(help="Seconds one call may take.", min=1)] = 600.0,
    ) -> None:
        from autocomp_zmq.agents.workers.llm.specs import CallOptions
        from autocomp_zmq.packbuilder.build import BuildError, BuildOptions, build
        opts = BuildOptions(docs=docs, name=name, out=out or Path("packs") / name, model=model, like=like,
                            replay=replay, budget_usd=budget_usd, prices=prices, section_chars=section_chars,
                            pack_chars=pack_chars, max_tokens=max_tokens, retries=retries,
                            call=CallOptions(timeout_s=call_timeout_s, max_retries=0))
        try:
            built = build(opts)
        except BuildError as exc:
            fail(str(exc), 1)
        for note in built.notes:
            console.print(f"note: {note}", markup=False, highlight=False)
        console.print(f"Wrote {len(built.files)} files to {built.out} ({', '.join(built.files)}); review them "
                      "before use.", markup=False, highlight=False)
        console.print(f"Spent ${built.spent:.4f} on {built.calls} model call(s).", markup=False, highlight=False)
