"""The store's write queue, shared by its backends: writes are queued by requests and committed in batches by one
thread, so a request never waits on the database; a reader waits only for the writes of the sessions (and the
tables) it reads.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Collection
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence, TypeVar

from .logs import get_logger
from .priority import lower_thread_priority
from .storage import NodeRow

WRITE_BATCH = 256  # writes per commit at most: bounds how long one commit holds the database (not a tuning knob)
T = TypeVar("T")


def _untold(error: BaseException | None) -> None:
    pass


class StoreDown(ConnectionError):
    """A write kept back, unwritten, because earlier ones are waiting for the store."""


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
    size: int = 0  # what it carries (characters of evidence): a large write goes in a lane of its own
    seq: int = 0  # its place among all writes queued (Pending.wait_queued_so_far)
    large: bool = False  # in the large lane (see WriteQueue)

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
        # writes are numbered as queued; those not done yet (the writer may take a later small one first)
        self._last_seq = 0
        self._undone: set[int] = set()
        self._tables: dict[str, dict[str, int]] = {}  # session -> table -> queued writes (a session is in while any)
        self._nodes: dict[str, tuple[str | None, NodeRow]] = {}
        self._children: dict[str | None, set[str]] = {}  # queued nodes by parent: a fork is found in one lookup

    def next_seq(self) -> int:
        """The number the next write queued is given (called with the queue's lock held: numbers follow the
        order of the queue)."""
        with self._changed:
            self._last_seq += 1
            return self._last_seq

    def add(self, write: Write) -> None:
        with self._changed:
            self._undone.add(write.seq)
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
            for write in writes:
                self._undone.discard(write.seq)
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
            wanted = self._last_seq
            self._changed.wait_for(lambda: not any(seq <= wanted for seq in self._undone))

    def wait_all(self) -> None:
        """Until no write is queued, those queued meanwhile included."""
        with self._changed:
            self._changed.wait_for(lambda: not self._undone)

    def _queued(self, session: str, tables: tuple[str, ...] | None) -> bool:
        counts = self._tables.get(session)
        return counts is not None and (tables is None or any(table in counts for table in tables))

    def nodes(self, hashes: Iterable[str]) -> dict[str, NodeRow]:
        with self._changed:
            return {digest: self._nodes[digest][1] for digest in hashes if digest in self._nodes}

    def has_child(self, parent: str, other_than: str) -> bool:
        with self._changed:
            return any(child != other_than for child in self._children.get(parent, ()))


class WriteQueue:
    """Queued writes committed by one background thread, a batch per transaction, each write its own savepoint.

    `connection()` gives the writer thread its connection (anything with `execute(sql)`; a backend may reconnect
    there after a failure); `begin` opens a transaction; `retryable(error)` tells a write that lost a race with
    another process (a deadlock, a serialisation failure): it is tried once more, alone, after its batch;
    `reconnectable(error)` a batch whose connection failed: it is tried again whole, up to `attempts` times in all,
    `pause_s` apart, each on the connection `connection()` gives then (a fresh one), before its writes are lost.
    `on_failed(sessions)` hears of the sessions whose writes were lost, so their cached state is rebuilt from the
    store.

    Writes go in two lanes, each in the order queued: a large write (`size` at least `large_write`: a tenant's
    megabyte of evidence to index) goes in a lane of its own, and so does any later write of a session that has
    one queued. The writer takes the lanes in turn, a batch of small writes then one large write: one tenant sending
    megabytes faster than the database indexes them never holds up the other tenants' writes (their answered turns
    reach the database, their readers stop waiting) by more than one large write."""

    def __init__(self, connection: Callable[[], Any], begin: str = "BEGIN",
                 retryable: Callable[[BaseException], bool] = lambda error: False, nice: int = 0,
                 large_write: int = 262144, reconnectable: Callable[[BaseException], bool] = lambda error: False,
                 attempts: int = 1, pause_s: float = 0.0) -> None:
        self._connection = connection
        self._nice = nice  # steps below the server's priority the writer thread runs at
        self._begin = begin
        self._retryable = retryable
        self._reconnectable = reconnectable
        self._attempts = attempts
        self._pause_s = pause_s  # between two attempts: a database back within it takes the batch
        self._large_write = large_write
        self.on_failed: Callable[[set[str]], None] = lambda sessions: None
        self.pending = Pending()
        self._lanes = threading.Condition()
        self._small: deque[Write] = deque()
        self._large: deque[Write] = deque()
        self._large_sessions: Counter[str] = Counter()  # their large writes queued or being written
        self._large_size = 0  # what the large lane holds, the write being written included
        self._large_turn = False  # whether the large lane goes next (the lanes take turns)
        self._closing = False
        self._writer: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.failed_writes = 0
        # writes of batches lost while the database was away, queued again when it answers (see _park)
        self._parked: deque[Write] = deque()
        self._parked_size = 0
        self.max_parked = 0
        self.max_parked_chars = 0
        self._unreachable: Callable[[BaseException], None] = _untold

    def submit(self, run: Callable[[], None], sessions: tuple[str, ...] = (),
               nodes: tuple[tuple[str, str | None, NodeRow], ...] = (),
               finished: Callable[[BaseException | None], None] = _untold, tables: tuple[str, ...] = (),
               size: int = 0) -> None:
        if self._writer is None:
            with self._start_lock:
                if self._writer is None:
                    self._writer = threading.Thread(target=self._loop, name="workset-store-writer", daemon=True)
                    self._writer.start()
        with self._lanes:  # numbered in the order queued (see Pending.wait_queued_so_far)
            # behind its session's large write, if it has one: a session's writes are written in order; and one of
            # no session (retention's deletions) behind every large write: it must see all that was queued before it
            large = (size >= self._large_write or any(self._large_sessions[session] for session in sessions)
                     or (not sessions and bool(self._large)))
            write = Write(run, sessions, nodes, finished, tables, size, self.pending.next_seq(), large)
            self.pending.add(write)
            if large:
                self._large.append(write)
                self._large_sessions.update(sessions)
                self._large_size += size
            else:
                self._small.append(write)
            self._lanes.notify()

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

        def run() -> None:  # a batch tried again runs it again: only the committed try's result counts
            result[:] = [write()]

        self.submit(run, finished=finished)
        return done.result()

    def keep_lost(self, writes: int, chars: int, unreachable: Callable[[BaseException], None]) -> None:
        """Keep up to `writes` writes (and `chars` of evidence) of batches lost on their connection, for `replay`;
        `unreachable(error)` hears of each such loss (the backend marks the store down)."""
        self.max_parked, self.max_parked_chars, self._unreachable = writes, chars, unreachable

    def _park(self, writes: list[Write]) -> int:
        """Keep the writes of a batch that failed on its connection (the database away), to be queued again once
        it answers (`replay`): those no caller waits on (a queued call is told its failure), within `max_parked`
        writes and `max_parked_chars` of evidence. How many were kept."""
        kept = 0
        with self._lanes:
            for write in writes:
                if write.finished is not _untold or len(self._parked) >= self.max_parked or \
                        self._parked_size + write.size > self.max_parked_chars:
                    continue
                self._parked.append(write)
                self._parked_size += write.size
                kept += 1
        return kept

    def replay(self, wait: bool = False) -> bool:
        """Queue again, in their order, the writes kept when the store was down (it answers again): a batch lost
        whole was rolled back, so each is written once. With `wait`, until they are written: whether none had to
        be kept back again (the store takes them)."""
        with self._lanes:
            parked, self._parked, self._parked_size = list(self._parked), deque(), 0
        for write in parked:
            self.submit(write.run, write.sessions, write.nodes, tables=write.tables, size=write.size)
        if parked:
            get_logger().info("store_writes_replayed", writes=len(parked))
            if wait:
                self.flush()
        return not self._parked

    def close(self) -> None:
        if self._writer is not None:
            self.pending.wait_all()  # everything, what is queued meanwhile too
            with self._lanes:
                self._closing = True
                self._lanes.notify()
            self._writer.join(10)
            self._writer = None

    def qsize(self) -> int:
        with self._lanes:
            return len(self._small) + len(self._large)

    def large_backlog(self) -> int:
        """The size of the large writes not yet written (a tenant sending megabytes faster than they are indexed
        makes it grow)."""
        return self._large_size

    def _loop(self) -> None:
        """Small writes queued meanwhile are committed together: under load one commit serves many requests, so
        what was answered reaches the database sooner."""
        lower_thread_priority(self._nice)
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            try:
                lost = self._commit(batch)
                if lost:
                    self.on_failed(lost)
            except Exception:  # a listener's failure must not stop the writer
                get_logger().exception("store_write_failed")
            finally:
                self._written(batch)

    def _next_batch(self) -> list[Write] | None:
        """The small writes queued (up to WRITE_BATCH), or the large lane's next write with the small ones queued
        behind it in that lane, the lanes in turn; None once closed and empty."""
        with self._lanes:
            self._lanes.wait_for(lambda: self._small or self._large or self._closing)
            # the large lane's next write goes only after the small writes queued before it (its session's among
            # them): those a batch of small writes took
            if self._large and (not self._small or (self._large_turn and self._small[0].seq > self._large[0].seq)):
                self._large_turn = False
                batch = [self._large.popleft()]
                size = batch[0].size
                while self._large and len(batch) < WRITE_BATCH and size + self._large[0].size < self._large_write:
                    size += self._large[0].size
                    batch.append(self._large.popleft())
                return batch
            if self._small:
                self._large_turn = True
                return [self._small.popleft() for _ in range(min(WRITE_BATCH, len(self._small)))]
            return None

    def _written(self, batch: list[Write]) -> None:
        large = [write for write in batch if write.large]
        if large:
            with self._lanes:
                for write in large:
                    self._large_size -= write.size
                    for session in write.sessions:
                        self._large_sessions[session] -= 1
                        if not self._large_sessions[session]:
                            del self._large_sessions[session]
        self.pending.done(batch)

    def _commit(self, writes: list[Write]) -> set[str]:
        """Commit the batch; the sessions whose writes were lost (or kept for later)."""
        if not writes:
            return set()
        if self._parked:
            # Writes are kept back for the store: no later write may land before them (a small one fits a disk
            # the earlier large one did not, and a conversation would have a gap); they wait behind, in order.
            error = StoreDown("the store is down: writes wait for it")
            self.failed_writes += len(writes) - self._park(writes)
            for write in writes:
                write.finished(error)
            return {session for write in writes for session in write.sessions}
        for attempt in range(1, self._attempts + 1):
            outcome = self._transaction(writes, first=True, last=attempt == self._attempts)
            if outcome is not None:
                break
            time.sleep(self._pause_s * attempt)
        assert outcome is not None  # the last attempt always tells its outcome
        again, lost = outcome
        for write in again:  # alone this time: a race lost in a batch is usually won alone
            alone = self._transaction([write], first=False)
            assert alone is not None  # a last attempt
            lost |= alone[1]
        return lost

    def _transaction(self, writes: list[Write], first: bool,
                     last: bool = True) -> tuple[list[Write], set[str]] | None:
        """One transaction of `writes`, each in its own savepoint: a write that fails is rolled back alone. The
        writes to try again (those that lost a race, on the first try), and the sessions of the writes lost; None
        when the batch failed whole on its connection and may be tried again (not the `last` attempt): nothing
        of it was told yet."""
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
                    if self._reconnectable(error):  # not the write's fault but the store's: the batch as a whole
                        raise
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
            if not last and self._reconnectable(error):
                get_logger().warning("store_batch_retried", writes=len(writes),
                                     error=f"{error.__class__.__name__}: {str(error).strip()[:200]}")
                return None
            parked = 0
            if self._reconnectable(error):
                parked = self._park(writes)
                self._unreachable(error)
            self.failed_writes += len(writes) - parked
            get_logger().error("store_write_failed", failed_writes=self.failed_writes, parked=parked,
                               error=f"{error.__class__.__name__}: {error}")
            for write in writes:  # those that never ran too: a caller waiting on one must not wait forever
                write.finished(error)
            return [], {session for write in writes for session in write.sessions}
        retried = {id(write) for write in again}
        for write in writes:  # results are told only once they are in the database
            if id(write) not in retried:
                write.finished(failed.get(id(write)))
        return again, {session for write in writes if id(write) in failed for session in write.sessions}
