"""Tool-call traces in the form text-based agents send (mini-swe-agent's text mode, SWE-agent): the agent's commands
as fenced blocks in its own message, each command's output back as a *user* message, no tool definitions.

Pure functions over plain data; the conversion is one message for one message, so a trace's turn indices (its
probe checks) stay valid.
"""

from __future__ import annotations

import json
from typing import Any

from ..messages import message_text
from ..records import Message

SHELL_TOOL = "bash"  # a call of this tool with {"command": ...} becomes a ```bash block of the bare command


def command_block(name: str, arguments: str) -> str:
    """One tool call as a fenced block: the bare command for the shell tool, else the arguments JSON."""
    if name == SHELL_TOOL:
        command = _shell_command(arguments)
        if command is not None:
            return f"```{SHELL_TOOL}\n{command}\n```"
    return f"```{name}\n{arguments}\n```"


def text_agent_message(message: Message) -> Message:
    """An assistant message with tool calls as a text agent writes it: its prose, then one block per call."""
    blocks = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            blocks.append(command_block(str(function.get("name", "")), str(function.get("arguments", ""))))
    prose = message_text(message).strip()
    converted = {key: value for key, value in message.items() if key not in ("tool_calls", "function_call")}
    converted["content"] = "\n\n".join(([prose] if prose else []) + blocks)
    return converted


def to_text_agent(trace: dict[str, Any]) -> dict[str, Any]:
    """The trace as a text agent would have sent it. `observations` lists the indices of the user messages that
    are command output (what the eval must not take for the user's words)."""
    messages: list[Message] = []
    observations: list[int] = []
    for index, message in enumerate(trace["messages"]):
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            messages.append(text_agent_message(message))
        elif role == "tool":
            observations.append(index)
            messages.append({"role": "user", "content": message_text(message)})
        else:
            messages.append(message)
    return {**trace, "messages": messages, "tools": [], "observations": observations}


def _shell_command(arguments: str) -> str | None:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return None
    command = parsed.get("command") if isinstance(parsed, dict) else None
    return command if isinstance(command, str) else None
