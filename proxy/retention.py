"""Session retention: sessions not updated for store.retention_days are deleted whole, at start-up and daily."""

from __future__ import annotations

import asyncio
import time

from .engine import Engine
from .logs import get_logger

DAY_S = 86400.0


def sweep(engine: Engine, days: float, now: float | None = None) -> int:
    """Delete the sessions last updated more than `days` ago; how many were deleted."""
    _settle(engine)
    return _forget(engine, _delete(engine, _cutoff(days, now)), days)


async def sweep_off_loop(engine: Engine, days: float) -> int:
    """sweep(), with the deletion in a worker thread: the branch cache is only touched on the event loop, like the
    request path does."""
    _settle(engine)
    deleted = await asyncio.to_thread(_delete, engine, _cutoff(days))
    return _forget(engine, deleted, days)


def start_retention(engine: Engine, days: float, every_s: float = DAY_S) -> asyncio.Task[None]:
    """Sweep now, then every `every_s` seconds; cancel the task at shutdown."""
    try:
        sweep(engine, days)
    except Exception as error:  # retention is housekeeping: a failed sweep must not stop workset
        _log_failure(error)
    return asyncio.create_task(_sweep_every(engine, days, every_s), name="workset-retention")


async def _sweep_every(engine: Engine, days: float, every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        try:
            await sweep_off_loop(engine, days)
        except Exception as error:
            _log_failure(error)


def _settle(engine: Engine) -> None:
    # A long-idle session that just got a request is not old: its deferred ingest updates it first.
    engine.sessions.settle_all()


def _delete(engine: Engine, cutoff: float) -> list[str]:
    """One replica at a time sweeps a store they share (the others find nothing left to delete)."""
    with engine.store.exclusive("retention"):
        return engine.store.delete_sessions_before(cutoff)


def _cutoff(days: float, now: float | None = None) -> float:
    return (time.time() if now is None else now) - days * DAY_S


def _forget(engine: Engine, deleted: list[str], days: float) -> int:
    engine.sessions.forget_sessions(set(deleted))
    get_logger().info("retention", deleted=len(deleted), retention_days=days)
    return len(deleted)


def _log_failure(error: Exception) -> None:
    get_logger().error("retention_failed", error=f"{error.__class__.__name__}: {error}", exc_info=True)
