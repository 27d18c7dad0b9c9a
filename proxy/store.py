"""The sidecar store's embedded backend (proxy.storage.Store): one SQLite file (sqlite-utils, WAL, FTS5). The
queries are proxy.sqlstore's; this module holds the file, its connections, its schema and its full-text search.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import sqlite_utils

from .config import StoreSettings
from .outage import Outage
from .sqlstore import SCHEMA_VERSION, UNIQUE_YIELDS, SqlStore
from .writequeue import WriteQueue


def _migrate_to_1(db: sqlite_utils.Database) -> None:
    db["sessions"].create(
        {"id": str, "key_hash": str, "explicit_id": str, "created_at": float, "updated_at": float,
         "model": str, "policy": str, "messages": int},
        pk="id", not_null={"key_hash"}, if_not_exists=True,
    )
    db["sessions"].create_index(["key_hash", "explicit_id"], if_not_exists=True)
    db["sessions"].create_index(["key_hash", "updated_at"], if_not_exists=True)
    db["messages"].create(
        {"hash": str, "session_id": str, "parent": str, "depth": int, "role": str, "body": str, "tokens": int,
         "ref": str, "tool": str, "gist": str, "outcome": str, "created_at": float},
        pk="hash", not_null={"session_id", "depth", "role", "body"}, if_not_exists=True,
    )
    db["messages"].create_index(["session_id", "depth"], if_not_exists=True)
    db["messages"].create_index(["session_id", "ref"], if_not_exists=True)
    db["facts"].create(
        {"id": int, "session_id": str, "node": str, "turn": int, "kind": str, "key": str, "value": str,
         "evidence_ref": str, "supersedes": str, "superseded": int},
        pk="id", not_null={"session_id", "node", "kind", "key"}, defaults={"superseded": 0}, if_not_exists=True,
    )
    db["facts"].create_index(["session_id", "node"], if_not_exists=True)
    db["facts"].create_index(["session_id", "kind", "key"], if_not_exists=True)
    db["actions"].create(
        {"id": int, "session_id": str, "node": str, "turn": int, "tool": str, "arguments": str, "outcome": str,
         "gist": str, "call_id": str, "evidence_ref": str},
        pk="id", not_null={"session_id", "node"}, if_not_exists=True,
    )
    db["actions"].create_index(["session_id", "node"], if_not_exists=True)
    db["evidence"].create(
        {"id": int, "session_id": str, "ref": str, "node": str, "role": str, "tool": str, "content": str,
         "tokens": int},
        pk="id", not_null={"session_id", "ref", "content"}, if_not_exists=True,
    )
    db["evidence"].create_index(["session_id", "ref"], unique=True, if_not_exists=True)
    if not db["evidence_fts"].exists():
        db["evidence"].enable_fts(["content", "tool"], create_triggers=True, tokenize="porter unicode61")
    db["checkpoints"].create(
        {"id": int, "session_id": str, "node": str, "depth": int, "created_at": float, "reason": str,
         "tokens_before": int, "tokens_after": int, "epoch": str, "state": str},
        pk="id", not_null={"session_id", "node", "epoch"}, if_not_exists=True,
    )
    db["checkpoints"].create_index(["session_id", "node"], if_not_exists=True)


def _migrate_to_2(db: sqlite_utils.Database) -> None:
    """Names per message, for the index of names in elided turns."""
    if "names" not in db["messages"].columns_dict:
        db["messages"].add_column("names", str)


def _migrate_to_3(db: sqlite_utils.Database) -> None:
    """Which role a fact came from (tool outputs are what the system knew)."""
    if "source" not in db["facts"].columns_dict:
        db["facts"].add_column("source", str)


def _migrate_to_4(db: sqlite_utils.Database) -> None:
    """Conversations that fork from one another are sessions of their own: which one a session forked from, and
    the children of a node (a fork is a node with a second child)."""
    if "forked_from" not in db["sessions"].columns_dict:
        db["sessions"].add_column("forked_from", str)
    db["messages"].create_index(["parent"], if_not_exists=True)


def _migrate_to_5(db: sqlite_utils.Database) -> None:
    """A session's task state as folded at its latest compaction, so that a cold start reads only what came
    after it (see Store.save_fold)."""
    db["folds"].create({"session_id": str, "node": str, "depth": int, "data": str}, pk="session_id",
                       not_null={"node", "depth", "data"}, if_not_exists=True)


def _migrate_to_6(db: sqlite_utils.Database) -> None:
    """The session id a client sent in its own header (Claude Code, Codex), and the session a subagent's
    conversation was started from."""
    for column in ("client_id", "parent_id"):
        if column not in db["sessions"].columns_dict:
            db["sessions"].add_column(column, str)


def _migrate_to_7(db: sqlite_utils.Database) -> None:
    """One row per forwarded request: its decision record and its accounting (proxy.decisions, proxy.accounting);
    and the messages workset wrote in the working sets (placeholders, excerpts, compacted turns, live state), each
    stored once per session under its content hash."""
    db["turns"].create(
        {"id": int, "session_id": str, "n": int, "created_at": float, "route": str, "model": str, "policy": str,
         "messages": int, "tip": str, "tokens_original": int, "tokens_sent": int,
         "input_tokens": int, "cached_tokens": int, "cache_write_tokens": int, "output_tokens": int,
         "reported": int, "whole_tokens": int, "whole_cached_tokens": int, "whole_write_tokens": int,
         "cost": float, "cost_whole": float, "compaction": str, "recall_rounds": int, "status": int,
         "workset_ms": float, "latency_ms": float, "note": str, "record": str},
        pk="id", not_null={"session_id", "n"}, if_not_exists=True,
    )
    db["turns"].create_index(["session_id", "n"], unique=True, if_not_exists=True)
    db["turns"].create_index(["created_at"], if_not_exists=True)
    db["shown"].create({"session_id": str, "hash": str, "body": str}, pk=("session_id", "hash"),
                       not_null={"body"}, if_not_exists=True)


def _migrate_to_8(db: sqlite_utils.Database) -> None:
    """What a message yields is written once: a request ingested twice (retried, or by two processes sharing the
    store) never duplicates the ledger. Duplicates already stored are dropped, the first kept."""
    for table, columns in UNIQUE_YIELDS.items():
        listed = ", ".join(columns)
        db.execute(f"DELETE FROM {table} WHERE id NOT IN (SELECT min(id) FROM {table} GROUP BY {listed})")
        db.execute(f"CREATE UNIQUE INDEX IF NOT EXISTS {table}_yield ON {table} ({listed})")


def _migrate_to_9(db: sqlite_utils.Database) -> None:
    """Recall answers waiting for a conversation's next request live in the store, not in one process: the next
    request may come to another replica, or after a restart."""
    db["pending_recall"].create({"id": int, "session_id": str, "text": str, "created_at": float}, pk="id",
                                not_null={"session_id", "text"}, if_not_exists=True)
    db["pending_recall"].create_index(["session_id"], if_not_exists=True)


def _migrate_to_10(db: sqlite_utils.Database) -> None:
    """A session's version, bumped by each compaction: a replica holding the session's state in memory checks it
    before building on it (another replica may have compacted meanwhile)."""
    if "version" not in db["sessions"].columns_dict:
        db["sessions"].add_column("version", int, not_null_default=0)


def _migrate_to_11(db: sqlite_utils.Database) -> None:
    """Background summary jobs and their results live in the store: any replica may run a session's job, and take
    over one whose replica died. At most one job of a session runs at a time."""
    db["summaries"].create({"id": int, "session_id": str, "state": str, "claim": str, "lease_until": float,
                            "created_at": float, "start": int, "through": int, "through_hash": str, "job": str,
                            "text": str, "verdict": str}, pk="id", not_null={"session_id", "state", "claim"},
                           if_not_exists=True)
    db["summaries"].create_index(["session_id"], if_not_exists=True)
    db.execute("CREATE UNIQUE INDEX IF NOT EXISTS summaries_running ON summaries (session_id) WHERE state = 'running'")


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [_migrate_to_1, _migrate_to_2, _migrate_to_3, _migrate_to_4,
                                                             _migrate_to_5, _migrate_to_6, _migrate_to_7, _migrate_to_8,
                                                             _migrate_to_9, _migrate_to_10, _migrate_to_11]


class SqliteStore(SqlStore):
    """The store in one SQLite file: a writer thread owns one connection, each thread that reads has its own (WAL
    lets them all run side by side). One process at a time writes it."""

    def __init__(self, path: str | Path, writer_nice: int = 0, large_write: int = 262144,
                 settings: StoreSettings = StoreSettings()) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write = _connect(path)
        self.db = sqlite_utils.Database(self._write)
        self._write.execute("PRAGMA journal_mode=WAL")
        self.migrate()
        # Each thread that reads has a connection of its own: WAL lets them read side by side, where one shared
        # connection put every read in line, each holding it across the interpreter-lock waits of a busy server.
        self._readers = threading.local()
        self._reader_of: dict[threading.Thread, sqlite3.Connection] = {}  # to close (at exit, or its thread's)
        self._readers_lock = threading.Lock()
        self._closed = False
        # Writes go through one background thread so requests never wait on SQLite. A crash can only lose
        # writes that the client's next request carries again (agents resend the whole history). It runs at a
        # lower priority: full-text indexing a megabyte is CPU that requests beside it need more.
        super().__init__(WriteQueue(lambda: self._write, begin="BEGIN IMMEDIATE", nice=writer_nice,
                                    large_write=large_write, reconnectable=_write_fault,
                                    attempts=settings.write_attempts, pause_s=settings.retry_s))
        # A file that cannot be written (a disk full, a read-only file or folder): writes are kept and the store is
        # down (reads go on) until a probe write succeeds, then what was kept is written.
        self._outage = Outage(str(self.path), settings.retry_s, self._writable, self.came_back)
        self.queue.keep_lost(settings.parked_writes, settings.max_backlog_chars, self._outage.down)

    def migrate(self) -> None:
        """Create or upgrade the schema; run at start-up, before any other use."""
        self.db["meta"].create({"key": str, "value": str}, pk="key", if_not_exists=True)
        row = self._write.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise RuntimeError(f"store {self.path} has schema {version}, newer than this workset ({SCHEMA_VERSION})")
        for number, migration in enumerate(MIGRATIONS[version:], start=version + 1):
            # Not in one transaction: sqlite-utils' FTS set-up runs scripts that commit on their own.
            # Every step is idempotent (if_not_exists), so a migration cut short is simply run again.
            migration(self.db)
            self._write.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(number),))

    def unavailable(self, probe: bool = False) -> str:
        """Why the file cannot be written now ("" when it can): reads go on, writes wait in memory."""
        return self._outage.why

    def _writable(self) -> bool:
        """The prober's try: a write committed on a connection of its own, then the writes kept back, written
        (a small write may fit a disk the kept ones do not): up only when they all are."""
        conn = _connect(self.path)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('probed_at', ?)", (str(time.time()),))
            conn.execute("COMMIT")
        except sqlite3.Error:
            return False
        finally:
            conn.close()
        return self.queue.replay(wait=True)

    def close(self) -> None:
        self._outage.close()
        self.queue.close()
        with self._readers_lock:
            self._closed = True
            for reader in self._reader_of.values():
                reader.close()
            self._reader_of.clear()
        self._write.close()

    def _reader(self) -> sqlite3.Connection:
        """This thread's read connection, made at its first read (the connections of threads that ended are
        closed then: the server's threads live as long as it does, a test's may not)."""
        reader: sqlite3.Connection | None = getattr(self._readers, "connection", None)
        if reader is None:
            with self._readers_lock:
                if self._closed:
                    raise sqlite3.ProgrammingError("the store is closed")
                for ended in [thread for thread in self._reader_of if not thread.is_alive()]:
                    self._reader_of.pop(ended).close()
                reader = self._reader_of[threading.current_thread()] = _connect(self.path)
            self._readers.connection = reader
        return reader

    def _fetch(self, query: str, params: Sequence[Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
        cursor = self._reader().execute(query, params)
        return [column[0] for column in cursor.description or ()], cursor.fetchall()

    def _exec(self, query: str, params: Sequence[Any] = ()) -> int:
        return self._write.execute(query, params).rowcount

    def _exec_many(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        self._write.executemany(query, rows)

    def _exec_rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._write.execute(query, params).fetchall()

    def size_bytes(self) -> int:
        """The database file and its write-ahead log on disk (0 for an in-memory store)."""
        total = 0
        for path in (self.path, self.path.with_name(self.path.name + "-wal")):
            try:
                total += path.stat().st_size
            except OSError:  # no such file (yet), or in memory
                pass
        return total


_WRITE_FAULTS = ("disk is full", "readonly database", "disk I/O error", "unable to open database", "database is locked")


def _write_fault(error: BaseException) -> bool:
    """A write the file refused (it may take it later), not a write of ours that is wrong."""
    return isinstance(error, sqlite3.OperationalError) and any(fault in str(error) for fault in _WRITE_FAULTS)


def _connect(path: str | Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA synchronous=NORMAL")  # with WAL: durable at checkpoints, no fsync per commit
    conn.execute("PRAGMA busy_timeout=5000")
    return conn
