"""structlog configuration: readable on a terminal, JSON lines otherwise."""
from __future__ import annotations

import logging
import os
import sys

import structlog


def configure(level: str | None = None) -> None:
    level = (level or os.environ.get("AUTOCOMP_LOG_LEVEL", "INFO")).upper()
    renderer = structlog.dev.ConsoleRenderer() if sys.stderr.isatty() else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"), renderer],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
