"""Metrics of one forwarded request against what the real agent did next. Pure functions over plain data."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..extract.names import names
from ..messages import message_text
from ..records import Message
from ..workingset import WORKSET_TAG

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


def message_texts(messages: Iterable[Message]) -> list[str]:
    """Each forwarded message's readable text, refs removed: a ref names content, it does not show it."""
    return [_REF.sub(" ", readable_text(m)) for m in messages]


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


# --- probe checks: what a scenario says must be in view when the agent acts -------------------------------------

PROBE_KINDS = ("constraint", "fact", "decision", "pending", "approval", "failure")


@dataclass(frozen=True)
class ProbeCheck:
    """One entry of a trace's probes.checks: at `turn` (an assistant message; the request is messages[:turn]),
    one forwarded message must hold one of `strings` (case-insensitive) or match one of `patterns`."""

    id: str
    turn: int
    kind: str
    strings: tuple[str, ...]  # casefolded
    patterns: tuple[re.Pattern[str], ...]  # compiled with re.IGNORECASE
    why: str = ""

    def kept_in(self, texts: Sequence[str]) -> bool:
        """Whether one of the texts (one per forwarded message) holds it: a probe split across two messages is
        not in view as the model would need it."""
        for text in texts:
            folded = text.casefold()
            if any(item in folded for item in self.strings) or any(p.search(text) for p in self.patterns):
                return True
        return False


def probe_checks(trace: dict[str, Any]) -> list[ProbeCheck]:
    """The trace's probe checks, each validated against its messages. Raises ValueError naming the trace and the
    check when one cannot be scored (no agent action at its turn, nothing to look for, a bad regex)."""
    messages = trace.get("messages") or []
    checks: list[ProbeCheck] = []
    for number, raw in enumerate((trace.get("probes") or {}).get("checks") or []):
        where = f"trace {trace.get('id')!r}, probe check {raw.get('id', number)!r}"
        turn = raw.get("turn")
        if not isinstance(turn, int) or not 2 <= turn < len(messages) or messages[turn].get("role") != "assistant":
            raise ValueError(f"{where}: turn {turn!r} is not an assistant message at index 2 or later "
                             f"(the request is messages[:turn])")
        strings = tuple(str(item).casefold() for item in raw.get("must_contain_any") or () if str(item))
        try:
            patterns = tuple(re.compile(str(item), re.IGNORECASE) for item in raw.get("must_match_any") or ())
        except re.error as error:
            raise ValueError(f"{where}: bad regex: {error}") from error
        if not strings and not patterns:
            raise ValueError(f"{where}: neither must_contain_any nor must_match_any is given")
        checks.append(ProbeCheck(str(raw.get("id", number)), turn, str(raw.get("kind") or "other"), strings,
                                 patterns, str(raw.get("why") or "")))
    return checks


# --- part sizes: what workset's own messages are made of -------------------------------------------------------

# Section headings of workset's messages, by prefix, and the part each belongs to (first match wins). Any
# "## Earlier ..." section is digest-like; an unknown heading counts as "other".
PART_HEADINGS: tuple[tuple[str, str], ...] = (
    ("## Task state", "state"),
    ("## Earlier", "digest"),
    ("## Names in elided turns", "names"),
    ("## Summary of turns", "summary"),
    ("## Retrieved for this step", "retrieval"),
)
OTHER_PART = "other"


def part_of(heading: str) -> str:
    return next((part for prefix, part in PART_HEADINGS if heading.startswith(prefix)), OTHER_PART)


def part_tokens(messages: Iterable[Message], count: Callable[[str], int]) -> dict[str, int]:
    """Tokens of each part (state, digest, names, ...) in one request: the "## " sections of the messages whose
    text starts with workset's tag (the compacted message, the live state), summed over messages. The lines
    before a message's first section (its header) belong to no part."""
    sizes: dict[str, int] = {}

    def add(part: str | None, lines: list[str]) -> None:
        if part is not None:
            sizes[part] = sizes.get(part, 0) + count("\n".join(lines).strip())

    for message in messages:
        text = message_text(message)
        if not text.startswith(WORKSET_TAG) or "\n## " not in text:
            continue
        part: str | None = None
        lines: list[str] = []
        for line in text.split("\n"):
            if line.startswith("## "):
                add(part, lines)
                part, lines = part_of(line), []
            lines.append(line)
        add(part, lines)
    return sizes
