"""Whether a store answers, for both backends: marked down by whatever found it failing (one log line), then a
prober thread tries `probe()` every `every_s` seconds and at its first success marks it up (one line) and calls
`recovered()` (which queues again the writes lost meanwhile). PostgreSQL is down when the database does not
answer; SQLite when its file cannot be written (a disk full, a read-only file)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .logs import get_logger


class Outage:
    def __init__(self, store: str, every_s: float, probe: Callable[[], bool], recovered: Callable[[], None]) -> None:
        self.store = store  # for the log lines, without a password
        self.every_s = every_s
        self._probe = probe
        self._recovered = recovered
        self._lock = threading.Lock()
        self._since = 0.0  # monotonic time it went down; 0 while it answers
        self._why = ""
        self._closed = threading.Event()

    @property
    def why(self) -> str:
        """Why the store does not answer ("" while it does)."""
        return self._why if self._since else ""

    def down_for(self) -> float:
        since = self._since
        return time.monotonic() - since if since else 0.0

    def down(self, error: BaseException) -> None:
        """The store failed to answer: marked down, said once, probed until it answers again."""
        with self._lock:
            if self._since or self._closed.is_set():
                return
            self._since = time.monotonic()
            self._why = f"{error.__class__.__name__}: {str(error).strip()[:200]}"
        get_logger().error("store_down", store=self.store, error=self._why, probe_every_s=self.every_s,
                           note="requests go out as sent until the store answers again")
        threading.Thread(target=self._probe_until_up, name="workset-store-probe", daemon=True).start()

    def close(self) -> None:
        self._closed.set()

    def _probe_until_up(self) -> None:
        while not self._closed.wait(self.every_s):
            try:
                if not self._probe():
                    continue
            except Exception:  # a probe that fails in a way of its own is a probe that failed
                continue
            with self._lock:
                down_s, why = self.down_for(), self._why
                self._since, self._why = 0.0, ""
            get_logger().info("store_up", store=self.store, down_s=round(down_s, 1), was=why)
            self._recovered()
            return
