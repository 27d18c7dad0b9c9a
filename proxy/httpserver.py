"""The HTTP server's own protocol: uvicorn's, except that
- a request which is not valid HTTP (a control character in a header, a malformed request line) is refused with a 400
  in OpenAI's error format, like every other 4xx workset sends, instead of uvicorn's plain text;
- a connection cannot be held without sending: uvicorn waits for ever for a new connection's first request and for
  the rest of a request once it began, so a client trickling bytes (slowloris) or just connecting holds a socket and
  its memory until the server runs out of either. A connection that has sent nothing is closed after the keep-alive
  time, as one that has sent its last request is; a request whose head and body have not all arrived within
  `read_s` of its first byte gets a 408, and its connection is closed;
- a request still running when a shutdown's grace ends (uvicorn then cancels it) is answered 503 in OpenAI's error
  format, with retry-after, instead of uvicorn's plain-text 500 (answer_when_cancelled)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from .errors import RETRY_AFTER_S, error_body
from .logs import get_logger

# set in the ASGI scope of a request whose reading timed out: the route tells it from a client that hung up
READ_TIMED_OUT = "workset.read_timed_out"


def http_protocol(read_s: float) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol (its h11 one when httptools is missing), with that 400 and those time limits."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    except ImportError:  # pragma: no cover - httptools is a dependency; h11 is uvicorn's fallback
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base  # type: ignore[assignment]

    class WorksetProtocol(Base):  # type: ignore[valid-type, misc]
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._reading: asyncio.TimerHandle | None = None
            # until its first byte, a new connection is an idle one (the first byte cancels this, as uvicorn's own)
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                                self.timeout_keep_alive_handler)

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_reading_clock()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._stop_reading_clock()
            self._reading = self.loop.call_later(read_s, self._read_too_slowly)

        def on_message_complete(self) -> None:
            self._stop_reading_clock()
            super().on_message_complete()

        def _stop_reading_clock(self) -> None:
            if self._reading is not None:
                self._reading.cancel()
                self._reading = None

        def _read_too_slowly(self) -> None:
            self._reading = None
            if self.transport.is_closing():
                return
            if self.flow.read_paused:  # workset stopped reading (a body not yet taken, a pipelined request): not
                self._reading = self.loop.call_later(read_s, self._read_too_slowly)  # the client's slowness
                return
            reading = self.cycle if self.cycle is not None and not self.cycle.response_complete else None
            if reading is not None:  # its route, waiting for the body, sees a disconnect: this tells it why
                reading.scope[READ_TIMED_OUT] = True  # type: ignore[literal-required]
            if reading is None or not reading.response_started:  # else the answer began: it can only be cut
                self._refuse(408, "Request Timeout", f"the request did not arrive whole within {read_s:g} s of its "
                             "first byte (server.request_read_s)", "invalid_request_error", "request_timeout")
            self.transport.close()

        def send_400_response(self, msg: str) -> None:
            self._refuse(400, "Bad Request", f"not a valid HTTP request: {msg}", "invalid_request_error",
                         "invalid_http_request")
            self.transport.close()

        def _refuse(self, status: int, reason: str, message: str, kind: str, code: str) -> None:
            body = orjson.dumps(error_body(message, kind, code))
            self.transport.write(b"".join([
                f"HTTP/1.1 {status} {reason}\r\n".encode("ascii"),
                b"content-type: application/json\r\n",
                b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                b"connection: close\r\n\r\n",
                body,
            ]))

    return WorksetProtocol


Asgi = Any  # an ASGI application: (scope, receive, send) -> awaitable


def answer_when_cancelled(app: Asgi) -> Asgi:
    """`app`, except that an HTTP request cancelled before its answer began (uvicorn cancels what still runs when a
    shutdown's grace ends) gets a 503 in OpenAI's format with retry-after, which the SDKs send again, to a server
    that is up; and a logged line, not uvicorn's traceback. An answer already begun (a stream) is cut: uvicorn
    closes its connection."""

    async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        started = False

        async def sending(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await app(scope, receive, sending)
        except asyncio.CancelledError:  # the request ends here, whatever was cancelled under it
            get_logger().warning("request_cancelled", path=scope.get("path"), answer="cut" if started else 503,
                                 why="still running when the shutdown's grace ended")
            if not started:
                body = orjson.dumps(error_body("workset is shutting down: send the request again", "server_error",
                                               "shutting_down"))
                await send({"type": "http.response.start", "status": 503, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode("ascii")),
                    (b"retry-after", RETRY_AFTER_S.encode("ascii")), (b"connection", b"close")]})
                await send({"type": "http.response.body", "body": body})

    return application
