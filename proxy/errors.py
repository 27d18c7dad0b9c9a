"""OpenAI-style errors: {"error": {"message", "type", "code"}} with a 4xx or 5xx status."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from .sse import boundary


# the retry-after of workset's own "try again" answers (429, 503): a second, about what the SDKs' first retry waits
RETRY_AFTER_S = "1"


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None,
               param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code, "param": param}}


class WorksetError(Exception):
    """An error answered to the client as is (bad input, auth, upstream unreachable or timed out)."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = kind
        self.code = code
        self.param = param
        self.headers = headers or {}  # the provider's retry-after, rate-limit and request-id headers, if any

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.code, self.param)

    def __reduce__(self) -> tuple[Any, ...]:  # raised in an extraction process, raised again here as it was
        return WorksetError, (self.status, self.message, self.type, self.code, self.param, self.headers)

    def response(self) -> Response:
        return json_response(self.status, self.body(), self.headers)


def store_down() -> WorksetError:
    """What a view of the store answers while the store does not (a 503 the client may retry)."""
    return WorksetError(503, "workset's store does not answer now; requests to the provider still go through",
                        "server_error", "store_unavailable", headers={"retry-after": RETRY_AFTER_S})


def bad_request(message: str, param: str | None = None, code: str = "invalid_request") -> WorksetError:
    return WorksetError(400, message, "invalid_request_error", code, param)


def json_response(status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(payload), status_code=status, media_type="application/json", headers=headers)


def sse_error(message: str, kind: str, code: str, tail: bytes = b"\n\n") -> bytes:
    """An error event for a server-sent-event stream, starting on an event boundary whatever `tail` (the end of
    what was sent so far) left open."""
    return boundary(tail) + b"data: " + orjson.dumps(error_body(message, kind, code)) + b"\n\n"
