"""Anthropic Messages at the edge (Claude Code's wire format).

A request is read into the internal (chat) form the core works on: `system` becomes a system message, an assistant
message keeps its blocks (text, thinking with its signature, server tool blocks) with its tool_use blocks as
tool calls, and a user message is split into one tool message per tool_result (tool outputs, for compaction) and
a user message of the blocks beside them (the user's words, which are not). `cache_control` is a transport hint,
not content: it is left out, so a conversation whose client moves its breakpoints each turn is still one path.

The working set is written back the other way: consecutive messages of one role joined into one Anthropic message
(tool results stay first: they were read first, and the core never puts a message before them), thinking blocks
as they came, `system` and `tools` as the client sent
them, and cache breakpoints (at most four in all, the client's own on system and tools counted) at the end of
the frozen head (system, task, compacted turns) and at the end of what stays byte-stable until the next
compaction, so the next turn reads it from the provider's cache.

The recall rounds (proxy.recall) read Anthropic replies and events here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from .errors import WorksetError, bad_request
from .jsonbytes import encode_json
from .messages import PINNED_ROLES, tool_name
from .recall import RECALL_DEFINITION, RECALL_TOOL, add_usage
from .records import WIRE, ClientSession, Message
from .sse import boundary, event, json_object
from .validate import check_common

CLAUDE_SESSION_HEADER = "x-claude-code-session-id"
CLAUDE_AGENT_HEADER = "x-claude-code-agent-id"  # on a subagent's requests only
ROLES = frozenset({"user", "assistant", "system"})  # Claude Code sends system messages among the others too
FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta", "anthropic-dangerous-direct-browser-access")
DEFAULT_VERSION = "2023-06-01"
MAX_BREAKPOINTS = 4  # cache_control blocks the API accepts in one request
EPHEMERAL = {"type": "ephemeral"}
UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})  # blocks the API refuses a cache_control on
# Claude Code's metadata.user_id: "user_<hash>_account_<uuid>_session_<uuid>" (or a JSON object with session_id)
_SESSION_IN_USER_ID = re.compile(r"session_([0-9A-Za-z-]{8,64})")

RECALL_TOOL_DEFINITION: dict[str, Any] = {
    "name": RECALL_TOOL,
    "description": RECALL_DEFINITION["function"]["description"],
    "input_schema": RECALL_DEFINITION["function"]["parameters"],
}


# --- reading a request ----------------------------------------------------------------------------------------


def check(body: dict[str, Any]) -> None:
    """What workset reads of a Messages request, well-typed: a 400 naming the problem otherwise (the provider
    checks the rest). Each message is checked as it is read (read_messages), once per conversation."""
    check_common(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty array", "messages", "invalid_type")
    system = body.get("system")
    if system is not None and type(system) is not str and (
            type(system) is not list or any(type(block) is not dict for block in system)):
        raise bad_request("'system' must be a string or an array of text blocks", "system", "invalid_type")


def client_session(headers: Mapping[str, str], body: dict[str, Any]) -> ClientSession | None:
    """The session Claude Code names (its X-Claude-Code-Session-Id header, else the session part of
    metadata.user_id); a subagent's requests add X-Claude-Code-Agent-Id, and its parent is the session's main
    conversation."""
    tree = _session_named(headers, body)
    if tree is None:
        return None
    agent = headers.get(CLAUDE_AGENT_HEADER, "").strip()[:128]
    return ClientSession(tree, agent, tree) if agent else ClientSession(tree, tree)


def _session_named(headers: Mapping[str, str], body: dict[str, Any]) -> str | None:
    header = headers.get(CLAUDE_SESSION_HEADER, "").strip()
    if header:
        return header[:128]
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(user_id, str):
        return None
    if user_id.startswith("{"):  # newer versions: a JSON object in the string
        try:
            session = orjson.loads(user_id).get("session_id")
        except (orjson.JSONDecodeError, AttributeError):
            session = None
        return session[:128] if isinstance(session, str) and session.strip() else None
    found = _SESSION_IN_USER_ID.search(user_id)
    return found.group(1) if found else None


def to_internal(body: dict[str, Any], read: list[Message] | None = None) -> dict[str, Any]:
    """The request in the internal (chat) form: model, messages, tools as functions, stream. `read`: its
    messages as read_messages read them already (see proxy.translation)."""
    messages: list[Message] = []
    system = body.get("system")
    if system:  # sent back as the request's own `system`, as the client wrote it
        messages.append({"role": "system", "content": _content(system), WIRE: {"system": True}})
    messages.extend(read if read is not None else read_messages(body["messages"])[0])
    internal: dict[str, Any] = {"model": body["model"], "messages": messages, "stream": bool(body.get("stream"))}
    tools = [_as_function(tool) for tool in body.get("tools") or ()]
    if tools:
        internal["tools"] = tools
    return internal


def read_messages(wire: list[Any], start: int = 0) -> tuple[list[Message], list[int]]:
    """Internal messages for wire[start:], each message checked as it is read (a 400 naming it), and after each
    one how many internal messages it completed (every Anthropic message is a clean cut)."""
    messages: list[Message] = []
    cuts: list[int] = []
    for index in range(start, len(wire)):
        message = _checked(wire[index], index)
        content = message["content"]
        role = message["role"]
        if role == "assistant":
            messages.append(_assistant(content))
        elif role == "system":  # among the messages: kept where it is, with its own fields (output_config)
            extra = {key: value for key, value in message.items() if key not in ("role", "content")}
            messages.append({"role": "system", "content": _content(content),
                             **({WIRE: {"fields": extra}} if extra else {})})
        elif isinstance(content, str):
            messages.append({"role": "user", "content": content})
        else:
            messages.extend(_user(content))
        cuts.append(len(messages))
    return messages, cuts


def _checked(message: Any, index: int) -> dict[str, Any]:
    where = f"messages[{index}]"
    if type(message) is not dict or message.get("role") not in ROLES:
        raise bad_request(f"{where} must be an object with role 'user', 'assistant' or 'system'", where,
                          "invalid_value")
    content = message.get("content")
    if type(content) is str:
        return message
    if type(content) is not list or any(type(block) is not dict for block in content):
        raise bad_request(f"{where}.content must be a string or an array of content blocks", f"{where}.content",
                          "invalid_type")
    for number, block in enumerate(content):
        kind = block.get("type")
        if kind == "tool_use" and (type(block.get("id")) is not str or type(block.get("name")) is not str):
            raise bad_request(f"{where}.content[{number}]: a tool_use block needs a string id and name",
                              f"{where}.content[{number}]", "invalid_type")
        if kind == "tool_result" and type(block.get("tool_use_id")) is not str:
            raise bad_request(f"{where}.content[{number}]: a tool_result block needs a string tool_use_id",
                              f"{where}.content[{number}]", "invalid_type")
    return message


def _content(content: Any) -> Any:
    """Content without cache breakpoints, and a lone text block as its text: Claude Code writes the message its
    breakpoint is on as blocks and the same message as a string on the next turn; both are one message."""
    if type(content) is not list:
        return content
    if len(content) == 1:
        block = content[0]
        if type(block) is dict and block.get("type") == "text" and type(block.get("text")) is str \
                and len(block) == 2 + ("cache_control" in block):
            return block["text"]
    for block in content:  # runs on every message of every request: copied only when a breakpoint is on it
        if type(block) is dict and "cache_control" in block:
            return [_plain(part) if type(part) is dict else part for part in content]
    return content


def _plain(block: dict[str, Any]) -> dict[str, Any]:
    """The block without its cache breakpoint (the same object when it has none)."""
    if "cache_control" not in block:
        return block
    return {key: value for key, value in block.items() if key != "cache_control"}


def _assistant(content: str | list[dict[str, Any]]) -> Message:
    content = _content(content)
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    blocks: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for block in content:  # one pass: this runs on every assistant message of every request
        if block.get("type") == "tool_use":
            calls.append({"id": block["id"], "type": "function",
                          "function": {"name": block["name"], "arguments": _json(block.get("input", {}))}})
        else:
            blocks.append(block)
    message: Message = {"role": "assistant", "content": blocks}
    if calls:
        message["tool_calls"] = calls
        message[WIRE] = {"blocks": content}  # written back as they came, in their order (no JSON parsed again)
    return message


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # nested past orjson's depth
        return encode_json(value).decode()


def _user(content: list[dict[str, Any]]) -> list[Message]:
    results: list[Message] = []
    rest: list[dict[str, Any]] = []
    for block in content:
        if block.get("type") == "tool_result":
            result: Message = {"role": "tool", "tool_call_id": block["tool_use_id"],
                               "content": _content(block.get("content", ""))}
            if block.get("is_error"):
                result[WIRE] = {"is_error": True}
            results.append(result)
        else:
            rest.append(_plain(block))
    if rest or not results:
        results.append({"role": "user", "content": _content(rest)})
    return results


def _as_function(tool: dict[str, Any]) -> dict[str, Any]:
    """A client tool as a chat function (what the core counts and names); a server tool (web search, code
    execution) as it is."""
    if tool.get("type") not in (None, "custom") or not isinstance(tool.get("name"), str):
        return tool
    function = {"name": tool["name"], "description": tool.get("description", ""),
                "parameters": tool.get("input_schema", {})}
    return {"type": "function", "function": function}


# --- writing the working set back ---------------------------------------------------------------------------------


def render(body: dict[str, Any], internal: dict[str, Any], stable: int, head: int) -> dict[str, Any]:
    """The Messages request to forward: the client's own fields as sent, the working set's messages, the recall
    tool when the core offered it, and cache breakpoints (see the module's docstring)."""
    out = {key: value for key, value in body.items() if key != "messages"}
    offered = any(tool_name(tool) == RECALL_TOOL for tool in internal.get("tools") or ())
    if offered:
        out["tools"] = [*(body.get("tools") or ()), RECALL_TOOL_DEFINITION]
    messages, ends = _wire_messages(internal["messages"])
    room = MAX_BREAKPOINTS - _breakpoints(body.get("system")) - _breakpoints(body.get("tools"))
    marked: set[tuple[int, int]] = set()
    for index in (stable - 1, head - 1):  # the stable part first: the next turn reads it from the cache
        end = ends[index] if 0 <= index < len(ends) else None
        spot = _cacheable(messages, end) if end is not None else None
        if spot is not None and spot not in marked and len(marked) < room:
            marked.add(spot)
            content = messages[spot[0]]["content"]
            content[spot[1]] = {**content[spot[1]], "cache_control": EPHEMERAL}
    out["messages"] = messages
    return out


def _wire_messages(messages: list[Message]) -> tuple[list[dict[str, Any]], list[tuple[int, int] | None]]:
    """Anthropic messages for internal ones, and for each internal message where its last block went
    (message index, block index); None for the system message (sent as `system`) and empty messages."""
    out: list[dict[str, Any]] = []
    ends: list[tuple[int, int] | None] = []
    for message in messages:
        role = message.get("role")
        wire = message.get(WIRE)
        if role in PINNED_ROLES and isinstance(wire, dict) and wire.get("system"):
            ends.append(None)  # the request's own `system`
            continue
        if role in PINNED_ROLES:
            fields = wire.get("fields", {}) if isinstance(wire, dict) else {}
            out.append({"role": "system", "content": _user_blocks(message), **fields})
            ends.append((len(out) - 1, len(out[-1]["content"]) - 1) if out[-1]["content"] else None)
            continue
        if role == "assistant":
            wire_role, blocks = "assistant", _assistant_blocks(message)
        elif role == "tool":
            wire_role, blocks = "user", [_tool_result(message)]
        else:
            wire_role, blocks = "user", _user_blocks(message)
        if out and out[-1]["role"] == wire_role and wire_role != "system":
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": wire_role, "content": list(blocks)})
        ends.append((len(out) - 1, len(out[-1]["content"]) - 1) if blocks else None)
    return out, ends


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    wire = message.get(WIRE)
    if isinstance(wire, dict) and "blocks" in wire:
        return list(wire["blocks"])
    content = message.get("content")
    blocks = list(content) if isinstance(content, list) else ([{"type": "text", "text": content}] if content else [])
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        try:
            arguments = orjson.loads(function.get("arguments") or "{}")
        except orjson.JSONDecodeError:
            arguments = {}
        blocks.append({"type": "tool_use", "id": call.get("id", ""), "name": function.get("name", ""),
                       "input": arguments})
    return blocks


def _tool_result(message: Message) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.get("tool_call_id", ""),
                             "content": message.get("content") or ""}
    wire = message.get(WIRE)
    if isinstance(wire, dict) and wire.get("is_error"):
        block["is_error"] = True
    return block


def _user_blocks(message: Message) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        return [part if isinstance(part, dict) else {"type": "text", "text": str(part)} for part in content]
    return [{"type": "text", "text": content}] if content else []


def _breakpoints(blocks: object) -> int:
    if not isinstance(blocks, list):
        return 0
    return sum(1 for block in blocks if isinstance(block, dict) and block.get("cache_control"))


def _cacheable(messages: list[dict[str, Any]], end: tuple[int, int]) -> tuple[int, int] | None:
    """The last block at or before `end`, in its message, that may carry a cache breakpoint."""
    number, index = end
    content = messages[number]["content"]
    while index >= 0:
        block = content[index]
        if block.get("type") not in UNCACHEABLE and not (block.get("type") == "text" and not block.get("text")):
            return number, index
        index -= 1
    return None


# --- errors ---------------------------------------------------------------------------------------------------


def error_body(error: WorksetError) -> dict[str, Any]:
    """Anthropic's error shape, which carries OpenAI's fields too: {"type": "error", "error": {type, message,
    code, param}}."""
    return {"type": "error", "error": {"type": error.type, "message": error.message, "code": error.code,
                                       "param": error.param}}


def error_event(message: str, kind: str, code: str, tail: bytes = b"\n\n") -> bytes:
    """An `error` event for a Messages stream, starting on an event boundary."""
    return boundary(tail) + event("error", {"type": "error", "error": {"type": kind, "message": message,
                                                                         "code": code}})


# --- recall rounds ----------------------------------------------------------------------------------------------


def _is_recall(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == RECALL_TOOL


def _arguments(block: dict[str, Any]) -> str:
    return encode_json(block.get("input") or {}).decode()


def _results(blocks: list[dict[str, Any]], answers: list[str]) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": block.get("id", ""), "content": answer}
            for block, answer in zip(blocks, answers)]


def _follow_up(body: dict[str, Any], content: list[dict[str, Any]], answers: list[str]) -> dict[str, Any]:
    """The next round's request: the reply as the assistant's turn (thinking included, as the API requires for a
    tool-use turn) and the recall answers as its tool results."""
    recall = [block for block in content if _is_recall(block)]
    turn = [{"role": "assistant", "content": content}, {"role": "user", "content": _results(recall, answers)}]
    return {**body, "messages": [*body["messages"], *turn]}


def _withdraw(body: dict[str, Any]) -> dict[str, Any]:
    """The last round: the recall tool stays defined (the history holds its calls) but may not be chosen."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("name") == RECALL_TOOL:
        return {key: value for key, value in body.items() if key != "tool_choice"}
    return body


class Dialect:
    """Whole Messages replies for proxy.recall.complete."""

    def calls(self, data: dict[str, Any]) -> tuple[list[str], bool]:
        content = data["content"]
        recall = [block for block in content if _is_recall(block)]
        own = any(isinstance(block, dict) and block.get("type") == "tool_use" and not _is_recall(block)
                  for block in content)
        return [_arguments(block) for block in recall], own

    def own_only(self, data: dict[str, Any]) -> None:
        data["content"] = [block for block in data["content"] if not _is_recall(block)]

    def text_only(self, data: dict[str, Any]) -> None:
        self.own_only(data)
        data["stop_reason"] = "end_turn"

    def follow_up(self, body: dict[str, Any], data: dict[str, Any], answers: list[str]) -> dict[str, Any]:
        return _follow_up(body, data["content"], answers)

    def withdraw(self, body: dict[str, Any]) -> dict[str, Any]:
        return _withdraw(body)

    def final(self, data: dict[str, Any], earlier: list[dict[str, Any]]) -> None:
        """With thinking on, the API wants the client's next turn to start with thinking: when the answer does
        not, the thinking of the recall round before it leads."""
        content = data.get("content") or []
        if content and isinstance(content[0], dict) and content[0].get("type") in UNCACHEABLE:
            return
        for reply in reversed(earlier):
            thoughts = [block for block in reply.get("content") or () if isinstance(block, dict)
                        and block.get("type") in UNCACHEABLE]
            if thoughts:
                data["content"] = [*thoughts, *content]
                return


DIALECT = Dialect()


# --- recall in a stream ---------------------------------------------------------------------------------------


@dataclass
class _Block:
    """A content block of the round being streamed, assembled from its events (for the next round's request)."""

    data: dict[str, Any]
    # the deltas of each field as they come (text, thinking, signature, the input JSON as "partial_json"), joined
    # once the round ends: adding each to a growing string would copy a long answer once per delta
    pieces: dict[str, list[str]] = field(default_factory=dict)
    recall: bool = False
    hidden: bool = False  # thinking that led to a recall call: not shown to the client
    client_index: int = -1  # its index in the client's stream (-1: held back, a recall call)

    def finished(self) -> dict[str, Any]:
        """The block as the provider sent it, its deltas joined."""
        block = dict(self.data)
        for name, pieces in self.pieces.items():
            if name != "partial_json":
                block[name] = block.get(name, "") + "".join(pieces)
        if block.get("type") in ("tool_use", "server_tool_use"):
            partial = "".join(self.pieces.get("partial_json", ()))
            try:
                block["input"] = orjson.loads(partial) if partial else {}
            except orjson.JSONDecodeError:
                block["input"] = {}
        return block


@dataclass
class _Round:
    """One round of a Messages stream: what goes to the client at once, what waits for the round's end."""

    first: bool  # the client sees this round's message_start
    offset: int  # content blocks the client was already sent in earlier rounds
    blocks: dict[int, _Block] = field(default_factory=dict)
    sent: int = 0  # blocks of this round relayed
    delta: dict[str, Any] | None = None  # message_delta (stop reason, usage), sent once the last round is known
    usage: dict[str, Any] | None = None  # message_start's usage (input tokens) and message_delta's
    failed: bool = False
    # Thinking is held until the next block shows whether it reaches the client: thinking that led to a recall
    # call is dropped with it (the client's next turn must not start with thinking the API did not pair with its
    # tool use).
    waiting: list[tuple[_Block, list[tuple[str, dict[str, Any]]]]] = field(default_factory=list)
    # ... but with thinking on, the API wants the client's next turn to start with a thinking block: the thinking
    # a recall round hid is shown before the next round's first block when that round opens without its own.
    hidden: list[tuple[_Block, list[tuple[str, dict[str, Any]]]]] = field(default_factory=list)
    carried: list[tuple[_Block, list[tuple[str, dict[str, Any]]]]] = field(default_factory=list)
    opened: bool = False  # the round's first block has come

    def take(self, name: str, data: dict[str, Any]) -> bytes | None:
        """The event for the client (None: held back or dropped)."""
        kind = data.get("type", name)
        if kind == "message_start":
            self.usage = add_usage(None, (data.get("message") or {}).get("usage"))
            return event(kind, data) if self.first else None
        if kind == "content_block_start":
            block = _Block(dict(data.get("content_block") or {}))
            block.recall = _is_recall(block.data) or block.data.get("name") == RECALL_TOOL
            self.blocks[int(data.get("index", 0))] = block
            first, self.opened = not self.opened, True
            if first and self.carried and not block.recall and block.data.get("type") not in UNCACHEABLE:
                self.waiting, self.carried = self.carried + self.waiting, []
            elif first and block.data.get("type") in UNCACHEABLE:
                self.carried = []  # this round thinks for itself
            if block.recall:
                for thought, _ in self.waiting:
                    thought.hidden = True
                self.hidden.extend(self.waiting)
                self.waiting.clear()
                return None
            if block.data.get("type") in UNCACHEABLE:  # thinking: wait for what follows
                self.waiting.append((block, [(kind, data)]))
                return None
            return self.flush() + self._show(block, kind, data)
        if kind in ("content_block_delta", "content_block_stop"):
            block = self.blocks.get(int(data.get("index", 0)))
            if block is None:
                return event(kind, data)
            if kind == "content_block_delta":
                _apply(block, data.get("delta") or {})
            for thought, events in self.waiting:
                if thought is block:
                    events.append((kind, data))
                    return None
            return None if block.recall or block.hidden else event(kind, {**data, "index": block.client_index})
        if kind == "message_delta":
            self.delta = data
            if isinstance(data.get("usage"), dict):  # cumulative within the message: it replaces, not adds
                self.usage = {**(self.usage or {}), **data["usage"]}
            return None
        if kind == "message_stop":
            return None
        if kind == "error":
            self.failed = True
        return event(kind, data)  # ping, error, and whatever the API adds later

    def _show(self, block: _Block, kind: str, data: dict[str, Any]) -> bytes:
        block.client_index = self.offset + self.sent
        self.sent += 1
        return event(kind, {**data, "index": block.client_index})

    def flush(self) -> bytes:
        """The held thinking blocks' events, now that what follows them reaches the client."""
        out = b""
        for block, events in self.waiting:
            out += self._show(block, *events[0]) + b"".join(
                event(kind, {**data, "index": block.client_index}) for kind, data in events[1:])
        self.waiting.clear()
        return out

    def content(self) -> list[dict[str, Any]]:
        return [self.blocks[index].finished() for index in sorted(self.blocks)]

    def own(self) -> bool:
        return any(block.data.get("type") == "tool_use" and not block.recall for block in self.blocks.values())


_DELTA_FIELDS = {"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "signature",
                 "input_json_delta": "partial_json"}


def _apply(block: _Block, delta: dict[str, Any]) -> None:
    kind = delta.get("type")
    name = _DELTA_FIELDS.get(str(kind))
    if name is not None:
        block.pieces.setdefault(name, []).append(str(delta.get(name, "")))
    elif kind == "citations_delta":
        block.data.setdefault("citations", []).append(delta.get("citation"))


class Relay:
    """A Messages stream across recall rounds (proxy.recall.stream): blocks relayed as they come, renumbered
    after the rounds before; recall calls held back; one message_start, one message_delta with the usage of every
    round, one message_stop."""

    def __init__(self) -> None:
        self.round = _Round(first=True, offset=0)
        self.rounds = 0
        self.usage: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.round.failed

    def start(self) -> None:
        if self.rounds:
            before = self.round
            self.round = _Round(first=False, offset=before.offset + before.sent,
                                carried=before.hidden or before.carried)
        self.rounds += 1

    def take(self, name: str, data: bytes) -> bytes | None:
        parsed = json_object(data)
        return self.round.take(name, parsed) if parsed is not None else None

    def end(self) -> bytes:
        self.usage = add_usage(self.usage, self.round.usage)
        return self.round.flush()

    def calls(self) -> tuple[list[str], bool]:
        return [_arguments(block) for block in self.round.content() if _is_recall(block)], self.round.own()

    def follow_up(self, body: dict[str, Any], answers: list[str]) -> dict[str, Any]:
        return _follow_up(body, self.round.content(), answers)

    def withdraw(self, body: dict[str, Any]) -> dict[str, Any]:
        return _withdraw(body)

    def close(self, recall_only: bool) -> bytes:
        delta = dict(self.round.delta or {"type": "message_delta", "delta": {"stop_reason": "end_turn"}})
        if recall_only:
            delta["delta"] = {**(delta.get("delta") or {}), "stop_reason": "end_turn"}
        if self.usage is not None:
            delta["usage"] = self.usage
        return event("message_delta", delta) + event("message_stop", {"type": "message_stop"})

    def error(self, message: str) -> bytes:
        return error_event(message, "api_error", "recall_failed")
