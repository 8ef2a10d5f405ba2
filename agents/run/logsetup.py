"""structlog configuration.

Worker processes: readable lines on a terminal, JSON lines otherwise, on stderr.
The coordinator during a run (`to_run_dir`): every event as a JSON line in RUN_DIR/logs/coordinator.log,
and warnings and errors also through the same rich console as the live view, so that they print above
it instead of tearing it, with no markup interpretation (events carry program text)."""
from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import IO

import structlog
from rich.console import Console
from rich.text import Text

from autocomp_zmq.agents.console import printable


def _level(level: str | None) -> int:
    name = (level or os.environ.get("AUTOCOMP_LOG_LEVEL", "INFO")).upper()
    return getattr(logging, name, logging.INFO)


def _shown_not_obeyed(_, __, event: dict) -> dict:
    """On a terminal, text from models and candidates (errors, kernels) shows its control characters (console.py)."""
    return {k: printable(v) if isinstance(v, str) else v for k, v in event.items()}


def configure(level: str | None = None) -> None:
    tty = sys.stderr.isatty()     # JSON lines escape control characters by themselves
    renderer = structlog.dev.ConsoleRenderer() if tty else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"),
                    *([_shown_not_obeyed] if tty else []), renderer],
        wrapper_class=structlog.make_filtering_bound_logger(_level(level)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


class _RunLogger:
    """Receives each event as a dict: writes it to the log file; shows warnings and errors on the console."""

    def __init__(self, file: IO[str] | None, console: Console, console_level: int) -> None:
        self.file, self.console, self.console_level = file, console, console_level

    def _emit(self, level: str, event: dict) -> None:
        if self.file is not None:
            try:
                self.file.write(json.dumps(event, default=str) + "\n")
                self.file.flush()
            except (OSError, ValueError):   # the run dir vanished or the file was closed: keep the console
                self.file = None
        if getattr(logging, level.upper(), logging.INFO) >= self.console_level:
            extra = " ".join(f"{k}={v}" for k, v in event.items() if k not in ("event", "level", "timestamp"))
            style = "red" if level in ("error", "critical") else "yellow"
            line = Text.assemble((f"{level}: ", style), str(event.get("event", "")), " ", extra)
            self.console.print(line, soft_wrap=True, highlight=False)

    def __getattr__(self, level: str):
        return lambda **event: self._emit(level, event)


def to_run_dir(log_path: Path | None, console: Console, level: str | None = None,
               console_level: int = logging.WARNING) -> None:
    """Route this process's log events to log_path (JSON lines) and, from console_level up, to console."""
    from autocomp_zmq.agents.run.rundir import private_open
    file = private_open(log_path, "a") if log_path else None   # open for the run
    logger = _RunLogger(file, console, max(console_level, _level(level)))

    def as_kwargs(_, method, event: dict) -> dict:
        event.setdefault("level", method)
        return event

    structlog.configure(
        processors=[structlog.processors.TimeStamper(fmt="iso"), as_kwargs],
        wrapper_class=structlog.make_filtering_bound_logger(_level(level)),
        logger_factory=lambda *_: logger,
        cache_logger_on_first_use=False,
    )
