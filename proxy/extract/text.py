"""Shared text helpers for the extractors: normalizing, clipping, code detection, sentence splitting.

Every regex here is precompiled and linear on its input: extraction runs on each new message inside the
request path, so no pattern may backtrack badly on long or hostile text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_WS = re.compile(r"\s+")
_TRAILING_PUNCT = ".!?;:,。！？；：，"
# Bold markers and inline-code backticks; not "__", which is part of names like __init__.py.
_MARKUP = re.compile(r"\*\*|(?<!\w)`|`(?!\w)")
_TAG = re.compile(r"</?[A-Za-z][\w-]*>")
_EDGE_TAGS = re.compile(r"^(?:\s*</?[A-Za-z][\w-]*>)+|(?:</?[A-Za-z][\w-]*>\s*)+$")
# A list marker at the start of a line: "- ", "* ", "• ", "1. ", "2) ".
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)", re.M)
# Text-based agents (mini-swe-agent, SWE-agent) start their prose with "THOUGHT:" or "DISCUSSION".
_SPEAKER = re.compile(r"[ \t]*(?:THOUGHT|Thought|DISCUSSION|Discussion)[ \t]?:?[ \t]+")
_HEADING = re.compile(r"^\s*#{1,6}\s")

# Lines that are code or machine output rather than prose.
_CODE_START = re.compile(
    r"^\s*(?:>>>|\.\.\.\s|\$ |#include|import \w|from [\w.]+ import|def \w|class \w|return\b|raise\b|"
    r"File \"|Traceback \(|at [\w.$]+\(|if \(|for \(|while \(|[}\])]|const \w|let \w|var \w|function\b|@\w|"
    r"[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit):)"
)
_CODE_OPERATORS = ("==", "!=", "=>", "->", "::", "&&", "||")
_CODE_ENDINGS = (";", "{", "}", ")", "):")
_CALL_AT_END = re.compile(r"\w\([^()]*\)\s*:?$")  # "foo(x)", "def f(a, b):"
_ASSIGNMENT = re.compile(r"\w+(?:\.\w+)*\s*(?::\s*[\w.\[\], ]+)?\s*=\s")  # "x = 1", "x: int = 1"
_SYMBOL_CHARS = "[]{}()=<>;_\\|`^~"
_WITHOUT_SYMBOLS = str.maketrans("", "", _SYMBOL_CHARS)
_CODE_PROBE_CHARS = 400
MAX_SENTENCES = 256  # of one unit: more is a list of fragments ("1. 1. 1."), not prose to read sentence by sentence

# Sentence ends: English ".!?" followed by space, Chinese full-width marks with or without space.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"')\]])\s+|(?<=[。！？；])\s*")
_ABBREVIATION = re.compile(
    r"(?:\b(?:e\.g|i\.e|etc|vs|mr|mrs|ms|dr|st|no|approx|fig|cf|al|inc|ltd|jr|sr)\.|\b[A-Za-z]\.)$",
    re.I,
)

TRACEBACK = "Traceback (most recent call last):"  # how a Python traceback starts, in any output


def collapse(text: str) -> str:
    """Whitespace runs become one space; ends trimmed."""
    return _WS.sub(" ", text).strip()


def flat(text: str) -> str:
    """Whitespace runs become one space (str.split's notion of whitespace); ends trimmed."""
    return " ".join(str(text).split())


def one_line(text: str, limit: int) -> str:
    """Flat, and at most `limit` characters: cut hard, with an ellipsis (rendered lines stay predictable). Of a long
    text only a head is flattened when it is enough (a flattened head is a head of the flattened text)."""
    line = flat(text[: 4 * limit + 16])
    if len(line) <= limit and len(text) > 4 * limit + 16:
        line = flat(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def normalize(text: str) -> str:
    """A comparison form: markup dropped, lowercased, whitespace collapsed, trailing punctuation dropped.

    Two spellings of the same sentence (case, spacing, a final period) give the same ledger key.
    """
    text = _MARKUP.sub("", text)
    return collapse(text).lower().rstrip(_TRAILING_PUNCT + " ")


def as_written(text: str) -> str:
    """normalize() with the case kept: the form a ledger item is shown in (its key compares without case)."""
    return collapse(_MARKUP.sub("", text)).rstrip(_TRAILING_PUNCT + " ")


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary when one is near, with an ellipsis."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return text[:limit]
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit * 2 // 3:
        cut = cut[:space]
    return cut.rstrip() + "…"


def clip_middle(text: str, limit: int) -> str:
    """At most `limit` characters keeping head and tail: error lines carry their cause at the end."""
    if len(text) <= limit:
        return text
    if limit < 8:
        return text[:limit]
    head = (limit - 3) * 3 // 5
    tail = limit - 3 - head
    return text[:head].rstrip() + " … " + text[len(text) - tail :].lstrip()


def strip_speaker(line: str) -> str:
    """The line without a leading "THOUGHT:" / "DISCUSSION" tag of a text-based agent."""
    match = _SPEAKER.match(line)
    return line[match.end():] if match else line


def trim(sentence: str) -> str:
    """The sentence as written, without a leading list marker or speaker tag, or XML-ish tags at its ends.

    What remains is a substring of the source (up to whitespace), so it can be found again in what is forwarded.
    """
    sentence = _BULLET.sub("", strip_speaker(sentence), count=1)
    return _EDGE_TAGS.sub("", sentence).strip()


def cut(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary when one is near; no ellipsis, so a prefix remains."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = head.rfind(" ")
    return (head[:space] if space >= limit * 2 // 3 else head).rstrip()


def strip_markup(line: str) -> str:
    """A line as a person reads it: speaker tag, list marker, bold markers, XML-ish tags and heading hashes
    removed."""
    line = _BULLET.sub("", strip_speaker(line), count=1)
    line = _TAG.sub("", line)
    line = _MARKUP.sub("", line)
    return line.strip().lstrip("#").strip()


def is_heading(line: str) -> bool:
    return bool(_HEADING.match(line))


def looks_like_code(line: str) -> bool:
    """True for a line of source code, a stack frame or a shell prompt; prose lines return False.

    Substring tests and anchored matches only: it runs on every line of the texts it filters.
    """
    stripped = line.strip()[:_CODE_PROBE_CHARS]  # bounded: a pasted one-line blob stays cheap
    if not stripped:
        return False
    if _CODE_START.match(stripped) or any(op in stripped for op in _CODE_OPERATORS):
        return True
    if stripped.endswith(_CODE_ENDINGS) and (stripped[-1] in ";{}" or _CALL_AT_END.search(stripped)):
        return True
    if "=" in stripped and _ASSIGNMENT.match(stripped):
        return True
    symbols = len(stripped) - len(stripped.translate(_WITHOUT_SYMBOLS))
    words = len(stripped) - stripped.count(" ") - symbols
    # Dense punctuation is code or data, not a sentence someone wrote.
    return symbols * 4 > words + 4


def fenced_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of fenced code blocks (``` or ~~~); an unclosed fence runs to the end."""
    marks = [m.start() for m in _FENCE.finditer(text)]
    spans: list[tuple[int, int]] = []
    for i in range(0, len(marks), 2):
        start = marks[i]
        end = text.find("\n", marks[i + 1]) if i + 1 < len(marks) else len(text)
        spans.append((start, len(text) if end < 0 else end))
    return spans


def prose_lines(text: str) -> Iterator[str]:
    """The lines of `text` outside fenced code blocks."""
    inside = False
    for line in text.splitlines():
        if _FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield line


def units(text: str) -> list[str]:
    """Logical text units: paragraphs with hard wraps joined, each list item and heading on its own.

    Code-looking lines and fenced blocks end a unit and are dropped, so pasted code and stack traces never
    reach the sentence-level extractors.
    """
    result: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            result.append(" ".join(current))
            current.clear()

    for raw in prose_lines(text):
        line = raw.strip()
        if not line or looks_like_code(raw) or _TAG.fullmatch(line):
            flush()
            continue
        starts_item = bool(_BULLET.match(raw)) or is_heading(raw)
        if starts_item or (current and current[-1].endswith(":")):
            flush()
        current.append(line)
        if is_heading(raw):
            flush()
    flush()
    return result


def sentences(unit: str, limit: int = MAX_SENTENCES) -> list[str]:
    """Split one unit into sentences on English and Chinese end punctuation, keeping abbreviations whole; the first
    `limit` of them."""
    groups: list[list[str]] = []
    for piece in _SENTENCE_END.split(unit):
        if not piece or piece.isspace():
            continue
        # "e.g. the", "U.S. law": a split after an abbreviation or before a lowercase word is no sentence end.
        if groups and (_ABBREVIATION.search(groups[-1][-1][-12:]) or piece[:1].islower()):
            groups[-1].append(piece)
        elif len(groups) == limit:
            break
        else:
            groups.append([piece])
    return [" ".join(group).strip() for group in groups]


def spans(text: str, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) pieces of `text` of about `size` characters, cut after a newline when there is one."""
    start = 0
    length = len(text)
    while start < length:
        end = min(length, start + size)
        if end < length:
            newline = text.rfind("\n", start, end)
            if newline > start:
                end = newline + 1
        yield start, end
        start = end
