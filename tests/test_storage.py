"""The store protocol: what the core needs of a backend. Every backend implements all of it, with the same
parameters, so that a second backend is a new module and not edits everywhere."""

from __future__ import annotations

import inspect
import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from stores import POSTGRES, run_sql, sqlite_only, store_location
from test_inspect import conversation

from proxy.config import Config
from proxy.engine import Engine
from proxy.pgstore import PostgresStore
from proxy.policy import BudgetRules, Policy
from proxy.records import Action, Fact
from proxy.storage import NewMessage, Scope, Store, open_store
from proxy.store import SqliteStore
from proxy.tokens import TokenCounter

COUNTER = TokenCounter()
POLICY = replace(Policy(name="tight"), recent_turns=2, budget=replace(BudgetRules(), max_input_tokens=2500))

BACKENDS = [SqliteStore, PostgresStore]


def protocol_methods() -> dict[str, inspect.Signature]:
    return {name: inspect.signature(member) for name, member in vars(Store).items()
            if callable(member) and not name.startswith("_")}


def test_the_protocol_names_what_the_core_calls() -> None:
    assert {"record", "path_to", "search_evidence", "add_turn", "turns", "flush"} <= set(protocol_methods())


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda backend: backend.__name__)
def test_every_backend_implements_every_method_with_the_same_parameters(backend: type) -> None:
    for name, wanted in protocol_methods().items():
        member = getattr(backend, name, None)
        assert callable(member), f"{backend.__name__} lacks {name}"
        have = inspect.signature(member)
        assert list(have.parameters) == list(wanted.parameters), f"{backend.__name__}.{name}{have} != {wanted}"
        for parameter in wanted.parameters.values():
            assert have.parameters[parameter.name].default == parameter.default, f"{backend.__name__}.{name}"


def ledger(store: Store, session: str) -> tuple[int, int]:
    return len(store.facts(session, 100_000)), len(store.actions(session, 100_000))


def test_a_request_s_yield_written_twice_is_stored_once(tmp_path: Path) -> None:
    """Two processes sharing one store that both ingest the same request before either sees the other's write (or
    one write retried) store what its messages yield once: facts and actions have unique keys."""
    path = store_location(tmp_path / "store.db")
    stores = [open_store(path), open_store(path)]
    node = NewMessage("n1", None, 0, {"role": "tool", "content": "status: paid"}, 5, "rn1", "bash", "", "ok", "x")
    facts = [("n1", Fact("field", "status", "paid", 0, "rn1", "tool"), None),
             ("n1", Fact("field", "invoice", "INV-7", 0, "rn1", "tool"), None)]
    actions = [("n1", Action(0, "bash", '{"command": "pay"}', "ok", "paid", "call_1", "rn1"))]
    try:
        stores[0].create_session("S", "key", None, "m", "p")
        for store in stores:
            store.record(Scope.whole("S"), [node], facts, actions, "m", "p", 1)
            store.flush()
        assert ledger(stores[0], "S") == ledger(stores[1], "S") == (2, 1)
    finally:
        for store in stores:
            store.close()


def test_a_conversation_ingested_twice_never_duplicates_the_ledger(tmp_path: Path) -> None:
    """Two processes sharing one store (here two engines, each with its own connection and cache) ingest the same
    requests of a session: what each message yields is stored once."""
    path = store_location(tmp_path / "store.db")
    messages = conversation(24)
    engines = [Engine(Config(), {"tight": POLICY}, open_store(path), COUNTER) for _ in range(2)]
    try:
        session = ""
        for engine in engines:
            for end in range(4, len(messages) + 1, 4):
                prepared = engine.prepare({"model": "m", "messages": messages[:end]}, "key", "shared-session", "tight")
                engine.settle(prepared)
                session = prepared.session_id or ""
            engine.store.flush()
            if engine is engines[0]:
                once = ledger(engine.store, session)
        assert once[0] > 0 and once[1] > 0
        assert ledger(engines[1].store, session) == once
    finally:
        for engine in engines:
            engine.store.close()


def test_a_session_whose_row_was_lost_gets_it_back_from_its_next_request(tmp_path: Path) -> None:
    """A session's row is written apart from its messages; when that write was lost (the store cut off as it was
    made) while the messages landed, every key-scoped read of the conversation answered 404. A replica that reads
    the conversation from the store (its cache dropped with the lost writes, or another replica) writes it again."""
    path = store_location(tmp_path / "store.db")
    messages = conversation(8)
    first = Engine(Config(), {"tight": POLICY}, open_store(path), COUNTER)
    try:
        prepared = first.prepare({"model": "m", "messages": messages[:6]}, "key", None, "tight")
        first.settle(prepared)
        first.store.flush()
    finally:
        first.store.close()
    session = prepared.session_id
    assert session is not None
    run_sql(path, "DELETE FROM sessions WHERE id = ?", (session,))
    cold = Engine(Config(), {"tight": POLICY}, open_store(path), COUNTER)
    try:
        assert cold.store.session(session, "key") is None
        again = cold.prepare({"model": "m", "messages": messages[:8]}, "key", None, "tight")
        cold.settle(again)
        cold.store.flush()
        assert again.session_id == session and cold.store.session(session, "key") is not None
    finally:
        cold.store.close()


def test_after_lost_writes_the_next_request_stores_its_path_before_it_shows_a_ref(tmp_path: Path) -> None:
    """A request's writes were lost (the store failed after its working set went out). The conversation's next
    request finds what the store missed as new messages and stores them before its working set is built: every
    ref that working set shows answers at once. If the store loses them again, the request fails open."""
    import re

    from proxy.storage import StoreUnavailable

    path = store_location(tmp_path / "store.db")
    messages = conversation(40)
    engine = Engine(Config(), {"tight": POLICY}, open_store(path), COUNTER)
    store = engine.store
    try:
        for end in (6, 24):
            prepared = engine.prepare({"model": "m", "messages": messages[:end]}, "key", None, "tight")
            engine.settle(prepared)
            store.flush()
        session = prepared.session_id
        assert session is not None
        # the second request's writes never landed: its rows are gone, and the writer said so
        lost = [row[0] for row in run_sql(path, "SELECT hash FROM messages WHERE session_id = ? AND depth >= 6",
                                          (session,))]
        assert lost
        for table, column in (("facts", "node"), ("actions", "node"), ("evidence", "node"), ("messages", "hash")):
            for node in lost:
                run_sql(path, f"DELETE FROM {table} WHERE {column} = ?", (node,))
        engine.sessions.writes_lost({session})
        again = engine.prepare({"model": "m", "messages": messages}, "key", None, "tight")  # not settled yet
        stored = run_sql(path, "SELECT count(*) FROM messages WHERE session_id = ?", (session,))[0][0]
        assert again.session_id == session and again.compacted and stored == len(messages), stored
        refs = set(re.findall(r"\[ref:([0-9a-f]{12})\]", json.dumps(again.body["messages"])))
        assert refs and all(store.evidence_by_ref(ref, "key") is not None for ref in refs), refs
        # lost again as it caught up: forwarded as sent
        engine.sessions.writes_lost({session})
        original = store.flush
        store.flush = lambda *args, **kwargs: (original(*args, **kwargs),  # type: ignore[method-assign]
                                               engine.sessions.writes_lost({session}))[0]
        with pytest.raises(StoreUnavailable):
            engine.prepare({"model": "m", "messages": messages + [{"role": "user", "content": "go on"}]},
                           "key", None, "tight")
    finally:
        store.close()


@sqlite_only  # a SQLite store of schema 7 (PostgreSQL stores began at schema 10)
def test_a_store_from_before_unique_yields_keeps_one_of_each_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    open_store(path).close()
    with sqlite3.connect(path) as conn:  # as a schema-7 store that two processes wrote to
        conn.execute("DROP INDEX facts_yield")
        for _ in range(3):
            conn.execute("INSERT INTO facts (session_id, node, turn, kind, key, value) VALUES ('S', 'n', 0, 'field',"
                         " 'status', 'paid')")
        conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    conn.close()
    store = open_store(path)
    try:
        assert ledger(store, "S") == (1, 0)
    finally:
        store.close()


def test_workset_migrate_creates_or_upgrades_the_store_and_exits(tmp_path: Path, capsys: Any) -> None:
    from proxy.cli import main
    from proxy.store import SCHEMA_VERSION

    path = tmp_path / "new" / "store.db"
    location = store_location(path)
    assert main(["migrate", "--store", location]) == 0
    assert f"schema {SCHEMA_VERSION}" in capsys.readouterr().out and (POSTGRES or path.is_file())
    run_sql(location, "UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    assert main(["migrate", "--store", location]) == 0
    assert run_sql(location, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]


def test_whatever_a_tool_printed_is_stored_and_found_by_its_words(tmp_path: Path) -> None:
    """Every backend stores a tool output with NUL characters, and finds it by any of its words: inside markup
    (a script element's too), paths and dotted names, as SQLite's tokenizer splits them."""
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}
    output = "exit\x000 <returncode>1</returncode> <script>alert('owned')</script> see src/parser.py 退款已完成"
    answer = {"role": "tool", "tool_call_id": "call_1", "content": output}
    location = store_location(tmp_path / "store.db")
    store = open_store(location)
    try:
        store.create_session("S", "key", None, "m", "p")
        store.record(Scope.whole("S"), [NewMessage("a1", None, 0, call, 5, "ra1", "", "", "", None),
                                        NewMessage("t1", "a1", 1, answer, 5, "rt1", "bash", "", "ok", output)],
                     [], [], "m", "p", 2)
        for query in ("owned", "returncode", "parser", "parser.py", "src/parser.py"):
            assert [hit["ref"] for hit in store.search_evidence(Scope.whole("S"), query)] == ["rt1"], query
        turn = store.turn(Scope.whole("S"), "a1")
        assert turn is not None and [(found.ref, found.call_id) for found in turn.answers] == [("rt1", "call_1")]
        assert store.failed_writes == 0
        # a message body is stored as JSON text (written from its UTF-8 bytes), the way it was sent
        stored = run_sql(location, "SELECT body FROM messages WHERE hash = ?", ("t1",))[0][0]
        assert isinstance(stored, str) and json.loads(stored) == answer
    finally:
        store.close()


@pytest.mark.skipif(not POSTGRES, reason="one process at a time: SQLite has one process, nothing to hold")
def test_a_lock_is_held_by_one_process_at_a_time_and_shared_by_its_threads(tmp_path: Path) -> None:
    """Threads of one replica share its hold (SQLite's single process orders its threads itself); another replica
    waits until the last of them leaves, and one that waits past store.lock_timeout_s gives up without calling the
    database unavailable."""
    import threading

    from proxy.config import StoreSettings
    from proxy.pgstore import LockWaitTimeout

    location = store_location(tmp_path / "store.db")
    here, there = open_store(location), open_store(location, StoreSettings(lock_timeout_s=0.3))
    events: list[str] = []
    entered, leave = threading.Event(), threading.Event()

    def other_replica() -> None:
        with there.exclusive("session:S"):
            events.append("there")

    def second_thread() -> None:
        with here.exclusive("session:S"):
            entered.set()
            leave.wait(10)

    worker = threading.Thread(target=second_thread)
    try:
        with here.exclusive("session:S"):
            with pytest.raises(LockWaitTimeout):
                other_replica()
            assert here.unavailable() == there.unavailable() == ""
            worker.start()
            assert entered.wait(5), "a second thread of the same process waited for the first"
        with pytest.raises(LockWaitTimeout):  # the first thread left; the second still holds it for the process
            other_replica()
        leave.set()
        worker.join(10)
        other_replica()  # the last of them left: the other replica takes it
        assert events == ["there"]
    finally:
        leave.set()
        here.close()
        there.close()


@pytest.mark.skipif(not POSTGRES, reason="replicas migrating at once: SQLite has one process")
def test_a_replica_starting_during_another_s_migration_waits_for_it_not_for_timeout_s(tmp_path: Path) -> None:
    """store.timeout_s bounds a request's statements, not start-up: a replica whose migration waits longer than
    that for another replica's starts once the other is done; one that waits past store.migrate_timeout_s fails to
    start, saying so."""
    import threading
    import time

    import psycopg

    from proxy.config import StoreSettings

    location = store_location(tmp_path / "store.db")

    def migrating_elsewhere(seconds: float) -> threading.Event:
        """Another replica's migration (its lock) for `seconds`, or until the event returned is set."""
        held, done = threading.Event(), threading.Event()

        def hold() -> None:
            with psycopg.connect(location, autocommit=True, connect_timeout=5) as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('workset:migrate', 0))")
                held.set()
                done.wait(seconds)

        threading.Thread(target=hold, daemon=True).start()
        assert held.wait(10)
        return done

    migrating_elsewhere(1.5)
    started = time.monotonic()
    store = open_store(location, StoreSettings(timeout_s=0.3))
    try:
        assert time.monotonic() - started >= 1.0  # it did wait for the other replica
        assert store.sessions() == []
    finally:
        store.close()

    done = migrating_elsewhere(30)
    started = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match=r"not ready within store.migrate_timeout_s \(1 s\)"):
            open_store(location, StoreSettings(timeout_s=0.3, migrate_timeout_s=1.0))
        assert time.monotonic() - started < 10
    finally:
        done.set()  # other tests' stores migrate under the same lock


def _cut_lock_holders(location: str, name: str) -> int:
    """Terminate the server connections holding the advisory lock `name` (a cut cable, as the server sees it)."""
    return len(run_sql(location, "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'"
                                 " AND granted AND objid = (hashtextextended(?, 0) & 4294967295)::oid"
                                 " AND classid = ((hashtextextended(?, 0) >> 32) & 4294967295)::oid",
                       ("workset:" + name, "workset:" + name)))


@pytest.mark.skipif(not POSTGRES, reason="the lock's own connection: SQLite has no lock to cut")
def test_a_lock_whose_connection_was_cut_is_let_go_and_taken_again(tmp_path: Path) -> None:
    """Leaving a block whose lock's connection died never raises (the block's outcome stands), and the lock is free
    for this replica and for another one."""
    import time

    from proxy.config import StoreSettings

    location = store_location(tmp_path / "store.db")
    # a wait for a lock still held ends in LockWaitTimeout, not a hang; the cut marks the store down for retry_s
    settings = StoreSettings(lock_timeout_s=2, retry_s=0.1)
    here, there = open_store(location, settings), open_store(location, settings)
    try:
        with here.exclusive("session:S"):
            assert _cut_lock_holders(location, "session:S") == 1
        with there.exclusive("session:S"):
            pass
        time.sleep(0.2)
        with here.exclusive("session:S"):
            pass
    finally:
        here.close()
        there.close()


@pytest.mark.skipif(not POSTGRES, reason="the lock's own connection: SQLite has no lock to cut")
def test_a_conversation_goes_on_after_its_lock_s_connection_was_cut(tmp_path: Path) -> None:
    """A request whose session lock was lost with its connection (the store cut off while it was being built) lets
    go of everything it held: the conversation's next requests, from any thread, are built, not stuck."""
    import threading

    import time

    from proxy.config import StoreSettings

    location = store_location(tmp_path / "store.db")
    engine = Engine(Config(), {"tight": POLICY}, open_store(location, StoreSettings(retry_s=0.1)), COUNTER)
    messages = conversation(6)
    try:
        with engine.sessions.claimed("key", None, messages[:4], "m", "tight") as resolved:
            assert _cut_lock_holders(location, "session:" + resolved.branch.session_id) == 1
        time.sleep(0.2)  # the cut marked the store down for retry_s
        built: list[str | None] = []
        for end in (5, 6, 7, 8):  # each on a new thread: a lock left held by the first would stall them
            worker = threading.Thread(target=lambda end=end: built.append(engine.prepare(
                {"model": "m", "messages": messages[:end]}, "key", None, "tight").session_id), daemon=True)
            worker.start()
            worker.join(30)
            assert not worker.is_alive(), f"request {end} of the conversation never got its branch"
        assert built == [resolved.branch.session_id] * 4
    finally:
        engine.store.close()
