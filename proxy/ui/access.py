"""Who may look, and at what: the caller's key (the bearer header as every route reads it, or the login form's
cookie), refused as the other routes refuse it, and the sessions it sees: its own (by key hash), or every key's
for ui.admin_keys."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..auth import caller_key, require_workset_key
from ..config import Config
from ..errors import WorksetError
from ..hashing import key_hash
from .html import ROOT

COOKIE = "workset_ui_key"
MAX_FORM_BYTES = 8192  # a login form holds one key


@dataclass(frozen=True)
class Viewer:
    key_hash: str | None  # the sessions shown are this key hash's; None: every key's (an admin)

    @property
    def label(self) -> str:
        return "admin: every key's sessions" if self.key_hash is None else f"key {self.key_hash[:8]}"


class LoginRequired(Exception):
    """No key, or one workset does not accept: answered with the login page (401)."""


def request_key(request: Request) -> str | None:
    return caller_key(request) or request.cookies.get(COOKIE) or None


def viewer_for(config: Config, key: str | None) -> Viewer:
    """The viewer a key makes; raises LoginRequired. When workset pays the provider only its own keys (and the
    admin keys) get in; otherwise any key does, and sees the sessions it made (none, for a key never used)."""
    if not key:
        # every keyless caller would share one namespace: nothing of it is shown
        raise LoginRequired("Log in with the API key your agents send to workset.")
    if any(hmac.compare_digest(key.encode(), admin.encode()) for admin in config.ui.admin_keys):
        return Viewer(None)
    try:
        require_workset_key(config, key)
    except WorksetError as error:
        raise LoginRequired("This workset pays the provider: log in with one of its own keys (server.api_keys).") \
            from error
    return Viewer(key_hash(key))


def same_origin(request: Request) -> bool:
    """A form post from one of workset's own pages: a browser says where a post comes from (Sec-Fetch-Site, Origin,
    Referer), and a cross-site one is refused so that no other site can log a visitor in or out. A client that
    sends none of them is not a browser, and has no cookie to abuse."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    source = request.headers.get("origin") or request.headers.get("referer")
    if source is None:
        return True
    return urlsplit(source).netloc.lower() == request.headers.get("host", "").lower() != ""


async def form_fields(request: Request) -> dict[str, str]:
    """An urlencoded form's fields (first value of each), read up to MAX_FORM_BYTES."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {}
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}


def safe_next(path: str | None) -> str:
    """Where to go after logging in: a dashboard path only, never another site."""
    if path and (path == ROOT or path.startswith(ROOT + "/") or path.startswith(ROOT + "?")) \
            and "\\" not in path and "//" not in path:
        return path
    return ROOT


def logged_in(key: str, to: str, secure: bool) -> Response:
    """Back to the page asked for, the key kept in a cookie scripts cannot read and other sites cannot send."""
    response = RedirectResponse(safe_next(to), status_code=303)
    response.set_cookie(COOKIE, key, path=ROOT, httponly=True, samesite="strict", secure=secure)
    return response


def logged_out() -> Response:
    response = RedirectResponse(f"{ROOT}/login", status_code=303)
    response.delete_cookie(COOKIE, path=ROOT, httponly=True, samesite="strict")
    return response
