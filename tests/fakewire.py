"""Strict fake providers for Anthropic Messages and OpenAI Responses, served over real HTTP by tests.

Where fakeupstream answers whatever it gets, these two check what the proxy forwards against the rules the real
APIs enforce (tool pairing, signed thinking, issued reasoning items, cache_control limits, ...). A request that
breaks one gets the provider's own 400 and a readable line in `fake.violations`, so proxy tests can end with
`assert not fake.violations`. Both also simulate prompt caching, to check that a frozen prefix is a hit next turn.

    fake = FakeAnthropic()
    fake.script(AnthropicReply([Thinking("plan"), ToolUse("read", {"path": "a"})]))
    with ServerThread(fake.app) as upstream:   # tests/servers.py
        ...                                    # drive the proxy at upstream.url
    assert not fake.violations and fake.cache_reads[-1] > 0

    fake = FakeResponses()
    fake.script(ResponsesReply([Reasoning("think"), FunctionCall("read", '{"path": "a"}')]))
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import re
import secrets
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any, TypeAlias

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from fakeupstream import CREATED, Recorded, _resolve, _Send

ANY_METHOD = ["GET", "POST", "PUT", "PATCH", "DELETE"]


# --- shared by both fakes ---


def canonical(value: Any) -> str:
    """The JSON text the fakes hash and count: sorted keys and no spaces, so equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def rough_tokens(value: Any) -> int:
    return len(canonical(value)) // 4


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def pieces(text: str) -> list[str]:
    """At least two deltas (one per word when there are several), so clients must accumulate them."""
    words = re.findall(r"\S+\s*|\s+", text)
    if len(words) >= 2:
        return words
    half = max(1, len(text) // 2)
    return [text[:half], text[half:]]


async def record(request: Request) -> Recorded:
    raw = await request.body()
    try:
        parsed = json.loads(raw) if raw else {}
    except (ValueError, RecursionError):
        parsed = {}
    headers = {k: ", ".join(request.headers.getlist(k)) for k in request.headers.keys()}
    query = request.url.query
    return Recorded(
        path=request.url.path + (f"?{query}" if query else ""),
        headers=headers,
        body=parsed if isinstance(parsed, dict) else {},
        method=request.method,
        raw=raw,
    )


class Violation(Exception):
    """A request the real provider would refuse: `rule` names the check, `message` reads like the provider's."""

    def __init__(self, rule: str, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule, self.message, self.param, self.code = rule, message, param, code


class _WireFake:
    """What both fakes share: recorded requests, a FIFO of scripted replies, the violations, one lock.

    The app runs in a server thread while the test reads from its own, so every state change holds the lock.
    """

    def __init__(self, default: Any) -> None:
        self._lock = threading.Lock()
        self._default = default
        self._queue: deque[Any] = deque()
        self._requests: list[Recorded] = []
        self._violations: list[str] = []
        self._ids: Counter[str] = Counter()
        self._forget()

    def _forget(self) -> None:
        """Drop what the fake issued and remembers (subclasses); called by __init__ and reset()."""

    @property
    def requests(self) -> list[Recorded]:
        """A snapshot of every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def violations(self) -> list[str]:
        """One readable line per refused request: which request, which rule, why."""
        with self._lock:
            return list(self._violations)

    def script(self, *replies: Any) -> None:
        """Queue replies for the next valid requests, first in first out (refused requests consume none)."""
        with self._lock:
            self._queue.extend(replies)

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._violations.clear()
            self._ids.clear()
            self._forget()

    async def _record(self, request: Request) -> Recorded:
        rec = await record(request)
        with self._lock:
            self._requests.append(rec)
        return rec

    def _new_id(self, prefix: str) -> str:
        self._ids[prefix] += 1
        return f"{prefix}_{self._ids[prefix]}"

    def _next_reply(self, body: dict[str, Any]) -> Any:
        return _resolve(self._queue.popleft() if self._queue else self._default, body)

    def _refuse(self, rec: Recorded, violation: Violation) -> None:
        number = next((i + 1 for i, r in enumerate(self._requests) if r is rec), len(self._requests))
        self._violations.append(f"{rec.method} {rec.path} (request {number}): {violation}")


# --- Anthropic Messages ---


@dataclass
class Text:
    text: str


@dataclass
class Thinking:
    text: str  # issued with signature = base64 HMAC-SHA256 of the text under the fake's secret


@dataclass
class RedactedThinking:
    """Issued with opaque `data` that the fake remembers."""


@dataclass
class ToolUse:
    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str | None = None  # None: "toolu_<n>", unique per fake


Block: TypeAlias = Text | Thinking | RedactedThinking | ToolUse


@dataclass
class AnthropicUsage:
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


@dataclass
class AnthropicError:
    """An HTTP error with Anthropic's body {"type": "error", "error": {"type", "message"}}."""

    status: int
    type: str = "api_error"  # e.g. overloaded_error (529), rate_limit_error (429), invalid_request_error (400)
    message: str = "fake upstream error"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class AnthropicReply:
    blocks: list[Block] = field(default_factory=list)
    stop_reason: str | None = None  # None: "tool_use" if any ToolUse, else "end_turn"
    usage: AnthropicUsage | None = None  # None: from the cache simulation and rough counts
    # Streamed: an `error` event after the first `error_after` blocks, then the stream ends (no message_stop).
    # Not streamed: this error as the HTTP answer.
    stream_error: AnthropicError | None = None
    error_after: int = 1
    chunk_delay: float = 0.0  # seconds between SSE events
    model: str | None = None  # None: echo the requested model


AnthropicScript: TypeAlias = AnthropicReply | AnthropicError | Callable[[dict[str, Any]], "AnthropicScript"]


def anthropic_echo(body: dict[str, Any]) -> AnthropicReply:
    """The default reply: echo the text of the last user message."""
    users = [m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    if isinstance(content, list):
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return AnthropicReply([Text(f"echo: {content}")])


@dataclass(frozen=True)
class CacheBlock:
    """One block of the cacheable sequence: tools, then system blocks, then message blocks, in order."""

    path: str  # "tools.0", "system" / "system.1", "messages.3.content" (a string) / "messages.3.content.2"
    text: str  # canonical JSON of the block without cache_control (a string content counts as a text block)
    breakpoint: bool  # the block (or a block nested in it) carries cache_control

    @property
    def tokens(self) -> int:
        return len(self.text) // 4


@dataclass(frozen=True)
class CacheHit:
    index: int  # position in cacheable_blocks(body) of the last block read from the cache
    path: str
    tokens: int  # = cache_read_input_tokens


ANTHROPIC_BLOCKS = frozenset({
    "text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use",
    "web_search_tool_result", "search_result", "container_upload",
})
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
BLOCK_FIELDS = MappingProxyType({  # the fields each block type must have, and their types
    "text": {"text": str},
    "tool_use": {"id": str, "name": str, "input": dict},
    "tool_result": {"tool_use_id": str},
    "thinking": {"thinking": str, "signature": str},
    "redacted_thinking": {"data": str},
    "image": {"source": dict},
    "document": {"source": dict},
})
CACHE_LOOKBACK = 20  # Anthropic checks for a hit at a breakpoint and up to 20 blocks before it


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _strip_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


def _has_cache_control(value: Any) -> bool:
    if isinstance(value, dict):
        return "cache_control" in value or any(_has_cache_control(v) for v in value.values())
    return isinstance(value, list) and any(_has_cache_control(v) for v in value)


def _marked(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every block carrying cache_control, in cache order, with where it is (incl. inside a tool_result)."""
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    for i, tool in enumerate(tools):
        if isinstance(tool, dict) and "cache_control" in tool:
            yield f"tools.{i}", tool
    system = body.get("system")
    for i, block in enumerate(system if isinstance(system, list) else []):
        if isinstance(block, dict) and "cache_control" in block:
            yield f"system.{i}", block
    for i, message in enumerate(body.get("messages") or []):
        for j, block in enumerate(_blocks(message) if isinstance(message, dict) else []):
            if not isinstance(block, dict):
                continue
            if "cache_control" in block:
                yield f"messages.{i}.content.{j}", block
            nested = block.get("content") if block.get("type") == "tool_result" else None
            for k, inner in enumerate(nested if isinstance(nested, list) else []):
                if isinstance(inner, dict) and "cache_control" in inner:
                    yield f"messages.{i}.content.{j}.content.{k}", inner


def cacheable_blocks(body: dict[str, Any]) -> list[CacheBlock]:
    """The sequence Anthropic caches by prefix. A message block is keyed with its role, not its message index,
    since the API merges consecutive messages of one role."""

    def block(path: str, value: Any) -> CacheBlock:
        return CacheBlock(path, canonical(_strip_cache_control(value)), _has_cache_control(value))

    out = [block(f"tools.{i}", ["tool", t]) for i, t in enumerate(body.get("tools") or [])]
    system = body.get("system")
    if isinstance(system, str):
        out.append(block("system", ["system", {"type": "text", "text": system}]))
    elif isinstance(system, list):
        out += [block(f"system.{i}", ["system", b]) for i, b in enumerate(system)]
    for i, message in enumerate(body.get("messages") or []):
        role, content = message.get("role"), message.get("content")
        if isinstance(content, str):
            out.append(block(f"messages.{i}.content", [role, {"type": "text", "text": content}]))
        else:
            out += [block(f"messages.{i}.content.{j}", [role, b]) for j, b in enumerate(content or [])]
    return out


def _prefix_keys(model: str, blocks: Sequence[CacheBlock]) -> list[str]:
    running = hashlib.sha256(canonical(model).encode())
    keys = []
    for b in blocks:
        running.update(b"\n" + b.text.encode())
        keys.append(running.copy().hexdigest())
    return keys


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_block(block: Any, where: str, allowed: frozenset[str] = ANTHROPIC_BLOCKS) -> None:
    if not isinstance(block, dict) or block.get("type") not in allowed:
        kind = block.get("type") if isinstance(block, dict) else type(block).__name__
        raise Violation("shape", f"{where}.type: unknown or misplaced content block type {kind!r}")
    kind = block["type"]
    for name, expected in BLOCK_FIELDS.get(kind, {}).items():
        if not isinstance(block.get(name), expected):
            raise Violation("shape", f"{where}.{name}: Field required ({expected.__name__})")
    if kind == "text" and not block["text"].strip():
        if "cache_control" in block:
            raise Violation("cache_control_placement", f"{where}.text: cache_control cannot be set for empty text blocks")
        raise Violation("empty_text", f"{where}.text: text content blocks must contain non-whitespace text")
    if kind == "tool_result":
        inner = block.get("content")
        if not (inner is None or isinstance(inner, str) or isinstance(inner, list)):
            raise Violation("shape", f"{where}.content: a string or a list of content blocks")
        for k, nested in enumerate(inner if isinstance(inner, list) else []):
            _check_block(nested, f"{where}.content.{k}", frozenset({"text", "image", "document", "search_result"}))


def _check_shape(body: dict[str, Any]) -> None:
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise Violation("shape", "model: Field required (a string)")
    if not _is_int(body.get("max_tokens")) or body["max_tokens"] < 1:
        raise Violation("shape", "max_tokens: Field required (a positive integer)")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise Violation("shape", "stream: Input should be a valid boolean")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Violation("shape", "messages: Field required (a non-empty list)")
    for i, message in enumerate(messages):
        # "system" among the messages: Claude Code sends them (the mid-conversation beta), the API accepts them
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
            raise Violation("shape", f"messages.{i}.role: Input should be 'user', 'assistant' or 'system'")
        content = message.get("content")
        final_assistant = i == len(messages) - 1 and message["role"] == "assistant"
        if isinstance(content, str):
            if not content.strip() and not final_assistant:
                raise Violation("empty_content", f"messages.{i}: all messages must have non-empty content "
                                                 "except for the optional final assistant message")
        elif isinstance(content, list):
            if not content and not final_assistant:
                raise Violation("empty_content", f"messages.{i}.content: List should have at least 1 item")
            for j, block in enumerate(content):
                _check_block(block, f"messages.{i}.content.{j}")
        else:
            raise Violation("shape", f"messages.{i}.content: a string or a list of content blocks")
    if messages[0]["role"] != "user":
        raise Violation("shape", "messages.0.role: the first message must use the user role")
    system = body.get("system")
    if isinstance(system, list):
        for i, block in enumerate(system):
            _check_block(block, f"system.{i}", frozenset({"text"}))
    elif system is not None and not isinstance(system, str):
        raise Violation("shape", "system: a string or a list of text blocks")


def _check_tools(body: dict[str, Any]) -> None:
    tools = body.get("tools", [])
    if not isinstance(tools, list):
        raise Violation("tools", "tools: Input should be a valid list")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise Violation("tools", f"tools.{i}.name: Field required")
        kind = tool.get("type")
        if kind in (None, "custom"):
            schema = tool.get("input_schema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                raise Violation("tools", f"tools.{i}.custom.input_schema: Field required (a JSON schema of type object)")
        elif not isinstance(kind, str):
            raise Violation("tools", f"tools.{i}.type: Input should be a string")
        if tool["name"] in names:
            raise Violation("tools", f"tools: Tool names must be unique. Duplicate: {tool['name']}")
        names.add(tool["name"])
    choice = body.get("tool_choice")
    if choice is None:
        return
    if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
        raise Violation("tool_choice", "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
    if "disable_parallel_tool_use" in choice and not isinstance(choice["disable_parallel_tool_use"], bool):
        raise Violation("tool_choice", "tool_choice.disable_parallel_tool_use: Input should be a valid boolean")
    if choice["type"] in ("any", "tool") and not names:
        raise Violation("tool_choice", "tool_choice may only be specified while providing tools")
    if choice["type"] == "tool" and choice.get("name") not in names:
        raise Violation("tool_choice", f"tool_choice.name: no tool named {choice.get('name')!r} in tools")


def _check_cache_control(body: dict[str, Any]) -> None:
    marked = list(_marked(body))
    seen_5m = False
    for where, block in marked:
        control = block["cache_control"]
        if (not isinstance(control, dict) or control.get("type") != "ephemeral" or set(control) - {"type", "ttl"}
                or control.get("ttl", "5m") not in ("5m", "1h")):
            raise Violation("cache_control_shape", f"{where}.cache_control: expected {{'type': 'ephemeral'}} "
                                                   f"with an optional ttl '5m' or '1h', got {control!r}")
        if block.get("type") in THINKING_BLOCKS:
            raise Violation("cache_control_placement", f"{where}.cache_control: cannot be set on {block['type']} blocks")
        if control.get("ttl", "5m") == "1h" and seen_5m:
            raise Violation("cache_control_ttl_order", f"{where}: a ttl='1h' cache_control block may not come after "
                                                       "a ttl='5m' one (longer TTLs must come first)")
        seen_5m = seen_5m or control.get("ttl", "5m") == "5m"
    if len(marked) > 4:
        raise Violation("cache_control_count", f"A maximum of 4 blocks with cache_control may be provided. Found {len(marked)}.")


def _check_tool_pairing(messages: list[dict[str, Any]]) -> None:
    def ids(message: dict[str, Any] | None, kind: str, key: str) -> list[str]:
        if message is None:
            return []
        return [b.get(key) for b in _blocks(message) if b.get("type") == kind]

    seen: set[str] = set()
    for i, message in enumerate(messages):
        blocks = _blocks(message)
        for use_id in ids(message, "tool_use", "id") + ids(message, "server_tool_use", "id"):
            if use_id in seen:
                raise Violation("tool_use_ids", f"messages.{i}: `tool_use` ids must be unique, found {use_id} twice")
            seen.add(use_id)
        results = [j for j, b in enumerate(blocks) if b.get("type") == "tool_result"]
        if results and message["role"] != "user":
            raise Violation("tool_pairing", f"messages.{i}.content.{results[0]}: tool_result blocks belong in user messages")
        if results:
            others = [j for j, b in enumerate(blocks) if b.get("type") != "tool_result"]
            if others and others[0] < results[-1]:
                raise Violation("tool_result_order", f"messages.{i}: tool_result blocks must come before any other "
                                                     "content in a user message")
            previous = messages[i - 1] if i and messages[i - 1]["role"] == "assistant" else None
            issued = set(ids(previous, "tool_use", "id"))
            for j in results:
                if blocks[j]["tool_use_id"] not in issued:
                    raise Violation("tool_pairing", f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                                    f"`tool_result` blocks: {blocks[j]['tool_use_id']}. Each `tool_result` block must "
                                    "have a corresponding `tool_use` block in the previous message.")
        uses = ids(message, "tool_use", "id")
        if uses:
            following = messages[i + 1] if i + 1 < len(messages) and messages[i + 1]["role"] == "user" else None
            answered = set(ids(following, "tool_result", "tool_use_id"))
            missing = [u for u in uses if u not in answered]
            if missing:
                raise Violation("tool_pairing", f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                                "corresponding `tool_result` block in the next message.")


def _thinking_key(block: dict[str, Any]) -> tuple[Any, ...]:
    if block.get("type") == "thinking":
        return ("thinking", block.get("thinking"), block.get("signature"))
    return (block.get("type"), block.get("data"))


class FakeAnthropic(_WireFake):
    """Anthropic's Messages API: POST /v1/messages (also ?beta=true) and /v1/messages/count_tokens."""

    def __init__(self, default: AnthropicScript = anthropic_echo) -> None:
        self._secret = secrets.token_bytes(32)  # per fake, so a signature from another fake never verifies
        super().__init__(default)
        self.app = Starlette(routes=[
            Route("/v1/messages", self._messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
            Route("/{path:path}", self._unknown, methods=ANY_METHOD),
        ])

    def _forget(self) -> None:
        self._redacted: set[str] = set()
        self._thinking_before: dict[str, list[dict[str, Any]]] = {}  # tool_use id -> thinking issued before it
        self._cache: set[str] = set()
        self._cache_hits: list[CacheHit | None] = []

    @property
    def cache_hits(self) -> list[CacheHit | None]:
        """Per valid /v1/messages request, in order: the longest cached prefix read, or None on a miss."""
        with self._lock:
            return list(self._cache_hits)

    @property
    def cache_reads(self) -> list[int]:
        """Per valid /v1/messages request, in order: its cache_read_input_tokens."""
        return [hit.tokens if hit else 0 for hit in self.cache_hits]

    def cache_hit_index(self, request: int = -1) -> int | None:
        """Index in cacheable_blocks(body) of the last block the request read from the cache (None: a miss)."""
        hit = self.cache_hits[request]
        return hit.index if hit else None

    def sign(self, thinking: str) -> str:
        """The signature this fake gives a thinking block with this text."""
        return base64.b64encode(hmac.new(self._secret, thinking.encode(), hashlib.sha256).digest()).decode()

    # --- routes ---

    async def _messages(self, request: Request) -> ASGIApp:
        rec = await self._record(request)
        with self._lock:
            try:
                self._validate(rec)
            except Violation as v:
                self._refuse(rec, v)
                return _anthropic_error(AnthropicError(400, "invalid_request_error", str(v)))
            usage = self._simulate_cache(rec.body)
            reply = self._next_reply(rec.body)
            if isinstance(reply, AnthropicError):
                return _anthropic_error(reply)
            message = self._issue(reply, rec.body, usage)
        if rec.body.get("stream") is not True:
            if reply.stream_error is not None:
                return _anthropic_error(reply.stream_error)
            return JSONResponse(message)
        return _Send("text/event-stream", _message_events(message, reply), reply.chunk_delay, rec)

    async def _count_tokens(self, request: Request) -> Response:
        rec = await self._record(request)
        if not isinstance(rec.body.get("messages"), list):
            return _anthropic_error(AnthropicError(400, "invalid_request_error", "messages: Field required"))
        return JSONResponse({"input_tokens": rough_tokens(rec.body)})

    async def _unknown(self, request: Request) -> Response:
        rec = await self._record(request)
        return _anthropic_error(AnthropicError(404, "not_found_error", f"Not found: {rec.method} {rec.path}"))

    # --- validation ---

    def _validate(self, rec: Recorded) -> None:
        if "anthropic-version" not in rec.headers:
            raise Violation("headers", "anthropic-version: header is required")
        body = rec.body
        _check_shape(body)
        _check_tools(body)
        _check_cache_control(body)
        _check_tool_pairing(body["messages"])
        self._check_thinking(body)

    def _check_thinking(self, body: dict[str, Any]) -> None:
        messages: list[dict[str, Any]] = body["messages"]
        for i, message in enumerate(messages):
            for j, block in enumerate(_blocks(message)):
                where = f"messages.{i}.content.{j}"
                if block["type"] in THINKING_BLOCKS and message["role"] != "assistant":
                    raise Violation("thinking_placement", f"{where}: {block['type']} blocks are only allowed in "
                                                          "assistant messages")
                if block["type"] == "thinking" and not hmac.compare_digest(block["signature"], self.sign(block["thinking"])):
                    raise Violation("thinking_signature", f"{where}: Invalid `signature` in `thinking` block")
                if block["type"] == "redacted_thinking" and block["data"] not in self._redacted:
                    raise Violation("redacted_thinking", f"{where}: Invalid `data` in `redacted_thinking` block")
        thinking = body.get("thinking")
        if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "adaptive"):
            return
        last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
        if last is None:
            return
        blocks = _blocks(messages[last])
        for block in blocks:
            required = self._thinking_before.get(block.get("id", "")) if block["type"] == "tool_use" else None
            if required and [_thinking_key(b) for b in blocks[: len(required)]] != [_thinking_key(b) for b in required]:
                raise Violation("thinking_preserved", f"messages.{last}: with `thinking` enabled, the assistant "
                                f"message with tool_use {block['id']} must start with the thinking blocks it was "
                                "issued with, unchanged (the current tool-use turn keeps its thinking)")

    # --- answering ---

    def _simulate_cache(self, body: dict[str, Any]) -> AnthropicUsage:
        blocks = cacheable_blocks(body)
        keys = _prefix_keys(body["model"], blocks)
        marks = [i for i, b in enumerate(blocks) if b.breakpoint]
        hits = [j for b in marks for j in range(b, max(-1, b - CACHE_LOOKBACK - 1), -1) if keys[j] in self._cache]
        hit = max(hits, default=-1)
        end = max(marks, default=-1)  # the cache is written up to the last breakpoint
        tokens = [b.tokens for b in blocks]
        read = sum(tokens[: hit + 1])
        self._cache_hits.append(CacheHit(hit, blocks[hit].path, read) if hit >= 0 else None)
        self._cache.update(keys[b] for b in marks)
        return AnthropicUsage(
            input_tokens=sum(tokens[max(hit, end) + 1:]),
            output_tokens=0,
            cache_read_input_tokens=read,
            cache_creation_input_tokens=sum(tokens[hit + 1: end + 1]),
        )

    def _issue(self, reply: AnthropicReply, body: dict[str, Any], usage: AnthropicUsage) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for block in reply.blocks:
            if isinstance(block, Text):
                content.append({"type": "text", "text": block.text})
            elif isinstance(block, Thinking):
                content.append({"type": "thinking", "thinking": block.text, "signature": self.sign(block.text)})
            elif isinstance(block, RedactedThinking):
                tag = hmac.new(self._secret, self._new_id("redacted").encode(), hashlib.sha256).digest()
                data = base64.b64encode(tag + secrets.token_bytes(24)).decode()
                self._redacted.add(data)
                content.append({"type": "redacted_thinking", "data": data})
            else:
                tool_id = block.id or self._new_id("toolu")
                self._thinking_before[tool_id] = [b for b in content if b["type"] in THINKING_BLOCKS]
                content.append({"type": "tool_use", "id": tool_id, "name": block.name, "input": block.input})
        if reply.usage is None:
            usage.output_tokens = max(1, rough_tokens(content))
        stop = reply.stop_reason or ("tool_use" if any(isinstance(b, ToolUse) for b in reply.blocks) else "end_turn")
        return {
            "id": self._new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": reply.model or body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": asdict(reply.usage or usage),
        }


def _anthropic_error(error: AnthropicError) -> Response:
    payload = {"type": "error", "error": {"type": error.type, "message": error.message}}
    return JSONResponse(payload, status_code=error.status, headers=error.headers)


def _message_events(message: dict[str, Any], reply: AnthropicReply) -> list[bytes]:
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**message["usage"], "output_tokens": 1}}
    out = [sse("message_start", {"type": "message_start", "message": start}), sse("ping", {"type": "ping"})]
    for index, block in enumerate(message["content"]):
        if reply.stream_error is not None and index == reply.error_after:
            break
        out += _block_events(index, block)
    if reply.stream_error is not None:
        error = {"type": reply.stream_error.type, "message": reply.stream_error.message}
        return out + [sse("error", {"type": "error", "error": error})]
    delta = {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
             "usage": {"output_tokens": message["usage"]["output_tokens"]}}
    return out + [sse("message_delta", delta), sse("message_stop", {"type": "message_stop"})]


def _block_events(index: int, block: dict[str, Any]) -> list[bytes]:
    def delta(body: dict[str, Any]) -> bytes:
        return sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": body})

    kind = block["type"]
    if kind == "text":
        head = {"type": "text", "text": ""}
        deltas = [delta({"type": "text_delta", "text": p}) for p in pieces(block["text"])]
    elif kind == "thinking":
        head = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [delta({"type": "thinking_delta", "thinking": p}) for p in pieces(block["thinking"])]
        deltas.append(delta({"type": "signature_delta", "signature": block["signature"]}))
    elif kind == "tool_use":
        head = {**block, "input": {}}
        args = json.dumps(block["input"])
        deltas = [delta({"type": "input_json_delta", "partial_json": p}) for p in (args[: len(args) // 2], args[len(args) // 2:])]
    else:  # redacted_thinking arrives whole
        head, deltas = block, []
    start = sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": head})
    return [start, *deltas, sse("content_block_stop", {"type": "content_block_stop", "index": index})]


# --- OpenAI Responses ---


@dataclass
class Reasoning:
    summary_text: str = ""
    encrypted: bool = True  # issue encrypted_content: opaque base64 the fake remembers byte for byte


@dataclass
class OutputText:
    text: str  # an assistant `message` item with one output_text part


@dataclass
class FunctionCall:
    name: str
    arguments: str = "{}"  # JSON text
    call_id: str | None = None  # None: "call_<n>", unique per fake


@dataclass
class CustomToolCall:
    name: str
    input: str = ""  # free text (a custom tool's grammar), not JSON
    call_id: str | None = None


Item: TypeAlias = Reasoning | OutputText | FunctionCall | CustomToolCall


@dataclass
class ResponsesUsage:
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass
class ResponsesError:
    """An HTTP error with OpenAI's body {"error": {"message", "type", "param", "code"}}."""

    status: int
    type: str = "server_error"
    message: str = "fake upstream error"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class ResponsesReply:
    items: list[Item] = field(default_factory=list)
    usage: ResponsesUsage | None = None  # None: from the cache simulation and rough counts
    # Streamed: response.failed (with this error) after the first `fail_after` items. Not streamed: this HTTP error.
    fail: ResponsesError | None = None
    cut: bool = False  # close the connection after `fail_after` items (not streamed: after half the JSON body)
    fail_after: int = 1
    chunk_delay: float = 0.0  # seconds between SSE events
    model: str | None = None  # None: echo the requested model


ResponsesScript: TypeAlias = ResponsesReply | ResponsesError | Callable[[dict[str, Any]], "ResponsesScript"]
# /v1/responses/compact answers: a JSON body sent as is with 200, or an error.
CompactScript: TypeAlias = dict[str, Any] | ResponsesError | Callable[[dict[str, Any]], "CompactScript"]


def responses_echo(body: dict[str, Any]) -> ResponsesReply:
    """The default reply: echo the text of the last user message."""
    given = body.get("input")
    text = given if isinstance(given, str) else ""
    users = [i for i in given if isinstance(i, dict) and i.get("role") == "user"] if isinstance(given, list) else []
    if users:
        content = users[-1].get("content")
        text = content if isinstance(content, str) else "".join(
            p.get("text", "") for p in content or [] if isinstance(p, dict))
    return ResponsesReply([OutputText(f"echo: {text}")])


RESPONSES_ITEMS = frozenset({
    "message", "reasoning", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
    "local_shell_call", "local_shell_call_output", "web_search_call", "compaction",
})
MESSAGE_PARTS = frozenset({"input_text", "input_image", "input_file", "output_text", "refusal"})
MESSAGE_ROLES = frozenset({"user", "assistant", "system", "developer"})
CALL_OUTPUT = MappingProxyType({"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"})
OUTPUT_CALL = MappingProxyType({output: call for call, output in CALL_OUTPUT.items()})
ITEM_FIELDS: MappingProxyType[str, dict[str, type]] = MappingProxyType({
    "function_call": {"call_id": str, "name": str, "arguments": str},
    "function_call_output": {"call_id": str},
    "custom_tool_call": {"call_id": str, "name": str, "input": str},
    "custom_tool_call_output": {"call_id": str},
    "reasoning": {"id": str, "summary": list},
    "compaction": {"encrypted_content": str},
})


@dataclass
class _IssuedReasoning:
    encrypted: str | None
    follower: dict[str, Any] | None  # the output item issued right after it, which must follow it in any input
    stored: bool


def _item_type(item: dict[str, Any]) -> str | None:
    return item.get("type") or ("message" if "role" in item else None)


def _follows(follower: dict[str, Any], item: dict[str, Any]) -> bool:
    kind = follower["type"]
    if _item_type(item) != kind:
        return False
    if kind in CALL_OUTPUT:
        return item.get("call_id") == follower["call_id"]
    if kind == "message":  # clients may drop an assistant message's id when they replay it
        return item.get("role") == "assistant" and item.get("id", follower["id"]) == follower["id"]
    return item.get("id") == follower["id"]


def _kind_word(kind: str) -> str:
    return "function" if kind.startswith("function") else "custom tool"


def _check_item(item: Any, where: str) -> None:
    kind = _item_type(item) if isinstance(item, dict) else None
    if kind not in RESPONSES_ITEMS:
        raise Violation("input_item", f"Invalid value: {kind!r}. Supported values are: {', '.join(sorted(RESPONSES_ITEMS))}.",
                        f"{where}.type", "invalid_value")
    for name, expected in ITEM_FIELDS.get(kind, {}).items():
        if not isinstance(item.get(name), expected):
            raise Violation("input_item", f"Missing required parameter: '{where}.{name}' ({expected.__name__}).",
                            f"{where}.{name}", "missing_required_parameter")
    if kind in OUTPUT_CALL and not isinstance(item.get("output"), (str, list)):
        raise Violation("input_item", f"Missing required parameter: '{where}.output'.", f"{where}.output")
    if kind != "message":
        return
    if item.get("role") not in MESSAGE_ROLES:
        raise Violation("input_item", f"Invalid value: {item.get('role')!r}. Supported values are: "
                        "'assistant', 'system', 'developer', and 'user'.", f"{where}.role", "invalid_value")
    content = item.get("content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise Violation("input_item", f"Invalid type for '{where}.content': expected a string or an array.",
                        f"{where}.content", "invalid_type")
    for k, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in MESSAGE_PARTS:
            kind = part.get("type") if isinstance(part, dict) else None
            raise Violation("input_item", f"Invalid value: {kind!r}. Supported values are: "
                            f"{', '.join(sorted(MESSAGE_PARTS))}.", f"{where}.content[{k}].type", "invalid_value")


def _check_request(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The checks that need no memory of earlier requests; returns the input as a list of items."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise Violation("shape", "Missing required parameter: 'model'.", "model", "missing_required_parameter")
    for name in ("stream", "store", "parallel_tool_calls"):
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise Violation("shape", f"Invalid type for '{name}': expected a boolean.", name, "invalid_type")
    if body.get("instructions") is not None and not isinstance(body["instructions"], str):
        raise Violation("shape", "Invalid type for 'instructions': expected a string.", "instructions", "invalid_type")
    tools = body.get("tools", [])
    if not isinstance(tools, list):
        raise Violation("tools", "Invalid type for 'tools': expected an array.", "tools", "invalid_type")
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise Violation("tools", f"Missing required parameter: 'tools[{i}].type'.", f"tools[{i}].type",
                            "missing_required_parameter")
    given = body.get("input")
    if isinstance(given, str):
        return [{"role": "user", "content": given}]
    if not isinstance(given, list):
        raise Violation("shape", "Invalid type for 'input': expected a string or an array of input items.", "input",
                        "invalid_type")
    for k, item in enumerate(given):
        _check_item(item, f"input[{k}]")
    return given


def _cached_tokens(tokens: int) -> int:
    """OpenAI caches from 1,024 tokens on, in steps of 128."""
    return tokens - tokens % 128 if tokens >= 1024 else 0


class FakeResponses(_WireFake):
    """OpenAI's Responses API: POST /v1/responses, POST /v1/responses/compact, GET /v1/models."""

    def __init__(self, default: ResponsesScript = responses_echo, models: Sequence[str] = ("fake-model",)) -> None:
        self._secret = secrets.token_bytes(32)
        self._models = list(models)
        super().__init__(default)
        self.app = Starlette(routes=[
            Route("/v1/responses", self._responses, methods=["POST"]),
            Route("/v1/responses/compact", self._compact, methods=["POST"]),
            Route("/v1/models", self._list_models, methods=["GET"]),
            Route("/{path:path}", self._unknown, methods=ANY_METHOD),
        ])

    def _forget(self) -> None:
        self._reasoning: dict[str, _IssuedReasoning] = {}
        self._stored: dict[str, list[dict[str, Any]]] = {}  # response id -> its whole conversation, output included
        self._prompts: dict[str, list[list[str]]] = {}  # cache key -> each earlier prompt, item by item
        self._cached: list[int] = []
        self._compact_queue: deque[CompactScript] = deque()

    @property
    def cached_tokens(self) -> list[int]:
        """Per valid /v1/responses request, in order: its usage.input_tokens_details.cached_tokens."""
        with self._lock:
            return list(self._cached)

    def script_compact(self, *answers: CompactScript) -> None:
        """Queue answers for /v1/responses/compact (which answers 404 while none is queued)."""
        with self._lock:
            self._compact_queue.extend(answers)

    def stored(self, response_id: str) -> list[dict[str, Any]] | None:
        """The conversation a stored response continues from: its input (after its own history) and output."""
        with self._lock:
            items = self._stored.get(response_id)
            return None if items is None else list(items)

    # --- routes ---

    async def _responses(self, request: Request) -> ASGIApp:
        rec = await self._record(request)
        with self._lock:
            try:
                items = _check_request(rec.body)
                history = self._check_history(rec.body, items)
            except Violation as v:
                self._refuse(rec, v)
                return _openai_error(ResponsesError(400, "invalid_request_error", str(v), v.code), v.param)
            conversation = history + items
            cached, total = self._simulate_cache(rec.body, conversation)
            reply = self._next_reply(rec.body)
            if isinstance(reply, ResponsesError):
                return _openai_error(reply)
            response = self._issue(reply, rec.body, conversation, ResponsesUsage(total, 0, cached))
        if rec.body.get("stream") is not True:
            if reply.fail is not None:
                return _openai_error(reply.fail)
            if reply.cut:
                raw = json.dumps(response).encode()
                return _Send("application/json", [raw[: len(raw) // 2]], 0.0, rec, complete=False)
            return JSONResponse(response)
        events, complete = _response_events(response, reply)
        return _Send("text/event-stream", events, reply.chunk_delay, rec, complete=complete)

    async def _compact(self, request: Request) -> Response:
        rec = await self._record(request)
        with self._lock:
            answer = _resolve(self._compact_queue.popleft(), rec.body) if self._compact_queue else None
        if answer is None:
            return _openai_error(ResponsesError(404, "invalid_request_error", f"Unknown path {rec.path}", "unknown_url"))
        if isinstance(answer, ResponsesError):
            return _openai_error(answer)
        return JSONResponse(answer)

    async def _list_models(self, request: Request) -> Response:
        await self._record(request)
        data = [{"id": m, "object": "model", "created": CREATED, "owned_by": "fake-responses"} for m in self._models]
        return JSONResponse({"object": "list", "data": data})

    async def _unknown(self, request: Request) -> Response:
        rec = await self._record(request)
        return _openai_error(ResponsesError(404, "invalid_request_error", f"Unknown path {rec.path}", "unknown_url"))

    # --- validation ---

    def _check_history(self, body: dict[str, Any], items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The checks against what the fake issued and stored; returns the stored history the input continues."""
        previous = body.get("previous_response_id")
        if previous is not None and (not isinstance(previous, str) or previous not in self._stored):
            raise Violation("previous_response", f"Previous response with id '{previous}' not found.",
                            "previous_response_id", "previous_response_not_found")
        history = self._stored[previous] if previous is not None else []
        calls = {(kind, i.get("call_id")) for i in history if (kind := _item_type(i)) in CALL_OUTPUT}
        for k, item in enumerate(items):
            kind = _item_type(item)
            if kind in CALL_OUTPUT:
                calls.add((kind, item["call_id"]))
            elif kind in OUTPUT_CALL and (OUTPUT_CALL[kind], item["call_id"]) not in calls:
                raise Violation("tool_output_without_call", f"No tool call found for {_kind_word(kind)} call output "
                                f"with call_id {item['call_id']}.", f"input[{k}]")
        trailing = len(items)  # unanswered calls are allowed only as the very last items
        while trailing and _item_type(items[trailing - 1]) in CALL_OUTPUT:
            trailing -= 1
        for k, item in enumerate(items[:trailing]):
            kind = _item_type(item)
            if kind in CALL_OUTPUT and not any(
                _item_type(later) == CALL_OUTPUT[kind] and later.get("call_id") == item["call_id"]
                for later in items[k + 1:]
            ):
                raise Violation("call_without_output", f"No tool output found for {_kind_word(kind)} call "
                                f"{item['call_id']}.", "input")
        for k, item in enumerate(items):
            if _item_type(item) == "reasoning":
                self._check_reasoning(item, items[k + 1] if k + 1 < len(items) else None, f"input[{k}]")
        return history

    def _check_reasoning(self, item: dict[str, Any], following: dict[str, Any] | None, where: str) -> None:
        rid = item["id"]
        issued = self._reasoning.get(rid)
        encrypted = item.get("encrypted_content")
        if issued is None or (encrypted is None and not issued.stored):
            unstored = " Items are not persisted when `store` is set to false. Try again with `store` set to true, " \
                       "or remove this item from your input." if issued is not None else ""
            raise Violation("reasoning_unknown", f"Item with id '{rid}' not found.{unstored}", where)
        if encrypted is not None and encrypted != issued.encrypted:
            raise Violation("reasoning_encrypted", f"The encrypted content for item {rid} could not be verified.",
                            where, "invalid_encrypted_content")
        if issued.follower is not None and (following is None or not _follows(issued.follower, following)):
            raise Violation("reasoning_following", f"Item '{rid}' of type 'reasoning' was provided without its "
                            "required following item.", where)

    # --- answering ---

    def _simulate_cache(self, body: dict[str, Any], conversation: list[dict[str, Any]]) -> tuple[int, int]:
        """(cached_tokens, input_tokens): the longest common prefix, item by item, with an earlier prompt."""
        texts = [canonical(["instructions", body.get("instructions")])]
        texts += [canonical(["tool", tool]) for tool in body.get("tools") or []]
        texts += [canonical(["item", item]) for item in conversation]
        key = f"key:{body['prompt_cache_key']}" if body.get("prompt_cache_key") else f"model:{body['model']}"
        earlier = self._prompts.setdefault(key, [])
        common = max((sum(1 for _ in itertools.takewhile(lambda p: p[0] == p[1], zip(texts, e))) for e in earlier),
                     default=0)
        cached = _cached_tokens(sum(len(t) for t in texts[:common]) // 4)
        earlier.append(texts)
        self._cached.append(cached)
        return cached, sum(len(t) for t in texts) // 4

    def _issue(
        self, reply: ResponsesReply, body: dict[str, Any], conversation: list[dict[str, Any]], usage: ResponsesUsage
    ) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        for item in reply.items:
            if isinstance(item, Reasoning):
                rid = self._new_id("rs")
                summary = [{"type": "summary_text", "text": item.summary_text}] if item.summary_text else []
                out: dict[str, Any] = {"id": rid, "type": "reasoning", "summary": summary}
                if item.encrypted:
                    secret = hmac.new(self._secret, rid.encode(), hashlib.sha256).digest() + secrets.token_bytes(32)
                    out["encrypted_content"] = base64.b64encode(secret).decode()
            elif isinstance(item, OutputText):
                part = {"type": "output_text", "text": item.text, "annotations": [], "logprobs": []}
                out = {"id": self._new_id("msg"), "type": "message", "status": "completed", "role": "assistant",
                       "content": [part]}
            elif isinstance(item, FunctionCall):
                out = {"id": self._new_id("fc"), "type": "function_call", "status": "completed", "name": item.name,
                       "arguments": item.arguments, "call_id": item.call_id or self._new_id("call")}
            else:
                out = {"id": self._new_id("ctc"), "type": "custom_tool_call", "status": "completed", "name": item.name,
                       "input": item.input, "call_id": item.call_id or self._new_id("call")}
            output.append(out)
        store = body.get("store") is not False
        for k, out in enumerate(output):
            if out["type"] == "reasoning":
                follower = output[k + 1] if k + 1 < len(output) else None
                self._reasoning[out["id"]] = _IssuedReasoning(out.get("encrypted_content"), follower, store)
        if reply.usage is None:
            usage.reasoning_tokens = rough_tokens([o for o in output if o["type"] == "reasoning"])
            usage.output_tokens = max(1, rough_tokens(output))
        used = reply.usage or usage
        response_id = self._new_id("resp")
        if store and reply.fail is None and not reply.cut:
            self._stored[response_id] = conversation + output
        return {
            "id": response_id,
            "object": "response",
            "created_at": CREATED,
            "status": "completed",
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "metadata": body.get("metadata") or {},
            "model": reply.model or body["model"],
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "prompt_cache_key": body.get("prompt_cache_key"),
            "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
            "store": store,
            "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools", []),
            "top_p": body.get("top_p", 1.0),
            "truncation": body.get("truncation", "disabled"),
            "usage": {
                "input_tokens": used.input_tokens,
                "input_tokens_details": {"cached_tokens": used.cached_tokens},
                "output_tokens": used.output_tokens,
                "output_tokens_details": {"reasoning_tokens": used.reasoning_tokens},
                "total_tokens": used.input_tokens + used.output_tokens,
            },
            "user": body.get("user"),
        }


def _openai_error(error: ResponsesError, param: str | None = None) -> Response:
    payload = {"error": {"message": error.message, "type": error.type, "param": param, "code": error.code}}
    return JSONResponse(payload, status_code=error.status, headers=error.headers)


EventFn: TypeAlias = Callable[..., bytes]


def _response_events(response: dict[str, Any], reply: ResponsesReply) -> tuple[list[bytes], bool]:
    """The SSE events of a streamed response, and whether the stream ends cleanly (False: cut)."""
    numbers = itertools.count()

    def event(kind: str, **fields: Any) -> bytes:
        return sse(kind, {"type": kind, **fields, "sequence_number": next(numbers)})

    early = {**response, "status": "in_progress", "output": [], "usage": None}
    out = [event("response.created", response=early), event("response.in_progress", response=early)]
    stop = reply.fail_after if reply.fail is not None or reply.cut else len(response["output"])
    for index, item in enumerate(response["output"][:stop]):
        out += _item_events(index, item, event)
    if reply.cut:
        return out, False
    if reply.fail is not None:
        error = {"code": reply.fail.code or "server_error", "message": reply.fail.message}
        failed = {**response, "status": "failed", "error": error, "output": response["output"][:stop], "usage": None}
        return out + [event("response.failed", response=failed)], True
    return out + [event("response.completed", response=response)], True


def _item_events(index: int, item: dict[str, Any], event: EventFn) -> list[bytes]:
    kind = item["type"]
    at = {"item_id": item["id"], "output_index": index}
    added = {
        "reasoning": {**item, "summary": []},
        "message": {**item, "status": "in_progress", "content": []},
        "function_call": {**item, "status": "in_progress", "arguments": ""},
        "custom_tool_call": {**item, "status": "in_progress", "input": ""},
    }[kind]
    out = [event("response.output_item.added", output_index=index, item=added)]
    if kind == "reasoning":
        for s, part in enumerate(item["summary"]):
            out.append(event("response.reasoning_summary_part.added", **at, summary_index=s,
                             part={"type": "summary_text", "text": ""}))
            out += [event("response.reasoning_summary_text.delta", **at, summary_index=s, delta=p)
                    for p in pieces(part["text"])]
            out.append(event("response.reasoning_summary_text.done", **at, summary_index=s, text=part["text"]))
            out.append(event("response.reasoning_summary_part.done", **at, summary_index=s, part=part))
    elif kind == "message":
        part = item["content"][0]
        out.append(event("response.content_part.added", **at, content_index=0, part={**part, "text": ""}))
        out += [event("response.output_text.delta", **at, content_index=0, delta=p, logprobs=[])
                for p in pieces(part["text"])]
        out.append(event("response.output_text.done", **at, content_index=0, text=part["text"], logprobs=[]))
        out.append(event("response.content_part.done", **at, content_index=0, part=part))
    elif kind == "function_call":
        args = item["arguments"]
        out += [event("response.function_call_arguments.delta", **at, delta=p)
                for p in (args[: len(args) // 2], args[len(args) // 2:])]
        out.append(event("response.function_call_arguments.done", **at, name=item["name"], arguments=args))
    else:
        text = item["input"]
        out += [event("response.custom_tool_call_input.delta", **at, delta=p)
                for p in (text[: len(text) // 2], text[len(text) // 2:])]
        out.append(event("response.custom_tool_call_input.done", **at, input=text))
    return out + [event("response.output_item.done", output_index=index, item=item)]
