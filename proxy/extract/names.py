"""Names an agent may reuse later: file paths, dotted / snake_case / camelCase names, ids, long numbers.

Two sets, for two jobs:
- `names` is the definition of the eval's next-step recall metric (and what retrieval and the summary check look
  for): every kind of name, bare numbers of three digits or more included. Its results must not change.
- `index_names` is what the index of names in elided turns keeps: identifiers and paths an agent can act on,
  without bare numbers, dates, timestamps or short hex fragments (noise that crowds the index out).
"""

from __future__ import annotations

import re
from typing import Callable

from ..records import Message
from .facts import parse_json, string_leaves

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
MIN_LENGTH = 4
MAX_TEXT = 200_000  # longer texts are scanned at both ends only
# NAME backtracks over a run of name characters once per start position: quadratic in the run's length. Chunks
# up to this length go to NAME itself (bounded work); longer runs go to `_run_names`, which finds the same
# matches in one pass.
MAX_REGEX_CHARS = 32
# Whitespace-free chunks that can hold a name (a slash, dot, underscore, capital or digit): no name spans
# whitespace, and NAME matches only inside such chunks.
_CHUNK = re.compile(r"\S+")
_CANDIDATE_CHAR = re.compile(r"[/._A-Z0-9]")
_RUN = re.compile(r"[\w./-]+")  # every NAME match lies inside one run of these characters

# For the index: an id with a letter prefix and a hyphen (PO-2231, INC-20931-B), which NAME cuts to its number.
_PREFIXED_ID = re.compile(r"(?<![\w-])[A-Z][A-Z0-9]{1,9}-\d{2,}(?:-[A-Z0-9]+)*(?![\w-])")
_DATE_LIKE = re.compile(r"\d{4}-?\d\d-?\d\d(?:[T_ ]?\d\d:?\d\d(?::?\d\d)?(?:\.\d+)?Z?)?")
_HEX = frozenset("0123456789abcdefABCDEF")
MIN_HASH_CHARS = 7  # a shorter all-hex token that mixes digits and letters is a fragment, not an id
MAX_INDEX_SCAN_CHARS = 200_000


def names(text: str) -> set[str]:
    """Distinct names of four characters or more (the next-step recall metric's definition)."""
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT // 2] + "\n" + text[-MAX_TEXT // 2:]
    found: set[str] = set()
    for chunk in _CHUNK.finditer(text):
        start, end = chunk.span()
        if _CANDIDATE_CHAR.search(text, start, end) is None:
            continue
        if end - start <= MAX_REGEX_CHARS:
            found.update(match for match in NAME.findall(chunk.group()) if len(match) >= MIN_LENGTH)
            continue
        for run in _RUN.finditer(text, start, end):
            run_start, run_end = run.span()
            if run_end - run_start <= MAX_REGEX_CHARS:
                # one character past the run, so that NAME's look-arounds see what follows it
                matches = NAME.findall(text, run_start, run_end + 1)
            else:
                matches = _run_names(text, run_start, run_end)
            found.update(match for match in matches if len(match) >= MIN_LENGTH)
    return found


def index_names(text: str) -> set[str]:
    """The names worth keeping in the index of elided turns: identifiers with letters and paths, including ids
    like PO-2231; not bare numbers (digits and separators only), dates and date-times, or hex fragments shorter
    than MIN_HASH_CHARS that mix digits and letters (E402 and ABC123 are codes, 3F2A is a fragment)."""
    kept = {name for name in names(text) if _worth_indexing(name)}
    if "-" in text:
        kept.update(_PREFIXED_ID.findall(text, 0, MAX_INDEX_SCAN_CHARS))
    return kept


def _worth_indexing(name: str) -> bool:
    if not any(char.isalpha() for char in name):
        return False  # a bare number, or numbers joined by separators (05/20/2024, 2024_05)
    if _DATE_LIKE.fullmatch(name):
        return False  # 20240514T104424Z
    if len(name) < MIN_HASH_CHARS and all(char in _HEX for char in name):
        return not _interleaved(name)
    return True


def _interleaved(name: str) -> bool:
    """True when letters and digits alternate more than once (3F2A, 1A2B), as in a cut-out hash; a code keeps
    its letters together (E402, ABC123)."""
    changes = sum(1 for a, b in zip(name, name[1:]) if a.isdigit() != b.isdigit())
    return changes > 1


def message_names(message: Message, text: str) -> tuple[str, ...]:
    """Index names in a message's text and tool-call arguments (what the index of elided turns keeps), in a
    stable order."""
    parts = [text]
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            arguments = str(function.get("arguments", ""))
            data = parse_json(arguments)
            # the values as written, not their JSON escapes: "\nConclusion" is no name
            parts.extend(string_leaves(data, MAX_ARGUMENT_STRINGS) if data is not None else [arguments])
    return tuple(sorted(index_names("\n".join(parts))))


MAX_ARGUMENT_STRINGS = 64  # string values of one call's arguments that are read for names


# ---- NAME in one pass ---------------------------------------------------------------------------------------


def _is_word(char: str) -> bool:
    """`re`'s \\w for str patterns."""
    return char.isalnum() or char == "_"


class _Runs:
    """The end of the run of one character class that starts at a position, remembered for the whole run: a
    scan that moves forward asks about each run once, so the work stays linear."""

    __slots__ = ("text", "end", "test", "_start", "_stop")

    def __init__(self, text: str, end: int, test: Callable[[str], bool]) -> None:
        self.text, self.end, self.test = text, end, test
        self._start = self._stop = -1

    def stop(self, index: int) -> int:
        """The first position at or after `index` (up to `end`) whose character is not in the class."""
        if self._start <= index < self._stop:
            return self._stop
        stop = index
        while stop < self.end and self.test(self.text[stop]):
            stop += 1
        if stop > index:
            self._start, self._stop = index, stop
        return stop


def _ascii_alnum(char: str) -> bool:
    return char.isascii() and char.isalnum()


def _is_dot(char: str) -> bool:
    return char == "."


def _is_underscore(char: str) -> bool:
    return char == "_"


def _upper(char: str) -> bool:
    return "A" <= char <= "Z"


def _lower(char: str) -> bool:
    return "a" <= char <= "z"


def _lower_or_digit(char: str) -> bool:
    return "a" <= char <= "z" or "0" <= char <= "9"


def _upper_or_digit(char: str) -> bool:
    return "A" <= char <= "Z" or "0" <= char <= "9"


def _letter_or_underscore(char: str) -> bool:
    return "a" <= char <= "z" or "A" <= char <= "Z" or char == "_"


def _run_names(text: str, start: int, end: int) -> list[str]:
    """NAME.findall over text[start:end], a maximal run of `[\\w./-]` characters, with the characters around it
    as context; the same matches in the same order, in time linear in the run's length."""
    words = _Runs(text, end, _is_word)
    alnums = _Runs(text, end, _ascii_alnum)
    lowers = _Runs(text, end, _lower)
    lower_digits = _Runs(text, end, _lower_or_digit)
    upper_digits = _Runs(text, end, _upper_or_digit)
    digits = _Runs(text, end, str.isdecimal)
    last_word = end - 1
    while last_word >= start and not _is_word(text[last_word]):
        last_word -= 1
    slash = -1  # the next "/" at or after the current position
    found: list[str] = []
    index = start
    while index < end:
        if slash < index:
            slash = text.find("/", index, end)
            if slash < 0:
                slash = end
        stop = _match_at(text, index, end, slash, last_word, words, alnums, lowers, lower_digits, upper_digits,
                         digits)
        if stop > index:
            found.append(text[index:stop])
            index = stop
        else:
            index += 1
    return found


def _match_at(text: str, i: int, end: int, slash: int, last_word: int, words: _Runs, alnums: _Runs,
              lowers: _Runs, lower_digits: _Runs, upper_digits: _Runs, digits: _Runs) -> int:
    """The end of NAME's match at `i` (its alternatives in order), or `i` when none matches there."""
    char = text[i]
    # path: [\w.-]* runs to the next "/", then [\w./-]* to the run's end and back to its last word character
    if slash < end and last_word > slash:
        return last_word + 1
    # dotted: [A-Za-z_]\w* then one or more (\.[A-Za-z_]\w*)
    if _letter_or_underscore(char):
        stop = _parts(text, words.stop(i), end, _is_dot, _letter_or_underscore, words)
        if stop:
            return stop
    # snake: [A-Za-z0-9]+ then one or more (_[A-Za-z0-9]+)
    if _ascii_alnum(char):
        stop = _parts(text, alnums.stop(i), end, _is_underscore, _ascii_alnum, alnums)
        if stop:
            return stop
    # camelCase: [a-z]+ then one or more ([A-Z][a-z0-9]+)
    if _lower(char):
        stop = _parts(text, lowers.stop(i), end, _upper, _lower_or_digit, lower_digits)
        if stop:
            return stop
    # PascalCase: [A-Z][a-z0-9]+ then one or more ([A-Z][a-z0-9]+)
    if _upper(char) and i + 1 < end and _lower_or_digit(text[i + 1]):
        stop = _parts(text, lower_digits.stop(i + 1), end, _upper, _lower_or_digit, lower_digits)
        if stop:
            return stop
    before = text[i - 1] if i > 0 else ""
    if before and _is_word(before):
        return i  # the last two alternatives start at a word boundary
    # id: (?<![-:]) [A-Z0-9]{4,} with a letter and a digit, then a word boundary not followed by ":"
    if _upper_or_digit(char) and before not in ("-", ":"):
        stop = upper_digits.stop(i)
        after = text[stop] if stop < len(text) else ""
        token = text[i:stop]
        if (stop - i >= 4 and not (after and _is_word(after)) and after != ":"
                and any(c.isdigit() for c in token) and any(c.isalpha() for c in token)):
            return stop
    # number: \d{3,} then a word boundary
    if char.isdecimal():
        stop = digits.stop(i)
        after = text[stop] if stop < len(text) else ""
        if stop - i >= 3 and not (after and _is_word(after)):
            return stop
    return i


def _parts(text: str, stop: int, end: int, lead: Callable[[str], bool], first: Callable[[str], bool],
           runs: _Runs) -> int:
    """After `stop`, one or more parts, each a `lead` character, then a `first` character and the rest of its run
    in `runs` ("." then a name, "_" then letters or digits, a capital then lowercase): the end of the last part,
    or 0 when there is none."""
    found = 0
    while stop + 1 < end and lead(text[stop]) and first(text[stop + 1]):
        stop = found = runs.stop(stop + 1)
    return found
