"""Turns per key: at most so many of one key's jobs run at a time, the rest wait their turn on the event loop
(no thread, no CPU). The inspection routes and the dashboard take theirs, so that one key listing its sessions
again and again holds at most that many inspection threads, and another key's page finds one free."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass
class _Line:
    turns: asyncio.Semaphore
    users: int = 0


class TurnsPerKey:
    """Used on the event loop only. A key has an entry only while it has jobs running or waiting: memory is
    bounded by the requests in flight, whatever keys callers invent."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lines: dict[str, _Line] = {}

    @asynccontextmanager
    async def turn(self, key: str) -> AsyncIterator[None]:
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = _Line(asyncio.Semaphore(self.limit))
        line.users += 1
        try:
            async with line.turns:
                yield
        finally:
            line.users -= 1
            if not line.users:
                del self._lines[key]

    def keys(self) -> int:
        """Keys with jobs running or waiting (a gauge, and what the tests check is let go)."""
        return len(self._lines)
