"""Names an agent may reuse later: file paths, dotted / snake_case / camelCase names, ids, long numbers.

Two sets, for two jobs:
- `names` is the definition of the eval's next-step recall metric (and what retrieval and the summary check look
  for): every kind of name, bare numbers of three digits or more included. Its results must not change.
- `index_names` is what the index of names in elided turns keeps: identifiers and paths an agent can act on,
  without bare numbers, dates, timestamps or short hex fragments (noise that crowds the index out).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..records import Message
from .facts import MAX_ARGUMENT_STRINGS, parse_json, string_leaves, window

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
MAX_TEXT = 65_536  # of a longer text both ends are read: a megabyte of hostile text costs what 64k chars do
# NAME backtracks over a run of name characters once per start position: quadratic in the run's length. Runs up
# to this length go to NAME itself (bounded work); longer ones go to `_run_names`, which finds the same names in
# one pass.
MAX_REGEX_CHARS = 24
# A run of name characters longer than that; every NAME match lies inside one run.
_LONG_RUN = re.compile(rf"[\w./-]{{{MAX_REGEX_CHARS + 1},}}")
# NAME as `names` runs it: the same matches, found with less backtracking. The first character every match starts
# with is checked first; quantifiers that can never give a character back usefully are possessive; and the path,
# snake_case and camelCase alternatives start only where their run of characters starts (their outcome is the same
# anywhere in that run, and a scan always reaches its start), as does a dotted name (not after a letter, unless
# at a "_": a snake_case name can end there). A text without a "." is read without the dotted alternative, whose
# tries are the costly ones left.
_ALTERNATIVES = (
    r"(?<![\w.-])[\w.-]*+/[\w./-]*\w",
    r"(?:(?<![A-Za-z])|(?=_))[A-Za-z_]\w*+(?:\.[A-Za-z_]\w*+)+",
    r"(?<![A-Za-z0-9])[A-Za-z0-9]++(?:_[A-Za-z0-9]++)+",
    r"(?<![a-z])[a-z]++(?:[A-Z][a-z0-9]++)+",
    r"[A-Z][a-z0-9]++(?:[A-Z][a-z0-9]++)+",
    r"\b(?<![-:])(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*\d)[A-Z0-9]{4,}+\b(?!:)",
    r"\b\d{3,}+\b",
)
_NAME_SCAN = re.compile(rf"(?=[\w./-])(?:{'|'.join(_ALTERNATIVES)})")
_NUMBER = re.compile(_ALTERNATIVES[-1])
_LETTER = re.compile(r"[A-Za-z_]")  # every alternative but the number needs one (or a "/")
_ALNUM = re.compile(r"[A-Za-z0-9]")  # and every one but the number and a dotted name one of these
_NAME_SCAN_UNDOTTED = re.compile(rf"(?=[\w/-])(?:{'|'.join(_ALTERNATIVES[:1] + _ALTERNATIVES[2:])})")
_CANDIDATE_CHAR = re.compile(r"[/._A-Z0-9]")  # every name holds one

# For the index: an id with a letter prefix and a hyphen (PO-2231, INC-20931-B), which NAME cuts to its number.
_PREFIXED_ID = re.compile(r"(?<![\w-])[A-Z][A-Z0-9]{1,9}-\d{2,}(?:-[A-Z0-9]+)*(?![\w-])")
_DATE_LIKE = re.compile(r"\d{4}-?\d\d-?\d\d(?:[T_ ]?\d\d:?\d\d(?::?\d\d)?(?:\.\d+)?Z?)?"
                        r"|\d+Z")  # or a UTC time's fraction of a second (the 019Z of 10:05:00.019Z)
_HEX = frozenset("0123456789abcdefABCDEF")
MIN_HASH_CHARS = 7  # a shorter all-hex token that mixes digits and letters is a fragment, not an id


def names(text: str, max_chars: int = MAX_TEXT) -> set[str]:
    """Distinct names of four characters or more (the next-step recall metric's definition); of a text longer
    than `max_chars`, both ends are read."""
    text = window(text, max_chars)
    # NAME never matches whitespace, so each distinct whitespace-free chunk is read once (a long output repeats
    # most of its words); the short ones together, in one call.
    dotted: list[str] = []
    undotted: list[str] = []
    long: list[str] = []
    for chunk in set(text.split()):
        (long if len(chunk) > MAX_REGEX_CHARS else dotted if "." in chunk else undotted).append(chunk)
    found = set(_NAME_SCAN.findall(" ".join(dotted)))
    found.update(_NAME_SCAN_UNDOTTED.findall(" ".join(undotted)))
    for chunk in long:
        if _CANDIDATE_CHAR.search(chunk) is not None:
            found.update(_chunk_names(chunk))
    return {name for name in found if len(name) >= MIN_LENGTH}


def _chunk_names(chunk: str) -> list[str]:
    """NAME.findall over one chunk, with its long runs read by `_run_names`."""
    scan = _NAME_SCAN if "." in chunk else _NAME_SCAN_UNDOTTED
    found: list[str] = []
    position = 0
    for run in _LONG_RUN.finditer(chunk):
        # what lies before the run ends with a character that is not a name character: it ends no match early
        found += scan.findall(chunk, position, run.start())
        found += _run_names(chunk, run.start(), run.end())
        position = run.end()
    found += scan.findall(chunk, position)
    return found


def index_names(text: str, max_chars: int = MAX_TEXT) -> set[str]:
    """The names worth keeping in the index of elided turns: identifiers with letters and paths, including ids
    like PO-2231; not bare numbers (digits and separators only), dates and date-times, or hex fragments shorter
    than MIN_HASH_CHARS that mix digits and letters (E402 and ABC123 are codes, 3F2A is a fragment). Of a text
    longer than `max_chars`, both ends are read."""
    text = window(text, max_chars)
    kept = {name for name in names(text, max_chars) if _worth_indexing(name)}
    if "-" in text:
        kept.update(_PREFIXED_ID.findall(text))
    return kept


_CODE = re.compile(r"(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*\d)[A-Z0-9]{4,}")
_NUMBERED = re.compile(r"[A-Za-z]+(?:_[A-Za-z]+)*_\d{3,}")  # credit_card_4421486, mia_li_3668


def is_record_id(name: str) -> bool:
    """An id a tool hands out for a record, which an agent looks up, cites and acts on later: a prefixed id
    (PO-2231, DG-2026-0331), capitals and digits together (HAT136, W2378156), or words ending in a number of three
    digits or more (credit_card_4421486); not a code identifier or a path."""
    return any(shape.fullmatch(name) is not None for shape in (_PREFIXED_ID, _CODE, _NUMBERED))


def _worth_indexing(name: str) -> bool:
    if not any(char.isalpha() for char in name):
        return False  # a bare number, or numbers joined by separators (05/20/2024, 2024_05)
    if _DATE_LIKE.fullmatch(name):
        return False  # 20240514T104424Z, 019Z
    if len(name) < MIN_HASH_CHARS and all(char in _HEX for char in name):
        return not _interleaved(name)
    return True


def _interleaved(name: str) -> bool:
    """True when letters and digits alternate more than once (3F2A, 1A2B), as in a cut-out hash; a code keeps
    its letters together (E402, ABC123)."""
    changes = sum(1 for a, b in zip(name, name[1:]) if a.isdigit() != b.isdigit())
    return changes > 1


def message_names(message: Message, text: str, max_chars: int = MAX_TEXT) -> tuple[str, ...]:
    """Index names in a message's text and tool-call arguments (what the index of elided turns keeps), in a
    stable order. Of a long message, half of `max_chars` of the text (its head and tail) is read, and half of the
    arguments, as extraction reads them (their JSON must parse: the traces' longest is 12k characters)."""
    calls = [call for call in message.get("tool_calls") or () if isinstance(call, dict)]
    parts = [window(text, max_chars // 2)]
    share = max_chars // 2 // max(1, len(calls))
    for call in calls:
        function = call.get("function")
        if isinstance(function, dict):
            arguments = window(str(function.get("arguments", "")), share)
            data = parse_json(arguments)
            # the values as written, not their JSON escapes: "\nConclusion" is no name
            parts.extend(string_leaves(data, MAX_ARGUMENT_STRINGS) if data is not None else [arguments])
    return tuple(sorted(index_names("\n".join(parts), max_chars + len(parts))))




# ---- NAME in one pass ---------------------------------------------------------------------------------------

# Inside a run without a path, no name crosses "-", "/" or a "." that does not join two parts of a dotted name (a
# word character before it, a letter or "_" after it): the run is read as the pieces between them, each with the
# "-" or ":" before it and the ":" after it (the only neighbours NAME looks at).
_PIECE = re.compile(r"([-:]?)((?:\w++|(?<=\w)\.(?=[A-Za-z_]))+)(?=(:?))")
# The ends of runs of one character class, and the parts that extend a dotted, snake_case or camelCase name; all
# possessive: giving a character back never lets the next part match.
_WORDS = re.compile(r"\w*")
_ALNUMS = re.compile(r"[A-Za-z0-9]*")
_LOWERS = re.compile(r"[a-z]*")
_LOWER_DIGITS = re.compile(r"[a-z0-9]*")
_UPPER_DIGITS = re.compile(r"[A-Z0-9]*")
_DIGITS = re.compile(r"\d*")
_DOTTED_PARTS = re.compile(r"(?:\.[A-Za-z_]\w*+)+")
_SNAKE_PARTS = re.compile(r"(?:_[A-Za-z0-9]++)+")
_CASE_PARTS = re.compile(r"(?:[A-Z][a-z0-9]++)+")
# Where the next match of one alternative can start after a failed position (see `_next_start`): snake_case at the
# start of a letters-and-digits run, camelCase at the start of a lowercase run, PascalCase at a capital, a dotted
# name at a letter or "_".
_SNAKE_START = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]++(?=_[A-Za-z0-9])")
_CAMEL_START = re.compile(r"(?<![a-z])[a-z]++(?=[A-Z][a-z0-9])")
_PASCAL_START = re.compile(r"[A-Z][a-z0-9]++(?=[A-Z][a-z0-9])")
_DOTTED_START = re.compile(r"[A-Za-z_]")
_DIGIT = re.compile(r"[0-9]")
_CAPITAL = re.compile(r"[A-Z]")


def _run_names(text: str, start: int, end: int) -> set[str]:
    """The distinct matches of NAME.findall over text[start:end], a maximal run of `[\\w./-]` characters, with the
    characters around it as context; in time linear in the run's length."""
    run = text[start:end]
    stem = run.rstrip("./-")  # up to the run's last word character
    if "/" in stem:
        # NAME's path alternative, tried first at the run's start: through the first "/" to the last word character
        return {stem}
    if _LETTER.search(stem) is None or ("." not in stem and _ALNUM.search(stem) is None):
        # no path, no letter or "_", or neither an ASCII letter or digit nor a ".": only numbers can match
        return set(_NUMBER.findall(text, start, start + len(stem) + 1))
    if "." not in stem:
        # no path and no dotted name: what is left of NAME is linear (see _NAME_SCAN). The run's end after its
        # last word character holds no name (it only makes the path alternative scan to the end at each "/").
        return set(_NAME_SCAN_UNDOTTED.findall(text, start, start + len(stem) + 1))
    # a dotted name is tried at many letters of a long word: the run is read in pieces, dotted ones by the scan
    found: set[str] = set()
    pos = start - 1 if start and text[start - 1] == ":" else start
    for lead, piece, trail in set(_PIECE.findall(text, pos, end + 1)):
        context = lead + piece + trail
        if "." in piece:
            found.update(_piece_names(context, len(lead), len(lead) + len(piece)))
        else:
            found.update(_NAME_SCAN_UNDOTTED.findall(context, len(lead), len(lead) + len(piece) + len(trail)))
    return found


class _Runs:
    """The end of the run of one character class that holds a position, remembered for the whole run: a scan that
    moves forward asks about each run once, so the work stays linear."""

    __slots__ = ("text", "end", "pattern", "_start", "_stop")

    def __init__(self, text: str, end: int, pattern: re.Pattern[str]) -> None:
        self.text, self.end, self.pattern = text, end, pattern
        self._start = self._stop = -1

    def stop(self, index: int) -> int:
        """The first position at or after `index` (up to `end`) whose character is not in the class."""
        if self._start <= index < self._stop:
            return self._stop
        match = self.pattern.match(self.text, index, self.end)
        stop = match.end() if match else index
        if stop > index:
            self._start, self._stop = index, stop
        return stop


class _Ahead:
    """The next start of one pattern at or after a position, remembered until the scan passes it: a scan that
    moves forward searches each stretch of the text once."""

    __slots__ = ("text", "end", "pattern", "_from", "_at")

    def __init__(self, text: str, end: int, pattern: re.Pattern[str]) -> None:
        self.text, self.end, self.pattern = text, end, pattern
        self._from = self._at = -1

    def at(self, index: int) -> int:
        if not self._from <= index <= self._at:
            match = self.pattern.search(self.text, index, self.end)
            self._from, self._at = index, match.start() if match else self.end
        return self._at


def _piece_names(text: str, start: int, end: int) -> list[str]:
    """NAME.findall over text[start:end]: word characters, and dots that join parts of a dotted name (no path can
    match in it). Each position the scan stops at is tried as NAME tries it; after a failed one the scan moves to
    the next position where some alternative can match."""
    words, alnums = _Runs(text, end, _WORDS), _Runs(text, end, _ALNUMS)
    lowers, lower_digits = _Runs(text, end, _LOWERS), _Runs(text, end, _LOWER_DIGITS)
    upper_digits, digits = _Runs(text, end, _UPPER_DIGITS), _Runs(text, end, _DIGITS)
    ahead = [_Ahead(text, end, pattern) for pattern in (_SNAKE_START, _CAMEL_START, _PASCAL_START)]
    dotted = _Ahead(text, end, _DOTTED_START)
    found: list[str] = []
    index = start
    while index < end:
        stop = _match_at(text, index, end, words, alnums, lowers, lower_digits, upper_digits, digits)
        if stop > index:
            found.append(text[index:stop])
            index = stop
            continue
        # Nothing starts here. A dotted name, snake_case, camelCase or PascalCase name would start at a position
        # its pattern finds; an id or a number only at the start of a word (after a "."). Positions in between
        # fail as this one did: each alternative's outcome is the same along the run it depends on.
        word_end = words.stop(index)
        if word_end == index:
            index += 1  # a "."
            continue
        following = min(word_end + 1, end)
        if word_end < end:  # a dot follows the word: a dotted name starts at its first letter
            following = min(following, dotted.at(index + 1))
        index = min(following, *(scan.at(index + 1) for scan in ahead))
    return found


def _match_at(text: str, i: int, end: int, words: _Runs, alnums: _Runs, lowers: _Runs, lower_digits: _Runs,
              upper_digits: _Runs, digits: _Runs) -> int:
    """The end of NAME's match at `i` (its alternatives but the path, in order), or `i` when none matches there."""
    char = text[i]
    # dotted: [A-Za-z_]\w* then one or more (\.[A-Za-z_]\w*)
    if "a" <= char <= "z" or "A" <= char <= "Z" or char == "_":
        parts = _DOTTED_PARTS.match(text, words.stop(i), end)
        if parts:
            return parts.end()
    # snake: [A-Za-z0-9]+ then one or more (_[A-Za-z0-9]+)
    if char.isascii() and char.isalnum():
        parts = _SNAKE_PARTS.match(text, alnums.stop(i), end)
        if parts:
            return parts.end()
    # camelCase: [a-z]+ then one or more ([A-Z][a-z0-9]+)
    if "a" <= char <= "z":
        parts = _CASE_PARTS.match(text, lowers.stop(i), end)
        if parts:
            return parts.end()
    # PascalCase: [A-Z][a-z0-9]+ then one or more ([A-Z][a-z0-9]+)
    if "A" <= char <= "Z" and i + 1 < end and ("a" <= text[i + 1] <= "z" or "0" <= text[i + 1] <= "9"):
        parts = _CASE_PARTS.match(text, lower_digits.stop(i + 1), end)
        if parts:
            return parts.end()
    before = text[i - 1] if i > 0 else ""
    if before and (before.isalnum() or before == "_"):
        return i  # the last two alternatives start at a word boundary
    after_word = words.stop(i)
    after = text[after_word] if after_word < len(text) else ""
    # id: (?<![-:]) [A-Z0-9]{4,} with a letter and a digit, then a word boundary not followed by ":"
    if ("A" <= char <= "Z" or "0" <= char <= "9") and before not in ("-", ":"):
        stop = upper_digits.stop(i)
        if (stop == after_word and stop - i >= 4 and after != ":" and _DIGIT.search(text, i, stop)
                and _CAPITAL.search(text, i, stop)):
            return stop
    # number: \d{3,} then a word boundary
    if char.isdecimal():
        stop = digits.stop(i)
        if stop - i >= 3 and stop == after_word:
            return stop
    return i
