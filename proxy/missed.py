"""Records of the requests forwarded as sent while the store did not answer: kept in memory, by conversation tree,
until that conversation's next request that reaches the store writes them (before its own record), so the
dashboard and `workset stats` count every request. Bounded: beyond `limit` the oldest go (and are counted)."""

from __future__ import annotations

import threading
from collections import OrderedDict
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
        self._by_root: OrderedDict[str, list[MissedTurn]] = OrderedDict()  # oldest conversation first
        self._count = 0

    def add(self, root: str, turn: MissedTurn) -> None:
        with self._lock:
            self._by_root.setdefault(root, []).append(turn)
            self._by_root.move_to_end(root)
            self._count += 1
            while self._count > self.limit:
                oldest_root, turns = next(iter(self._by_root.items()))
                turns.pop(0)
                self._count -= 1
                self.dropped += 1
                if not turns:
                    del self._by_root[oldest_root]

    def take(self, root: str) -> list[MissedTurn]:
        """The records waiting for the conversation tree `root`, oldest first; they are no longer kept here."""
        with self._lock:
            turns = self._by_root.pop(root, [])
            self._count -= len(turns)
            return turns

    def __len__(self) -> int:
        return self._count
