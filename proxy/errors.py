"""OpenAI-style errors: {"error": {"message", "type", "code"}} with a 4xx or 5xx status."""

from __future__ import annotations

from typing import Any


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None,
               param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code, "param": param}}


class WorksetError(Exception):
    """An error answered to the client as is (bad input, auth, upstream unreachable or timed out)."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = kind
        self.code = code
        self.param = param

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.code, self.param)


def bad_request(message: str, param: str | None = None, code: str = "invalid_request") -> WorksetError:
    return WorksetError(400, message, "invalid_request_error", code, param)
