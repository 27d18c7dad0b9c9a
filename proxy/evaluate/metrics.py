"""Metrics of one forwarded request against what the real agent did next. Pure functions over plain data."""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from ..extract.names import names
from ..messages import message_text
from ..records import Message

_REF = re.compile(r"\[ref:[0-9a-f]+\]")


def identifiers(text: str) -> set[str]:
    """The names of the next-step recall metric (the issue's definition; the same kinds workset indexes)."""
    return names(text)


def readable_text(message: Message) -> str:
    """What a model reads in a message: its text and its tool calls."""
    parts = [message_text(message)]
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            parts.append(f"{function.get('name', '')} {function.get('arguments', '')}")
    return "\n".join(parts)


def forwarded_text(messages: Iterable[Message]) -> str:
    """Everything forwarded, refs removed: a ref names content, it does not show it."""
    return _REF.sub(" ", "\n".join(readable_text(m) for m in messages))


def leading_identical(previous: Sequence[Message] | None, current: Sequence[Message]) -> int:
    """How many leading messages the request shares with the previous one (what a prompt cache can reuse)."""
    if not previous:
        return 0
    count = min(len(previous), len(current))
    for index in range(count):
        if previous[index] is not current[index] and previous[index] != current[index]:
            return index
    return count


def cached_cost(message_tokens: Sequence[int], tools_tokens: int, reused: int, tools_reused: bool,
                cache_read_price: float) -> float:
    """Cost of one request in full-price token units: the reused leading messages (and the tool definitions, which
    come first in the prompt) at the cache-read price, the rest at 1."""
    cached = sum(message_tokens[:reused]) + (tools_tokens if tools_reused else 0)
    total = sum(message_tokens) + tools_tokens
    return cached * cache_read_price + (total - cached)


def flat(text: str) -> str:
    return " ".join(text.split()).lower()


def probe_values(expected_actions: Sequence[dict[str, Any]]) -> list[str]:
    """Scalar argument values of tau's expected actions, as the strings an agent would write."""
    values: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, bool) or value is None:
            return
        elif isinstance(value, (int, float)):
            values.append(str(int(value)) if float(value).is_integer() else str(value))
        elif isinstance(value, str) and len(value) >= 2:
            values.append(value)

    for action in expected_actions:
        walk(action.get("kwargs", {}))
    return list(dict.fromkeys(values))


def probe_turns(messages: Sequence[Message], values: Sequence[str]) -> dict[int, list[str]]:
    """For each value, the first assistant turn (index >= 2) whose tool calls carry it, if the value occurs in the
    history before that turn: {turn: [values]}. Those are what the agent had to have in view at that turn."""
    arguments = {i: " ".join(str((c.get("function") or {}).get("arguments", "")) for c in m.get("tool_calls") or ())
                 for i, m in enumerate(messages) if i >= 2 and m.get("role") == "assistant" and m.get("tool_calls")}
    turns: dict[int, list[str]] = {}
    for value in values:
        turn = next((i for i in sorted(arguments) if value in arguments[i]), None)
        if turn is None:
            continue
        history = "\n".join(readable_text(m) for m in messages[:turn])
        if value in history:
            turns.setdefault(turn, []).append(value)
    return turns
