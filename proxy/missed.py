"""Records of the requests forwarded as sent while the store did not answer: kept in memory, by conversation tree,
until that conversation's next request that reaches the store writes them (before its own record), so the
dashboard and `workset stats` count every request. Bounded: beyond `limit` the oldest go (and are counted)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MissedTurn:
    """One failed-open request's record: made on the store's writer thread when written (it may parse an answer)."""

    created_at: float
    row: Callable[[], dict[str, Any]]


class MissedTurns:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.dropped = 0  # records let go for room
        self._lock = threading.Lock()
        self._by_root: dict[str, deque[MissedTurn]] = {}
        self._order: deque[str] = deque()  # the root of each record kept, oldest first (taken ones linger)
        self._count = 0

    def add(self, root: str, turn: MissedTurn) -> None:
        with self._lock:
            self._by_root.setdefault(root, deque()).append(turn)
            self._order.append(root)
            self._count += 1
            while self._count > self.limit and self._order:
                oldest = self._order.popleft()
                waiting = self._by_root.get(oldest)
                if not waiting:  # taken meanwhile
                    continue
                waiting.popleft()
                self._count -= 1
                self.dropped += 1
                if not waiting:
                    del self._by_root[oldest]

    def take(self, root: str) -> list[MissedTurn]:
        """The records waiting for the conversation tree `root`, oldest first; they are no longer kept here."""
        with self._lock:
            turns = list(self._by_root.pop(root, ()))
            self._count -= len(turns)
            if not self._by_root:
                self._order.clear()
            return turns

    def __len__(self) -> int:
        return self._count
