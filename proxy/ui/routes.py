"""The dashboard's routes. The event loop only checks the key and answers: every page's store reads and its
rendering run on a worker, after deferred ingest is settled (as the inspection routes do)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import WorksetError, store_down
from ..inspect import evidence_view, find_session, session_view, settled_reads
from ..logs import get_logger
from ..storage import StoreUnavailable
from ..report import TurnNotFound, savings, session_total, session_turns, turn_detail
from ..storage import Scope, Store
from .access import (LoginRequired, Viewer, form_fields, logged_in, logged_out, request_key, safe_next, same_origin,
                     viewer_for)
from .html import ROOT
from .pages import SEARCH_RESULTS, error_page, evidence_page, login_page, session_page, sessions_page, turn_page

if TYPE_CHECKING:
    from ..app import Workset

STATIC = Path(__file__).resolve().parent / "static"
SESSIONS_SHOWN = 200
MAX_QUERY_CHARS = 200
# Pages show what agents sent, which is hostile input: escaped, and no script may run even if something slipped.
HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}

Render = Callable[[Store, Viewer, Request], str]


def ui_routes(workset: Workset) -> list[BaseRoute]:
    """The dashboard under /ui (none when ui.enabled is false)."""
    if not workset.config.ui.enabled:
        return []
    return [
        Route(ROOT, _page(workset, _sessions), methods=["GET"]),
        Route(f"{ROOT}/login", _login(workset), methods=["GET", "POST"]),
        Route(f"{ROOT}/logout", _logout, methods=["POST"]),
        Route(f"{ROOT}/sessions/{{id}}", _page(workset, _session), methods=["GET"]),
        Route(f"{ROOT}/sessions/{{id}}/turns/{{n}}", _page(workset, _turn), methods=["GET"]),
        Route(f"{ROOT}/sessions/{{id}}/evidence/{{ref}}", _page(workset, _evidence), methods=["GET"]),
        Mount(f"{ROOT}/static", StaticFiles(directory=STATIC), name="ui-static"),
        Route(f"{ROOT}/{{rest:path}}", _unknown, methods=["GET"]),
    ]


# --- pages: what each reads -----------------------------------------------------------------------------------------


def _sessions(store: Store, viewer: Viewer, request: Request) -> str:
    return sessions_page(savings(store, viewer.key_hash, limit=SESSIONS_SHOWN), viewer)


def _session(store: Store, viewer: Viewer, request: Request) -> str:
    row = find_session(store, request.path_params["id"], viewer.key_hash)
    turns = session_turns(store, row["id"])  # figures only, one query: no records
    query = request.query_params.get("q", "").strip()[:MAX_QUERY_CHARS]
    hits = store.search_evidence(Scope.whole(row["id"]), query, SEARCH_RESULTS) if query else None
    return session_page(row, session_total(row, turns), turns, session_view(store, row), store.checkpoints(row["id"]),
                        query, hits, viewer)


def _turn(store: Store, viewer: Viewer, request: Request) -> str:
    row = find_session(store, request.path_params["id"], viewer.key_hash)
    text = request.path_params["n"]
    try:
        if not (text.isascii() and text.isdigit()) or len(text) > 9:
            raise TurnNotFound(text)
        detail = turn_detail(store, row["id"], int(text))
    except TurnNotFound as error:
        raise WorksetError(404, f"request {text[:20]!r} of session {row['id']!r} not found") from error
    return turn_page(row, detail, viewer)


def _evidence(store: Store, viewer: Viewer, request: Request) -> str:
    row = find_session(store, request.path_params["id"], viewer.key_hash)
    # refs are looked up among the sessions of the session's own key: a fork's refs may lie in its parent
    return evidence_page(row, evidence_view(store, request.path_params["ref"], row["key_hash"]), viewer)


# --- endpoints ------------------------------------------------------------------------------------------------------


def _page(workset: Workset, render: Render) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        key = request_key(request)
        try:
            viewer = viewer_for(workset.config, key)
        except LoginRequired as refused:
            return _login_page(401, str(refused), _here(request), failed=key is not None)
        try:
            status, body = await workset.inspect(viewer.key_hash, _rendered, workset, render, viewer, request)
        except StoreUnavailable:  # its outage is logged where it is found: a page that says so, to reload
            down = store_down()
            return _html(503, error_page(503, down.message, viewer), down.headers)
        except Exception as error:  # a store fault: a page that says so, and a log line
            get_logger().error("ui_failed", path=request.url.path, exc_info=True,
                               error=f"{error.__class__.__name__}: {error}")
            status, body = 500, error_page(500, "workset could not read its store (see its log)", viewer)
        return _html(status, body)

    return endpoint


def _rendered(workset: Workset, render: Render, viewer: Viewer, request: Request) -> tuple[int, str]:
    with settled_reads(workset, viewer.key_hash):
        try:
            return 200, render(workset.store, viewer, request)
        except WorksetError as error:  # an unknown (or another key's) session, turn or ref: the same answer
            return error.status, error_page(error.status, error.message, viewer)


def _login(workset: Workset) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        if request.method == "GET":
            return _login_page(200, "Log in with the API key your agents send to workset.",
                               request.query_params.get("next", ROOT))
        if not same_origin(request):
            return _html(403, error_page(403, "a login from another site is refused", None))
        fields = await form_fields(request)
        key, then = fields.get("key", "").strip(), fields.get("next", ROOT)
        try:
            viewer_for(workset.config, key)
        except LoginRequired as refused:
            message = str(refused) if key else "Enter an API key."
            return _login_page(401, message, then, failed=True)
        return logged_in(key, then, secure=request.url.scheme == "https")

    return endpoint


async def _logout(request: Request) -> Response:
    if not same_origin(request):
        return _html(403, error_page(403, "a logout from another site is refused", None))
    return logged_out()


async def _unknown(request: Request) -> Response:
    return _html(404, error_page(404, f"no page {request.url.path[:200]}", None))


def _login_page(status: int, message: str, then: str, failed: bool = False) -> Response:
    headers = {"www-authenticate": 'Bearer realm="workset"'} if status == 401 else {}
    return _html(status, login_page(message, safe_next(then), failed), headers)


def _html(status: int, body: str, headers: dict[str, str] | None = None) -> Response:
    return HTMLResponse(body, status_code=status, headers={**HEADERS, **(headers or {})})


def _here(request: Request) -> str:
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")
