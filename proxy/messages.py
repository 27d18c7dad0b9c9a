"""Reading OpenAI chat messages: their text, their tool calls, their roles."""

from __future__ import annotations

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
    """The assistant message's tool calls (and a legacy function_call), as ToolCall records."""
    calls: list[ToolCall] = []
    for call in message.get("tool_calls") or ():
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = str(arguments)
        calls.append(ToolCall(id=str(call.get("id", "")), name=str(function.get("name", "")), arguments=arguments))
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        calls.append(ToolCall(id="", name=str(legacy.get("name", "")), arguments=str(legacy.get("arguments", ""))))
    return calls


def is_tool_result(message: Message) -> bool:
    return message.get("role") in ("tool", "function")
