"""How fast this machine is today, printed by the timing benches beside their figures.

The benches run on a shared 2-core machine whose speed changes from day to day: in a session of 2026-12-01 the
same code (commit eddd628) gave bench.load an x-workset-ms p95 of 16.9 ms against 7.5 ms in the session before, and
bench.adversarial's best-of-3 CPU timings were 1.5-1.8x those in docs/eval.md. A timing that missed
its target on a slow day and met it on a fast one is the machine, not the code; this figure tells them apart.
It is a fixed mix of what workset's own work is made of (JSON read and written, regular expressions over text,
plain Python over dicts, hashing), timed alone before a bench starts its servers: best of `runs`.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def _history() -> list[dict[str, object]]:
    return [{"role": ("user", "assistant", "tool")[n % 3], "content": f"step {n}: ran pytest -k case_{n}, "
             f"exit code {n % 7}, see src/module_{n}.py line {n * 13} " * 4} for n in range(300)]


def _mix(history: list[dict[str, object]], text: str, blob: bytes) -> int:
    parsed = orjson.loads(orjson.dumps(history))
    words = len(WORD.findall(text))
    counts: dict[str, int] = {}
    for message in parsed:
        for piece in str(message["content"]).split():
            counts[piece] = counts.get(piece, 0) + 1
    digest = hashlib.blake2b(blob, digest_size=16).digest()
    return words + len(counts) + digest[0]


def reference_ms(runs: int = 5) -> float:
    """Milliseconds of the fixed mix, best of `runs` (10.6-12.6 ms in that slow session)."""
    history = _history()
    text = " ".join(str(message["content"]) for message in history) * 2
    blob = text.encode() * 4
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        _mix(history, text, blob)
        best = min(best, (time.perf_counter() - started) * 1000)
    return best


def speed_line() -> str:
    return (f"machine: the reference mix took {reference_ms():.1f} ms (bench/machine.py; compare runs of other days "
            "by it, the timings scale with it)")


@dataclass(frozen=True)
class CpuTicks:
    """The machine's CPU time so far (all cores, /proc/stat), and the part of it the hypervisor gave to other
    machines (steal). On a shared host steal comes and goes by the hour: a run during which it was high is slower
    for every process, whatever the code does."""

    steal: int
    total: int

    @classmethod
    def now(cls) -> CpuTicks:
        try:
            fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):  # not Linux: no figure
            return cls(0, 0)
        return cls(fields[7] if len(fields) > 7 else 0, sum(fields[:8]))

    def steal_since(self, earlier: CpuTicks) -> float:
        """The share of the CPU time between `earlier` and this that was stolen, 0-1 (0 where unknown)."""
        total = self.total - earlier.total
        return (self.steal - earlier.steal) / total if total > 0 else 0.0


if __name__ == "__main__":
    print(speed_line())
