"""A chat-completions trace request as the other wire formats' clients send it: Anthropic Messages (Claude Code)
and OpenAI Responses (Codex), so `workset eval --format` measures them the way it measures chat completions.

Pure functions over plain data, deterministic, and prefix-stable: the wire body of messages[:t] is a prefix of
the one of messages[:t+1] but for the last Anthropic user message, which a user message may join. Translated
back by the edge (proxy.anthropic.to_internal, proxy.responses.to_internal), a request gives the same messages,
one for one, in the same order (the leading system prompt at the head, tool results as tool messages); what
differs is what the wire cannot say: a tool message's `name`, the spacing of a call's JSON arguments (Anthropic
sends them parsed), and a tool call id the trace reused, which the wire gets with a suffix (see `call_ids`).
"""

from __future__ import annotations

from typing import Any

import orjson

from ..messages import PINNED_ROLES, call_body, message_text
from ..records import Message

FORMATS = ("chat", "anthropic", "responses")
MAX_TOKENS = 4096  # Anthropic requires max_tokens; what the agent may answer, not what it is sent


def call_ids(messages: list[Message]) -> dict[tuple[int, int], str]:
    """The wire id of each tool call ((message index, call index) -> id) and of each tool message ((index, -1)):
    the trace's own, but for a call id used before in the run, which gets `_2`, `_3`, ...: Anthropic refuses a
    request whose tool_use ids repeat, and tau-bench's traces reuse them. A tool message answers the latest call
    with its id."""
    ids: dict[tuple[int, int], str] = {}
    used: dict[str, int] = {}
    current: dict[str, str] = {}
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            for number, call in enumerate(message.get("tool_calls") or ()):
                original = str(call.get("id", "")) if isinstance(call, dict) else ""
                used[original] = used.get(original, 0) + 1
                wire = original if used[original] == 1 else f"{original}_{used[original]}"
                current[original] = wire
                ids[index, number] = wire
        elif message.get("role") == "tool":
            original = str(message.get("tool_call_id", ""))
            ids[index, -1] = current.get(original, original)
    return ids


def _system_prompt(messages: list[Message]) -> tuple[str | None, int]:
    """The leading system (or developer) message's text, and where the rest starts."""
    if messages and messages[0].get("role") in PINNED_ROLES:
        return message_text(messages[0]), 1
    return None, 0


def _calls(message: Message) -> list[tuple[bool, str, str]]:
    """(custom, name, arguments or input) of each tool call."""
    out = []
    for call in message.get("tool_calls") or ():
        custom, body = call_body(call)
        if body is not None:
            raw = body.get("input" if custom else "arguments", "")
            out.append((custom, str(body.get("name", "")), raw if isinstance(raw, str) else str(raw)))
    return out


# --- Anthropic Messages -----------------------------------------------------------------------------------------


def to_anthropic(model: str, messages: list[Message], tools: list[Any] | None = None,
                 max_tokens: int = MAX_TOKENS) -> dict[str, Any]:
    """A Messages request: the leading system message as `system`; each assistant message's text and tool calls
    as text and tool_use blocks (input parsed); consecutive tool messages as one user message of tool_result
    blocks, which a user message right after them joins (after the results, as the API requires); a later system
    message among the messages, as Claude Code sends them; tools as {name, description, input_schema}. An empty
    user or assistant message (no text, no calls) is left out: the API refuses empty content."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    system, start = _system_prompt(messages)
    if system:
        body["system"] = system
    ids = call_ids(messages)
    out: list[dict[str, Any]] = []
    results = False  # whether out[-1] is a user message that holds tool results (and may take more)
    for index in range(start, len(messages)):
        message = messages[index]
        role = message.get("role")
        if role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": ids[index, -1]}
            text = message_text(message)
            if text:
                block["content"] = text
            if results:
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
            results = True
            continue
        if role == "user" and results:
            out[-1]["content"].extend(_text_blocks(message))
        elif role == "user" and message_text(message).strip():
            out.append({"role": "user", "content": _anthropic_content(message)})
        elif role == "assistant":
            blocks = _text_blocks(message)
            for number, (custom, name, arguments) in enumerate(_calls(message)):
                blocks.append({"type": "tool_use", "id": ids[index, number], "name": name,
                               "input": {"input": arguments} if custom else _input(arguments)})
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        elif role in PINNED_ROLES:
            out.append({"role": "system", "content": _anthropic_content(message)})
        results = False
    body["messages"] = out
    if tools:
        body["tools"] = [_anthropic_tool(tool) for tool in tools]
    return body


def _text_blocks(message: Message) -> list[dict[str, Any]]:
    """The message's text as text blocks, one per text part; none for empty text (the API refuses those)."""
    content = message.get("content")
    parts = content if isinstance(content, list) else [content]
    texts = [part.get("text") if isinstance(part, dict) else part for part in parts]
    return [{"type": "text", "text": text} for text in texts if isinstance(text, str) and text.strip()]


def _anthropic_content(message: Message) -> str | list[dict[str, Any]]:
    content = message.get("content")
    return content if isinstance(content, str) else _text_blocks(message)


def _input(arguments: str) -> dict[str, Any]:
    """A call's JSON arguments parsed, as tool_use input; arguments that are not a JSON object are kept whole under
    "arguments" (the API takes only an object)."""
    try:
        parsed = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"arguments": arguments}


def _anthropic_tool(tool: Any) -> dict[str, Any]:
    custom, body = call_body(tool)
    if body is None:
        return tool  # not a function: passed on as it is
    if custom:
        return {"name": str(body.get("name", "")), "description": str(body.get("description", "")),
                "input_schema": {"type": "object", "properties": {"input": {"type": "string"}}}}
    out = {"name": str(body.get("name", ""))}
    if body.get("description"):
        out["description"] = str(body["description"])
    out["input_schema"] = body.get("parameters") or {"type": "object", "properties": {}}
    return out


# --- OpenAI Responses -------------------------------------------------------------------------------------------


def to_responses(model: str, messages: list[Message], tools: list[Any] | None = None) -> dict[str, Any]:
    """A Responses request: the leading system message as `instructions` (where Codex and the Agents SDK put the
    system prompt; workset reads it back as the system message it was); a later system message as a developer
    message item; user text as a message item of input_text; an assistant message as a message item of
    output_text (when it has text) followed by one function_call item (custom_tool_call for a custom tool) per
    tool call; a tool message as a function_call_output item; tools as Responses function tools, `strict: false`
    as Codex sends them (strict is the API's default and refuses schemas that are not closed). Stateless: no
    previous_response_id, and no reasoning items (a chat trace has none to replay)."""
    body: dict[str, Any] = {"model": model}
    system, start = _system_prompt(messages)
    if system:
        body["instructions"] = system
    ids = call_ids(messages)
    items: list[dict[str, Any]] = []
    for index in range(start, len(messages)):
        message = messages[index]
        role = message.get("role")
        text = message_text(message)
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": ids[index, -1], "output": text})
        elif role == "assistant":
            calls = _calls(message)
            if text or not calls:
                items.append({"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": text}]})
            for number, (custom, name, arguments) in enumerate(calls):
                kind, field = ("custom_tool_call", "input") if custom else ("function_call", "arguments")
                items.append({"type": kind, "call_id": ids[index, number], "name": name, field: arguments})
        else:
            wire_role = "developer" if role in PINNED_ROLES else "user"
            items.append({"type": "message", "role": wire_role, "content": [{"type": "input_text", "text": text}]})
    body["input"] = items
    if tools:
        body["tools"] = [_responses_tool(tool) for tool in tools]
    return body


def _responses_tool(tool: Any) -> dict[str, Any]:
    custom, body = call_body(tool)
    if body is None:
        return tool
    if custom:
        return {"type": "custom", **body}
    return {"type": "function", "name": str(body.get("name", "")), "description": str(body.get("description", "")),
            "parameters": body.get("parameters") or {"type": "object", "properties": {}}, "strict": False}


def to_wire(wire: str, model: str, messages: list[Message], tools: list[Any] | None = None) -> dict[str, Any]:
    """The request in the named format: `chat` (as the trace has it), `anthropic` or `responses`."""
    if wire == "anthropic":
        return to_anthropic(model, messages, tools)
    if wire == "responses":
        return to_responses(model, messages, tools)
    if wire == "chat":
        body: dict[str, Any] = {"model": model, "messages": messages}
        if tools:
            body["tools"] = tools
        return body
    raise ValueError(f"unknown wire format {wire!r}: one of {', '.join(FORMATS)}")
