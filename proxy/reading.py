"""Request bodies being read, bounded in bytes. A body is held whole in memory while it arrives (up to
server.max_body_bytes, 32 MB), and a client may take its time sending the last byte (server.request_read_s): a
thousand connections each holding 31 MB would be 31 GB. So the bytes of bodies still arriving are counted, per caller
(its key, or its address when it sends none) and in all; a chunk past either bound ends its request with a 429 or a
503, both with retry-after, and frees what it held. Only the event loop reads bodies: no lock."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import RETRY_AFTER_S, WorksetError


@dataclass
class ReadingBudget:
    total: int  # server.max_reading_bytes
    per_caller: int  # server.max_reading_bytes_per_caller
    _held: dict[str, int] = field(default_factory=dict)
    _sum: int = 0

    def take(self, caller: str, size: int) -> None:
        """Count `size` more bytes of `caller`'s bodies as arriving; a WorksetError (nothing counted) past a bound."""
        held = self._held.get(caller, 0)
        if held + size > self.per_caller:
            raise WorksetError(429, f"this caller's requests still arriving hold {held + size} bytes, more than "
                                    f"server.max_reading_bytes_per_caller ({self.per_caller}): send them whole, or "
                                    "fewer at once", "rate_limit_error", "too_many_bytes_arriving",
                               headers={"retry-after": RETRY_AFTER_S})
        if self._sum + size > self.total:
            raise WorksetError(503, f"the requests still arriving hold more than server.max_reading_bytes "
                                    f"({self.total}) between them", "server_error", "too_many_bytes_arriving",
                               headers={"retry-after": RETRY_AFTER_S})
        self._held[caller] = held + size
        self._sum += size

    def give_back(self, caller: str, size: int) -> None:
        """`caller`'s body of `size` bytes arrived whole (or ended): no longer counted."""
        if not size:
            return
        left = self._held.get(caller, 0) - size
        if left > 0:
            self._held[caller] = left
        else:
            self._held.pop(caller, None)
        self._sum -= size

    def held(self) -> int:
        return self._sum
