"""The sidecar store's embedded backend (proxy.storage.Store): one SQLite file (sqlite-utils, WAL). Nothing is
deleted when it leaves the working set.

Tables: sessions, messages (the conversation tree, one row per node), facts (the key-facts ledger), actions,
evidence (full contents under a stable ref, FTS5-indexed), checkpoints (one per compaction).
"""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from collections.abc import Collection
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TypeVar

import orjson
import sqlite_utils

from .jsonbytes import encode_json
from .logs import get_logger
from .passages import has_cjk, query_words
from .records import Action, Fact
from .storage import Answer, NewMessage, NodeRow, Scope, StoredTurn

SCHEMA_VERSION = 9
_IN_CHUNK = 500  # host parameters per IN (...) query
_WRITE_BATCH = 256  # writes per commit at most: bounds how long one commit holds the file (not a tuning knob)
T = TypeVar("T")


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


# what identifies a fact or an action a message yielded (the unique keys of ingest)
UNIQUE_YIELDS = {"facts": ("session_id", "node", "kind", "key", "value"),
                 "actions": ("session_id", "node", "call_id", "tool", "arguments")}

MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [_migrate_to_1, _migrate_to_2, _migrate_to_3, _migrate_to_4,
                                                             _migrate_to_5, _migrate_to_6, _migrate_to_7, _migrate_to_8,
                                                             _migrate_to_9]


@dataclass(frozen=True)
class _Write:
    """One queued write, with what it touches: the sessions whose rows it writes, and the message nodes it adds
    as (hash, parent, row)."""

    run: Callable[[], None]
    sessions: tuple[str, ...] = ()
    nodes: tuple[tuple[str, str | None, NodeRow], ...] = ()


class _Pending:
    """The queued writes not yet committed, counted by session, and the message nodes among them. A request
    waits only for its own conversation's writes, never behind another tenant's megabyte of evidence being
    indexed, and finds queued nodes without waiting at all."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._sessions: dict[str, int] = {}
        self._nodes: dict[str, tuple[str | None, NodeRow]] = {}
        self._children: dict[str | None, set[str]] = {}  # queued nodes by parent: a fork is found in one lookup

    def add(self, write: _Write) -> None:
        with self._changed:
            for session in write.sessions:
                self._sessions[session] = self._sessions.get(session, 0) + 1
            for digest, parent, row in write.nodes:
                self._nodes[digest] = (parent, row)
                self._children.setdefault(parent, set()).add(digest)

    def done(self, writes: Sequence[_Write]) -> None:
        """Committed, or failed for good: readers stop waiting for them either way."""
        with self._changed:
            for write in writes:
                for session in write.sessions:
                    left = self._sessions[session] - 1
                    if left:
                        self._sessions[session] = left
                    else:
                        del self._sessions[session]
                for digest, parent, _ in write.nodes:
                    if self._nodes.pop(digest, None) is not None:
                        siblings = self._children[parent]
                        siblings.discard(digest)
                        if not siblings:
                            del self._children[parent]
            self._changed.notify_all()

    def wait(self, sessions: Iterable[str]) -> None:
        wanted = tuple(sessions)
        with self._changed:
            self._changed.wait_for(lambda: not any(session in self._sessions for session in wanted))

    def nodes(self, hashes: Iterable[str]) -> dict[str, NodeRow]:
        with self._changed:
            return {digest: self._nodes[digest][1] for digest in hashes if digest in self._nodes}

    def has_child(self, parent: str, other_than: str) -> bool:
        with self._changed:
            return any(child != other_than for child in self._children.get(parent, ()))


class SqliteStore:
    """All reads and writes of the sidecar store. Writes of one request happen in one transaction."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # Two connections: the writer thread owns one, readers share the other (WAL lets them run side by side).
        self._write = _connect(path)
        self.db = sqlite_utils.Database(self._write)
        self._write.execute("PRAGMA journal_mode=WAL")
        self.migrate()
        self._read = _connect(path)
        self._read_lock = threading.Lock()
        self._start_lock = threading.Lock()
        # Writes go through one background thread so requests never wait on SQLite. A crash can only lose
        # writes that the client's next request carries again (agents resend the whole history).
        self._writes: queue.Queue[_Write | None] = queue.Queue()
        self._pending = _Pending()
        self._writer: threading.Thread | None = None
        # (on success, on failure) of the writes of the batch being committed; the writer thread's alone
        self._after_commit: list[tuple[Callable[[None], None], Callable[[BaseException], None]]] = []
        self.failed_writes = 0

    # --- schema ---------------------------------------------------------------------------------------------

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

    def close(self) -> None:
        self.flush()
        if self._writer is not None:
            self._writes.put(None)
            self._writer.join(10)
            self._writer = None
        with self._read_lock:
            self._read.close()
        self._write.close()

    def flush(self, sessions: Iterable[str] | None = None) -> None:
        """Wait until every queued write is in the database, or only those of `sessions`."""
        if self._writer is None:
            return
        if sessions is None:
            self._writes.join()
        else:
            self._pending.wait(sessions)

    def _submit(self, run: Callable[[], None], sessions: tuple[str, ...] = (),
                nodes: tuple[tuple[str, str | None, NodeRow], ...] = ()) -> None:
        if self._writer is None:
            with self._start_lock:
                if self._writer is None:
                    self._writer = threading.Thread(target=self._write_loop, name="workset-store-writer", daemon=True)
                    self._writer.start()
        write = _Write(run, sessions, nodes)
        self._pending.add(write)
        self._writes.put(write)

    def _write_loop(self) -> None:
        """Writes queued meanwhile are committed together: under load one commit serves many requests, so what was
        answered reaches the file sooner. Each write is its own savepoint: one that fails is rolled back alone."""
        while True:
            batch = [self._writes.get()]
            while len(batch) < _WRITE_BATCH and batch[-1] is not None:
                try:
                    batch.append(self._writes.get_nowait())
                except queue.Empty:
                    break
            writes = [write for write in batch if write is not None]
            try:
                self._commit([write.run for write in writes])
            finally:
                self._pending.done(writes)
                for _ in batch:
                    self._writes.task_done()
            if batch[-1] is None:
                return

    def _commit(self, writes: list[Callable[[], None]]) -> None:
        if not writes:
            return
        conn = self._write
        self._after_commit = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for write in writes:
                conn.execute("SAVEPOINT one_write")
                try:
                    write()
                except Exception:  # a failed write must not stop the others; the next request re-sends the history
                    conn.execute("ROLLBACK TO one_write")
                    self.failed_writes += 1
                    get_logger().exception("store_write_failed", failed_writes=self.failed_writes)
                conn.execute("RELEASE one_write")
            conn.execute("COMMIT")
        except Exception as error:  # the commit failed (disk full, locked past busy_timeout): nothing of it is kept
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self.failed_writes += len(writes)
            get_logger().exception("store_write_failed", failed_writes=self.failed_writes)
            for _, failed in self._after_commit:
                failed(error)
            return
        for done, _ in self._after_commit:  # results are told only once they are in the file
            done(None)

    # --- sessions -------------------------------------------------------------------------------------------

    def session_by_explicit_id(self, key_hash: str, explicit_id: str) -> str | None:
        self.flush()
        with self._read_lock:
            row = self._read.execute(
                "SELECT id FROM sessions WHERE key_hash = ? AND explicit_id = ?", (key_hash, explicit_id)
            ).fetchone()
        return row[0] if row else None

    def create_session(self, session_id: str, key_hash: str, explicit_id: str | None, model: str, policy: str,
                       forked_from: str | None = None, client_id: str | None = None,
                       parent_id: str | None = None) -> None:
        now = time.time()

        def write() -> None:
            self._write.execute(
                "INSERT OR IGNORE INTO sessions (id, key_hash, explicit_id, created_at, updated_at, model, policy, messages,"
                " forked_from, client_id, parent_id) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
                (session_id, key_hash, explicit_id, now, now, model, policy, forked_from, client_id, parent_id),
            )

        self._submit(write, (session_id,))

    def session(self, session_id: str, key_hash: str) -> dict[str, Any] | None:
        self.flush()
        with self._read_lock:
            cursor = self._read.execute("SELECT * FROM sessions WHERE id = ? AND key_hash = ?", (session_id, key_hash))
            row = cursor.fetchone()
            return dict(zip([c[0] for c in cursor.description], row)) if row else None

    def sessions(self, key_hash: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        self.flush()
        query = "SELECT * FROM sessions" + (" WHERE key_hash = ?" if key_hash else "") + " ORDER BY updated_at DESC LIMIT ?"
        params: tuple[Any, ...] = (key_hash, limit) if key_hash else (limit,)
        with self._read_lock:
            cursor = self._read.execute(query, params)
            names = [c[0] for c in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]

    # --- the conversation tree ------------------------------------------------------------------------------

    def find_nodes(self, hashes: Sequence[str]) -> dict[str, NodeRow]:
        """The stored nodes among `hashes`, queued ones included (the file's row wins where both are)."""
        found = self._pending.nodes(hashes)  # first: a node committed meanwhile is then in the file
        for row in self._select_in(
                "SELECT hash, session_id, depth, tokens, ref, tool, gist, outcome, names FROM messages WHERE hash IN ({})",
                (), hashes):
            found[row[0]] = NodeRow(*row[:8], row[8] or "")
        return found

    def other_child(self, parent: str, child: str) -> bool:
        """Whether `parent` has a stored or queued child other than `child`: a conversation diverges from another
        there."""
        if self._pending.has_child(parent, child):
            return True
        with self._read_lock:
            return self._read.execute("SELECT 1 FROM messages WHERE parent = ? AND hash != ? LIMIT 1",
                                      (parent, child)).fetchone() is not None

    def record(self, scope: Scope, messages: Sequence[NewMessage], facts: Sequence[tuple[str, Fact, str | None]],
               actions: Sequence[tuple[str, Action]], model: str, policy: str, depth: int) -> None:
        """Queue one request's new nodes (of the scope's newest session) with their facts, actions and evidence,
        written in one transaction. Every session of the scope counts as updated: a session others forked from
        lives as long as they do.

        facts are (node, fact, node of the fact it supersedes on this path): both stay, the older is marked."""
        session_id = scope.sessions[-1]
        nodes = tuple((item.hash, item.parent, NodeRow(item.hash, session_id, item.depth, item.tokens, item.ref, item.tool,
                                                       item.gist, item.outcome, " ".join(item.names)))
                      for item in messages)
        self._submit(lambda: self._record(scope.sessions, messages, facts, actions, model, policy, depth),
                     scope.sessions, nodes)

    def _record(self, sessions: tuple[str, ...], messages: Sequence[NewMessage],
                facts: Sequence[tuple[str, Fact, str | None]], actions: Sequence[tuple[str, Action]], model: str,
                policy: str, depth: int) -> None:
        now = time.time()
        session_id, lineage = sessions[-1], _marks(len(sessions))
        conn = self._write  # inside the writer's batch transaction (see _commit)
        for item in messages:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO messages (hash, session_id, parent, depth, role, body, tokens, ref, tool, gist,"
                " outcome, names, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (item.hash, session_id, item.parent, item.depth, str(item.message.get("role")),
                 encode_json(item.message).decode(), item.tokens, item.ref, item.tool, item.gist, item.outcome,
                 " ".join(item.names), now),
            )
            if cursor.rowcount and item.evidence:
                conn.execute(
                    "INSERT OR IGNORE INTO evidence (session_id, ref, node, role, tool, content, tokens) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (session_id, item.ref, item.hash, str(item.message.get("role")), item.tool, item.evidence, item.tokens),
                )
        conn.executemany(
            "INSERT OR IGNORE INTO facts (session_id, node, turn, kind, key, value, evidence_ref, supersedes, superseded,"
            " source)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
            [(session_id, node, f.turn, f.kind, f.key, f.value, f.evidence_ref, older, f.source)
             for node, f, older in facts],
        )
        conn.executemany(
            f"UPDATE facts SET superseded = 1 WHERE session_id IN ({lineage}) AND node = ? AND kind = ? AND key = ?",
            [(*sessions, older, f.kind, f.key) for _, f, older in facts if older is not None],
        )
        conn.executemany(
            "INSERT OR IGNORE INTO actions (session_id, node, turn, tool, arguments, outcome, gist, call_id, evidence_ref)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(session_id, node, a.turn, a.tool, a.arguments, a.outcome, a.gist, a.call_id, a.evidence_ref)
             for node, a in actions],
        )
        conn.execute(
            "UPDATE sessions SET updated_at = ?, model = ?, policy = ?, messages = MAX(messages, ?) WHERE id = ?",
            (now, model, policy, depth, session_id),
        )
        if len(sessions) > 1:  # the sessions it forked from live as long as it does
            conn.execute(f"UPDATE sessions SET updated_at = ? WHERE id IN ({_marks(len(sessions) - 1)})",
                         (now, *sessions[:-1]))

    def path_records(self, sessions: Sequence[str], hashes: Sequence[str]) -> tuple[list[tuple[str, Fact]], list[tuple[str, Action]]]:
        """Facts and actions stored for the nodes of one path (whose nodes lie in `sessions`), with their nodes,
        in path order."""
        self.flush(sessions)
        order = {digest: index for index, digest in enumerate(hashes)}
        facts: list[tuple[int, int, str, Fact]] = []
        actions: list[tuple[int, int, str, Action]] = []
        lineage = _marks(len(sessions))
        for row in self._select_in("SELECT id, node, turn, kind, key, value, evidence_ref, source FROM facts"
                                   f" WHERE session_id IN ({lineage}) AND node IN ({{}})", tuple(sessions), hashes):
            facts.append((order[row[1]], row[0], row[1], Fact(row[3], row[4], row[5], row[2], row[6], row[7] or "")))
        for row in self._select_in("SELECT id, node, turn, tool, arguments, outcome, gist, call_id, evidence_ref"
                                   f" FROM actions WHERE session_id IN ({lineage}) AND node IN ({{}})", tuple(sessions),
                                   hashes):
            actions.append((order[row[1]], row[0], row[1], Action(row[2], row[3], row[4], row[5], row[6], row[7], row[8])))
        facts.sort(key=lambda item: (item[0], item[1]))
        actions.sort(key=lambda item: (item[0], item[1]))
        return [(node, fact) for _, _, node, fact in facts], [(node, action) for _, _, node, action in actions]

    # --- checkpoints ----------------------------------------------------------------------------------------

    def add_checkpoint(self, session_id: str, node: str, depth: int, reason: str, tokens_before: int,
                       tokens_after: int, epoch: dict[str, Any], state: dict[str, Any]) -> None:
        created = time.time()
        row = (session_id, node, depth, created, reason, tokens_before, tokens_after,
               encode_json(epoch).decode(), encode_json(state).decode())

        def write() -> None:
            self._write.execute(
                "INSERT INTO checkpoints (session_id, node, depth, created_at, reason, tokens_before, tokens_after, epoch, state)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )

        self._submit(write, (session_id,))

    def save_fold(self, session_id: str, node: str, depth: int, data: Callable[[], object]) -> None:
        """The session's folded task state through its node at `depth` (messages on the path): one per session,
        replaced at each compaction. `data()` is encoded on the writer thread, off the request's path."""

        def write() -> None:
            self._write.execute("INSERT OR REPLACE INTO folds (session_id, node, depth, data) VALUES (?, ?, ?, ?)",
                                (session_id, node, depth, encode_json(data()).decode()))

        self._submit(write, (session_id,))

    def fold_on_path(self, sessions: Sequence[str], hashes: Sequence[str]) -> tuple[int, Any] | None:
        """The deepest saved fold of these sessions whose node lies on this path: (its depth, its data)."""
        self.flush(sessions)
        with self._read_lock:
            rows = self._read.execute(f"SELECT session_id, depth, node FROM folds WHERE session_id IN"
                                      f" ({_marks(len(sessions))}) ORDER BY depth DESC", tuple(sessions)).fetchall()
            on_path = next(((session, depth) for session, depth, node in rows
                            if 0 < depth <= len(hashes) and hashes[depth - 1] == node), None)
            if on_path is None:
                return None
            data = self._read.execute("SELECT data FROM folds WHERE session_id = ?", (on_path[0],)).fetchone()[0]
        return on_path[1], orjson.loads(data)

    def latest_checkpoint_on_path(self, sessions: Sequence[str], hashes: Sequence[str]) -> dict[str, Any] | None:
        """The deepest compaction whose tip lies on this path (whose nodes lie in `sessions`)."""
        self.flush(sessions)
        best: tuple[int, int, str] | None = None
        lineage = _marks(len(sessions))
        for row in self._select_in(f"SELECT depth, id, epoch FROM checkpoints WHERE session_id IN ({lineage})"
                                   " AND node IN ({})", tuple(sessions), hashes):
            if best is None or (row[0], row[1]) > (best[0], best[1]):
                best = row
        return orjson.loads(best[2]) if best else None

    def epoch_at(self, session_id: str, node: str) -> dict[str, Any] | None:
        """The epoch of the session's newest compaction whose tip is `node`."""
        rows = self._rows("SELECT epoch FROM checkpoints WHERE session_id = ? AND node = ? ORDER BY id DESC LIMIT 1",
                          (session_id, node), (session_id,))
        return orjson.loads(rows[0]["epoch"]) if rows else None

    def checkpoints(self, session_id: str) -> list[dict[str, Any]]:
        self.flush()
        with self._read_lock:
            cursor = self._read.execute(
                "SELECT id, node, depth, created_at, reason, tokens_before, tokens_after, epoch, state FROM checkpoints"
                " WHERE session_id = ? ORDER BY id",
                (session_id,),
            )
            names = [c[0] for c in cursor.description]
            rows = [dict(zip(names, row)) for row in cursor.fetchall()]
        for row in rows:
            row["epoch"], row["state"] = orjson.loads(row["epoch"]), orjson.loads(row["state"])
        return rows

    # --- evidence -------------------------------------------------------------------------------------------

    def evidence(self, scope: Scope, ref: str) -> dict[str, Any] | None:
        """The content stored under `ref` within the scope (refs are unique within a session)."""
        self.flush(scope.sessions)
        with self._read_lock:
            cursor = self._read.execute(
                "SELECT ref, node, role, tool, content, tokens, session_id FROM evidence WHERE session_id IN ({}) AND"
                " ref = ?".format(_marks(len(scope.sessions))),
                (*scope.sessions, ref),
            )
            names = [c[0] for c in cursor.description]
            rows = [dict(zip(names, row)) for row in cursor.fetchall()]
        return next((row for row in rows if scope.holds(row.pop("session_id"), row["node"])), None)

    def turn(self, scope: Scope, node: str) -> StoredTurn | None:
        """The assistant message at `node` (within the scope) with what answers it: the tool messages on the
        paths below it, as deep as it made calls (parallel calls' results follow one another), or, when it made
        none, an observation sent in the user role as its child (ingest read it as a tool output: its tool is set).
        Branches forking below the message are all walked, newest first (a retried call's latest result is the
        one that counts); each step is a lookup by parent, never a scan of the session. None when the node is not an
        assistant message of the scope."""
        self.flush(scope.sessions)
        with self._read_lock:
            row = self._read.execute(
                "SELECT depth, role, body, session_id FROM messages WHERE hash = ?", (node,)
            ).fetchone()
            if row is None or row[1] != "assistant" or not scope.holds(row[3], node):
                return None
            message = orjson.loads(row[2])
            calls = len(message.get("tool_calls") or ()) + isinstance(message.get("function_call"), dict)
            roles = ("tool", "function") if calls else ("user", "user")
            rows = self._read.execute(
                "WITH RECURSIVE below(hash, depth, level) AS ("
                " SELECT ?, ?, 0"
                " UNION ALL SELECT m.hash, m.depth, below.level + 1 FROM below CROSS JOIN messages m"
                " WHERE below.level < ? AND m.parent = below.hash"
                " AND m.role IN (?, ?) AND m.tool != '')"
                " SELECT m.ref, m.role, m.tool, json_extract(m.body, '$.tool_call_id'), e.content, m.hash, m.session_id"
                " FROM below CROSS JOIN messages m ON m.hash = below.hash"
                " LEFT JOIN evidence e ON e.session_id = m.session_id AND e.ref = m.ref"
                " WHERE below.level > 0 ORDER BY m.rowid DESC",
                (node, row[0], max(1, calls), *roles),
            ).fetchall()
        answers = tuple(Answer(ref, role, tool, str(call_id or ""), content or "")
                        for ref, role, tool, call_id, content, below, session in rows if scope.holds(session, below))
        return StoredTurn(message, answers)

    def search_evidence(self, scope: Scope, query: str, limit: int = 5, fresh: bool = True) -> list[dict[str, Any]]:
        """Best full-text matches (BM25) within the scope: its sessions, and for an implicit session only what its
        own conversation stored; fresh=False skips waiting for queued writes.

        The full-text index splits words at spaces, so a CJK word inside a run of CJK text is not one of its
        words: such words are also looked for as substrings, in this session's content only."""
        if fresh:
            self.flush(scope.sessions)
        words = query_words(query.replace('"', " "))
        if not words:
            return []
        # Only the request's own conversation, when given: filtered in SQL, so that another conversation's better
        # matches cannot crowd its own out of the limit.
        path = scope.path
        in_sessions = _marks(len(scope.sessions))
        on_path = " AND {node} IN (SELECT value FROM json_each(?))" if path is not None else ""
        path_args: tuple[str, ...] = (*scope.sessions, *((orjson.dumps(list(path)).decode(),) if path is not None else ()))
        with self._read_lock:
            cursor = self._read.execute(
                "SELECT evidence.ref, evidence.tool, evidence.role, evidence.content, bm25(evidence_fts) AS rank"
                " FROM evidence_fts JOIN evidence ON evidence.id = evidence_fts.rowid"
                f" WHERE evidence_fts MATCH ? AND evidence.session_id IN ({in_sessions})"
                + on_path.format(node="evidence.node") + " ORDER BY rank LIMIT ?",
                (" OR ".join(f'"{word}"' for word in words), *path_args, limit),
            )
            names = [c[0] for c in cursor.description]
            hits = [dict(zip(names, row)) for row in cursor.fetchall()]
            cjk = [word for word in words if has_cjk(word)]
            if cjk and len(hits) < limit:
                found = {hit["ref"] for hit in hits}
                cursor = self._read.execute(
                    f"SELECT ref, tool, role, content FROM evidence WHERE session_id IN ({in_sessions})"
                    + on_path.format(node="node") + " AND (" + " OR ".join("instr(lower(content), ?) > 0" for _ in cjk)
                    + ") ORDER BY id DESC LIMIT ?",
                    (*path_args, *cjk, limit + len(found)),
                )
                names = [c[0] for c in cursor.description]
                more = (dict(zip(names, row)) for row in cursor.fetchall())
                hits += [hit for hit in more if hit["ref"] not in found][:limit - len(hits)]
        return hits

    def facts(self, session_id: str, limit: int = 1000) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM facts WHERE session_id = ? ORDER BY id LIMIT ?", (session_id, limit),
                          (session_id,))

    def actions(self, session_id: str, limit: int = 1000) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM actions WHERE session_id = ? ORDER BY id LIMIT ?", (session_id, limit),
                          (session_id,))

    def _select_in(self, query: str, params: tuple[Any, ...], keys: Sequence[str]) -> list[tuple[Any, ...]]:
        """Rows of `query`, whose `IN ({})` takes `keys` a chunk at a time (SQLite caps host parameters)."""
        rows: list[tuple[Any, ...]] = []
        with self._read_lock:
            for chunk in _chunks(keys):
                rows.extend(self._read.execute(query.format(_marks(len(chunk))), (*params, *chunk)))
        return rows

    def _rows(self, query: str, params: tuple[Any, ...], sessions: Collection[str] | None = None) -> list[dict[str, Any]]:
        """Rows as dicts, once the queued writes are in: those of `sessions` only, when the query reads only theirs
        (a reader never waits behind another tenant's writes), else all."""
        self.flush(sessions)
        with self._read_lock:
            cursor = self._read.execute(query, params)
            names = [c[0] for c in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]

    # --- inspection and retention -----------------------------------------------------------------------------

    def find_sessions(self, ident: str, key_hash: str | None = None) -> list[dict[str, Any]]:
        """Sessions whose internal, explicit or client id is `ident`, of one key (None: every key, for the local CLI);
        an internal-id match first, then the most recently updated."""
        scope = " AND key_hash = ?" if key_hash is not None else ""
        params: tuple[Any, ...] = (ident, ident, ident) + ((key_hash,) if key_hash is not None else ()) + (ident,)
        return self._rows(
            f"SELECT * FROM sessions WHERE (id = ? OR explicit_id = ? OR client_id = ?){scope}"
            " ORDER BY id = ? DESC, updated_at DESC",
            params,
        )

    # --- recall answers for a conversation's next request ----------------------------------------------------

    def add_pending_recall(self, session_id: str, texts: Sequence[str]) -> None:
        now = time.time()
        rows = [(session_id, text, now) for text in texts]

        def write() -> None:
            self._write.executemany("INSERT INTO pending_recall (session_id, text, created_at) VALUES (?, ?, ?)", rows)

        self._submit(write, (session_id,))

    def take_pending_recall(self, session_id: str) -> list[str]:
        """The session's waiting answers, oldest first, and gone from the store (a request of a conversation is
        served by one worker at a time: its branch is claimed)."""
        rows = self._rows("SELECT id, text FROM pending_recall WHERE session_id = ? ORDER BY id", (session_id,),
                          (session_id,))
        if rows:
            ids = [row["id"] for row in rows]

            def write() -> None:
                self._write.execute(f"DELETE FROM pending_recall WHERE id IN ({_marks(len(ids))})", ids)

            self._submit(write, (session_id,))
        return [row["text"] for row in rows]

    # --- turns: decision records and accounting -------------------------------------------------------------

    def add_turn(self, session_id: str, row: Callable[[], dict[str, Any]], made: dict[str, bytes]) -> None:
        """A forwarded request's row, numbered in its session as it is written, and the messages workset wrote for it
        that the session does not hold yet. `row()` is called on the writer thread (it may parse an answer)."""
        shown = [(session_id, key, body.decode()) for key, body in made.items()]

        def write() -> None:
            figures = row()
            names = ["session_id", "created_at", *figures]
            self._write.execute(
                f"INSERT INTO turns (n, {', '.join(names)}) SELECT coalesce(max(n), 0) + 1, {_marks(len(names))}"
                " FROM turns WHERE session_id = ?", (session_id, time.time(), *figures.values(), session_id))
            if shown:
                self._write.executemany("INSERT OR IGNORE INTO shown (session_id, hash, body) VALUES (?, ?, ?)", shown)

        self._submit(write, (session_id,))

    def turns(self, session_id: str, columns: Sequence[str], first: int = 1, last: int | None = None) -> list[dict[str, Any]]:
        """Rows of a session's forwarded requests numbered first..last, in order: only `columns` (records are
        large; a session page of 2,000 turns reads figures only)."""
        upper = " AND n <= ?" if last is not None else ""
        params: tuple[Any, ...] = (session_id, first) + ((last,) if last is not None else ())
        return self._rows(f"SELECT {', '.join(columns)} FROM turns WHERE session_id = ? AND n >= ?{upper} ORDER BY n",
                          params, (session_id,))

    def turn_count(self, session_id: str) -> int:
        rows = self._rows("SELECT max(n) AS n FROM turns WHERE session_id = ?", (session_id,), (session_id,))
        return int(rows[0]["n"] or 0) if rows else 0

    def shown_messages(self, session_id: str, keys: Sequence[str]) -> dict[str, Any]:
        """The messages workset wrote, by storage key (parsed)."""
        rows = self._select_in("SELECT hash, body FROM shown WHERE session_id = ? AND hash IN ({})", (session_id,),
                               keys)
        return {digest: orjson.loads(body) for digest, body in rows}

    def turn_totals(self, key_hash: str | None = None, since: float = 0.0, limit: int = 100) -> list[dict[str, Any]]:
        """Per session, the sums of its requests since `since` (epoch seconds), most recently active first: the
        savings table (of one key, or of all keys when None)."""
        scope = " AND s.key_hash = ?" if key_hash is not None else ""
        return self._rows(
            "SELECT s.id, s.explicit_id, s.client_id, s.model, s.policy, s.messages, count(*) AS turns,"
            " sum(t.tokens_original) AS tokens_original, sum(t.tokens_sent) AS tokens_sent,"
            " sum(t.input_tokens) AS input_tokens, sum(t.cached_tokens) AS cached_tokens,"
            " sum(t.cache_write_tokens) AS cache_write_tokens, sum(t.whole_tokens) AS whole_tokens,"
            " sum(t.whole_cached_tokens) AS whole_cached_tokens, sum(t.cost) AS cost, sum(t.cost_whole) AS cost_whole,"
            " count(t.cost) AS priced, sum(t.compaction != '') AS compactions, sum(t.reported) AS reported,"
            " min(t.created_at) AS first_at, max(t.created_at) AS last_at"
            f" FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.created_at >= ?{scope}"
            " GROUP BY s.id ORDER BY last_at DESC LIMIT ?",
            (since,) + ((key_hash,) if key_hash is not None else ()) + (limit,))

    def latest_tip(self, session_id: str) -> str | None:
        """The node most recently written in the session (deepest on ties): the tip of its current branch."""
        rows = self._rows(
            "SELECT hash FROM messages WHERE session_id = ? ORDER BY created_at DESC, depth DESC LIMIT 1", (session_id,)
        )
        return rows[0]["hash"] if rows else None

    def path_to(self, node: str) -> list[dict[str, Any]]:
        """The nodes from the root to `node`, in order, each with its message (`message`, parsed)."""
        rows = self._rows(
            "WITH RECURSIVE path(hash, parent) AS ("
            " SELECT hash, parent FROM messages WHERE hash = ?"
            " UNION ALL SELECT m.hash, m.parent FROM messages m JOIN path ON m.hash = path.parent)"
            " SELECT m.hash, m.session_id, m.depth, m.role, m.body, m.tokens, m.ref FROM path"
            " JOIN messages m ON m.hash = path.hash ORDER BY m.depth",
            (node,),
        )
        for row in rows:
            row["message"] = orjson.loads(row.pop("body"))
        return rows

    def evidence_by_ref(self, ref: str, key_hash: str | None = None) -> dict[str, Any] | None:
        """The evidence stored under `ref` in any session of one key (None: every key, for the local CLI)."""
        # A ref is the first REF_LENGTH hex digits of its node's hash: a range on the messages primary key finds the
        # node without scanning the evidence table (its index starts with session_id). CROSS JOIN keeps that
        # order: SQLite's planner, without statistics, would rather walk every session of the key.
        scope = " AND s.key_hash = ?" if key_hash is not None else ""
        rows = self._rows(
            "SELECT e.ref, e.session_id AS session, e.role, e.tool, e.content, e.tokens FROM messages m"
            " CROSS JOIN evidence e ON e.session_id = m.session_id AND e.ref = ?"
            " CROSS JOIN sessions s ON s.id = m.session_id"
            f" WHERE m.hash >= ? AND m.hash < ?{scope} ORDER BY e.id LIMIT 1",
            (ref, ref, ref + "~") + ((key_hash,) if key_hash is not None else ()),
        )
        return rows[0] if rows else None

    def delete_sessions_before(self, cutoff: float) -> list[str]:
        """Delete whole sessions last updated before `cutoff` (epoch seconds), with everything they own, in one
        transaction; the ids deleted (the evidence FTS index follows through sqlite-utils' triggers)."""
        return self._call(lambda: self._delete_sessions_before(cutoff))

    def _delete_sessions_before(self, cutoff: float) -> list[str]:
        conn = self._write  # inside the writer's batch transaction (see _commit)
        # A session others forked from holds the beginning they read: it goes only with them. (Their requests
        # keep it updated too; this guards against clocks and hand edits.)
        ids = [row[0] for row in conn.execute(
            "SELECT id FROM sessions WHERE updated_at < ? AND id NOT IN"
            " (SELECT forked_from FROM sessions WHERE forked_from IS NOT NULL AND updated_at >= ?)",
            (cutoff, cutoff))]
        for chunk in _chunks(ids):
            marks = _marks(len(chunk))
            for table in ("messages", "facts", "actions", "evidence", "checkpoints", "folds", "turns", "shown",
                          "pending_recall"):
                conn.execute(f"DELETE FROM {table} WHERE session_id IN ({marks})", chunk)
            conn.execute(f"DELETE FROM sessions WHERE id IN ({marks})", chunk)
        return ids

    def _call(self, write: Callable[[], T]) -> T:
        """Run a write on the writer thread, after the writes queued before it, and return its result."""
        done: Future[T] = Future()

        def run() -> None:
            try:
                result = write()
            except BaseException as error:
                done.set_exception(error)
                raise
            self._after_commit.append((lambda _: done.set_result(result), done.set_exception))

        self._submit(run)
        return done.result()

    # --- figures for /metrics ------------------------------------------------------------------------------

    def queued_writes(self) -> int:
        """Writes waiting for the writer thread (a growing number: SQLite cannot keep up)."""
        return self._writes.qsize()

    def size_bytes(self) -> int:
        """The database file and its write-ahead log on disk (0 for an in-memory store)."""
        total = 0
        for path in (self.path, self.path.with_name(self.path.name + "-wal")):
            try:
                total += path.stat().st_size
            except OSError:  # no such file (yet), or in memory
                pass
        return total


def _connect(path: str | Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA synchronous=NORMAL")  # with WAL: durable at checkpoints, no fsync per commit
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


def _marks(count: int) -> str:
    """Placeholders for `count` parameters of an IN (...) list."""
    return ",".join("?" * count)


def _chunks(items: Sequence[str]) -> Iterable[list[str]]:
    items = list(items)
    for start in range(0, len(items), _IN_CHUNK):
        yield items[start:start + _IN_CHUNK]
