"""The HTTP server's own protocol: uvicorn's, except that a request which is not valid HTTP (a control character
in a header, a malformed request line) is refused with a 400 in OpenAI's error format, like every other 4xx
workset sends, instead of uvicorn's plain text."""

from __future__ import annotations

import asyncio

import orjson

from .errors import error_body


def http_protocol() -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol (its h11 one when httptools is missing), with that 400."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    except ImportError:  # pragma: no cover - httptools is a dependency; h11 is uvicorn's fallback
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base  # type: ignore[assignment]

    class OpenAIErrorProtocol(Base):  # type: ignore[valid-type, misc]
        def send_400_response(self, msg: str) -> None:
            body = orjson.dumps(error_body(f"not a valid HTTP request: {msg}", "invalid_request_error",
                                           "invalid_http_request"))
            self.transport.write(b"".join([
                b"HTTP/1.1 400 Bad Request\r\n",
                b"content-type: application/json\r\n",
                b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                b"connection: close\r\n\r\n",
                body,
            ]))
            self.transport.close()

    return OpenAIErrorProtocol
