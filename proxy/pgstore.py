"""The sidecar store on PostgreSQL (proxy.storage.Store), for workset replicas that share one database: psycopg 3
with a connection pool, the schema migrated at start-up under an advisory lock, full-text search over a generated
`tsvector` (websearch_to_tsquery, ts_rank_cd), advisory locks for what one replica at a time may do.

The queries are proxy.sqlstore's. A pooled connection that sat idle is checked before it is handed out, and
one found broken has every idle one checked (a database restart kills them all): a connection that died while
idle is replaced, and the read that met it is tried again on a fresh one, without counting as an outage. When the
database itself is cut off or slow, a read fails within `store.timeout_s`, the store is marked down (`unavailable()`:
/healthz reports degraded) and every call fails at once: requests go out as the agent sent them (fail open). A
prober thread tries a fresh connection every `store.retry_s`; at the first that succeeds the pool is made anew
(its own reconnection backs off for tens of seconds) and the store is up again. A batch of writes whose connection
failed is tried again on a fresh one (`store.write_attempts`).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Sequence

import psycopg
from psycopg import errors
from psycopg_pool import ConnectionPool

from .config import StoreSettings
from .outage import Outage
from .sqlstore import SCHEMA_VERSION, SqlStore
from .storage import StoreUnavailable, without_password
from .writequeue import WriteQueue

_SHORT = "text COLLATE \"C\""  # ids, hashes and refs: compared byte by byte (ranges on hashes, like SQLite)

# Full-text search splits words at every ASCII punctuation mark, as SQLite's unicode61 tokenizer does: PostgreSQL's
# parser would otherwise read `src/parser.py` as one token (a search for "parser" missing it), and skip markup such
# as <tag> names and everything between <script> and </script>. Punctuation becomes spaces in the indexed text and
# in the query's words alike.
_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
_UNPUNCTUATE = str.maketrans(_PUNCTUATION, " " * len(_PUNCTUATION))
_SQL_PUNCTUATION = "'" + _PUNCTUATION.replace("'", "''") + "'"  # a standard SQL literal: backslash is itself

# (schema version, statements): a store at an older version runs the statements of every later entry, in one
# transaction. PostgreSQL support began at SQLite's schema 10, so its first entry creates that schema whole.
_MIGRATIONS: list[tuple[int, tuple[str, ...]]] = [(10, (
    "CREATE TABLE IF NOT EXISTS sessions (id {s} PRIMARY KEY, key_hash {s} NOT NULL, explicit_id text,"
    " created_at double precision, updated_at double precision, model text, policy text, messages bigint,"
    " forked_from {s}, client_id text, parent_id {s}, version bigint NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS sessions_key_explicit ON sessions (key_hash, explicit_id)",
    "CREATE INDEX IF NOT EXISTS sessions_key_updated ON sessions (key_hash, updated_at)",
    "CREATE TABLE IF NOT EXISTS messages (hash {s} PRIMARY KEY, seq bigserial, session_id {s} NOT NULL, parent {s},"
    " depth bigint NOT NULL, role text NOT NULL, body text NOT NULL, tokens bigint, ref {s}, tool text, gist text,"
    " outcome text, created_at double precision, names text)",
    "CREATE INDEX IF NOT EXISTS messages_session_depth ON messages (session_id, depth)",
    "CREATE INDEX IF NOT EXISTS messages_session_ref ON messages (session_id, ref)",
    "CREATE INDEX IF NOT EXISTS messages_parent ON messages (parent)",
    # values and arguments may be long: their unique keys hold digests (a B-tree entry must stay under 2.7 KB)
    "CREATE TABLE IF NOT EXISTS facts (id bigserial PRIMARY KEY, session_id {s} NOT NULL, node {s} NOT NULL,"
    " turn bigint, kind text NOT NULL, key text NOT NULL, value text, evidence_ref text, supersedes text,"
    " superseded bigint DEFAULT 0, source text)",
    "CREATE INDEX IF NOT EXISTS facts_session_node ON facts (session_id, node)",
    "CREATE UNIQUE INDEX IF NOT EXISTS facts_yield ON facts (session_id, node, kind, md5(key), md5(value))",
    "CREATE TABLE IF NOT EXISTS actions (id bigserial PRIMARY KEY, session_id {s} NOT NULL, node {s} NOT NULL,"
    " turn bigint, tool text, arguments text, outcome text, gist text, call_id text, evidence_ref text)",
    "CREATE INDEX IF NOT EXISTS actions_session_node ON actions (session_id, node)",
    "CREATE UNIQUE INDEX IF NOT EXISTS actions_yield ON actions (session_id, node, call_id, tool, md5(arguments))",
    # The index reads the first 256 KB of each content: a tsvector must stay under 1 MB.
    "CREATE TABLE IF NOT EXISTS evidence (id bigserial PRIMARY KEY, session_id {s} NOT NULL, ref {s} NOT NULL,"
    " node {s}, role text, tool text, content text NOT NULL, tokens bigint,"
    " tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', translate(left(coalesce(tool, '') || ' ' || content,"
    " 262144), {punctuation}, {spaces}))) STORED)",
    "CREATE UNIQUE INDEX IF NOT EXISTS evidence_session_ref ON evidence (session_id, ref)",
    "CREATE INDEX IF NOT EXISTS evidence_tsv ON evidence USING gin (tsv)",
    "CREATE TABLE IF NOT EXISTS checkpoints (id bigserial PRIMARY KEY, session_id {s} NOT NULL, node {s} NOT NULL,"
    " depth bigint, created_at double precision, reason text, tokens_before bigint, tokens_after bigint,"
    " epoch text NOT NULL, state text)",
    "CREATE INDEX IF NOT EXISTS checkpoints_session_node ON checkpoints (session_id, node)",
    "CREATE TABLE IF NOT EXISTS folds (session_id {s} PRIMARY KEY, node {s} NOT NULL, depth bigint NOT NULL,"
    " data text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS turns (id bigserial PRIMARY KEY, session_id {s} NOT NULL, n bigint NOT NULL,"
    " created_at double precision, route text, model text, policy text, messages bigint, tip text,"
    " tokens_original bigint, tokens_sent bigint, input_tokens bigint, cached_tokens bigint, cache_write_tokens bigint,"
    " output_tokens bigint, reported bigint, whole_tokens bigint, whole_cached_tokens bigint,"
    " whole_write_tokens bigint, cost double precision, cost_whole double precision, compaction text,"
    " recall_rounds bigint, status bigint, workset_ms double precision, latency_ms double precision, note text,"
    " record text)",
    "CREATE UNIQUE INDEX IF NOT EXISTS turns_session_n ON turns (session_id, n)",
    "CREATE INDEX IF NOT EXISTS turns_created ON turns (created_at)",
    "CREATE TABLE IF NOT EXISTS shown (session_id {s} NOT NULL, hash {s} NOT NULL, body text NOT NULL,"
    " PRIMARY KEY (session_id, hash))",
    "CREATE TABLE IF NOT EXISTS pending_recall (id bigserial PRIMARY KEY, session_id {s} NOT NULL, text text NOT NULL,"
    " created_at double precision)",
    "CREATE INDEX IF NOT EXISTS pending_recall_session ON pending_recall (session_id)",
)), (11, (
    "CREATE TABLE IF NOT EXISTS summaries (id bigserial PRIMARY KEY, session_id {s} NOT NULL, state text NOT NULL,"
    " claim {s} NOT NULL, lease_until double precision, created_at double precision, start bigint, through bigint,"
    " through_hash {s}, job text, text text, verdict text)",
    "CREATE INDEX IF NOT EXISTS summaries_session ON summaries (session_id)",
    "CREATE UNIQUE INDEX IF NOT EXISTS summaries_running ON summaries (session_id) WHERE state = 'running'",
))]


class _StaleConnection(StoreUnavailable):
    """A pooled connection had died while idle, though the database answers: the call is tried again."""


class LockWaitTimeout(RuntimeError):
    """Another process held a lock of `exclusive` longer than store.lock_timeout_s (the database answers)."""


class PostgresStore(SqlStore):
    """The store in a PostgreSQL database (its first schema on the search path), shared by every replica."""

    CROSS_JOIN = "JOIN"
    NEWEST = "m.seq"
    JSON_LIST = "json_array_elements_text(CAST(? AS json))"
    # a body holding a NUL character (escaped: \u0000) is valid json, but ->> refuses to read any of it
    CALL_ID = "(CAST(replace(m.body, '\\u0000', '\\ufffd') AS json) ->> 'tool_call_id')"
    JSON_TEXT = "convert_from(?, 'UTF8')"  # bytes arrive as bytea
    CONTAINS = "strpos(lower(content), ?) > 0"
    # the generated tsvector over the English configuration (stemmed, as SQLite's porter tokenizer is)
    MATCH_FROM = "evidence e, websearch_to_tsquery('english', ?) q"
    MATCH_WHERE = "e.tsv @@ q"
    MATCH_RANK = "-ts_rank_cd(e.tsv, q)"
    SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"
    shared = True

    def __init__(self, url: str, settings: StoreSettings = StoreSettings()) -> None:
        self.url = url
        self.settings = settings
        self._outage = Outage(without_password(url), settings.retry_s, self._reopen, self.came_back)
        # when each pooled connection was last given back (a connection idle longer is checked before it is used)
        self._returned: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = weakref.WeakKeyDictionary()
        # The pool logs each failed reconnection in plain text; the store's own log says when it went down and why.
        logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
        self._pool = self._new_pool()
        try:
            self._pool.open(wait=True, timeout=max(settings.timeout_s, 5.0))
        except Exception as error:
            self._pool.close()
            raise RuntimeError(f"cannot reach the store at {without_password(url)}: {error}") from error
        try:
            self.migrate()
        except (errors.QueryCanceled, errors.LockNotAvailable) as error:
            self._pool.close()
            raise RuntimeError(f"the store's schema at {without_password(url)} was not ready within "
                               f"store.migrate_timeout_s ({settings.migrate_timeout_s:g} s): another replica's "
                               f"migration, or the database, is slow ({str(error).strip()})") from error
        self._writer: psycopg.Connection[Any] | None = None  # the writer thread's own
        self._writer_used = 0.0
        self._writer_renew = False  # the database came back: the writer's connection is made anew before use
        self._holds: dict[str, _Hold] = {}  # the locks of `exclusive` this process holds (or is taking), by name
        self._holds_changed = threading.Condition()
        super().__init__(WriteQueue(self._writer_connection, retryable=_lost_race, reconnectable=_connection_lost,
                                    attempts=settings.write_attempts, pause_s=settings.retry_s,
                                    large_write=settings.large_write_chars))
        self.queue.keep_lost(settings.parked_writes, settings.max_backlog_chars, self._went_down)

    # --- connections and outages ------------------------------------------------------------------------------

    def _new_pool(self) -> ConnectionPool:
        settings = self.settings
        return ConnectionPool(self.url, min_size=1, max_size=settings.pool_size, timeout=settings.timeout_s,
                              open=False, configure=self._configure, check=self._check, reset=self._given_back,
                              name="workset-store",
                              kwargs={"autocommit": True, "connect_timeout": max(1, round(settings.timeout_s))})

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Every connection: a slow statement or lock wait fails instead of holding the request."""
        conn.execute(f"SET statement_timeout = {int(self.settings.timeout_s * 1000)}")
        conn.execute(f"SET lock_timeout = {int(self.settings.lock_timeout_s * 1000)}")

    def _given_back(self, conn: psycopg.Connection[Any]) -> None:
        self._returned[conn] = time.monotonic()

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """Before the pool hands a connection out: one idle longer than store.check_idle_s is tried (an empty
        query); if it is broken, so are the other idle ones, most likely (they died together, in a restart): all of
        them are checked now, and the broken ones replaced."""
        if time.monotonic() - self._returned.get(conn, 0.0) < self.settings.check_idle_s:
            return
        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            self._pool.check()
            raise

    def unavailable(self, probe: bool = False) -> str:
        """Why the database does not answer ("" when it does). With `probe`, a store that is up is asked for real
        (a statement through the pool), which marks it down if it does not answer."""
        if probe and not self._outage.why:
            try:
                self._fetch("SELECT 1", ())
            except StoreUnavailable:
                pass
        return self._outage.why

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection, failing at once while the database is marked down."""
        self._check_down()
        with self._outages(), self._pool.connection() as conn:
            yield conn

    def _check_down(self) -> None:
        why = self._outage.why
        if why:
            raise StoreUnavailable(f"store unavailable for {self._outage.down_for():.1f} s ({why})")

    @contextmanager
    def _outages(self) -> Iterator[None]:
        """The database failing to answer (cut off, down, slower than store.timeout_s, no pooled connection in time)
        as StoreUnavailable, marking it down, unless a fresh connection answers: then the connection was one that
        died while idle, the idle ones are checked, and the caller may try again (_StaleConnection)."""
        try:
            yield
        except (psycopg.OperationalError, errors.QueryCanceled, OSError) as error:  # PoolTimeout is operational
            if not isinstance(error, errors.QueryCanceled) and self._answers():
                self._pool.check()
                raise _StaleConnection(f"a pooled connection had died: {error}") from error
            self._went_down(error)
            raise StoreUnavailable(f"store unavailable: {error}") from error

    def _answers(self) -> bool:
        """Whether the database takes a fresh connection (within store.timeout_s)."""
        try:
            psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, round(self.settings.timeout_s))).close()
        except Exception:
            return False
        return True

    def _went_down(self, error: BaseException) -> None:
        self._outage.down(error)

    def _reopen(self) -> bool:
        """The prober's try while the store is down: a fresh connection, then the pool made anew (its own
        reconnection backs off for tens of seconds after an outage) and the writer's connection to be."""
        if not self._answers():
            return False
        fresh = self._new_pool()
        try:
            fresh.open(wait=True, timeout=max(self.settings.timeout_s, 1.0))
        except Exception:
            fresh.close()
            return False
        old, self._pool = self._pool, fresh
        self._writer_renew = True
        old.close(timeout=0)  # its connections in use are closed as they are given back
        return True

    def _writer_connection(self) -> psycopg.Connection[Any]:
        """The writer thread's connection: checked when it sat idle, made again after it broke or once the
        database came back."""
        self._check_down()
        writer, now = self._writer, time.monotonic()
        if writer is not None and not (writer.closed or writer.broken or self._writer_renew):
            if now - self._writer_used < self.settings.check_idle_s:
                self._writer_used = now
                return writer
            try:
                ConnectionPool.check_connection(writer)
                self._writer_used = now
                return writer
            except Exception:
                pass
        if writer is not None:
            writer.close()
        self._writer, self._writer_renew = None, False
        try:
            self._writer = psycopg.connect(self.url, autocommit=True,
                                           connect_timeout=max(1, round(self.settings.timeout_s)))
            self._configure(self._writer)
        except psycopg.OperationalError as error:
            self._writer = None
            self._went_down(error)
            raise StoreUnavailable(f"store unavailable: {error}") from error
        self._writer_used = now
        return self._writer

    # --- schema -------------------------------------------------------------------------------------------

    def migrate(self) -> None:
        """Create or upgrade the schema in one transaction, one replica at a time (the others wait, then find it
        done)."""
        with self._pool.connection() as conn, conn.transaction():
            # start-up, not a request: statement_timeout (store.timeout_s) would fail a replica that waits for
            # another's migration, or DDL on a busy database
            cap = int(self.settings.migrate_timeout_s * 1000)
            conn.execute(f"SET LOCAL statement_timeout = {cap}")
            conn.execute(f"SET LOCAL lock_timeout = {cap}")
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('workset:migrate', 0))")
            schema = _first_schema(str(conn.execute("SHOW search_path").fetchone()[0]))  # type: ignore[index]
            if schema:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value text)")
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise RuntimeError(f"store {without_password(self.url)} has schema {version}, newer than this workset "
                                   f"({SCHEMA_VERSION})")
            for number, statements in _MIGRATIONS:
                if number > version:
                    for statement in statements:
                        conn.execute(statement.format(s=_SHORT, punctuation=_SQL_PUNCTUATION,
                                                      spaces="'" + " " * len(_PUNCTUATION) + "'"))
                    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', %s) ON CONFLICT (key)"
                                 " DO UPDATE SET value = excluded.value", (str(number),))

    def close(self) -> None:
        self._outage.close()
        self.queue.close()
        if self._writer is not None:
            self._writer.close()
        self._pool.close()

    # --- what SqlStore asks of a backend ------------------------------------------------------------------

    def _fetch(self, query: str, params: Sequence[Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
        try:
            return self._fetch_once(query, params)
        except _StaleConnection:  # the idle connections are checked by now: a fresh one
            return self._fetch_once(query, params)

    def _fetch_once(self, query: str, params: Sequence[Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
        with self._connection() as conn:
            cursor = conn.execute(_placeholders(query), _values(params))
            return [column.name for column in cursor.description or ()], cursor.fetchall()

    def _exec(self, query: str, params: Sequence[Any] = ()) -> int:
        assert self._writer is not None  # inside the writer's transaction
        return self._writer.execute(_placeholders(query), _values(params)).rowcount

    def _exec_many(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        assert self._writer is not None
        if rows:
            with self._writer.cursor() as cursor:
                cursor.executemany(_placeholders(query), [_values(row) for row in rows])

    def _exec_rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        assert self._writer is not None
        return self._writer.execute(_placeholders(query), _values(params)).fetchall()

    def _match_query(self, words: list[str]) -> str:
        return " or ".join(f'"{word.translate(_UNPUNCTUATE)}"' for word in words)

    def _number_turns(self, session_id: str) -> None:
        """Replicas number a session's turns in turn: the lock lasts until the writer's transaction ends."""
        self._exec("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", ("workset:turns:" + session_id,))

    @contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        """A session-level advisory lock on a pooled connection: released when the block ends, or by the server
        when the replica holding it dies (its connection closes).

        Held by one process at a time, as the protocol says, not by one thread: threads of this process that want
        it while it is held here share the hold (what they do to one another is the caller's to order, as with one
        process on SQLite), and it goes when the last of them leaves. The wait for another process is bounded by
        store.lock_timeout_s, not by store.timeout_s, and running out of it is no outage of the database
        (LockWaitTimeout). What the block raises is its own: only the lock's statements can mark the store down."""
        self._check_down()
        with self._holds_changed:
            while True:
                hold = self._holds.get(name)
                if hold is None:  # this thread takes it for the process
                    hold = self._holds[name] = _Hold()
                    break
                if hold.conn is not None:  # held here already: shared
                    hold.count += 1
                    break
                self._holds_changed.wait()  # another thread of this process is taking it: wait for its outcome
                if hold.error is not None:  # it failed (the database is away, or another process held on)
                    kind = type(hold.error) if isinstance(hold.error, LockWaitTimeout) else StoreUnavailable
                    raise kind(str(hold.error)) from hold.error
        if hold.conn is None:
            try:
                conn = self._lock("workset:" + name, name)
            except BaseException as error:
                with self._holds_changed:
                    hold.error = error
                    del self._holds[name]
                    self._holds_changed.notify_all()
                raise
            with self._holds_changed:
                hold.conn = conn
                self._holds_changed.notify_all()
        try:
            yield
        finally:
            with self._holds_changed:
                hold.count -= 1
                last = not hold.count
                if last:
                    del self._holds[name]
            if last:
                assert hold.conn is not None
                self._unlock(*hold.conn, "workset:" + name)

    def _lock(self, key: str, name: str) -> tuple[ConnectionPool, psycopg.Connection[Any]]:
        """A pooled connection holding the advisory lock `key`, once no other process holds it, and its pool (the
        pool may be made anew meanwhile: the connection goes back to its own)."""
        pool = self._pool
        try:
            with self._outages():
                conn = pool.getconn()
        except _StaleConnection:
            with self._outages():
                conn = pool.getconn()
        try:
            with self._outages():
                try:
                    with conn.transaction():  # the session-level lock outlives it; the SET LOCAL does not
                        conn.execute("SET LOCAL statement_timeout = 0")
                        conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
                except errors.LockNotAvailable as error:
                    raise LockWaitTimeout(f"{name} still held by another process after "
                                          f"{self.settings.lock_timeout_s:g} s (store.lock_timeout_s)") from error
        except BaseException:
            pool.putconn(conn)
            raise
        return pool, conn

    def _unlock(self, pool: ConnectionPool, conn: psycopg.Connection[Any], key: str) -> None:
        """Let the lock go. Never raises: the block's own outcome stands, and its caller must go on to release
        what else it holds. If the unlock fails (the connection was cut), the connection is closed, and with it
        the server drops the lock."""
        try:
            with self._outages():
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))
        except Exception:
            conn.close()
        finally:
            pool.putconn(conn)

    def size_bytes(self) -> int:
        """Tables and indexes of the store's schema (0 while the database does not answer)."""
        try:
            rows = self._fetch("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN"
                               " pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema()"
                               " AND c.relkind = 'r'", ())[1]
        except StoreUnavailable:
            return 0
        return int(rows[0][0])


def _placeholders(query: str) -> str:
    """The shared queries' `?` placeholders as psycopg's `%s` (a literal % doubled)."""
    return query.replace("%", "%%").replace("?", "%s")


class _Hold:
    """A lock of `exclusive` held by this process: the connection holding it (None while it is being taken), the
    threads inside the block, and why taking it failed."""

    def __init__(self) -> None:
        self.conn: tuple[ConnectionPool, psycopg.Connection[Any]] | None = None
        self.count = 1
        self.error: BaseException | None = None


def _values(params: Sequence[Any]) -> Sequence[Any]:
    """Parameters as the shared queries mean them (SQLite's values): a bool is 0 or 1 (psycopg would send a boolean,
    which no integer column takes), and a text's NUL characters, which PostgreSQL text cannot hold, become U+FFFD
    (a tool output may carry them: its evidence is stored, the character replaced)."""
    if not any(type(value) is bool or (type(value) is str and "\x00" in value) for value in params):
        return params
    return [int(value) if type(value) is bool else value.replace("\x00", "\ufffd") if type(value) is str else value
            for value in params]


def _connection_lost(error: BaseException) -> bool:
    """A batch's failure that another connection may not meet: its connection died, or the database was away."""
    return isinstance(error, (psycopg.OperationalError, OSError, ConnectionError)) and not _lost_race(error)


def _lost_race(error: BaseException) -> bool:
    """A write that another replica's transaction made fail, which succeeds when tried again."""
    return isinstance(error, (errors.DeadlockDetected, errors.SerializationFailure, errors.LockNotAvailable))


def _first_schema(search_path: str) -> str:
    """The schema the store's tables go in: the first of the search path, but "$user"."""
    for name in search_path.split(","):
        name = name.strip().strip('"')
        if name and name != "$user":
            return name
    return ""
