"""Read-only views of the store: sessions, the task state along a session's latest branch, its checkpoints, and the
evidence behind a [ref:ID]. Over HTTP every view is scoped to the caller's key; the local CLI reads every key."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .auth import caller_key, require_workset_key
from .errors import WorksetError, bad_request, error_body, json_response, store_down
from .hashing import REF_LENGTH, key_hash
from .logs import get_logger
from .messages import message_text
from .records import Message
from .session import path_state
from .state import TaskState, state_snapshot
from .storage import Store, StoreUnavailable
from .workingset import first_user

if TYPE_CHECKING:
    from .app import Workset

SESSION_FIELDS = ("id", "explicit_id", "client_id", "parent_id", "forked_from", "created_at", "updated_at", "model",
                  "policy", "messages")
MAX_LIMIT = 1000
_REF = re.compile(f"[0-9a-f]{{{REF_LENGTH}}}")

View = Callable[[Store, str, Request], dict[str, Any]]


@dataclass
class LatestBranch:
    """A session's most recently written branch, with the task state folded along it."""

    messages: list[Message]
    hashes: list[str]
    state: TaskState
    goal: str  # the first user message: the task


# --- views shared by the HTTP routes and the CLI ------------------------------------------------------------------


def not_found(what: str, ident: str) -> WorksetError:
    # The same answer whether the id exists under another key or not at all: nothing leaks across keys.
    return WorksetError(404, f"{what} {_clip(ident)!r} not found", "invalid_request_error", "not_found")


def public(row: dict[str, Any]) -> dict[str, Any]:
    """A session row without its key hash."""
    return {name: row.get(name) for name in SESSION_FIELDS}


def find_session(store: Store, ident: str, key_hash: str | None) -> dict[str, Any]:
    """The session whose internal or explicit id is `ident` (of one key, or of any key when None)."""
    matches = store.find_sessions(ident, key_hash)
    if not matches:
        raise not_found("session", ident)
    return matches[0]


def latest_branch(store: Store, session_id: str) -> LatestBranch:
    """The session's most recently written branch, and its state folded from the store along that path only."""
    tip = store.latest_tip(session_id)
    path = store.path_to(tip) if tip else []
    messages = [row["message"] for row in path]
    hashes = [row["hash"] for row in path]
    sessions = list(dict.fromkeys(row["session_id"] for row in path)) or [session_id]
    state, _ = path_state(store, sessions, hashes)
    task = first_user(messages)
    return LatestBranch(messages, hashes, state, message_text(messages[task]) if task is not None else "")


def session_view(store: Store, row: dict[str, Any]) -> dict[str, Any]:
    session_id = row["id"]
    branch = latest_branch(store, session_id)
    return {
        "object": "workset.session",
        **public(row),
        "branch": {"tip": branch.hashes[-1] if branch.hashes else None, "messages": len(branch.messages)},
        "state": state_snapshot(branch.state, branch.goal),
        "facts": store.facts(session_id),
        "actions": store.actions(session_id),
    }


def evidence_view(store: Store, ref: str, key_hash: str | None) -> dict[str, Any]:
    if not _REF.fullmatch(ref):
        raise bad_request(f"a ref is {REF_LENGTH} lowercase hex digits, got {_clip(ref)!r}", "ref", "invalid_ref")
    row = store.evidence_by_ref(ref, key_hash)
    if row is None:
        raise not_found("ref", ref)
    return row


# --- HTTP -----------------------------------------------------------------------------------------------------------


def inspection_routes(workset: Workset) -> list[Route]:
    """GET routes under /v1/workset/ answering for the caller's own key only."""
    return [
        Route("/v1/workset/sessions", _endpoint(workset, _sessions), methods=["GET"]),
        Route("/v1/workset/sessions/{id}", _endpoint(workset, _session), methods=["GET"]),
        Route("/v1/workset/sessions/{id}/checkpoints", _endpoint(workset, _checkpoints), methods=["GET"]),
        Route("/v1/workset/evidence/{ref}", _endpoint(workset, _evidence), methods=["GET"]),
    ]


def _sessions(store: Store, caller: str, request: Request) -> dict[str, Any]:
    rows = store.sessions(caller, _limit(request))
    return {"object": "list", "data": [public(row) for row in rows]}


def _session(store: Store, caller: str, request: Request) -> dict[str, Any]:
    return session_view(store, find_session(store, request.path_params["id"], caller))


def _checkpoints(store: Store, caller: str, request: Request) -> dict[str, Any]:
    row = find_session(store, request.path_params["id"], caller)
    return {"object": "list", "data": store.checkpoints(row["id"])}


def _evidence(store: Store, caller: str, request: Request) -> dict[str, Any]:
    return evidence_view(store, request.path_params["ref"], caller)


def _endpoint(workset: Workset, view: View) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            key = caller_key(request)
            require_workset_key(workset.config, key)
            if key is None:
                # every keyless caller would share one namespace: nothing of it is listed or shown
                raise WorksetError(401, "workset's inspection routes need a key: send one as the bearer token",
                                   "authentication_error", "missing_api_key")
            # settling and the store reads run on an inspection thread: off the event loop, and off the workers
            caller = key_hash(key)
            return json_response(200, await workset.inspect(caller, _settled_view, workset, view, caller, request))
        except WorksetError as error:
            return error.response()
        except StoreUnavailable:  # the store's outage is logged where it is found: a 503 to retry
            return store_down().response()
        except Exception as error:  # a store fault: answered in OpenAI's format, and logged
            get_logger().error("inspection_failed", path=request.url.path, exc_info=True,
                               error=f"{error.__class__.__name__}: {error}")
            return json_response(500, error_body("workset could not read its store", "server_error", "internal_error"))

    return endpoint


def _settled_view(workset: Workset, view: View, caller: str, request: Request) -> dict[str, Any]:
    with settled_reads(workset, caller):
        return view(workset.store, caller, request)


@contextmanager
def settled_reads(workset: Workset, caller: str | None) -> Iterator[None]:
    """The caller's deferred ingest first (None: every key's), so the store holds every request of theirs already
    answered; then, in the block, reads of the store wait for the writes of the caller's conversations only, not
    for another tenant's megabytes queued before them. A branch that fails to settle is dropped by Sessions and
    logged; what is stored is still shown."""
    sessions: set[str] | None
    try:
        sessions = workset.engine.sessions.settle_all(caller, wait=False)
    except Exception as error:
        get_logger().error("ingest_failed", error=f"{error.__class__.__name__}: {error}", exc_info=True)
        sessions = None  # which of the caller's writes were queued is unknown: reads wait for every one
    with workset.store.reads_waiting_for(None if caller is None else sessions):
        yield


def _limit(request: Request) -> int:
    text = request.query_params.get("limit", "100")
    if not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise bad_request(f"limit must be an integer from 1 to {MAX_LIMIT}, got {_clip(text)!r}", "limit")
    return int(text)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
