"""structlog set-up: one JSON line per request on stderr. API keys are never logged."""

from __future__ import annotations

import logging
import math
import sys
import threading
import time

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure(level: str = "info") -> None:
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )


class _CurrentStderr:
    """Writes to whatever sys.stderr is now (test capture, a redirect), not the one seen at configure time."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def get_logger() -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger("workset")


class Throttled:
    """A log line that may repeat for every request (a failed-open request while the store is down) let through at
    most once per `every_s` seconds, with the number held back since the last one."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self._lock = threading.Lock()
        self._last = -math.inf
        self._held = 0

    def passes(self) -> int | None:
        """The lines held back before this one when it may be written now; None when it is held back too."""
        now = time.monotonic()
        with self._lock:
            if now - self._last < self.every_s:
                self._held += 1
                return None
            held, self._held, self._last = self._held, 0, now
            return held
