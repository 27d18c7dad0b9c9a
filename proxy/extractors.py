"""Where extraction (and the parsing of a huge body) runs: on the calling thread, or in a pool of processes of
lower priority.

Extraction is most of the CPU a request costs after it is sent. In the server's own process it holds the
interpreter lock, so every other request waits its turn behind it; in a process of its own, at a lower priority,
it takes only what the machine has to spare, and a tenant's megabyte of hostile text is read there. So is a body
of several megabytes: orjson reads one in a single call that holds the interpreter lock for 5-15 ms (a megabyte of
Chinese is 6 MB of escapes), while taking the result back costs a third of that. Inputs and results are plain data
(ingest.extract_message, a parsed body); a pool that fails is replaced, and the work done here.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol, Sequence, TypeVar

from .errors import WorksetError
from .ingest import Extracted, evidence_of, extract_message
from .logs import get_logger
from .records import Message, MessageContext
from .validate import parse_json_object

T = TypeVar("T")
A = TypeVar("A")


@dataclass(frozen=True)
class Job:
    """One message to extract, with what extraction may know of the messages before it."""

    message: Message
    context: MessageContext
    observed: bool
    max_chars: int
    deadline_ms: float | None
    tokens: int  # the message's size: a batch of small ones is extracted where it is


class Extractor(Protocol):
    def __call__(self, jobs: Sequence[Job]) -> list[Extracted]: ...

    def parse(self, raw: bytes) -> dict[str, Any]:
        """A request body, as validate.parse_json_object reads it (its WorksetError when it is not a JSON object)."""
        ...

    def offloaded_ms(self) -> float:
        """CPU milliseconds this thread's calls have had done in other processes so far (for x-workset-ms)."""
        ...

    def close(self) -> None: ...


def extract_jobs(jobs: Sequence[Job]) -> list[Extracted]:
    return [extract_message(job.message, job.context, job.observed, job.max_chars, job.deadline_ms) for job in jobs]


class InlineExtractor:
    """On the calling thread (tests, the eval, `ingest.extract_processes: 0`)."""

    def __call__(self, jobs: Sequence[Job]) -> list[Extracted]:
        return extract_jobs(jobs)

    def parse(self, raw: bytes) -> dict[str, Any]:
        return parse_json_object(raw)

    def offloaded_ms(self) -> float:
        return 0.0

    def close(self) -> None:
        pass


class ProcessExtractor:
    """A pool of `processes` extraction processes at `nice` steps below the server's priority. Started at once,
    forked before the server starts any thread (a fork copies a process with one thread safely); a pool that
    breaks is replaced by spawned processes. A batch of at most `inline_tokens` is extracted on the calling thread:
    it takes less than the trip to a process would, and never waits in the processes' queue behind another
    tenant's megabyte. Likewise a body of at most `inline_bytes` is parsed on the calling thread. An answer not
    back within `timeout_s` is taken for a stuck process: the pool is killed and replaced, the work done here."""

    def __init__(self, processes: int, nice: int, inline_tokens: int = 0, inline_bytes: int = 0,
                 timeout_s: float = 30.0) -> None:
        self._processes, self._nice = processes, nice
        self._inline_tokens, self._inline_bytes = inline_tokens, inline_bytes
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._local = threading.local()  # the CPU ms each thread's calls had done elsewhere
        self._pool: ProcessPoolExecutor | None = self._start()

    def _start(self, method: str = "fork") -> ProcessPoolExecutor:
        pool = ProcessPoolExecutor(self._processes, mp_context=multiprocessing.get_context(method),
                                   initializer=_lower_priority, initargs=(self._nice, os.getpid()))
        pool.submit(int).result()  # starts them all now (with fork, 3.11 starts every worker at the first call)
        return pool

    def __call__(self, jobs: Sequence[Job]) -> list[Extracted]:
        if not jobs:
            return []
        pool = self._pool
        if pool is None or sum(job.tokens for job in jobs) <= self._inline_tokens:
            return extract_jobs(jobs)
        results = self._elsewhere(pool, _extract_elsewhere, list(jobs))
        if results is None:
            return extract_jobs(jobs)
        return [replace(result, evidence=evidence_of(job.message, job.observed)) for job, result in zip(jobs, results)]

    def parse(self, raw: bytes) -> dict[str, Any]:
        pool = self._pool
        if pool is None or len(raw) <= self._inline_bytes:
            return parse_json_object(raw)
        body = self._elsewhere(pool, _parse_elsewhere, raw)
        return parse_json_object(raw) if body is None else body

    def _elsewhere(self, pool: ProcessPoolExecutor, work: Callable[[A], tuple[T, float]], argument: A) -> T | None:
        """`work(argument)` in the pool, its CPU counted for this thread; None when it must be done here instead.
        A WorksetError it raises (a body that is not JSON) is the caller's."""
        try:
            result, cpu_ms = pool.submit(work, argument).result(timeout=self._timeout_s)
        except WorksetError:
            raise
        except (BrokenProcessPool, FutureTimeout) as error:
            # A process died (killed, out of memory) or is stuck: here, and replace the pool. A request never
            # waits on a process for longer than the timeout.
            stuck = isinstance(error, FutureTimeout)
            get_logger().error("extract_pool_failed", work=work.__name__,
                               error=f"no answer in {self._timeout_s:g} s (ingest.process_timeout_s)" if stuck
                               else f"{error.__class__.__name__}: {error}")
            with self._lock:
                if self._pool is pool:
                    self._pool = self._replacement()
                    if stuck:
                        _kill(pool)
            return None
        except Exception as error:  # what cannot travel (JSON nested past the pickle's recursion limit): here
            get_logger().warning("extract_here", work=work.__name__, reason=f"{error.__class__.__name__}: {error}"[:200])
            return None
        self._local.ms = self.offloaded_ms() + cpu_ms
        return result

    def _replacement(self) -> ProcessPoolExecutor | None:
        """Spawned processes (threads run now: a fork could copy a lock some thread holds), or None: from then
        on extraction runs on the calling threads."""
        try:
            return self._start("spawn")
        except Exception as error:
            get_logger().error("extract_pool_failed", error=f"{error.__class__.__name__}: {error}",
                               fallback="extraction on the worker threads")
            return None

    def offloaded_ms(self) -> float:
        return float(getattr(self._local, "ms", 0.0))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _kill(pool: ProcessPoolExecutor) -> None:
    """End a pool whose processes may be stuck: shutting it down waits for none of them, and each is killed
    (concurrent.futures offers no other way before Python 3.14's terminate_workers)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        try:
            process.kill()
        except Exception:  # already gone
            pass


def _lower_priority(nice: int, parent: int) -> None:
    """In each extraction process: lower its priority, and end it when the server (`parent`) ends. A server killed
    with -9 closes no pipe its siblings still hold open, so the process watches for its parent to change (it may
    have changed already, if the server died while this process started)."""
    os.nice(nice)
    threading.Thread(target=_exit_with, args=(parent,), name="workset-extract-watch", daemon=True).start()


def _exit_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


PARENT_CHECK_S = 1.0  # how soon an extraction process notices the server is gone


def _extract_elsewhere(jobs: Sequence[Job]) -> tuple[list[Extracted], float]:
    """In an extraction process: the results without their evidence (the caller has the text), and the CPU ms."""
    started = time.process_time()
    results = [replace(result, evidence=None) for result in extract_jobs(jobs)]
    return results, (time.process_time() - started) * 1000


def _parse_elsewhere(raw: bytes) -> tuple[dict[str, Any], float]:
    """In an extraction process: the parsed body and the CPU ms."""
    started = time.process_time()
    body = parse_json_object(raw)
    return body, (time.process_time() - started) * 1000
