"""The sidecar store as the core sees it: the records it reads and writes, and `Store`, the protocol every backend
implements (proxy.store: SQLite, the embedded default). Nothing above this module knows which backend it talks to;
`open_store` picks one from the configured location.

Writes are queued: a backend may apply them after the call returns (requests never wait on the database), and
`flush` is the barrier a reader passes for read-your-writes (of some sessions, or of all).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence
from urllib.parse import urlsplit, urlunsplit

from .config import StoreSettings
from .records import Action, Fact


# a forwarded request's counts that sum per session (the savings table; integers in every dialect)
SUMMED_COUNTS = ("tokens_original", "tokens_sent", "input_tokens", "cached_tokens", "cache_write_tokens", "whole_tokens",
                 "whole_cached_tokens")


@dataclass(frozen=True)
class Scope:
    """What one conversation may read of the store: the sessions its path runs through (a conversation that forked
    from another reads their shared beginning from the session it began in) and, for an implicit session, only
    the nodes of its own path (None: all of one explicit session, which its client declared one conversation)."""

    sessions: tuple[str, ...]
    path: Collection[str] | None = None

    @classmethod
    def whole(cls, session_id: str) -> Scope:
        return cls((session_id,))

    def holds(self, session_id: str, node: str) -> bool:
        return session_id in self.sessions and (self.path is None or node in self.path)



@dataclass(frozen=True)
class NodeRow:
    """What the store knows of one message node, enough to rebuild a path without re-reading bodies."""

    hash: str
    session_id: str
    depth: int
    tokens: int
    ref: str
    tool: str
    gist: str
    outcome: str
    names: str  # space-separated


@dataclass(frozen=True)
class Answer:
    """A stored message that answers an assistant message: a tool result, or an observation sent in the user role."""

    ref: str
    role: str
    tool: str  # the tool that produced it
    call_id: str  # the tool_call_id it carries ("" for an observation or a legacy function result)
    content: str  # its stored evidence, what recall shows ("" when it had none)


@dataclass(frozen=True)
class StoredTurn:
    """An assistant message as stored, with the messages below it in the tree that may answer it."""

    message: dict[str, Any]
    answers: tuple[Answer, ...]  # first seen first, over every branch below the message


@dataclass
class NewMessage:
    hash: str
    parent: str | None
    depth: int
    message: dict[str, Any]
    tokens: int
    ref: str
    tool: str
    gist: str
    outcome: str
    evidence: str | None  # content to index under ref, None for messages not worth recalling
    names: tuple[str, ...] = ()


class Store(Protocol):
    """What the core needs of the sidecar store."""

    # Whether other processes share this store (workset replicas): then a session's state held in memory is
    # checked against the store before a request builds on it, and a session's writes are made durable before the
    # answer that follows them goes back (its next request may come to another replica).
    shared: bool

    # --- lifecycle ------------------------------------------------------------------------------------------------
    def migrate(self) -> None:
        """Create or upgrade the schema (at start-up, before any other use)."""

    def close(self) -> None:
        """Write what is queued, then release the database."""

    def flush(self, sessions: Collection[str] | None = None, tables: Collection[str] | None = None) -> None:
        """Wait until every queued write (or those of `sessions`, to `tables` when given) is readable."""

    def reads_waiting_for(self, sessions: Collection[str] | None) -> AbstractContextManager[None]:
        """In the block, on the calling thread, a read that would wait for every queued write waits only for those
        of `sessions` (None: every write)."""

    def queued_writes(self) -> int:
        """Writes queued and not yet applied (a gauge)."""

    def large_backlog(self) -> int:
        """Characters of evidence the large writes queued carry (store.max_backlog_chars bounds it)."""

    def size_bytes(self) -> int:
        """The store's size on disk, 0 when unknown (a gauge)."""

    def unavailable(self, probe: bool = False) -> str:
        """Why the store does not answer now ("" when it does): while it is cut off, requests go out as sent. With
        `probe`, a store that seems up is asked for real (and marked down if it does not answer)."""

    def exclusive(self, name: str) -> AbstractContextManager[None]:
        """Held by one process at a time among those sharing the store, until the block ends. Leaving the block
        never raises: a lock that cannot be let go (the connection was cut) ends with its connection."""

    def on_lost_writes(self, listener: Callable[[set[str]], None]) -> None:
        """Tell `listener` the sessions whose queued writes failed for good (the store was cut off, a disk full)."""

    # --- sessions -------------------------------------------------------------------------------------------------
    def create_session(self, session_id: str, key_hash: str, explicit_id: str | None, model: str, policy: str,
                       forked_from: str | None = None, client_id: str | None = None,
                       parent_id: str | None = None) -> None: ...

    def session(self, session_id: str, key_hash: str) -> dict[str, Any] | None: ...

    def sessions(self, key_hash: str | None = None, limit: int = 100) -> list[dict[str, Any]]: ...

    def find_sessions(self, ident: str, key_hash: str | None = None) -> list[dict[str, Any]]:
        """Sessions whose internal or explicit id is `ident` (of one key; None: every key)."""

    def delete_sessions_before(self, cutoff: float) -> list[str]:
        """Delete whole sessions last updated before `cutoff`, with all they own; the ids deleted."""

    # --- the conversation tree and what ingest extracted ------------------------------------------------------------
    def find_nodes(self, hashes: Sequence[str]) -> dict[str, NodeRow]: ...

    def other_child(self, parent: str, child: str) -> bool:
        """Whether `parent` has a stored or queued child other than `child`."""

    def record(self, scope: Scope, messages: Sequence[NewMessage], facts: Sequence[tuple[str, Fact, str | None]],
               actions: Sequence[tuple[str, Action]], model: str, policy: str, depth: int) -> None:
        """One request's new messages with their facts, actions and evidence, written together."""

    def path_records(self, sessions: Sequence[str],
                     hashes: Sequence[str]) -> tuple[list[tuple[str, Fact]], list[tuple[str, Action]]]: ...

    def latest_tip(self, session_id: str) -> str | None: ...

    def path_to(self, node: str) -> list[dict[str, Any]]: ...

    def facts(self, session_id: str, limit: int = 1000) -> list[dict[str, Any]]: ...

    def actions(self, session_id: str, limit: int = 1000) -> list[dict[str, Any]]: ...

    # --- compactions ------------------------------------------------------------------------------------------------
    def add_checkpoint(self, session_id: str, node: str, depth: int, reason: str, tokens_before: int,
                       tokens_after: int, epoch: dict[str, Any], state: dict[str, Any]) -> None: ...

    def save_fold(self, session_id: str, node: str, depth: int, data: Callable[[], object]) -> None: ...

    def fold_on_path(self, sessions: Sequence[str], hashes: Sequence[str]) -> tuple[int, Any] | None: ...

    def latest_checkpoint_on_path(self, sessions: Sequence[str], hashes: Sequence[str]) -> dict[str, Any] | None: ...

    def epoch_at(self, session_id: str, node: str) -> dict[str, Any] | None: ...

    def session_version(self, session_id: str) -> int:
        """Bumped by each compaction of the session."""

    def checkpoints(self, session_id: str) -> list[dict[str, Any]]: ...

    # --- evidence and recall ----------------------------------------------------------------------------------------
    def evidence(self, scope: Scope, ref: str) -> dict[str, Any] | None: ...

    def evidence_by_ref(self, ref: str, key_hash: str | None = None) -> dict[str, Any] | None: ...

    def turn(self, scope: Scope, node: str) -> StoredTurn | None: ...

    def search_evidence(self, scope: Scope, query: str, limit: int = 5, fresh: bool = True) -> list[dict[str, Any]]: ...

    # --- recall answers waiting for a conversation's next request ---------------------------------------------------
    def add_pending_recall(self, session_id: str, texts: Sequence[str]) -> None: ...

    def take_pending_recall(self, session_id: str) -> list[str]:
        """The session's waiting answers, oldest first; taken, so no other request shows them again."""

    # --- background summary jobs: any replica runs one, and takes over a job whose replica died ---------------------
    def summary_jobs(self, session_id: str) -> list[dict[str, Any]]:
        """The session's jobs running or finished and not yet used, oldest first."""

    def start_summary(self, session_id: str, job: dict[str, Any], claim: str, lease_until: float) -> bool:
        """A new job claimed by the caller, unless one of the session runs: whether the caller runs it."""

    def take_over_summary(self, session_id: str, claim: str, lease_until: float) -> dict[str, Any] | None:
        """The session's running job whose lease ran out, claimed by the caller; None if none (or taken first)."""

    def finish_summary(self, session_id: str, claim: str, text: str, verdict: str) -> None:
        """A job's result, kept while `claim` still holds the job."""

    def summary_used(self, session_id: str, job_id: int) -> None:
        """A compaction took the job's summary in."""

    # --- decision records and accounting ----------------------------------------------------------------------------
    def add_turn(self, session_id: str, row: Callable[[], dict[str, Any]], made: dict[str, bytes],
                 created_at: float | None = None) -> None: ...

    def turns(self, session_id: str, columns: Sequence[str], first: int = 1,
              last: int | None = None) -> list[dict[str, Any]]: ...

    def turn_count(self, session_id: str) -> int: ...

    def shown_messages(self, session_id: str, keys: Sequence[str]) -> dict[str, Any]: ...

    def turn_totals(self, key_hash: str | None = None, since: float = 0.0, limit: int = 100) -> list[dict[str, Any]]: ...


class StoreUnavailable(ConnectionError):
    """The store did not answer (cut off, down, or slower than store.timeout_s): the request goes out as sent."""


class StoreOpenError(RuntimeError):
    """The store cannot be opened: a file that is not SQLite, a folder that cannot be made, a database that does not
    answer, or whose schema is not ready in time. Its message names the store (without a password) and why."""


def open_store(location: str | Path, settings: StoreSettings | None = None) -> Store:
    """The store at `location`: a postgresql:// URL (replicas share it), else a SQLite file path (the embedded
    default) or ":memory:". StoreOpenError when it cannot be opened."""
    try:
        if is_database_url(str(location)):
            from .pgstore import PostgresStore

            return PostgresStore(str(location), settings or StoreSettings())
        from .store import SqliteStore

        settings = settings or StoreSettings()
        return SqliteStore(location, settings.writer_nice, settings.large_write_chars, settings)
    except (sqlite3.Error, OSError, RuntimeError) as error:
        raise StoreOpenError(f"cannot open the store {without_password(str(location))}: {error}") from error


def is_database_url(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def without_password(location: str) -> str:
    """A store's location fit for a log line or a message: a URL's password left out."""
    parts = urlsplit(location) if is_database_url(location) else None
    if parts is None or parts.password is None:
        return location
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}@{host}"))
