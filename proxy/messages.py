"""Reading OpenAI chat messages: their text, their tool calls, their roles."""

from __future__ import annotations

from typing import Any

from .records import Message, ToolCall

KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
PINNED_ROLES = frozenset({"system", "developer"})


def message_text(message: Message) -> str:
    """The message's text: a string content as is, the text parts of a list content joined by newlines."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(text)
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return str(content)


def tool_calls(message: Message) -> list[ToolCall]:
    """The assistant message's tool calls (function and custom ones, and a legacy function_call), as ToolCall
    records; malformed entries are skipped."""
    calls: list[ToolCall] = []
    for call in message.get("tool_calls") or ():
        read = tool_call(call)
        if read is not None:
            calls.append(read)
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        calls.append(ToolCall(id="", name=str(legacy.get("name", "")), arguments=str(legacy.get("arguments", ""))))
    return calls


def call_body(call: object) -> tuple[bool, dict[str, Any] | None]:
    """(is it a custom tool call, its body): `custom` {name, input} for a custom call, `function` {name, arguments}
    otherwise; the body is None when it is not an object."""
    if not isinstance(call, dict):
        return False, None
    custom = call.get("type") == "custom"
    body = call.get("custom" if custom else "function")
    return custom, body if isinstance(body, dict) else None


def tool_call(call: object) -> ToolCall | None:
    """One entry of `tool_calls`: a function call {"function": {name, arguments}}, or a custom tool call
    {"type": "custom", "custom": {name, input}} whose free-form input stands as its arguments; None if neither."""
    custom, body = call_body(call)
    if body is None:
        return None
    arguments = body.get("input" if custom else "arguments", "")
    return ToolCall(id=str(call.get("id", "")), name=str(body.get("name", "")),
                    arguments=arguments if isinstance(arguments, str) else str(arguments))


def is_tool_result(message: Message) -> bool:
    return message.get("role") in ("tool", "function")


def tool_name(tool: object) -> str:
    """The name of a tool definition (`{"type": "function", "function": {"name"}}` or a custom tool's
    `{"type": "custom", "custom": {"name"}}`); "" for anything else, however malformed."""
    if not isinstance(tool, dict):
        return ""
    for part in (tool.get("function"), tool.get("custom")):
        if isinstance(part, dict) and isinstance(part.get("name"), str):
            return part["name"]
    return ""
