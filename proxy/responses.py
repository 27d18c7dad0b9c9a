"""OpenAI Responses at the edge (Codex's and the Agents SDK's wire format).

A request's `input` is read into the internal (chat) form: a user, system or developer message item is a message
of its role; a run of items the model produced (reasoning with its encrypted_content, assistant messages,
function, custom-tool and shell calls, a compaction item) is one assistant message whose tool calls the core
pairs and reads, keeping the items themselves byte for byte to be written back; a call's output item is a tool
message (a tool output, for compaction). `instructions` is a system message, sent back as `instructions`.

The working set is written back as input items: each message as the item it came from (with a compacted output
in place of the original where the core elided it), workset's own messages as user message items.

The recall rounds (proxy.recall) read Responses objects and events here.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import bad_request
from .jsonbytes import encode_json
from .messages import tool_name
from .recall import RECALL_DEFINITION, RECALL_TOOL, add_usage
from .records import WIRE, ClientSession, Message
from .sse import boundary, event, json_object
from .validate import check_common

SESSION_HEADERS = ("session-id", "thread-id", "session_id", "conversation_id")  # Codex sends the first two
THREAD_HEADER = "thread-id"  # Codex: this conversation (a subagent's own), within the session
PARENT_HEADER = "x-codex-parent-thread-id"  # Codex: on a subagent's requests, the thread that spawned it
# outputs answering a call by its call_id (an mcp_approval_response answers a request by another key: it stays
# with the model's items, written back as it came)
OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output",
                          "computer_call_output"})
CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call", "computer_call"})

RECALL_TOOL_DEFINITION: dict[str, Any] = {
    "type": "function",
    "name": RECALL_TOOL,
    "description": RECALL_DEFINITION["function"]["description"],
    "parameters": RECALL_DEFINITION["function"]["parameters"],
}


# --- reading a request ----------------------------------------------------------------------------------------


def check(body: dict[str, Any]) -> None:
    """What workset reads of a Responses request, well-typed: a 400 naming the problem otherwise."""
    check_common(body)
    items = body.get("input")
    if items is None:
        raise bad_request("missing required parameter: 'input'", "input", "missing_required_parameter")
    if type(items) is not str and (type(items) is not list or any(type(item) is not dict for item in items)):
        raise bad_request("'input' must be a string or an array of items", "input", "invalid_type")
    instructions = body.get("instructions")
    if instructions is not None and type(instructions) is not str:
        raise bad_request("'instructions' must be a string", "instructions", "invalid_type")


def client_session(headers: Mapping[str, str], body: dict[str, Any]) -> ClientSession | None:
    """The session Codex names: its session-id header (shared by a thread and the subagents it spawns), else
    thread-id or prompt_cache_key; the thread is its own conversation, and a subagent names its parent's."""
    tree = next((value.strip()[:128] for value in (headers.get(name, "") for name in SESSION_HEADERS)
                 if value.strip()), None)
    key = body.get("prompt_cache_key")
    if tree is None and isinstance(key, str) and key.strip():
        tree = key.strip()[:128]
    if tree is None:
        return None
    own = headers.get(THREAD_HEADER, "").strip()[:128] or tree
    parent = headers.get(PARENT_HEADER, "").strip()[:128] or None
    return ClientSession(tree, own, parent)


def provider_holds_history(body: dict[str, Any]) -> bool:
    """With previous_response_id the provider keeps the conversation: the request holds only what is new."""
    return bool(body.get("previous_response_id")) or bool(body.get("conversation"))


def to_internal(body: dict[str, Any], read: list[Message] | None = None) -> dict[str, Any]:
    """The request in the internal (chat) form: model, messages, tools as functions, stream. `read`: its input
    items as read_messages read them already (see proxy.translation)."""
    messages: list[Message] = []
    instructions = body.get("instructions")
    if instructions:
        messages.append({"role": "system", "content": instructions, WIRE: {"instructions": True}})
    items = body["input"]
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    else:
        messages.extend(read if read is not None else read_messages(items)[0])
    internal: dict[str, Any] = {"model": body["model"], "messages": messages, "stream": bool(body.get("stream"))}
    tools = [_as_chat_tool(tool) for tool in body.get("tools") or ()]
    if tools:
        internal["tools"] = tools
    return internal


def read_messages(items: list[Any], start: int = 0) -> tuple[list[Message], list[int]]:
    """Internal messages for items[start:], and after each item how many internal messages are complete, or -1
    where the item may still be followed by more of the same model turn (no clean cut there)."""
    messages: list[Message] = []
    cuts: list[int] = []
    turn: list[dict[str, Any]] = []  # items the model produced, since the last message or output
    for index in range(start, len(items)):
        item = items[index]
        kind = item.get("type") or ("message" if "role" in item else "")
        handed_off = _handoff_text(item) if kind == "compaction" else None
        if handed_off is not None:  # workset's own compaction item: what it stands for
            _close(turn, messages)
            messages.append({"role": "user", "content": handed_off})
        elif kind == "message" and item.get("role") != "assistant":
            _close(turn, messages)
            messages.append({"role": str(item.get("role")), "content": item.get("content"),
                             WIRE: {"item": _template(item, "content")}})
        elif kind in OUTPUT_TYPES:
            _close(turn, messages)
            messages.append({"role": "tool", "tool_call_id": str(item.get("call_id") or item.get("id") or ""),
                             "content": item.get("output"), WIRE: {"item": _template(item, "output")}})
        else:
            turn.append(item)
        cuts.append(-1 if turn else len(messages))
    _close(turn, messages)
    return messages, cuts


def _template(item: dict[str, Any], field: str) -> dict[str, Any]:
    """The item with its content left out (the core may rewrite it), keys in their order."""
    return {key: (None if key == field else value) for key, value in item.items()}


def _close(turn: list[dict[str, Any]], messages: list[Message]) -> None:
    """The model's items so far as one assistant message: their text, their calls, and the items themselves."""
    if not turn:
        return
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in turn:
        kind = item.get("type") or "message"
        if kind == "message":
            content = item.get("content")
            if isinstance(content, str):  # an assistant message item may hold its text as a string
                texts.append(content)
            for part in content if isinstance(content, list) else ():
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
        elif kind in CALL_TYPES:
            calls.append(_as_call(item))
    message: Message = {"role": "assistant", "content": "\n".join(texts), WIRE: {"items": list(turn)}}
    if calls:
        message["tool_calls"] = calls
    messages.append(message)
    turn.clear()


def _as_call(item: dict[str, Any]) -> dict[str, Any]:
    call_id = str(item.get("call_id") or item.get("id") or "")
    if item.get("type") == "custom_tool_call":
        return {"id": call_id, "type": "custom", "custom": {"name": str(item.get("name", "")),
                                                            "input": str(item.get("input", ""))}}
    if item.get("type") == "function_call":
        return {"id": call_id, "type": "function", "function": {"name": str(item.get("name", "")),
                                                                "arguments": str(item.get("arguments", ""))}}
    action = item.get("action")  # a shell or computer call: its action stands as the arguments
    return {"id": call_id, "type": "function",
            "function": {"name": str(item.get("type")), "arguments": encode_json(action or {}).decode()}}


def _as_chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A function or custom tool in the chat form (what the core counts and names); others as they are."""
    kind = tool.get("type")
    if kind == "function" and isinstance(tool.get("name"), str):
        return {"type": "function", "function": {"name": tool["name"], "description": tool.get("description", ""),
                                                 "parameters": tool.get("parameters", {})}}
    if kind == "custom" and isinstance(tool.get("name"), str):
        return {"type": "custom", "custom": {key: value for key, value in tool.items() if key != "type"}}
    return tool


# --- a client's compaction, answered by workset ---------------------------------------------------------------
#
# Codex compacts its history through the provider: a `compaction_trigger` item at the end of the input (or, in
# older versions, POST /responses/compact) asks for one `compaction` item whose opaque `encrypted_content` stands
# for everything before it. OpenAI itself writes that item; a provider that is only OpenAI-compatible cannot. There
# workset answers from its own record: the compacted-turns message (task state, digest of every step, refs), carried
# in the item itself, so nothing needs looking up when Codex sends it back; read back, it is a user message.

HANDOFF_PREFIX = "workset-handoff:v1:"


def compaction_requested(body: dict[str, Any]) -> bool:
    items = body.get("input")
    return isinstance(items, list) and bool(items) and isinstance(items[-1], dict) \
        and items[-1].get("type") == "compaction_trigger"


def without_trigger(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "input": [item for item in body["input"] if item.get("type") != "compaction_trigger"]}


def compaction_item(text: str) -> dict[str, Any]:
    encoded = base64.b64encode(text.encode()).decode()
    digest = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
    return {"type": "compaction", "id": f"cmp_workset_{digest}", "encrypted_content": HANDOFF_PREFIX + encoded}


def _handoff_text(item: dict[str, Any]) -> str | None:
    content = item.get("encrypted_content")
    if not isinstance(content, str) or not content.startswith(HANDOFF_PREFIX):
        return None
    try:
        return base64.b64decode(content[len(HANDOFF_PREFIX):], validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None


def compaction_response(body: dict[str, Any], text: str, usage_tokens: int) -> dict[str, Any]:
    """The Response a compaction_trigger gets: one compaction item."""
    item = compaction_item(text)
    return {"id": "resp_" + item["id"].removeprefix("cmp_"), "object": "response", "created_at": int(time.time()),
            "status": "completed", "model": body.get("model"), "output": [item], "error": None,
            "incomplete_details": None, "store": body.get("store", True),
            "usage": {"input_tokens": usage_tokens, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": usage_tokens}}


def compaction_events(response: dict[str, Any]) -> list[bytes]:
    """The same Response as a stream: created, the item added and done, completed."""
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    item = response["output"][0]
    return [event("response.created", {"type": "response.created", "sequence_number": 0, "response": started}),
            event("response.output_item.added", {"type": "response.output_item.added", "sequence_number": 1,
                                                 "output_index": 0, "item": item}),
            event("response.output_item.done", {"type": "response.output_item.done", "sequence_number": 2,
                                                "output_index": 0, "item": item}),
            event("response.completed", {"type": "response.completed", "sequence_number": 3, "response": response})]


def compact_output(body: dict[str, Any], text: str) -> dict[str, Any]:
    """POST /responses/compact's answer: the user's own messages, then one compaction item."""
    items = body.get("input")
    users = [item for item in items if isinstance(item, dict) and (item.get("type") or "message") == "message"
             and item.get("role") == "user"] if isinstance(items, list) else [{"role": "user", "content": items}]
    return {"output": [*users, compaction_item(text)]}


# --- writing the working set back ---------------------------------------------------------------------------------


def render(body: dict[str, Any], internal: dict[str, Any]) -> dict[str, Any]:
    """The Responses request to forward: the client's own fields as sent, the working set as input items, the
    recall tool when the core offered it."""
    out = dict(body)
    items: list[dict[str, Any]] = []
    for message in internal["messages"]:
        wire = message.get(WIRE)
        if isinstance(wire, dict) and wire.get("instructions"):
            continue  # sent as `instructions`, as the client wrote it
        if isinstance(wire, dict) and "items" in wire:
            items.extend(wire["items"])
        elif isinstance(wire, dict) and "item" in wire:
            template = wire["item"]
            field_name = "output" if "output" in template else "content"
            items.append({key: (message.get("content") if key == field_name else value)
                          for key, value in template.items()})
        else:  # workset's own (the compacted turns, the live state) or a string input
            items.append({"type": "message", "role": str(message.get("role") or "user"),
                          "content": message.get("content") or ""})
    out["input"] = items
    if any(tool_name(tool) == RECALL_TOOL for tool in internal.get("tools") or ()):
        out["tools"] = [*(body.get("tools") or ()), RECALL_TOOL_DEFINITION]
    return out


# --- recall rounds ----------------------------------------------------------------------------------------------


def _is_recall(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "function_call" and item.get("name") == RECALL_TOOL


def _is_own_call(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") in CALL_TYPES and not _is_recall(item)


def without_recall(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items without the recall calls and the reasoning items right before them (the API refuses a reasoning
    item without the item that followed it)."""
    kept: list[dict[str, Any]] = []
    for position, item in enumerate(output):
        following = output[position + 1] if position + 1 < len(output) else None
        if _is_recall(item) or (item.get("type") == "reasoning" and _is_recall(following)):
            continue
        kept.append(item)
    return kept


def _follow_up(body: dict[str, Any], output: list[dict[str, Any]], answers: list[str]) -> dict[str, Any]:
    """The next round: the round's output items and the recall answers as function_call_output items."""
    items = body["input"] if isinstance(body["input"], list) else [{"role": "user", "content": body["input"]}]
    recall = [item for item in output if _is_recall(item)]
    results = [{"type": "function_call_output", "call_id": item.get("call_id", ""), "output": answer}
               for item, answer in zip(recall, answers)]
    return {**body, "input": [*items, *output, *results]}


def _withdraw(body: dict[str, Any]) -> dict[str, Any]:
    out = dict(body)
    tools = [tool for tool in body.get("tools") or () if not (tool.get("name") == RECALL_TOOL)]
    if tools:
        out["tools"] = tools
    else:
        out.pop("tools", None)
        out.pop("tool_choice", None)
    choice = out.get("tool_choice")
    if isinstance(choice, dict) and choice.get("name") == RECALL_TOOL:
        out.pop("tool_choice", None)
    return out


class Dialect:
    """Whole Response objects for proxy.recall.complete."""

    def calls(self, data: dict[str, Any]) -> tuple[list[str], bool]:
        output = data["output"]
        return [str(item.get("arguments", "")) for item in output if _is_recall(item)], any(map(_is_own_call, output))

    def own_only(self, data: dict[str, Any]) -> None:
        data["output"] = without_recall(data["output"])

    def text_only(self, data: dict[str, Any]) -> None:
        self.own_only(data)

    def follow_up(self, body: dict[str, Any], data: dict[str, Any], answers: list[str]) -> dict[str, Any]:
        return _follow_up(body, data["output"], answers)

    def withdraw(self, body: dict[str, Any]) -> dict[str, Any]:
        return _withdraw(body)

    def final(self, data: dict[str, Any], earlier: list[dict[str, Any]]) -> None:
        return None


DIALECT = Dialect()


# --- recall in a stream ---------------------------------------------------------------------------------------


@dataclass
class _Round:
    """One round of a Responses stream: what goes to the client at once (output indexes and sequence numbers
    renumbered across rounds), what waits for the round's end."""

    first: bool
    offset: int  # output items the client was already sent in earlier rounds
    numbering: list[int]  # the next sequence number, shared by the rounds
    held: set[int] = field(default_factory=set)  # provider output indexes of recall calls
    remap: dict[int, int] = field(default_factory=dict)  # provider output index -> the client's
    done: dict[int, dict[str, Any]] = field(default_factory=dict)  # finished items, by provider output index
    completed: dict[str, Any] | None = None  # the round's final response object
    response_id: str | None = None  # of the response the client was told about (the first round's)
    failed: bool = False
    # A reasoning item is held until the next item shows whether it reaches the client: one that led to a recall
    # call is dropped with it (the API refuses a reasoning item without the item that followed it).
    waiting: int | None = None
    pending: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def take(self, name: str, data: dict[str, Any]) -> bytes | None:
        kind = str(data.get("type") or name)
        if kind in ("response.created", "response.in_progress", "response.queued"):
            if self.first and isinstance(data.get("response"), dict) and self.response_id is None:
                self.response_id = data["response"].get("id")
            return self._out(kind, data) if self.first else None
        if kind == "response.completed":
            self.completed = data.get("response") if isinstance(data.get("response"), dict) else {}
            return None
        if kind in ("response.failed", "response.incomplete", "error"):
            self.failed = True
            return self._out(kind, data)
        index = data.get("output_index")
        if not isinstance(index, int):
            return self._out(kind, data)
        flushed = b""
        if kind == "response.output_item.added":
            item = data.get("item")
            if self.waiting is not None:  # a reasoning item goes where the item after it goes
                if _is_recall(item):
                    self.held.add(self.waiting)
                    self.pending.clear()
                else:
                    flushed = self.flush()
                self.waiting = None
            if _is_recall(item):
                self.held.add(index)
            elif isinstance(item, dict) and item.get("type") == "reasoning":
                self.waiting = index
            else:
                self.remap[index] = self.offset + len(self.remap)
        if kind == "response.output_item.done" and isinstance(data.get("item"), dict):
            self.done[index] = data["item"]
        if index == self.waiting:
            self.pending.append((kind, data))
            return flushed or None
        if index in self.held:
            return flushed or None
        return flushed + self._out(kind, {**data, "output_index": self.remap.get(index, index)})

    def flush(self) -> bytes:
        """The held reasoning item's events, now that what follows it is known to reach the client."""
        if self.waiting is None or not self.pending:
            return b""
        self.remap[self.waiting] = self.offset + len(self.remap)
        out = b"".join(self._out(kind, {**data, "output_index": self.remap[self.waiting]})
                       for kind, data in self.pending)
        self.pending.clear()
        return out

    def _out(self, kind: str, data: dict[str, Any]) -> bytes:
        if "sequence_number" in data:
            data = {**data, "sequence_number": self.numbering[0]}
            self.numbering[0] += 1
        return event(kind, data)

    def output(self) -> list[dict[str, Any]]:
        """The round's finished items, in order."""
        return [self.done[index] for index in sorted(self.done)]

    def shown(self) -> list[dict[str, Any]]:
        """The finished items the client was sent."""
        return [self.done[index] for index in sorted(self.done) if index not in self.held]


class Relay:
    """A Responses stream across recall rounds (proxy.recall.stream): items relayed as they come, output indexes
    and sequence numbers running on across rounds; recall calls held back; one response.created, one
    response.completed with every item the client saw, under the first round's response id, with the usage of
    every round."""

    def __init__(self) -> None:
        self.numbering = [0]
        self.round = _Round(True, 0, self.numbering)
        self.rounds = 0
        self.shown: list[dict[str, Any]] = []
        self.usage: dict[str, Any] | None = None
        self.response_id: str | None = None

    @property
    def failed(self) -> bool:
        return self.round.failed

    def start(self) -> None:
        if self.rounds:
            self.round = _Round(False, len(self.shown), self.numbering)
        self.rounds += 1

    def take(self, name: str, data: bytes) -> bytes | None:
        parsed = json_object(data)
        return self.round.take(name, parsed) if parsed is not None else None

    def end(self) -> bytes:
        out = self.round.flush()
        completed = self.round.completed or {}
        self.usage = add_usage(self.usage, completed.get("usage"))
        self.response_id = self.response_id or self.round.response_id or completed.get("id")
        self.shown.extend(self.round.shown())
        return out

    def calls(self) -> tuple[list[str], bool]:
        output = self.round.output()
        return [str(item.get("arguments", "")) for item in output if _is_recall(item)], any(map(_is_own_call, output))

    def follow_up(self, body: dict[str, Any], answers: list[str]) -> dict[str, Any]:
        return _follow_up(body, self.round.output(), answers)

    def withdraw(self, body: dict[str, Any]) -> dict[str, Any]:
        return _withdraw(body)

    def close(self, recall_only: bool) -> bytes:
        final = {**(self.round.completed or {}), "output": self.shown}
        if self.response_id:  # one response for the client, whatever rounds it took
            final["id"] = self.response_id
        if self.usage is not None:
            final["usage"] = self.usage
        return event("response.completed", {"type": "response.completed", "sequence_number": self.numbering[0],
                                            "response": final})

    def error(self, message: str) -> bytes:
        return error_event(message, self.numbering)


def error_event(message: str, numbering: list[int] | None = None, code: str = "recall_failed") -> bytes:
    """An `error` event of a Responses stream (clients such as Codex read its `type`)."""
    number = numbering[0] if numbering else 0
    return event("error", {"type": "error", "code": code, "message": message, "param": None,
                           "sequence_number": number})


def stream_error(message: str, kind: str, code: str, tail: bytes = b"\n\n") -> bytes:
    """The event ending a Responses stream the provider cut or stalled, on an event boundary."""
    return boundary(tail) + error_event(message, None, code)
