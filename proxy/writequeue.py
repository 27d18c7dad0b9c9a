"""The store's write queue, shared by its backends: writes are queued by requests and committed in batches by one
thread, so a request never waits on the database; a reader waits only for the writes of the sessions (and the
tables) it reads.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Collection
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence, TypeVar

from .logs import get_logger
from .storage import NodeRow

WRITE_BATCH = 256  # writes per commit at most: bounds how long one commit holds the database (not a tuning knob)
T = TypeVar("T")


def _untold(error: BaseException | None) -> None:
    pass


ANY_TABLE = "*"  # what a write that does not name its tables counts as: every reader of its sessions waits for it


@dataclass(frozen=True)
class Write:
    """One queued write, with what it touches: the sessions whose rows it writes, the tables it writes them in
    (none named: any), and the message nodes it adds as (hash, parent, row). `finished` is told its outcome once:
    None when committed, else why it was lost (its own error, or the batch's: the connection failed before it
    ran, the commit failed)."""

    run: Callable[[], None]
    sessions: tuple[str, ...] = ()
    nodes: tuple[tuple[str, str | None, NodeRow], ...] = ()
    finished: Callable[[BaseException | None], None] = _untold
    tables: tuple[str, ...] = ()

    @property
    def counted_tables(self) -> tuple[str, ...]:
        """The tables it is counted under: those it names, or ANY_TABLE."""
        return self.tables or (ANY_TABLE,)


class Pending:
    """The queued writes not yet committed, counted by session and table, and the message nodes among them. A
    request waits only for its own conversation's writes to the tables it reads: never behind another tenant's
    megabyte of evidence being indexed, nor behind its own conversation's ledger when it reads its waiting recall
    answers. Queued nodes are found without waiting at all."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        # writes queued and writes done, ever: the writer takes them in order, so the first `done` are all done
        self._queued_count = 0
        self._done_count = 0
        self._tables: dict[str, dict[str, int]] = {}  # session -> table -> queued writes (a session is in while any)
        self._nodes: dict[str, tuple[str | None, NodeRow]] = {}
        self._children: dict[str | None, set[str]] = {}  # queued nodes by parent: a fork is found in one lookup

    def add(self, write: Write) -> None:
        with self._changed:
            self._queued_count += 1
            for session in write.sessions:
                counts = self._tables.setdefault(session, {})
                for table in write.counted_tables:
                    counts[table] = counts.get(table, 0) + 1
            for digest, parent, row in write.nodes:
                self._nodes[digest] = (parent, row)
                self._children.setdefault(parent, set()).add(digest)

    def done(self, writes: Sequence[Write]) -> None:
        """Committed, or failed for good: readers stop waiting for them either way."""
        with self._changed:
            self._done_count += len(writes)
            for write in writes:
                for session in write.sessions:
                    counts = self._tables[session]
                    for table in write.counted_tables:
                        counts[table] -= 1
                        if not counts[table]:
                            del counts[table]
                    if not counts:
                        del self._tables[session]
                for digest, parent, _ in write.nodes:
                    if self._nodes.pop(digest, None) is not None:
                        siblings = self._children[parent]
                        siblings.discard(digest)
                        if not siblings:
                            del self._children[parent]
            self._changed.notify_all()

    def wait(self, sessions: Iterable[str], tables: Iterable[str] | None = None) -> None:
        """Until the queued writes of `sessions` are committed: all of them, or those to `tables` (and those that
        name no table)."""
        wanted, named = tuple(sessions), None if tables is None else (*tables, ANY_TABLE)
        with self._changed:
            self._changed.wait_for(lambda: not any(self._queued(session, named) for session in wanted))

    def wait_queued_so_far(self) -> None:
        """Until every write queued before this call is committed: not until the queue is empty, which under
        steady load may take long after them."""
        with self._changed:
            wanted = self._queued_count
            self._changed.wait_for(lambda: self._done_count >= wanted)

    def _queued(self, session: str, tables: tuple[str, ...] | None) -> bool:
        counts = self._tables.get(session)
        return counts is not None and (tables is None or any(table in counts for table in tables))

    def nodes(self, hashes: Iterable[str]) -> dict[str, NodeRow]:
        with self._changed:
            return {digest: self._nodes[digest][1] for digest in hashes if digest in self._nodes}

    def has_child(self, parent: str, other_than: str) -> bool:
        with self._changed:
            return any(child != other_than for child in self._children.get(parent, ()))


def _lower_thread_priority(nice: int) -> None:
    """This thread `nice` steps below its process (Linux gives each thread a priority of its own)."""
    if not nice or not sys.platform.startswith("linux"):
        return
    thread = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + nice))
    except OSError as error:  # it runs as it was: slower requests under load, nothing lost
        get_logger().warning("writer_priority_unchanged", error=f"{error.__class__.__name__}: {error}")


class WriteQueue:
    """Queued writes committed by one background thread, a batch per transaction, each write its own savepoint.

    `connection()` gives the writer thread its connection (anything with `execute(sql)`; a backend may reconnect
    there after a failure); `begin` opens a transaction; `retryable(error)` tells a write that lost a race with
    another process (a deadlock, a serialisation failure): it is tried once more, alone, after its batch.
    `on_failed(sessions)` hears of the sessions whose writes were lost, so their cached state is rebuilt from the
    store."""

    def __init__(self, connection: Callable[[], Any], begin: str = "BEGIN",
                 retryable: Callable[[BaseException], bool] = lambda error: False, nice: int = 0) -> None:
        self._connection = connection
        self._nice = nice  # steps below the server's priority the writer thread runs at
        self._begin = begin
        self._retryable = retryable
        self.on_failed: Callable[[set[str]], None] = lambda sessions: None
        self._writes: queue.Queue[Write | None] = queue.Queue()
        self.pending = Pending()
        self._writer: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._order = threading.Lock()
        self.failed_writes = 0

    def submit(self, run: Callable[[], None], sessions: tuple[str, ...] = (),
               nodes: tuple[tuple[str, str | None, NodeRow], ...] = (),
               finished: Callable[[BaseException | None], None] = _untold, tables: tuple[str, ...] = ()) -> None:
        if self._writer is None:
            with self._start_lock:
                if self._writer is None:
                    self._writer = threading.Thread(target=self._loop, name="workset-store-writer", daemon=True)
                    self._writer.start()
        write = Write(run, sessions, nodes, finished, tables)
        with self._order:  # counted in the order the writer takes them (see Pending.wait_queued_so_far)
            self.pending.add(write)
            self._writes.put(write)

    def flush(self, sessions: Collection[str] | None = None, tables: Collection[str] | None = None) -> None:
        """Wait until every write queued so far is committed (or failed for good), or only those of `sessions` (to
        `tables`, when given)."""
        if self._writer is None:
            return
        if sessions is None:
            self.pending.wait_queued_so_far()
        else:
            self.pending.wait(sessions, tables)

    def call(self, write: Callable[[], T]) -> T:
        """Run a write on the writer thread, after the writes queued before it, and return its result once
        committed; raise why it was not (its own error, or the store's: it always hears one or the other)."""
        done: Future[T] = Future()
        result: list[T] = []

        def finished(error: BaseException | None) -> None:
            if error is None:
                done.set_result(result[0])
            else:
                done.set_exception(error)

        self.submit(lambda: result.append(write()), finished=finished)
        return done.result()

    def close(self) -> None:
        if self._writer is not None:
            self._writes.join()  # everything, what is queued meanwhile too
            self._writes.put(None)
            self._writer.join(10)
            self._writer = None

    def qsize(self) -> int:
        return self._writes.qsize()

    def _loop(self) -> None:
        """Writes queued meanwhile are committed together: under load one commit serves many requests, so what was
        answered reaches the database sooner."""
        _lower_thread_priority(self._nice)
        while True:
            batch = [self._writes.get()]
            while len(batch) < WRITE_BATCH and batch[-1] is not None:
                try:
                    batch.append(self._writes.get_nowait())
                except queue.Empty:
                    break
            writes = [write for write in batch if write is not None]
            try:
                lost = self._commit(writes)
                if lost:
                    self.on_failed(lost)
            except Exception:  # a listener's failure must not stop the writer
                get_logger().exception("store_write_failed")
            finally:
                self.pending.done(writes)
                for _ in batch:
                    self._writes.task_done()
            if batch[-1] is None:
                return

    def _commit(self, writes: list[Write]) -> set[str]:
        """Commit the batch; the sessions whose writes were lost."""
        if not writes:
            return set()
        again, lost = self._transaction(writes, first=True)
        for write in again:  # alone this time: a race lost in a batch is usually won alone
            lost |= self._transaction([write], first=False)[1]
        return lost

    def _transaction(self, writes: list[Write], first: bool) -> tuple[list[Write], set[str]]:
        """One transaction of `writes`, each in its own savepoint: a write that fails is rolled back alone. The
        writes to try again (those that lost a race, on the first try), and the sessions of the writes lost."""
        again: list[Write] = []
        failed: dict[int, BaseException] = {}  # by id of the write: lost alone, its own error
        conn = None
        try:
            conn = self._connection()
            conn.execute(self._begin)
            for write in writes:
                conn.execute("SAVEPOINT one_write")
                try:
                    write.run()
                except Exception as error:  # a failed write must not stop the others; the next request re-sends it
                    conn.execute("ROLLBACK TO SAVEPOINT one_write")
                    if first and self._retryable(error):
                        again.append(write)
                    else:
                        self.failed_writes += 1
                        failed[id(write)] = error
                        get_logger().exception("store_write_failed", failed_writes=self.failed_writes)
                conn.execute("RELEASE SAVEPOINT one_write")
            conn.execute("COMMIT")
        except Exception as error:  # the commit failed (disk full, locked, connection lost): nothing of it is kept
            try:
                if conn is not None:
                    conn.execute("ROLLBACK")
            except Exception:  # the connection itself is gone: the backend reconnects for the next batch
                pass
            self.failed_writes += len(writes)
            get_logger().error("store_write_failed", failed_writes=self.failed_writes,
                               error=f"{error.__class__.__name__}: {error}")
            for write in writes:  # those that never ran too: a caller waiting on one must not wait forever
                write.finished(error)
            return [], {session for write in writes for session in write.sessions}
        retried = {id(write) for write in again}
        for write in writes:  # results are told only once they are in the database
            if id(write) not in retried:
                write.finished(failed.get(id(write)))
        return again, {session for write in writes if id(write) in failed for session in write.sessions}
