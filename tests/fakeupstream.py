"""A scriptable fake OpenAI-compatible provider, served over real HTTP by tests.

The fake records every request it receives, then answers chat completions from a FIFO
of scripted replies (or a default echo reply when the script is empty):

    fake = FakeUpstream()
    fake.script(Completion("hi", usage=Usage(12, 1)), Error(429, "slow down"))
    with ServerThread(fake.app) as upstream:   # tests/servers.py
        ...                                    # drive the proxy at upstream.url + "/v1"
    assert fake.requests[0].headers["authorization"] == "Bearer k"
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import re
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

# A fixed timestamp keeps every response byte-for-byte deterministic.
CREATED = 1_700_000_000
CHAT_PATH = "/v1/chat/completions"


@dataclass
class Recorded:
    """One request as the fake received it."""

    path: str
    headers: dict[str, str]  # lowercased names; repeated headers joined with ", "
    body: dict[str, Any]  # parsed JSON object; {} when the body is empty or not a JSON object
    method: str = "POST"
    raw: bytes = b""
    # Set (from the server thread) when the client went away before a Hang or a stream finished,
    # so tests can wait for "the proxy aborted its upstream call".
    disconnected: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    at: float = field(default_factory=time.monotonic, compare=False)  # when it arrived (the test's clock)


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None  # sent as prompt_tokens_details.cached_tokens

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }
        if self.cached_tokens is not None:
            out["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return out


@dataclass
class ToolCall:
    name: str
    arguments: str = "{}"  # JSON text, as providers send it
    id: str | None = None  # None: "call_<completion number>_<index>", unique per FakeUpstream


@dataclass
class Completion:
    """A successful reply; streamed as chat.completion.chunk events when the request asks for it."""

    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None  # None: "tool_calls" if there are tool calls, else "stop"
    usage: Usage | None = None  # None: a rough deterministic count (chars / 4)
    pieces: list[str] | None = None  # streamed content deltas; None: content split after each word
    chunk_delay: float = 0.0  # seconds between streamed chunks, to observe chunks one by one
    model: str | None = None  # None: echo the requested model
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"x-request-id": "req_1"}, streamed or not

    def __post_init__(self) -> None:
        if self.pieces is None:
            return
        if self.content is None:
            self.content = "".join(self.pieces)
        elif "".join(self.pieces) != self.content:
            raise ValueError("pieces must join to content")


def message_text(message: dict[str, Any]) -> str:
    """Text of a message whose content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def echo(body: dict[str, Any]) -> Completion:
    """The default reply: echo the last user message."""
    users = [m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
    return Completion(content=f"echo: {message_text(users[-1]) if users else ''}")


@dataclass
class Error:
    """An HTTP error with an OpenAI-style body {"error": {"message", "type", "code", "param"}}."""

    status: int
    message: str = "fake upstream error"
    type: str = "api_error"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"retry-after": "1"}


@dataclass
class Hang:
    """Wait `seconds` (ending early if the client disconnects), then answer with `then`.

    The wait is an asyncio wait, so other requests are served meanwhile; when the server
    stops, uvicorn cancels it after its graceful-shutdown timeout and answers 500.
    """

    seconds: float
    then: Script = echo  # echo, not the fake's default, which may itself be a Hang


@dataclass
class CutStream:
    """Send a 200 and some content, then close the connection abruptly (no [DONE], no final chunk).

    Streaming requests get the role chunk and one chunk per piece; non-streaming requests get
    the first half of the JSON body.
    """

    pieces: list[str] = field(default_factory=lambda: ["partial ", "answer"])
    chunk_delay: float = 0.0


@dataclass
class Raw:
    """Any answer as given, streamed request or not: an HTML error page, a body that is not JSON, a wrong content
    type (None: no content-type header)."""

    status: int
    body: bytes
    content_type: str | None = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


Reply: TypeAlias = Completion | Error | Hang | CutStream | Raw
# A callable decides from the request body, e.g. replaying the next message of a trace.
Script: TypeAlias = Reply | Callable[[dict[str, Any]], "Script"]


class FakeUpstream:
    def __init__(
        self,
        default: Script = echo,
        models: Sequence[str] = ("fake-model",),
        embedding_dim: int = 8,
    ) -> None:
        self._default = default
        self._models = list(models)
        self._embedding_dim = embedding_dim
        self._lock = threading.Lock()
        self._queue: deque[Script] = deque()
        self._by_model: dict[str, Script] = {}
        self._requests: list[Recorded] = []
        self._completions = itertools.count(1)
        self.app = Starlette(
            routes=[
                Route(CHAT_PATH, self._chat, methods=["POST"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
                Route("/v1/messages", self._anthropic_messages, methods=["POST"]),
                Route("/v1/models", self._list_models, methods=["GET"]),
                # Record wrong paths too, so a test failure shows where the proxy actually went.
                Route("/{path:path}", self._unknown, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
            ]
        )

    @property
    def requests(self) -> list[Recorded]:
        """A snapshot of every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path == CHAT_PATH]

    def script(self, *replies: Script) -> None:
        """Queue replies for the next chat completions, first in first out."""
        with self._lock:
            self._queue.extend(replies)

    def answer_model(self, model: str, script: Script) -> None:
        """Every request for `model` gets `script` (outside the FIFO): e.g. a summariser called in the background."""
        with self._lock:
            self._by_model[model] = script

    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        with self._lock:
            return len(self._queue)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._by_model.clear()
            self._completions = itertools.count(1)

    # --- routes ---

    async def _record(self, request: Request) -> Recorded:
        raw = await request.body()
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = {}
        except RecursionError:  # nested deeper than json reads (about 1,000 levels); orjson reads up to 1,024
            parsed = orjson.loads(raw)
        headers = {k: ", ".join(request.headers.getlist(k)) for k in request.headers.keys()}
        rec = Recorded(
            path=request.url.path,
            headers=headers,
            body=parsed if isinstance(parsed, dict) else {},
            method=request.method,
            raw=raw,
        )
        with self._lock:
            self._requests.append(rec)
        return rec

    async def _chat(self, request: Request) -> ASGIApp:
        rec = await self._record(request)
        if not isinstance(rec.body.get("model"), str) or not isinstance(rec.body.get("messages"), list):
            return _error_response(Error(400, "model and messages are required", "invalid_request_error"))
        with self._lock:
            if rec.body["model"] in self._by_model:
                script = self._by_model[rec.body["model"]]
            else:
                script = self._queue.popleft() if self._queue else self._default
        return self._respond(_resolve(script, rec.body), rec)

    async def _anthropic_messages(self, request: Request) -> Response:
        """Anthropic's Messages API, just enough for litellm's anthropic/ provider (non-streamed)."""
        rec = await self._record(request)
        last = rec.body.get("messages", [{}])[-1]
        content = last.get("content")
        text = content if isinstance(content, str) else " ".join(
            part.get("text", "") for part in content or [] if isinstance(part, dict))
        return JSONResponse({
            "id": f"msg_fake_{next(self._completions)}", "type": "message", "role": "assistant",
            "model": rec.body.get("model", "claude"), "content": [{"type": "text", "text": f"echo: {text[-60:]}"}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 3},
        })

    def _respond(self, reply: Reply, rec: Recorded) -> ASGIApp:
        body = rec.body
        streaming = body.get("stream") is True
        if isinstance(reply, Error):
            return _error_response(reply)
        if isinstance(reply, Raw):
            return Response(reply.body, reply.status, reply.headers, reply.content_type)
        if isinstance(reply, Hang):
            then = self._respond(_resolve(reply.then, body), rec)
            return _HangThen(reply.seconds, then, rec)
        if isinstance(reply, CutStream):
            partial = Completion(pieces=reply.pieces)
            if streaming:
                # Role chunk + one chunk per piece; drop the finish chunk and [DONE].
                events = self._stream_events(partial, body)[: 1 + len(reply.pieces)]
                return _Send("text/event-stream", events, reply.chunk_delay, rec, complete=False)
            whole = json.dumps(self._completion_json(partial, body)).encode()
            return _Send("application/json", [whole[: len(whole) // 2]], 0.0, rec, complete=False)
        if streaming:
            return _Send("text/event-stream", self._stream_events(reply, body), reply.chunk_delay, rec,
                         headers=reply.headers)
        return JSONResponse(self._completion_json(reply, body), headers=reply.headers)

    def _tool_calls_json(self, reply: Completion, number: int) -> list[dict[str, Any]]:
        return [
            {
                "id": call.id or f"call_{number}_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for i, call in enumerate(reply.tool_calls)
        ]

    def _completion_json(self, reply: Completion, body: dict[str, Any]) -> dict[str, Any]:
        number = next(self._completions)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
        if reply.tool_calls:
            message["tool_calls"] = self._tool_calls_json(reply, number)
        return {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": CREATED,
            "model": reply.model or body["model"],
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(reply)}
            ],
            "usage": _usage(reply, body).to_json(),
        }

    def _stream_events(self, reply: Completion, body: dict[str, Any]) -> list[bytes]:
        number = next(self._completions)
        include_usage = (body.get("stream_options") or {}).get("include_usage") is True
        base: dict[str, Any] = {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": reply.model or body["model"],
        }
        if include_usage:
            base["usage"] = None  # OpenAI sends usage: null on every chunk but the last

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            return {**base, "choices": [choice]}

        pieces = reply.pieces if reply.pieces is not None else re.findall(r"\S+\s*|\s+", reply.content or "")
        chunks = [chunk({"role": "assistant", "content": "" if reply.content is not None else None})]
        chunks += [chunk({"content": piece}) for piece in pieces]
        for i, call in enumerate(self._tool_calls_json(reply, number)):
            args = call["function"]["arguments"]
            head = {**call, "function": {"name": call["function"]["name"], "arguments": ""}}
            chunks.append(chunk({"tool_calls": [{"index": i, **head}]}))
            # Two argument deltas, so clients must accumulate them.
            for part in (args[: len(args) // 2], args[len(args) // 2 :]):
                chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]}))
        chunks.append(chunk({}, _finish_reason(reply)))
        if include_usage:
            chunks.append({**base, "choices": [], "usage": _usage(reply, body).to_json()})
        return [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]

    async def _embeddings(self, request: Request) -> Response:
        rec = await self._record(request)
        inputs = rec.body.get("input")
        if not isinstance(rec.body.get("model"), str) or inputs is None:
            return _error_response(Error(400, "model and input are required", "invalid_request_error"))
        # A string, a token list, or a list of either.
        if isinstance(inputs, str) or (isinstance(inputs, list) and inputs and isinstance(inputs[0], int)):
            inputs = [inputs]
        dim = rec.body.get("dimensions") or self._embedding_dim
        as_base64 = rec.body.get("encoding_format") == "base64"
        data = []
        for i, item in enumerate(inputs):
            vector = _vector(json.dumps(item), dim)
            encoded: Any = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode() if as_base64 else vector
            data.append({"object": "embedding", "index": i, "embedding": encoded})
        tokens = sum(_rough_tokens(json.dumps(item)) for item in inputs)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": rec.body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def _list_models(self, request: Request) -> Response:
        await self._record(request)
        data = [{"id": m, "object": "model", "created": CREATED, "owned_by": "fake-upstream"} for m in self._models]
        return JSONResponse({"object": "list", "data": data})

    async def _unknown(self, request: Request) -> Response:
        await self._record(request)
        return _error_response(Error(404, f"Unknown path {request.url.path}", "invalid_request_error", "unknown_url"))


def _resolve(script: Script, body: dict[str, Any]) -> Reply:
    while callable(script):
        script = script(body)
    return script


def _finish_reason(reply: Completion) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _rough_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _usage(reply: Completion, body: dict[str, Any]) -> Usage:
    if reply.usage is not None:
        return reply.usage
    try:
        prompt = json.dumps(body.get("messages", [])) + json.dumps(body.get("tools", []))
    except RecursionError:  # nested past json's reach: a fixed rough count will do
        prompt = "x" * 4000
    completion = (reply.content or "") + "".join(c.name + c.arguments for c in reply.tool_calls)
    return Usage(_rough_tokens(prompt), _rough_tokens(completion))


def _vector(text: str, dim: int) -> list[float]:
    # Multiples of 1/128 in [-1, 1) are exact in float32, so base64 and float encodings agree.
    return [(b - 128) / 128 for b in hashlib.shake_256(text.encode()).digest(dim)]


def _error_response(error: Error) -> Response:
    payload = {"error": {"message": error.message, "type": error.type, "param": None, "code": error.code}}
    return JSONResponse(payload, status_code=error.status, headers=error.headers)


async def _until_disconnect(receive: Receive) -> None:
    # The request body is already read, so receive() only returns again once the client leaves.
    while (await receive())["type"] != "http.disconnect":
        pass


@dataclass
class _Send:
    """Send body parts one by one, noticing a client disconnect between parts."""

    media_type: str
    parts: list[bytes]
    delay: float
    rec: Recorded
    complete: bool = True  # False: return mid-response, which makes uvicorn close the socket
    headers: dict[str, str] = field(default_factory=dict)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.ensure_future(_until_disconnect(receive))
        try:
            headers = [(b"content-type", self.media_type.encode()), (b"cache-control", b"no-cache")]
            headers += [(name.encode(), value.encode("latin-1")) for name, value in self.headers.items()]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            for i, part in enumerate(self.parts):
                if i and self.delay:
                    await asyncio.wait({gone}, timeout=self.delay)
                if gone.done():
                    self.rec.disconnected.set()
                    return
                await send({"type": "http.response.body", "body": part, "more_body": True})
            if self.complete:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            gone.cancel()


@dataclass
class _HangThen:
    seconds: float
    then: ASGIApp
    rec: Recorded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.ensure_future(_until_disconnect(receive))
        try:
            await asyncio.wait({gone}, timeout=self.seconds)
            left = gone.done()
        finally:
            gone.cancel()
        if left:
            self.rec.disconnected.set()
            return
        await self.then(scope, receive, send)
