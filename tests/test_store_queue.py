"""Writes queue behind one writer thread; a conversation's reads wait for its own queued writes only, never behind
another conversation's (a tenant's megabyte of evidence being indexed), and queued nodes are found at once."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from stores import store_location

from proxy.config import StoreSettings
from proxy.records import Fact
from proxy.storage import NewMessage, Scope, open_store

WAIT_S = 30  # bounds a hang; never reached when the store behaves


def message(node: str, parent: str | None = None) -> NewMessage:
    return NewMessage(node, parent, 0 if parent is None else 1, {"role": "tool", "content": node}, 5, "r" + node,
                      "t", "", "ok", node)


def in_thread(work: object) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(work()), daemon=True)  # type: ignore[operator]
    thread.start()
    return thread, out


def waits_for(gate: threading.Event, read: object, why: str) -> list[object]:
    """What `read` returns, checked to wait until `gate` lets the write it needs through."""
    reader, out = in_thread(read)
    reader.join(0.2)
    assert reader.is_alive(), why
    gate.set()
    reader.join(WAIT_S)
    assert not reader.is_alive()
    return out


def test_reads_wait_for_their_own_sessions_writes_only(tmp_path: Path) -> None:
    store = open_store(store_location(tmp_path / "store.db"))
    gate = threading.Event()
    try:
        store.create_session("A", "key", None, "m", "p")
        store.create_session("B", "key", None, "m", "p")
        store.flush()
        # A's write holds the writer (as indexing a huge evidence would); B's write queues behind it
        store._submit(lambda: gate.wait(WAIT_S), ("A",), ("evidence",))
        store.record(Scope.whole("B"), [message("b1")], [("b1", Fact("field", "status", "paid", 0, "rb1"), None)], [],
                     "m", "p", 1)
        # another conversation's reads go on: nothing of theirs is queued
        other, found = in_thread(lambda: store.path_records(("C",), ["c1"]))
        other.join(WAIT_S)
        assert not other.is_alive() and found == [([], [])]
        # a queued node is found at once, and so is a queued child of its parent
        assert set(store.find_nodes(["b1", "zz"])) == {"b1"}
        assert store.find_nodes(["b1"])["b1"].session_id == "B"
        # B's own read waits until its write is in the file, then sees it
        records = waits_for(gate, lambda: store.path_records(("B",), ["b1"]), "B's read did not wait for B's queued write")
        assert records and [fact.value for _, fact in records[0][0]] == ["paid"]  # type: ignore[index]
    finally:
        gate.set()
        store.close()


def test_a_read_waits_only_for_its_conversations_writes_to_the_tables_it_reads(tmp_path: Path) -> None:
    """Every request reads its waiting recall answers, and a new conversation reads its path: neither waits for its
    own ledger, or its session's row, queued behind another tenant's megabyte. A write that names no table is waited
    for by every reader of its session."""
    store = open_store(store_location(tmp_path / "store.db"))
    gate, unnamed = threading.Event(), threading.Event()
    try:
        store.create_session("A", "key", None, "m", "p")
        store.create_session("B", "key", None, "m", "p")
        store.add_pending_recall("B", ["an answer"])
        store.flush()
        store._submit(lambda: gate.wait(WAIT_S), ("A",), ("evidence",))  # A's megabyte holds the writer
        store.record(Scope.whole("B"), [message("b1")], [("b1", Fact("field", "status", "paid", 0, "rb1"), None)], [],
                     "m", "p", 1)
        store.create_session("C", "key", None, "m", "p")

        def new_conversation() -> object:
            return (store.path_records(("C",), ["c1"]), store.fold_on_path(("C",), ["c1"]),
                    store.latest_checkpoint_on_path(("C",), ["c1"]))

        for read, expected in ((lambda: store.take_pending_recall("B"), ["an answer"]),
                               (new_conversation, (([], []), None, None))):
            reader, found = in_thread(read)
            reader.join(WAIT_S)
            assert not reader.is_alive() and found == [expected]
        records = waits_for(gate, lambda: store.path_records(("B",), ["b1"]),
                            "B's ledger read did not wait for B's queued record")
        assert records and [fact.value for _, fact in records[0][0]] == ["paid"]  # type: ignore[index]

        store._submit(lambda: unnamed.wait(WAIT_S), ("B",), ())
        waits_for(unnamed, lambda: store.take_pending_recall("B"), "a read did not wait for a write that names no table")
    finally:
        gate.set()
        unnamed.set()
        store.close()


def test_a_queued_child_counts_as_a_fork(tmp_path: Path) -> None:
    store = open_store(store_location(tmp_path / "store.db"))
    gate = threading.Event()
    try:
        store.create_session("A", "key", None, "m", "p")
        store.record(Scope.whole("A"), [message("root")], [], [], "m", "p", 1)
        store.flush()
        store._submit(lambda: gate.wait(WAIT_S), ("A",), ("evidence",))
        store.record(Scope.whole("A"), [message("left", "root")], [], [], "m", "p", 2)
        assert store.other_child("root", "right") and not store.other_child("root", "left")
    finally:
        gate.set()
        store.close()


def test_a_write_waited_for_hears_why_when_the_store_cannot_take_it() -> None:
    """A caller waiting for its write's result (retention's delete) is told the store's failure, even when the
    connection failed before the write ever ran; it never waits forever. The next write goes through."""
    from proxy.writequeue import WriteQueue

    class Connection:
        cut = True

        def execute(self, sql: str) -> None:
            if self.cut and sql == "BEGIN":
                raise ConnectionError("store cut off")

    connection = Connection()
    queue = WriteQueue(lambda: connection)
    try:
        thread, out = in_thread(lambda: _outcome(lambda: queue.call(lambda: "deleted")))
        thread.join(WAIT_S)
        assert not thread.is_alive(), "call() waited forever for a write that never ran"
        assert out == ["ConnectionError: store cut off"]
        connection.cut = False
        assert queue.call(lambda: "deleted") == "deleted"
        thread, out = in_thread(lambda: _outcome(lambda: queue.call(lambda: 1 / 0)))
        thread.join(WAIT_S)
        assert out == ["ZeroDivisionError: division by zero"]
    finally:
        queue.close()


def test_a_read_of_everything_waits_for_what_was_queued_before_it_not_for_the_queue_to_empty() -> None:
    """A read that names no session (the inspection routes, the dashboard) waits for the writes queued before it.
    Under steady load the queue is never empty: waiting for that kept a listing seconds behind other tenants'
    megabytes being indexed, holding a worker all the while."""
    from proxy.writequeue import WriteQueue

    class Connection:
        def execute(self, sql: str) -> None:
            pass

    queue = WriteQueue(lambda: Connection())
    ahead, behind = threading.Event(), threading.Event()
    try:
        queue.submit(lambda: ahead.wait(WAIT_S))  # being written when the read comes
        reader, out = in_thread(lambda: queue.flush() or "read")
        reader.join(0.2)
        assert reader.is_alive(), "the read went before the write queued ahead of it"
        queue.submit(lambda: behind.wait(3 * WAIT_S))  # queued once the read had begun, and held
        ahead.set()
        reader.join(WAIT_S)
        assert not reader.is_alive() and out == ["read"], "the read waited for a write queued after it"
    finally:
        ahead.set()
        behind.set()
        queue.close()


def test_other_tenants_writes_pass_a_large_one_and_a_sessions_writes_keep_their_order() -> None:
    """A tenant sending megabytes faster than they are indexed must not hold up another tenant's answered turns:
    small writes queued behind a large one are written before it. A session's own writes stay in order: one queued
    after its session's large write waits for it, one queued before it goes first; a write of no session (a
    deletion of old sessions) goes after everything queued before it."""
    from proxy.writequeue import WriteQueue

    class Connection:
        def execute(self, sql: str) -> None:
            pass

    queue = WriteQueue(lambda: Connection(), large_write=1000)
    written: list[str] = []
    started, first = threading.Event(), threading.Event()

    def write(name: str) -> object:
        return lambda: written.append(name)

    def being_written() -> None:
        started.set()
        first.wait(WAIT_S)
        written.append("large Z, being written")

    try:
        queue.submit(being_written, ("Z",), size=5000)
        assert started.wait(WAIT_S)
        queue.submit(write("small A, before its large write"), ("A",))
        queue.submit(write("large C"), ("C",), size=5000)
        queue.submit(write("large A"), ("A",), size=5000)
        queue.submit(write("small A, after its large write"), ("A",))
        queue.submit(write("small B"), ("B",))
        queue.submit(write("small D"), ("D",))
        queue.submit(write("of no session (a deletion)"))
        first.set()
        queue.flush()
        assert written == ["large Z, being written", "small A, before its large write", "small B", "small D",
                           "large C", "large A", "small A, after its large write", "of no session (a deletion)"]
        assert queue.large_backlog() == 0 and queue.qsize() == 0
    finally:
        first.set()
        queue.close()


def test_a_view_of_one_keys_sessions_does_not_wait_for_another_tenants_large_write(tmp_path: Path) -> None:
    """The inspection routes and the dashboard read the store for one key, waiting for that key's conversations'
    writes only: another tenant's megabytes, queued before them and indexed long after, do not hold them up
    (a read of everything, the local CLI's, waits for them)."""
    store = open_store(store_location(tmp_path / "store.db"))
    gate = threading.Event()
    try:
        store.create_session("A", "key-a", None, "m", "p")
        store.create_session("B", "key-b", None, "m", "p")
        store.record(Scope.whole("B"), [message("b1")], [], [], "m", "p", 1)
        store.flush()
        store._submit(lambda: gate.wait(WAIT_S), ("A",), ("evidence",), size=10_000_000)  # key-a's, being indexed

        def view() -> object:
            with store.reads_waiting_for({"B"}):
                return [row["messages"] for row in store.sessions("key-b")]

        reader, out = in_thread(view)
        reader.join(WAIT_S)
        assert not reader.is_alive(), "key-b's view waited for key-a's large write"
        assert out == [[1]], "key-b's view missed its own write"
        assert waits_for(gate, lambda: store.sessions("key-b"), "outside the block, a read of everything waits")
    finally:
        gate.set()
        store.close()


def _outcome(work: object) -> object:
    try:
        return work()  # type: ignore[operator]
    except Exception as error:
        return f"{error.__class__.__name__}: {error}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priorities are Linux's")
def test_the_sqlite_writer_runs_at_a_lower_priority_than_the_server(tmp_path: Path) -> None:
    """Full-text indexing a tenant's megabyte takes the CPU the requests beside it leave (store.writer_nice)."""
    store = open_store(tmp_path / "store.db", StoreSettings(writer_nice=7))
    try:
        mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        seen = store.queue.call(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))  # type: ignore[attr-defined]
        assert seen == min(19, mine + 7)
    finally:
        store.close()


def test_sqlite_reads_of_different_threads_do_not_wait_for_each_other(tmp_path: Path) -> None:
    """One slow read (held here inside SQLite) does not hold up another thread's: each thread reads on its own
    connection. With one shared connection, the second read waited for the first to finish."""
    store = open_store(tmp_path / "store.db")
    gate = threading.Event()

    def held_read() -> object:
        store._reader().create_function("hold", 0, lambda: int(gate.wait(WAIT_S)))  # type: ignore[attr-defined]
        return store._fetch("SELECT hold()", ())  # type: ignore[attr-defined]

    try:
        slow, out = in_thread(held_read)
        other, other_out = in_thread(lambda: store.find_sessions("nobody"))
        other.join(WAIT_S)
        assert other_out == [[]] and slow.is_alive(), "a read waited for another thread's read"
        gate.set()
        slow.join(WAIT_S)
        assert out == [(["hold()"], [(1,)])]
    finally:
        gate.set()
        store.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open files in /proc")
def test_threads_that_read_and_end_leave_no_connection_open(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store.db")
    try:
        store.find_sessions("nobody")
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(40):
            reader, out = in_thread(lambda: store.find_sessions("nobody"))
            reader.join(WAIT_S)
            assert out == [[]]
        assert len(os.listdir("/proc/self/fd")) - before <= 3  # the last thread's connection at most
    finally:
        store.close()
    with pytest.raises(Exception):
        store.find_sessions("nobody")


class _FlakyConnection:
    """A writer connection whose first `dies` statements fail as a connection cut would; a record of what ran."""

    def __init__(self, dies: int) -> None:
        self.dies = dies
        self.ran: list[str] = []

    def execute(self, sql: str) -> None:
        if self.dies:
            self.dies -= 1
            raise ConnectionError("server closed the connection unexpectedly")
        self.ran.append(sql)


def test_a_batch_whose_connection_failed_is_tried_again_on_a_fresh_one() -> None:
    """The first write after a database restart meets a dead connection: its batch is tried again whole (the
    backend reconnects), committed, and its writer is told so; only after `attempts` failures is it lost, and
    then every write of it hears why."""
    from proxy.writequeue import WriteQueue

    connections = [_FlakyConnection(dies=1), _FlakyConnection(dies=0)]
    given: list[_FlakyConnection] = []

    def connection() -> _FlakyConnection:
        given.append(connections[min(len(given), len(connections) - 1)])
        return given[-1]

    queue = WriteQueue(connection, reconnectable=lambda error: isinstance(error, ConnectionError), attempts=3)
    lost: list[set[str]] = []
    queue.on_failed = lost.append
    try:
        assert queue.call(lambda: "written") == "written"
        assert len(given) == 2 and connections[1].ran[-1] == "COMMIT" and lost == [] and queue.failed_writes == 0
    finally:
        queue.close()

    dead = WriteQueue(lambda: _FlakyConnection(dies=99), reconnectable=lambda error: True, attempts=2)
    outcomes: list[BaseException | None] = []
    try:
        dead.submit(lambda: None, ("S",), finished=outcomes.append)
        dead.flush()
        assert len(outcomes) == 1 and isinstance(outcomes[0], ConnectionError) and dead.failed_writes == 1
    finally:
        dead.close()


def test_writes_lost_while_the_database_was_away_are_written_once_it_answers() -> None:
    """A batch that failed on its connection every time is kept (no caller waits on it; a queued call is told its
    failure) and queued again, in order, when the store answers again: written once, not lost."""
    from proxy.writequeue import WriteQueue

    up = threading.Event()
    written: list[str] = []

    class Database:
        def execute(self, sql: str) -> None:
            if not up.is_set():
                raise ConnectionError("connection refused")

    queue = WriteQueue(Database, reconnectable=lambda error: isinstance(error, ConnectionError), attempts=2)
    unreachable: list[BaseException] = []
    queue.keep_lost(10, 1000, unreachable.append)
    told: list[BaseException | None] = []
    try:
        queue.submit(lambda: written.append("turn 1"), ("S",))
        queue.submit(lambda: written.append("turn 2"), ("S",))
        queue.submit(lambda: written.append("claim"), ("S",), finished=told.append)
        queue.flush()
        assert written == [] and len(told) == 1 and isinstance(told[0], ConnectionError) and unreachable
        up.set()
        assert queue.replay(wait=True)
        assert written == ["turn 1", "turn 2"] and queue.failed_writes == 1  # the call, told
        assert queue.replay()
    finally:
        queue.close()
