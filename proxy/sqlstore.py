"""What the store's SQL backends share (proxy.store: SQLite; proxy.pgstore: PostgreSQL): every query of the Store
protocol, written once with `?` placeholders and the few fragments a dialect spells its own way, over the write
queue (proxy.writequeue). A backend supplies its connections, its schema and its full-text search.

Tables: sessions, messages (the conversation tree, one row per node), facts (the key-facts ledger), actions,
evidence (full contents under a stable ref, full-text indexed), checkpoints (one per compaction), folds, turns and
shown (decision records), pending_recall, summaries (background summary jobs and their results). Nothing is
deleted when it leaves the working set.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Callable, Iterable, Sequence

import orjson

from .jsonbytes import encode_json, encode_message
from .passages import has_cjk, query_words
from .records import Action, Fact
from .storage import SUMMED_COUNTS, Answer, NewMessage, NodeRow, Scope, StoredTurn
from .writequeue import WriteQueue

SCHEMA_VERSION = 11
IN_CHUNK = 500  # host parameters per IN (...) query

# what identifies a fact or an action a message yielded (the unique keys of ingest)
UNIQUE_YIELDS = {"facts": ("session_id", "node", "kind", "key", "value"),
                 "actions": ("session_id", "node", "call_id", "tool", "arguments")}

# the tables that hold a session's rows, deleted with it
SESSION_TABLES = ("messages", "facts", "actions", "evidence", "checkpoints", "folds", "turns", "shown", "pending_recall",
                  "summaries")


class SqlStore:
    """All reads and writes of the sidecar store. Writes of one request happen in one transaction."""

    # How the dialect spells what SQL does not fix (SQLite's spellings; a backend overrides them):
    CROSS_JOIN = "CROSS JOIN"  # a join the planner must keep in the written order (SQLite without statistics)
    NEWEST = "m.rowid"  # a message row's insertion order
    JSON_LIST = "json_each(?)"  # the rows (column `value`) of a JSON array given as text
    CALL_ID = "json_extract(m.body, '$.tool_call_id')"  # a stored message's tool_call_id
    # a JSON text given as its UTF-8 bytes, as encode_json writes it: not decoded into a str for the driver to
    # encode back (4 ms of the interpreter lock for a megabyte of Chinese, on the writer thread)
    JSON_TEXT = "CAST(? AS TEXT)"
    CONTAINS = "instr(lower(content), ?) > 0"  # a stored content contains a lower-case word
    # full-text search: where matches come from (evidence as e; the one ? is the query), what matches, and the
    # rank, lowest best (FTS5's BM25 over a porter-stemmed index)
    MATCH_FROM = "evidence_fts JOIN evidence e ON e.id = evidence_fts.rowid"
    MATCH_WHERE = "evidence_fts MATCH ?"
    MATCH_RANK = "bm25(evidence_fts)"
    # after a SELECT on the writer: rows another transaction has locked are passed over, not waited for (SQLite
    # has one writer: nothing to pass over)
    SKIP_LOCKED = ""
    # Whether other processes share this store (replicas): then a session's cached state is checked against the
    # store before each request, and writes are made durable before the answer that follows them.
    shared = False

    def __init__(self, queue: WriteQueue) -> None:
        self.queue = queue
        self._read_scope = threading.local()  # see reads_waiting_for

    # --- what a backend supplies ------------------------------------------------------------------------------

    def _fetch(self, query: str, params: Sequence[Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Column names and rows of a read."""
        raise NotImplementedError

    def _exec(self, query: str, params: Sequence[Any] = ()) -> int:
        """A statement on the writer's connection (inside its batch transaction); rows it changed."""
        raise NotImplementedError

    def _exec_many(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    def _exec_rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """A read on the writer's connection, inside its batch transaction."""
        raise NotImplementedError

    def _match_query(self, words: list[str]) -> str:
        """The full-text query for any of `words`."""
        return " OR ".join(f'"{word}"' for word in words)

    def exclusive(self, name: str) -> AbstractContextManager[None]:
        """Held by one process at a time among those sharing the store (nothing to hold for one process)."""
        return nullcontext()

    def unavailable(self, probe: bool = False) -> str:
        """Why the store does not answer now ("" when it does; a backend behind a network may be cut off)."""
        return ""

    def came_back(self) -> None:
        """The backend found the store answering again after it was down: the writes kept meanwhile are queued
        again."""
        self.queue.replay()

    def on_lost_writes(self, listener: Callable[[set[str]], None]) -> None:
        self.queue.on_failed = listener

    # --- the write queue ------------------------------------------------------------------------------------

    def flush(self, sessions: Collection[str] | None = None, tables: Collection[str] | None = None) -> None:
        """Wait until every queued write is in the database, or only those of `sessions` (to `tables`, when given:
        a read of those tables waits for nothing else, neither its conversation's ledger nor another tenant's
        megabyte)."""
        if sessions is None:
            sessions = getattr(self._read_scope, "sessions", None)
        self.queue.flush(sessions, tables)

    @contextmanager
    def reads_waiting_for(self, sessions: Collection[str] | None) -> Iterator[None]:
        """In this block, on this thread, a read that would wait for every queued write waits only for those of
        `sessions` (None: for every write, as outside it): a view of one key's sessions needs that key's writes
        in, not another tenant's megabytes, which may be indexed long after."""
        outer = getattr(self._read_scope, "sessions", None)
        self._read_scope.sessions = None if sessions is None else tuple(sessions)
        try:
            yield
        finally:
            self._read_scope.sessions = outer

    def queued_writes(self) -> int:
        """Writes waiting for the writer thread (a growing number: the database cannot keep up)."""
        return self.queue.qsize()

    def large_backlog(self) -> int:
        return self.queue.large_backlog()

    @property
    def failed_writes(self) -> int:
        return self.queue.failed_writes

    def _submit(self, run: Callable[[], None], sessions: tuple[str, ...] = (), tables: tuple[str, ...] = (),
                nodes: tuple[tuple[str, str | None, NodeRow], ...] = (), size: int = 0) -> None:
        """Queue a write of `sessions`' rows in `tables` (what readers of those tables wait for), carrying `size`
        characters of evidence."""
        self.queue.submit(run, sessions, nodes, tables=tables, size=size)

    # --- sessions -------------------------------------------------------------------------------------------

    def create_session(self, session_id: str, key_hash: str, explicit_id: str | None, model: str, policy: str,
                       forked_from: str | None = None, client_id: str | None = None,
                       parent_id: str | None = None) -> None:
        now = time.time()

        def write() -> None:
            self._exec(
                "INSERT INTO sessions (id, key_hash, explicit_id, created_at, updated_at, model, policy, messages,"
                " forked_from, client_id, parent_id) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?) ON CONFLICT DO NOTHING",
                (session_id, key_hash, explicit_id, now, now, model, policy, forked_from, client_id, parent_id),
            )

        self._submit(write, (session_id,), ("sessions",))

    def session(self, session_id: str, key_hash: str) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM sessions WHERE id = ? AND key_hash = ?", (session_id, key_hash))
        return rows[0] if rows else None

    def sessions(self, key_hash: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        query = "SELECT * FROM sessions" + (" WHERE key_hash = ?" if key_hash else "") + " ORDER BY updated_at DESC LIMIT ?"
        params: tuple[Any, ...] = (key_hash, limit) if key_hash else (limit,)
        return self._rows(query, params)

    # --- the conversation tree ------------------------------------------------------------------------------

    def find_nodes(self, hashes: Sequence[str]) -> dict[str, NodeRow]:
        """The stored nodes among `hashes`, queued ones included (the file's row wins where both are)."""
        found = self.queue.pending.nodes(hashes)  # first: a node committed meanwhile is then in the database
        for row in self._select_in(
                "SELECT hash, session_id, depth, tokens, ref, tool, gist, outcome, names FROM messages WHERE hash IN ({})",
                (), hashes):
            found[row[0]] = NodeRow(*row[:8], row[8] or "")
        return found

    def other_child(self, parent: str, child: str) -> bool:
        """Whether `parent` has a stored or queued child other than `child`: a conversation diverges from another
        there."""
        if self.queue.pending.has_child(parent, child):
            return True
        return bool(self._fetch("SELECT 1 FROM messages WHERE parent = ? AND hash != ? LIMIT 1", (parent, child))[1])

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
                     scope.sessions, ("messages", "evidence", "facts", "actions", "sessions"), nodes,
                     sum(len(item.evidence or "") for item in messages))

    def _record(self, sessions: tuple[str, ...], messages: Sequence[NewMessage],
                facts: Sequence[tuple[str, Fact, str | None]], actions: Sequence[tuple[str, Action]], model: str,
                policy: str, depth: int) -> None:
        now = time.time()
        session_id, lineage = sessions[-1], marks(len(sessions))
        for item in messages:
            added = self._exec(
                "INSERT INTO messages (hash, session_id, parent, depth, role, body, tokens, ref, tool, gist,"
                f" outcome, names, created_at) VALUES (?, ?, ?, ?, ?, {self.JSON_TEXT}, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (item.hash, session_id, item.parent, item.depth, str(item.message.get("role")),
                 encode_message(item.message), item.tokens, item.ref, item.tool, item.gist, item.outcome,
                 " ".join(item.names), now),
            )
            if added and item.evidence:
                self._exec(
                    "INSERT INTO evidence (session_id, ref, node, role, tool, content, tokens)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (session_id, item.ref, item.hash, str(item.message.get("role")), item.tool, item.evidence, item.tokens),
                )
        self._exec_many(
            "INSERT INTO facts (session_id, node, turn, kind, key, value, evidence_ref, supersedes, superseded, source)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?) ON CONFLICT DO NOTHING",
            [(session_id, node, f.turn, f.kind, f.key, f.value, f.evidence_ref, older, f.source)
             for node, f, older in facts],
        )
        self._exec_many(
            f"UPDATE facts SET superseded = 1 WHERE session_id IN ({lineage}) AND node = ? AND kind = ? AND key = ?",
            [(*sessions, older, f.kind, f.key) for _, f, older in facts if older is not None],
        )
        self._exec_many(
            "INSERT INTO actions (session_id, node, turn, tool, arguments, outcome, gist, call_id, evidence_ref)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [(session_id, node, a.turn, a.tool, a.arguments, a.outcome, a.gist, a.call_id, a.evidence_ref)
             for node, a in actions],
        )
        self._exec(
            "UPDATE sessions SET updated_at = ?, model = ?, policy = ?,"
            " messages = CASE WHEN messages > ? THEN messages ELSE ? END WHERE id = ?",
            (now, model, policy, depth, depth, session_id),
        )
        if len(sessions) > 1:  # the sessions it forked from live as long as it does
            self._exec(f"UPDATE sessions SET updated_at = ? WHERE id IN ({marks(len(sessions) - 1)})",
                       (now, *sessions[:-1]))

    def path_records(self, sessions: Sequence[str], hashes: Sequence[str]) -> tuple[list[tuple[str, Fact]], list[tuple[str, Action]]]:
        """Facts and actions stored for the nodes of one path (whose nodes lie in `sessions`), with their nodes,
        in path order."""
        self.flush(sessions, ("facts", "actions"))
        order = {digest: index for index, digest in enumerate(hashes)}
        facts: list[tuple[int, int, str, Fact]] = []
        actions: list[tuple[int, int, str, Action]] = []
        lineage = marks(len(sessions))
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
            self._exec(
                "INSERT INTO checkpoints (session_id, node, depth, created_at, reason, tokens_before, tokens_after, epoch, state)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            self._exec("UPDATE sessions SET version = version + 1 WHERE id = ?", (session_id,))

        self._submit(write, (session_id,), ("checkpoints", "sessions"))

    def save_fold(self, session_id: str, node: str, depth: int, data: Callable[[], object]) -> None:
        """The session's folded task state through its node at `depth` (messages on the path): one per session,
        replaced at each compaction. `data()` is encoded on the writer thread, off the request's path."""

        def write() -> None:
            self._exec("INSERT INTO folds (session_id, node, depth, data) VALUES (?, ?, ?, ?) ON CONFLICT (session_id)"
                       " DO UPDATE SET node = excluded.node, depth = excluded.depth, data = excluded.data",
                       (session_id, node, depth, encode_json(data()).decode()))

        self._submit(write, (session_id,), ("folds",))

    def fold_on_path(self, sessions: Sequence[str], hashes: Sequence[str]) -> tuple[int, Any] | None:
        """The deepest saved fold of these sessions whose node lies on this path: (its depth, its data)."""
        self.flush(sessions, ("folds",))
        rows = self._fetch(f"SELECT session_id, depth, node FROM folds WHERE session_id IN ({marks(len(sessions))})"
                           " ORDER BY depth DESC", tuple(sessions))[1]
        on_path = next(((session, depth) for session, depth, node in rows
                        if 0 < depth <= len(hashes) and hashes[depth - 1] == node), None)
        if on_path is None:
            return None
        data = self._fetch("SELECT data FROM folds WHERE session_id = ?", (on_path[0],))[1]
        return (on_path[1], orjson.loads(data[0][0])) if data else None

    def latest_checkpoint_on_path(self, sessions: Sequence[str], hashes: Sequence[str]) -> dict[str, Any] | None:
        """The deepest compaction whose tip lies on this path (whose nodes lie in `sessions`)."""
        self.flush(sessions, ("checkpoints",))
        best: tuple[int, int, str] | None = None
        lineage = marks(len(sessions))
        for row in self._select_in(f"SELECT depth, id, epoch FROM checkpoints WHERE session_id IN ({lineage})"
                                   " AND node IN ({})", tuple(sessions), hashes):
            if best is None or (row[0], row[1]) > (best[0], best[1]):
                best = row
        return orjson.loads(best[2]) if best else None

    def epoch_at(self, session_id: str, node: str) -> dict[str, Any] | None:
        """The epoch of the session's newest compaction whose tip is `node`."""
        rows = self._rows("SELECT epoch FROM checkpoints WHERE session_id = ? AND node = ? ORDER BY id DESC LIMIT 1",
                          (session_id, node), (session_id,), ("checkpoints",))
        return orjson.loads(rows[0]["epoch"]) if rows else None

    def session_version(self, session_id: str) -> int:
        """Bumped by each compaction of the session (0 before the first)."""
        rows = self._rows("SELECT version FROM sessions WHERE id = ?", (session_id,), (session_id,), ("sessions",))
        return int(rows[0]["version"] or 0) if rows else 0

    def checkpoints(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._rows(
            "SELECT id, node, depth, created_at, reason, tokens_before, tokens_after, epoch, state FROM checkpoints"
            " WHERE session_id = ? ORDER BY id", (session_id,), (session_id,), ("checkpoints",))
        for row in rows:
            row["epoch"], row["state"] = orjson.loads(row["epoch"]), orjson.loads(row["state"])
        return rows

    # --- evidence -------------------------------------------------------------------------------------------

    def evidence(self, scope: Scope, ref: str) -> dict[str, Any] | None:
        """The content stored under `ref` within the scope (refs are unique within a session)."""
        rows = self._rows(
            f"SELECT ref, node, role, tool, content, tokens, session_id FROM evidence WHERE session_id IN"
            f" ({marks(len(scope.sessions))}) AND ref = ?", (*scope.sessions, ref), scope.sessions, ("evidence",))
        return next((row for row in rows if scope.holds(row.pop("session_id"), row["node"])), None)

    def turn(self, scope: Scope, node: str) -> StoredTurn | None:
        """The assistant message at `node` (within the scope) with what answers it: the tool messages on the
        paths below it, as deep as it made calls (parallel calls' results follow one another), or, when it made
        none, an observation sent in the user role as its child (ingest read it as a tool output: its tool is set).
        Branches forking below the message are all walked, newest first (a retried call's latest result is the
        one that counts); each step is a lookup by parent, never a scan of the session. None when the node is not an
        assistant message of the scope."""
        self.flush(scope.sessions, ("messages", "evidence"))
        found = self._fetch("SELECT depth, role, body, session_id FROM messages WHERE hash = ?", (node,))[1]
        if not found or found[0][1] != "assistant" or not scope.holds(found[0][3], node):
            return None
        body = found[0][2]
        message = orjson.loads(body)
        calls = len(message.get("tool_calls") or ()) + isinstance(message.get("function_call"), dict)
        roles = ("tool", "function") if calls else ("user", "user")
        rows = self._fetch(
            "WITH RECURSIVE below(hash, depth, level) AS ("
            " SELECT hash, depth, 0 FROM messages WHERE hash = ?"
            f" UNION ALL SELECT m.hash, m.depth, below.level + 1 FROM below {self.CROSS_JOIN} messages m"
            " ON m.parent = below.hash WHERE below.level < ? AND m.role IN (?, ?) AND m.tool != '')"
            f" SELECT m.ref, m.role, m.tool, {self.CALL_ID}, e.content, m.hash, m.session_id"
            f" FROM below {self.CROSS_JOIN} messages m ON m.hash = below.hash"
            " LEFT JOIN evidence e ON e.session_id = m.session_id AND e.ref = m.ref"
            f" WHERE below.level > 0 ORDER BY {self.NEWEST} DESC",
            (node, max(1, calls), *roles),
        )[1]
        answers = tuple(Answer(ref, role, tool, str(call_id or ""), content or "")
                        for ref, role, tool, call_id, content, below, session in rows if scope.holds(session, below))
        return StoredTurn(message, answers)

    def search_evidence(self, scope: Scope, query: str, limit: int = 5, fresh: bool = True) -> list[dict[str, Any]]:
        """Best full-text matches (BM25) within the scope: its sessions, and for an implicit session only what its
        own conversation stored; fresh=False skips waiting for queued writes.

        The full-text index splits words at spaces, so a CJK word inside a run of CJK text is not one of its
        words: such words are also looked for as substrings, in this session's content only."""
        if fresh:
            self.flush(scope.sessions, ("evidence",))
        words = query_words(query.replace('"', " "))
        if not words:
            return []
        # Only the request's own conversation, when given: filtered in SQL, so that another conversation's better
        # matches cannot crowd its own out of the limit.
        path = scope.path
        on_path = f" AND {{node}} IN (SELECT value FROM {self.JSON_LIST})" if path is not None else ""
        path_args: tuple[str, ...] = (*scope.sessions, *((orjson.dumps(list(path)).decode(),) if path is not None else ()))
        # (the reads below never wait for queued writes: `fresh` decided that above)
        in_sessions = marks(len(scope.sessions))
        hits = self._dicts(
            f"SELECT e.ref, e.tool, e.role, e.content, {self.MATCH_RANK} AS rank FROM {self.MATCH_FROM}"
            f" WHERE {self.MATCH_WHERE} AND e.session_id IN ({in_sessions})" + on_path.format(node="e.node")
            + " ORDER BY rank, e.id LIMIT ?", (self._match_query(words), *path_args, limit))
        cjk = [word for word in words if has_cjk(word)]
        if cjk and len(hits) < limit:
            found = {hit["ref"] for hit in hits}
            more = self._dicts(
                f"SELECT ref, tool, role, content FROM evidence WHERE session_id IN ({in_sessions})"
                + on_path.format(node="node") + " AND (" + " OR ".join(self.CONTAINS for _ in cjk)
                + ") ORDER BY id DESC LIMIT ?", (*path_args, *cjk, limit + len(found)))
            hits += [hit for hit in more if hit["ref"] not in found][:limit - len(hits)]
        return hits

    def facts(self, session_id: str, limit: int = 1000) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM facts WHERE session_id = ? ORDER BY id LIMIT ?", (session_id, limit),
                          (session_id,), ("facts",))

    def actions(self, session_id: str, limit: int = 1000) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM actions WHERE session_id = ? ORDER BY id LIMIT ?", (session_id, limit),
                          (session_id,), ("actions",))

    def _select_in(self, query: str, params: tuple[Any, ...], keys: Sequence[str]) -> list[tuple[Any, ...]]:
        """Rows of `query`, whose `IN ({})` takes `keys` a chunk at a time (SQLite caps host parameters)."""
        rows: list[tuple[Any, ...]] = []
        for chunk in chunks(keys):
            rows.extend(self._fetch(query.format(marks(len(chunk))), (*params, *chunk))[1])
        return rows

    def _rows(self, query: str, params: Sequence[Any], sessions: Collection[str] | None = None,
              tables: Collection[str] | None = None) -> list[dict[str, Any]]:
        """Rows as dicts, once the queued writes are in: those of `sessions` only, when the query reads only theirs
        (a reader never waits behind another tenant's writes), and of them those to `tables` when it names the
        tables it reads; else all."""
        self.flush(sessions, tables)
        return self._dicts(query, params)

    def _dicts(self, query: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        """Rows as dicts, as the database holds them now."""
        names, rows = self._fetch(query, params)
        return [dict(zip(names, row)) for row in rows]

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
            self._exec_many("INSERT INTO pending_recall (session_id, text, created_at) VALUES (?, ?, ?)", rows)

        self._submit(write, (session_id,), ("pending_recall",))

    def take_pending_recall(self, session_id: str) -> list[str]:
        """The session's waiting answers, oldest first, and gone from the store (a request of a conversation is
        served by one worker at a time: its branch is claimed)."""
        rows = self._rows("SELECT id, text FROM pending_recall WHERE session_id = ? ORDER BY id", (session_id,),
                          (session_id,), ("pending_recall",))
        if rows:
            ids = [row["id"] for row in rows]

            def write() -> None:
                self._exec(f"DELETE FROM pending_recall WHERE id IN ({marks(len(ids))})", ids)

            self._submit(write, (session_id,), ("pending_recall",))
        return [row["text"] for row in rows]

    # --- summary jobs: any replica may run a session's, and take over one whose replica died ----------------

    def summary_jobs(self, session_id: str) -> list[dict[str, Any]]:
        """The session's jobs running or finished and not yet used, oldest first (at most one runs: a unique
        index): id, state ("running" or "done"), lease_until, start, through, through_hash, text, verdict."""
        return self._rows("SELECT id, state, lease_until, start, through, through_hash, text, verdict FROM summaries"
                          " WHERE session_id = ? ORDER BY id", (session_id,), (session_id,), ("summaries",))

    def start_summary(self, session_id: str, job: dict[str, Any], claim: str, lease_until: float) -> bool:
        """A new job claimed by the caller until `lease_until`, unless the session has one running (here or on
        another replica): whether the caller runs it."""
        row = (session_id, claim, lease_until, time.time(), job["start"], job["through"], job["through_hash"],
               encode_json(job).decode())

        def write() -> bool:
            return self._exec("INSERT INTO summaries (session_id, state, claim, lease_until, created_at, start, through,"
                              " through_hash, job) VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                              row) > 0

        return self.queue.call(write)

    def take_over_summary(self, session_id: str, claim: str, lease_until: float) -> dict[str, Any] | None:
        """The session's running job whose lease ran out (the replica running it died), now claimed by the
        caller until `lease_until`; None when there is none, or another replica took it first."""
        now = time.time()

        def write() -> dict[str, Any] | None:
            rows = self._exec_rows("SELECT id, job FROM summaries WHERE session_id = ? AND state = 'running' AND"
                                   f" lease_until < ? ORDER BY id LIMIT 1{self.SKIP_LOCKED}", (session_id, now))
            if not rows:
                return None
            self._exec("UPDATE summaries SET claim = ?, lease_until = ? WHERE id = ?", (claim, lease_until, rows[0][0]))
            return dict(orjson.loads(rows[0][1]))

        return self.queue.call(write)

    def finish_summary(self, session_id: str, claim: str, text: str, verdict: str) -> None:
        """A job's result, kept only while `claim` still holds it (a job taken over from a replica thought dead
        keeps the result of the one that took it). It replaces the session's earlier results: until then a rejected
        one still says why no summary was used."""
        def write() -> None:
            if self._exec("UPDATE summaries SET state = 'done', text = ?, verdict = ?, job = NULL WHERE session_id = ?"
                          " AND claim = ? AND state = 'running'", (text, verdict, session_id, claim)):
                self._exec("DELETE FROM summaries WHERE session_id = ? AND state = 'done' AND id < (SELECT id FROM"
                           " summaries WHERE session_id = ? AND claim = ?)", (session_id, session_id, claim))

        self._submit(write, (session_id,), ("summaries",))

    def summary_used(self, session_id: str, job_id: int) -> None:
        """A compaction took the job's summary in: it and the finished jobs before it are dropped."""
        def write() -> None:
            self._exec("DELETE FROM summaries WHERE session_id = ? AND state = 'done' AND id <= ?", (session_id, job_id))

        self._submit(write, (session_id,), ("summaries",))

    # --- turns: decision records and accounting -------------------------------------------------------------

    def add_turn(self, session_id: str, row: Callable[[], dict[str, Any]], made: dict[str, bytes],
                 created_at: float | None = None) -> None:
        """A forwarded request's row, numbered in its session as it is written, and the messages workset wrote for it
        that the session does not hold yet. `row()` is called on the writer thread (it may parse an answer).
        `created_at`: when the request was made, if not now (a record written once the store answered again)."""
        shown = [(session_id, key, body) for key, body in made.items()]

        made_at = created_at or time.time()

        def write() -> None:
            figures = row()
            names = ["session_id", "created_at", *figures]
            self._number_turns(session_id)
            self._exec(
                f"INSERT INTO turns (n, {', '.join(names)}) SELECT coalesce(max(n), 0) + 1, {marks(len(names))}"
                " FROM turns WHERE session_id = ?", (session_id, made_at, *figures.values(), session_id))
            if shown:
                self._exec_many(f"INSERT INTO shown (session_id, hash, body) VALUES (?, ?, {self.JSON_TEXT})"
                                " ON CONFLICT DO NOTHING", shown)

        self._submit(write, (session_id,), ("turns", "shown"))

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
            "SELECT s.id, s.explicit_id, s.client_id, s.model, s.policy, s.messages, count(*) AS turns, "
            + ", ".join(f"CAST(sum(t.{column}) AS BIGINT) AS {column}" for column in (*SUMMED_COUNTS, "reported")) +
            ", sum(t.cost) AS cost, sum(t.cost_whole) AS cost_whole, count(t.cost) AS priced,"
            " sum(CASE WHEN t.compaction != '' THEN 1 ELSE 0 END) AS compactions,"
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
            f" {self.CROSS_JOIN} evidence e ON e.session_id = m.session_id AND e.ref = ?"
            f" {self.CROSS_JOIN} sessions s ON s.id = m.session_id"
            f" WHERE m.hash >= ? AND m.hash < ?{scope} ORDER BY e.id LIMIT 1",
            (ref, ref, ref + "~") + ((key_hash,) if key_hash is not None else ()),
        )
        return rows[0] if rows else None

    def delete_sessions_before(self, cutoff: float) -> list[str]:
        """Delete whole sessions last updated before `cutoff` (epoch seconds), with everything they own, in one
        transaction; the ids deleted (the evidence FTS index follows through sqlite-utils' triggers)."""
        return self.queue.call(lambda: self._delete_sessions_before(cutoff))

    def _delete_sessions_before(self, cutoff: float) -> list[str]:
        # inside the writer's batch transaction. A session others forked from holds the beginning they read: it goes
        # only with them. (Their requests keep it updated too; this guards against clocks and hand edits.)
        rows = self._exec_rows(
            "SELECT id FROM sessions WHERE updated_at < ? AND id NOT IN"
            " (SELECT forked_from FROM sessions WHERE forked_from IS NOT NULL AND updated_at >= ?)", (cutoff, cutoff))
        ids = [row[0] for row in rows]
        for chunk in chunks(ids):
            listed = marks(len(chunk))
            for table in SESSION_TABLES:
                self._exec(f"DELETE FROM {table} WHERE session_id IN ({listed})", chunk)
            self._exec(f"DELETE FROM sessions WHERE id IN ({listed})", chunk)
        return ids

    def _number_turns(self, session_id: str) -> None:
        """Before a session's next turn is numbered in the writer's transaction (no other process writes here)."""


def marks(count: int) -> str:
    """Placeholders for `count` parameters of an IN (...) list."""
    return ",".join("?" * count)


def chunks(items: Sequence[str]) -> Iterable[list[str]]:
    items = list(items)
    for start in range(0, len(items), IN_CHUNK):
        yield items[start:start + IN_CHUNK]
