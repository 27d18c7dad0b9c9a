"""Tool observations sent in the user role.

Text-based agents (mini-swe-agent's default mode, SWE-agent and others) write their action as a fenced command
block in an assistant message and get the command's output back as a *user* message: `<returncode>0</returncode>
<output>…`, `OBSERVATION: …`, or a fenced block. Those are tool outputs, not the user's words: they are compacted
like tool outputs, while every message the user wrote stays in view. Pure functions over plain messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import orjson

from .messages import message_text
from .records import Message, ToolCall

SHAPE_PROBE_CHARS = 400  # an observation shows its shape at its start: only this much is looked at
ACTION_SCAN_CHARS = 20_000  # the command block and the prose are looked for in this much of the assistant's text

# A fenced block: the opening line (with its language) and the body up to the next fence line.
_FENCE = re.compile(r"^[ \t]*```[ \t]*(?:([\w+-]+)[ \t]*)?\n", re.M)  # no two [ \t]* side by side: linear
_FENCE_END = re.compile(r"^[ \t]*```[ \t]*$", re.M)
_COMMAND_LANGUAGES = frozenset({"", "bash", "sh", "shell", "console", "zsh", "python", "py", "cmd", "powershell"})


@dataclass(frozen=True)
class ObservationMatcher:
    """The policy's rules for recognising observations, compiled once per policy."""

    enabled: bool
    shapes: tuple[re.Pattern[str], ...]
    after_action: bool

    @staticmethod
    def of(enabled: bool, patterns: Sequence[str], after_action: bool) -> ObservationMatcher:
        return ObservationMatcher(enabled, tuple(re.compile(p, re.I) for p in patterns), after_action)

    def is_observation(self, messages: Sequence[Message], index: int, task: int | None) -> bool:
        """Whether messages[index], a user message, is a tool observation: its start has the shape of one
        (`<returncode>`, `OBSERVATION:`, …), or it follows an assistant's command block and starts with a fenced
        block. The task (the first user message) never is."""
        message = messages[index]
        if not self.enabled or message.get("role") != "user" or task is None or index <= task:
            return False  # the task is the user's
        start = message_text(message)[:SHAPE_PROBE_CHARS].lstrip()
        if any(shape.match(start) for shape in self.shapes):
            return True
        if self.after_action and start.startswith("```") and index > 0:
            return action_command(messages[index - 1]) is not None
        return False


NO_OBSERVATIONS = ObservationMatcher(False, (), False)


def action_command(message: Message) -> str | None:
    """The command of a text-based agent's action: the body of the assistant's last fenced command block, or None
    (no block, or the message has tool calls of its own)."""
    if message.get("role") != "assistant" or message.get("tool_calls"):
        return None
    text = message_text(message)[:ACTION_SCAN_CHARS]
    command: str | None = None
    position = 0
    while True:
        opening = _FENCE.search(text, position)
        if opening is None:
            return command
        closing = _FENCE_END.search(text, opening.end())
        if closing is None:
            return command
        if (opening.group(1) or "").lower() in _COMMAND_LANGUAGES:
            command = text[opening.end():closing.start()].strip()
        position = closing.end()


def action_call(message: Message) -> ToolCall | None:
    """The text-based action as a tool call (`bash` with its command), for extraction and the digest."""
    command = action_command(message)
    if command is None:
        return None
    return ToolCall(id="", name="bash", arguments=orjson.dumps({"command": command}).decode())


def prose_of(text: str) -> str:
    """The assistant's words without its fenced blocks (the command is shown separately), from the first
    ACTION_SCAN_CHARS of the text: a digest shows the start of long prose only."""
    text = text[:ACTION_SCAN_CHARS]
    out: list[str] = []
    position = 0
    while True:
        opening = _FENCE.search(text, position)
        if opening is None:
            out.append(text[position:])
            break
        out.append(text[position:opening.start()])
        closing = _FENCE_END.search(text, opening.end())
        if closing is None:
            break
        position = closing.end()
    return "".join(out).strip()


__all__ = ["NO_OBSERVATIONS", "ObservationMatcher", "action_call", "action_command", "prose_of"]
