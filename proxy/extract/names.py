"""Names an agent may reuse later: file paths, dotted / snake_case / camelCase names, ids, long numbers.

The index of names in elided turns (built at compaction) lists these, so that content leaving the working set
still leaves its names in view; the eval's next-step recall counts the same kinds of names.
"""

from __future__ import annotations

import re

from ..records import Message

NAME = re.compile(
    r"(?:[\w.-]*/[\w./-]*\w)"  # file paths (a slash inside)
    r"|(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)"  # dotted names
    r"|(?:[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+)"  # snake_case, and ids such as mia_li_3668
    r"|(?:[a-z]+(?:[A-Z][a-z0-9]+)+)"  # camelCase
    r"|(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+)"  # PascalCase with an inner capital
    # ids such as ABC123, HAT136 (not "14T10" inside a timestamp "2024-05-14T10:44:24")
    r"|(?:\b(?<![-:])(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*\d)[A-Z0-9]{4,}\b(?!:))"
    r"|(?:\b\d{3,}\b)"  # numbers of three or more digits
)
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b")  # ISO dates and times
MIN_LENGTH = 4
# Whitespace-free chunks that can hold a name (a slash, dot, underscore, capital or digit): matching only inside
# them finds exactly what matching the whole text would (no name spans whitespace), at half the cost.
_CANDIDATE = re.compile(r"\S*[/._A-Z0-9]\S*")
MAX_TEXT = 200_000  # longer texts are scanned at both ends only


def names(text: str) -> set[str]:
    """Distinct names of four characters or more."""
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT // 2] + "\n" + text[-MAX_TEXT // 2:]
    found: set[str] = set()
    for chunk in _CANDIDATE.findall(text):
        found.update(match for match in NAME.findall(chunk) if len(match) >= MIN_LENGTH)
    return found


def message_names(message: Message, text: str) -> tuple[str, ...]:
    """Names and ISO dates in a message's text and tool-call arguments (what the index of elided turns keeps),
    in a stable order."""
    parts = [text]
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            parts.append(str(function.get("arguments", "")))
    joined = "\n".join(parts)
    return tuple(sorted(names(joined) | set(DATE.findall(joined))))
