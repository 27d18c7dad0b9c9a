"""Who is calling: the bearer key as every route reads it (sessions belong to its hash, never to the key)."""

from __future__ import annotations

from starlette.requests import Request

from .config import Config
from .errors import WorksetError


def caller_key(request: Request) -> str | None:
    authorization = request.headers.get("authorization", "")
    if authorization[:7].lower() == "bearer ":
        return authorization[7:].strip() or None
    return request.headers.get("api-key") or request.headers.get("x-api-key") or None


def require_workset_key(config: Config, key: str | None) -> None:
    """When workset holds a provider key, only holders of its own keys (server.api_keys) may use it."""
    if config.workset_pays and key not in config.server.api_keys:
        raise WorksetError(401, "this workset pays the provider: present one of its keys (server.api_keys) as the "
                                "bearer token", "authentication_error", "invalid_api_key")
