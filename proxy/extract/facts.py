"""Key facts: entities in free text (amounts, quantities, dates, ids, paths, URLs), `key: value` lines, and the
scalar fields of JSON tool outputs. Log lines, text tables and numeric series are not key facts (see noise.py).

Keys decide supersession (a later fact with the same kind and key replaces an earlier one), so they are built
to be stable: an entity's key is its normalized spelling, a JSON field's key is qualified by the identifier of
the object that holds it (`ZFA04Y.cabin`), and a `key: value` line's key by the heading above it.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterator
from itertools import islice
from typing import Any, NamedTuple

from ..records import AMOUNT, DATE, FIELD, IDENTIFIER, PATH, QUANTITY, URL
from .noise import series_summary, without_noise_lines
from .text import clip, collapse, fenced_spans, looks_like_code, normalize, spans, strip_markup

MAX_TEXT_FACTS = 60  # per message, free text: the first ones in text order are kept
MAX_JSON_FACTS = 200  # per message, JSON leaves: the first ones in document order are kept
MAX_VALUE_CHARS = 120
MAX_KEY_CHARS = 160
MAX_QUALIFIER_CHARS = 64
MAX_JSON_CHARS = 1_000_000  # a larger output is read as text: parsing it would cost more than it gives
MAX_JSON_DEPTH = 32
MIN_LINE_CHARS = 16  # a window of N characters holds at most N / 16 lines (see `window`)
SCAN_CHUNK_CHARS = 16_384  # free text is scanned in pieces so that the cap can stop the scan early
MAX_SCAN_HEAD_CHARS = 24_000  # of a long text, free-text facts come from this much of its start
MAX_SCAN_TAIL_CHARS = 8_000  # and this much of its end
CONTEXT_BEFORE = 48
CONTEXT_AFTER = 40

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_CURRENCY_CODE = r"(?:USD|EUR|GBP|CNY|RMB|JPY|CAD|AUD|CHF|HKD|INR|SGD)"
_NUMBER = r"\d(?:[\d,]*\d)?(?:\.\d+)?"
_PER_UNIT = r"(?:\s?/\s?[A-Za-z]{1,12}\b|\s+per\s+[A-Za-z]{1,12}\b)?"
_UNITS = (
    r"(?:pcs|pieces?|units?|items?|bags?|baggages?|suitcases?|passengers?|people|persons?|adults?|children|kids|"
    r"tickets?|seats?|nights?|rooms?|days?|weeks?|months?|years?|hours?|hrs?|minutes?|mins?|seconds?|secs?|ms|"
    r"kg|kgs|lbs?|km|miles?|GB|MB|KB|TB|GiB|MiB|KiB|bytes?|tokens?|requests?|tests?|retries|attempts?|"
    r"percent|件|个|天|小时|分钟|公斤|千克|箱|袋|张|人|次|周|晚)"
)
_CODE_EXTENSIONS = (
    r"(?:py|pyi|pyx|ipynb|js|jsx|mjs|cjs|ts|tsx|go|rs|java|kt|scala|rb|php|cs|cpp|cc|hpp|swift|sh|bash|zsh|"
    r"md|rst|txt|toml|yaml|yml|json|jsonl|cfg|ini|conf|html|css|scss|sql|lock|xml|csv|tsv|log|patch|diff)"
)

# Entity patterns, one per kind, matched only at candidate token starts (see `entities`), never scanned over
# the text: `re` scans an alternation like this at microseconds per character.
_URL = r"(?P<url>https?://[^\s<>\"'`\])]+)"
_EMAIL = r"(?P<email>[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-]))"
_UUID = r"(?P<uuid>[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}(?![\w-]))"
_DATE = (
    r"(?P<date>\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?(?![\w-])"
    rf"|{_MONTH}\.?\s\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s\d{{4}})?(?![\w:/-])"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s(?:of\s)?{_MONTH}(?:,?\s\d{{4}})?(?![\w/-])"
    r"|\d{1,2}/\d{1,2}/\d{4}(?![\w/])"
    r"|\d{4}年\d{1,2}月(?:\d{1,2}[日号])?|\d{1,2}月\d{1,2}[日号])"
)
_AMOUNT = (
    rf"(?P<amount>(?:US\$|[$€£¥￥])\s?{_NUMBER}(?:\s?(?:[kKmM]|million|billion|bn)\b)?{_PER_UNIT}"
    rf"|{_CURRENCY_CODE}\s?{_NUMBER}{_PER_UNIT}"
    rf"|{_NUMBER}\s?(?:{_CURRENCY_CODE}|(?i:dollars?|euros?)|元|美元|欧元|人民币|块钱|块)(?![A-Za-z]){_PER_UNIT})"
)
_PERCENT = r"(?P<percent>\d+(?:\.\d+)?\s?[%％])"
_QUANTITY = rf"(?P<quantity>{_NUMBER}\s?(?i:{_UNITS})(?![A-Za-z]))"
_PATH = (
    r"(?P<path>(?:~/|\.\.?/|/)?(?:[\w@+-][\w.@+-]*/)+[\w@+-]+(?:\.[\w@+-]+)*"
    r"\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/@+-]|\.\w))"
)
_PREFIXED = r"(?P<prefixed>[A-Z][A-Z0-9]{1,9}-\d{2,}(?:-[A-Z0-9]+)*(?![\w-]))"
_SNAKE = r"(?P<snake>[a-z][a-z0-9]*(?:_[a-z0-9]+)*_\d{3,}(?![\w-]))"
_HASH = r"(?P<hash>(?=[0-9a-f]{0,63}[a-f])(?=[0-9a-f]{0,63}\d)[0-9a-f]{7,64}(?![\w-]))"
_CODE = r"(?P<code>(?=[A-Z0-9]{0,23}[A-Z])(?=[A-Z0-9]{0,23}\d)[A-Z0-9]{5,24}(?![\w-]))"
_FILE = rf"(?P<file>[A-Za-z_][\w-]*(?:\.[\w-]+)?\.(?i:{_CODE_EXTENSIONS})(?![\w/(-]|\.\w))"

# Which patterns to try at a candidate start, by the trigger that found it; the order is the priority.
_STARTS_WITH_SYMBOL = re.compile(_AMOUNT)
_HAS_SCHEME = re.compile(_URL)
_HAS_AT = re.compile(_EMAIL)
_HAS_SLASH = re.compile("|".join((_DATE, _PATH)))
_STARTS_WITH_DIGIT = re.compile("|".join((_UUID, _DATE, _AMOUNT, _PERCENT, _QUANTITY, _HASH, _CODE)))
_STARTS_WITH_WORD = re.compile("|".join((_DATE, _AMOUNT)))  # "May 20", "USD 8.42"
_STARTS_WITH_LETTER = re.compile("|".join((_UUID, _PREFIXED, _SNAKE, _HASH, _CODE, _FILE)))
_HAS_EXTENSION = re.compile(_FILE)

def _by_first_letter(words: list[str], escape: bool = True) -> str:
    """An alternation of `words` grouped by first letter ("p(?:y|yi|…)|j(?:s|…)"): `re` then rejects most positions
    at their first character instead of trying every word there. With `escape` False the words are patterns
    ("pieces?") whose first character is a literal."""
    groups: dict[str, list[str]] = {}
    for word in sorted(words, key=len, reverse=True):
        groups.setdefault(word[0], []).append(re.escape(word[1:]) if escape else word[1:])
    return "|".join(f"{re.escape(first)}(?:{'|'.join(rest)})" for first, rest in sorted(groups.items()))


# Cheap scans that find where an entity may be, run by `re` in C so Python only sees likely spots. Each
# consumes the rest of its token, so a long token is visited once. Every entity kind holds a digit, a slash,
# an "@", "http" or a known file extension.
_DIGIT_TRIGGER = re.compile(
    r"\d(?:"
    # a token that starts with a number shaped like an entity: "2024-05-20", "05/20/2024", "15%", "20th",
    # "1c6ba19b", "300元", "3 bags", "250 USD", "20 May" (checked here, in C: most numbers in logs are bare)
    r"(?<![\w.,:/%+@~$€£¥￥-]\d)"
    r"(?=\d{3}-\d\d-|\d?/\d{1,2}/\d{4}|[0-9a-f]{7}-|[\d,.]*(?:[A-Za-z%％_]|\s?[^\x00-\x7f])"
    rf"|[\d,.]* (?=[^\W\d_])(?:(?i:{_by_first_letter([*_UNITS[3:-1].split('|'), 'dollars?', 'euros?'], False)})"
    rf"|{_CURRENCY_CODE}|(?:of )?{_MONTH})(?![A-Za-z]))"
    # or a digit after what starts ids, hashes and amounts: "HAT136", "PO-2231", "mia_li_3668", "c6ba19b", "$250"
    r"|(?<=[A-Z$€£¥￥_a-f-]\d)"
    r")[\w.,:/%+@~-]*"
)
# Words that lead a date or an amount before a number ("May 20", "USD 8.42"; see _WORD_BEFORE_NUMBER).
_MONTHS_AND_CURRENCIES = (
    "Jan January Feb February Mar March Apr April May Jun June Jul July Aug August Sep Sept September Oct October "
    "Nov November Dec December USD EUR GBP CNY RMB JPY CAD AUD CHF HKD INR SGD US$ $ € £ ¥ ￥".split()
)
_SLASH_TRIGGER = re.compile(r"/[\w.,:/%+@~-]*")
_AT_TRIGGER = re.compile(r"@[\w.-]*")
_URL_TRIGGER = re.compile(r"https?://")


# A "." and a letter first: a run of dots or "1. 1. 1." costs one look per dot.
_FILE_TRIGGER = re.compile(rf"\.(?=[A-Za-z])(?i:{_by_first_letter(_CODE_EXTENSIONS[3:-1].split('|'))})\b")
_TOKEN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/@+~%$€£¥￥")
_TOKEN_CLASS = f"[{re.escape(''.join(sorted(_TOKEN_CHARS)))}]"
_TOKEN_RUN = re.compile(f"{_TOKEN_CLASS}*")
# A month or a currency, then a space and a number ("May 20", "USD 8.42"): where a date or an amount led by a word
# starts, when the word is a whole token (checked in `_candidates`: a look-behind first would slow the scan).
_WORD_BEFORE_NUMBER = re.compile(rf"(?:{_by_first_letter(_MONTHS_AND_CURRENCIES)})\.* (?=\d)")
_HEX = "0123456789abcdef-"
MAX_TOKEN_CHARS = 256  # a longer run of token characters is not an entity; its start is not looked for
MAX_ENTITY_TRIES = 256  # candidate starts looked at per text (extraction of the traces looks at 97 at most)
# The stretch an entity pattern can read from its start: five words ("$ 250 million per month") and the blanks
# after them, when they are shorter than _MEMO_CHARS (see `entities`).
_MEMO_SPAN = re.compile(r"\S*(?:\s+\S+){0,4}\s*")
_MEMO_CHARS = 256
_SYMBOL_SPACE = re.compile(r"(?<=[$€£¥￥])\s+")
_GROUP_KIND = {
    "url": URL,
    "email": IDENTIFIER,
    "uuid": IDENTIFIER,
    "date": DATE,
    "amount": AMOUNT,
    "percent": QUANTITY,
    "quantity": QUANTITY,
    "path": PATH,
    "prefixed": IDENTIFIER,
    "snake": IDENTIFIER,
    "hash": IDENTIFIER,
    "code": IDENTIFIER,
    "file": PATH,
}
# `key: value` on one line: a short key (at most five words), a colon, a short value.
_KEY_VALUE = re.compile(
    r"[ \t]*(?:(?:[-*+•]|\d{1,3}[.)])[ \t]+)?(?:\*\*)?(?P<key>[^\W\d_][\w .#/-]{0,39}?)(?:\*\*)?"
    r"(?::(?:\*\*)?[ \t]+|：(?:\*\*)?[ \t]*)(?P<value>\S.*?)[ \t]*$"
)
# A heading-like line that names the `key: value` lines under it: `# Title`, `**Flight HAT136**`, `Payment:`.
_HEADER_LINE = re.compile(
    r"[ \t]*(?:(?:[-*+•]|\d{1,3}[.)])[ \t]+)?"
    r"(?:#{1,6}[ \t]+(?P<h>.{1,60})|\*\*(?P<b>[^*]{1,60})\*\*:?|(?P<c>[^\W\d_][^:()]{0,59}):)[ \t]*$"
)
_NUMBER_COMMAS = re.compile(r"(?<=\d),(?=\d{3})")
_ORDINAL = re.compile(r"(?<=\d)(?:st|nd|rd|th)\b", re.I)
_URL_TRAILING = ".,;:!?*'\")]}>"
_ID_FIELD = re.compile(r"^(?:id|.+_id|.+_number|code|.+_code|uuid|key|slug|sku)$", re.I)
_ID_ARGUMENT = re.compile(r"^(?:id|.+_id)$", re.I)
# mini-swe-agent style wrappers around a command's output carry no facts.
_WRAPPER_LINE = re.compile(r"^[ \t]*</?(?:returncode|output|exception|stdout|stderr|error)>[^\n]*$", re.M)
_COLON = re.compile(r":(?:\*\*)?[ \t]|：")  # literal-led: a fast scan
_FAR = 1 << 62
MAX_LINE_CHARS = 200  # a longer line is not a `key: value` line
MAX_SECTION_LOOKBACK = 12  # lines looked at above a `key: value` line for its heading
MAX_SECTION_CHARS = 60


class Entity(NamedTuple):
    """One entity found in free text (a tuple: thousands are made per long output)."""

    kind: str
    key: str  # normalized spelling
    raw: str  # as written
    start: int  # offset in the scanned text
    end: int


def entities(text: str, limit: int | None = None) -> list[Entity]:
    """Distinct entities (by kind and key) in text order, non-overlapping, at most `limit` (the first ones).

    Linear: cheap trigger scans collect candidate starts, and entity patterns are matched only there. The text
    is handled in pieces so that reaching `limit` stops the work early on a long output, and at most
    MAX_ENTITY_TRIES candidate starts are looked at (a text of repeated amounts or dates: its first mentions stand
    for it).
    """
    found: list[Entity] = []
    keys: set[tuple[str, str]] = set()
    covered = 0  # end of the last entity: a candidate inside it is skipped
    tries = 0
    # A pattern's match depends only on the text from its start, up to five words of it (see _MEMO_SPAN): a
    # mention seen before is answered from memory.
    seen: dict[tuple[re.Pattern[str], str], tuple[str, str, int] | None] = {}
    for pos, endpos in spans(text, SCAN_CHUNK_CHARS):
        candidates = _candidates(text, pos, endpos, MAX_ENTITY_TRIES - tries)
        for start in sorted(candidates):
            tries += 1
            if tries > MAX_ENTITY_TRIES:
                return found
            if start < covered:
                continue
            pattern = candidates[start]
            reach = _MEMO_SPAN.match(text, start, start + _MEMO_CHARS).end()
            memo = (pattern, text[start:reach]) if reach < start + _MEMO_CHARS else None
            if memo in seen:
                known = seen[memo]
                if known is not None:
                    covered = start + known[2]  # a repeated mention: the first one stands for it
                continue
            match = pattern.match(text, start)
            entity = _entity(match, start) if match is not None else None
            if memo is not None:
                seen[memo] = (entity.kind, entity.key, entity.end - start) if entity is not None else None
            if entity is None:
                continue
            covered = entity.end
            if (entity.kind, entity.key) in keys:
                continue  # a repeated mention: the first one stands for it
            keys.add((entity.kind, entity.key))
            found.append(entity)
            if limit is not None and len(found) >= limit:
                return found
    return found


def _candidates(text: str, pos: int, endpos: int, limit: int) -> dict[int, re.Pattern[str]]:
    """Candidate starts in text[pos:endpos], each with the pattern to try there (the first trigger wins). Each
    trigger reads at most `limit` of its matches: on a normal text, the first `limit` candidates in text order are
    found all the same; a hostile one (a trigger on every token) costs at most that much."""
    found: dict[int, re.Pattern[str]] = {}
    spans: list[tuple[int, int]] = []  # tokens already taken by a URL, an email or a path
    token_start = _TokenStarts(text, pos)
    for match in islice(_URL_TRIGGER.finditer(text, pos, endpos), limit):
        found.setdefault(match.start(), _HAS_SCHEME)
    for trigger, pattern in ((_AT_TRIGGER, _HAS_AT), (_SLASH_TRIGGER, _HAS_SLASH)):
        for match in islice(trigger.finditer(text, pos, endpos), limit):
            start = token_start(match.start())
            if start is not None:
                found.setdefault(start, _HAS_SCHEME if text.startswith("http", start) else pattern)
                spans.append((start, match.end()))
    for match in islice(_DIGIT_TRIGGER.finditer(text, pos, endpos), limit):
        index = match.start()
        if index > pos and text[index - 1] in _TOKEN_CHARS:
            start = token_start(index)
            if start is not None and start not in found:
                pattern = _letter_led_pattern(text[start : match.end()])
                if pattern is not None:
                    found[start] = pattern
        else:
            found.setdefault(index, _STARTS_WITH_DIGIT)
    for match in islice(_WORD_BEFORE_NUMBER.finditer(text, pos, endpos), limit):
        start = match.start()
        if start == pos or text[start - 1] not in _TOKEN_CHARS:
            found.setdefault(start, _STARTS_WITH_WORD)
    spans.sort()
    taken = 0  # spans before this index end before the current match (both are in text order)
    for match in islice(_FILE_TRIGGER.finditer(text, pos, endpos), limit):
        index = match.start()
        while taken < len(spans) and spans[taken][1] <= index:
            taken += 1
        if taken < len(spans) and spans[taken][0] <= index:
            continue  # "x.py" inside a path that is already a candidate
        start = token_start(index)
        if start is not None:
            found.setdefault(start, _HAS_EXTENSION)
    return found


def _letter_led_pattern(token: str) -> re.Pattern[str] | None:
    """The patterns for a token with a letter or symbol before its first digit, or None when it cannot be an
    entity: most such tokens are identifiers in code ("x1", "float64")."""
    token = token.rstrip(".,:;")
    first = token[:1]
    if first in "$€£¥￥" or token.startswith("US$"):
        return _STARTS_WITH_SYMBOL
    if "@" in token:
        return _HAS_AT
    if "/" in token:
        return _HAS_SLASH
    if (
        token.isupper()  # HAT136, PO-2231
        or ("_" in token and token[-3:].isdigit())  # mia_li_3668
        or (len(token) >= 7 and not token.strip(_HEX))  # c6ba19b, uuids
        or "." in token  # setup2.py
    ):
        return _STARTS_WITH_LETTER
    return None


def _token_start(text: str, index: int, floor: int) -> int | None:
    """Where the token holding text[index] starts; None past MAX_TOKEN_CHARS (not an entity)."""
    lowest = max(floor, index - MAX_TOKEN_CHARS)
    start = index
    while start > lowest and text[start - 1] in _TOKEN_CHARS:
        start -= 1
    if start == lowest and start > floor and text[start - 1] in _TOKEN_CHARS:
        return None
    return start


class _TokenStarts:
    """`_token_start` remembered along a run of token characters: every trigger inside one long token (an email
    address repeated without spaces) would walk back the same MAX_TOKEN_CHARS characters."""

    __slots__ = ("text", "floor", "_low", "_high", "_start")

    def __init__(self, text: str, floor: int) -> None:
        self.text, self.floor = text, floor
        self._low = self._high = -1
        self._start: int | None = None

    def __call__(self, index: int) -> int | None:
        if not self._low <= index <= self._high:
            self._low, self._high = index, _TOKEN_RUN.match(self.text, index).end()
            self._start = _token_start(self.text, index, self.floor)
        start = self._start
        return None if start is None or index - start > MAX_TOKEN_CHARS else start


def _entity(match: re.Match[str], start: int) -> Entity | None:
    group = match.lastgroup or ""
    raw = match.group()
    if group == "url":
        raw = raw.rstrip(_URL_TRAILING)
    kind = _GROUP_KIND.get(group)
    if kind is None or not raw:
        return None
    return Entity(kind, _entity_key(group, raw), raw, start, start + len(raw))


def _entity_key(group: str, raw: str) -> str:
    """The normalized spelling that makes two mentions of the same entity one ledger key."""
    if group in ("prefixed", "snake", "code"):
        return raw
    if group == "url":
        return raw.rstrip("/")
    if group in ("email", "uuid", "hash"):
        return raw.lower()
    if group in ("path", "file"):
        return raw[2:] if raw.startswith("./") else raw
    key = " ".join(raw.split()).lower()
    if "," in key:
        key = _NUMBER_COMMAS.sub("", key)
    if group == "date":
        key = _ORDINAL.sub("", key)
    if group == "amount" and " " in key:
        key = _SYMBOL_SPACE.sub("", key)
    return key


def snippet(text: str, start: int, end: int) -> str:
    """The entity with a few words of its line around it, markup dropped, at most MAX_VALUE_CHARS."""
    newline = text.rfind("\n", max(0, start - CONTEXT_BEFORE), start)
    left = newline + 1 if newline >= 0 else max(0, start - CONTEXT_BEFORE)
    right = text.find("\n", end, end + CONTEXT_AFTER)
    if right < 0:
        right = min(len(text), end + CONTEXT_AFTER)
    before = text[left:start]
    after = text[end:right]
    if left > 0 and text[left - 1] != "\n" and " " in before:
        before = before[before.index(" ") + 1 :]  # do not start inside a word
    if right < len(text) and text[right] != "\n" and " " in after:
        after = after[: after.rindex(" ")]
    return clip(collapse(strip_markup(before + text[start:end] + after)), MAX_VALUE_CHARS)


def head_and_tail(text: str, head: int = MAX_SCAN_HEAD_CHARS, tail: int = MAX_SCAN_TAIL_CHARS) -> str:
    """The start and the end of a long text, cut at line ends when they are near.

    Free-text extraction reads only this much of a long message, so its cost stays bounded whatever the
    message's size; the full text stays in the evidence store.
    """
    if len(text) <= head + tail:
        return text
    head_end = text.rfind("\n", head // 2, head)
    tail_start = text.find("\n", len(text) - tail, len(text) - tail // 2)
    first = text[: head_end if head_end >= 0 else head]
    last = text[tail_start + 1 if tail_start >= 0 else len(text) - tail :]
    return f"{first}\n{last}"


def window(text: str, max_chars: int) -> str:
    """What extraction reads of a text: all of it up to `max_chars` characters and max_chars / MIN_LINE_CHARS
    lines, else its head (three quarters) and its tail, cut at line ends when they are near (extractors work line
    by line: the line bound keeps a text of short lines as cheap as any other)."""
    text = head_and_tail(text, max_chars - max_chars // 4, max_chars // 4)
    max_lines = max(1, max_chars // MIN_LINE_CHARS)
    if text.count("\n") < max_lines:
        return text
    tail_lines = max_lines // 4
    lines = text.split("\n", max_lines - tail_lines)
    rest = lines.pop()
    return "\n".join(lines + (rest.rsplit("\n", tail_lines)[1:] if tail_lines else []))


def text_facts(text: str, limit: int = MAX_TEXT_FACTS) -> list[tuple[str, str, str]]:
    """(kind, key, value) facts of free text in text order: `key: value` lines and entities, deduplicated; log
    lines and text-table rows give none."""
    if "<" in text:
        text = _WRAPPER_LINE.sub("", text)
    text = without_noise_lines(text)
    found: list[tuple[int, str, str, str]] = list(_key_values(text, limit))
    found.extend((e.start, e.kind, e.key, snippet(text, e.start, e.end)) for e in entities(text, limit))
    found.sort(key=lambda f: f[0])
    return _first_unique([(kind, key, value) for _, kind, key, value in found], limit)


def _key_values(text: str, limit: int) -> Iterator[tuple[int, str, str, str]]:
    """`key: value` lines outside code blocks, keyed under the heading-like line of their list, if any.

    Driven by a literal scan for ": " so a long output costs little: only lines with a colon are looked at.
    """
    fences = fenced_spans(text) if "```" in text or "~~~" in text else []
    count = 0
    position = 0
    # (end, indentation, section) of the last `key: value` line that is no heading: the line right below it, at
    # its indentation, belongs to the same list (what _section would find walking up), so a list of n lines
    # costs n steps, not n times the look-back
    sibling: tuple[int, int, str] | None = None
    while (hit := _COLON.search(text, position)) is not None:
        pos = hit.start()
        bounds = _line_bounds(text, pos)
        if bounds is None:  # a line too long to be a `key: value` line: none of its colons is looked at
            newline = text.find("\n", pos)
            if newline < 0:
                return
            position = newline
            continue
        position = bounds[1]  # one look per line
        if _inside(fences, pos):
            continue
        line = text[bounds[0] : bounds[1]]
        match = _KEY_VALUE.match(line)
        if match is None:
            continue
        indent = _indent(line)
        if sibling is not None and sibling[0] + 1 == bounds[0] and sibling[1] == indent:
            section = sibling[2]
        else:
            section = _section(text, bounds[0])
        sibling = (bounds[1], indent, section) if _header_label(line) is None else None
        key = collapse(match.group("key")).lower()
        value = collapse(strip_markup(match.group("value")))
        if key.count(" ") > 4 or not value or len(value) > MAX_VALUE_CHARS or value.endswith(("?", "？")):
            continue  # a question ("Trip type: one-way or round-trip?") is not a fact
        if looks_like_code(line):
            continue
        yield bounds[0], FIELD, clip(f"{section}.{key}" if section else key, MAX_KEY_CHARS), value
        count += 1
        if count >= limit:
            return


def _line_bounds(text: str, pos: int) -> tuple[int, int] | None:
    """(start, end) of the line holding `pos`, or None when it is longer than MAX_LINE_CHARS."""
    newline = text.rfind("\n", max(0, pos - MAX_LINE_CHARS), pos)
    if newline < 0 and pos > MAX_LINE_CHARS:
        return None
    start = newline + 1
    end = text.find("\n", pos, start + MAX_LINE_CHARS + 1)
    if end < 0:
        end = len(text)
        if end - start > MAX_LINE_CHARS:
            return None
    return start, end


def _inside(spans: list[tuple[int, int]], pos: int) -> bool:
    """Whether `pos` falls in one of the sorted, disjoint `spans`."""
    index = bisect_right(spans, (pos, _FAR)) - 1
    return index >= 0 and pos < spans[index][1]


def _section(text: str, line_start: int) -> str:
    """The heading-like line of the list a `key: value` line belongs to, or "".

    Walking up: sibling `key: value` lines (same indentation) are passed; a heading at the same or a lesser
    indentation names the list, also when one blank line separates them; anything else ends the search.
    """
    end = line_start - 1
    indent = _indent(text[line_start : line_start + MAX_LINE_CHARS])
    blank_seen = False
    for _ in range(MAX_SECTION_LOOKBACK):
        if end <= 0:
            return ""
        newline = text.rfind("\n", max(0, end - MAX_LINE_CHARS), end)
        start = newline + 1
        line = text[start:end]
        end = newline
        if not line.strip():
            if blank_seen:
                return ""
            blank_seen = True
            continue
        if _indent(line) <= indent:
            label = _header_label(line)
            if label is not None:
                return label
        if blank_seen or _indent(line) != indent or _KEY_VALUE.match(line) is None:
            return ""
    return ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _header_label(line: str) -> str | None:
    """The label of a heading-like line (`# Title`, `**Flight HAT136**`, `Payment breakdown:`), else None."""
    stripped = line.strip()
    if not stripped or not (stripped[0] in "#*-•" or stripped[0].isdigit() or stripped.endswith(":")):
        return None
    match = _HEADER_LINE.match(line)
    if match is None:
        return None
    label = match.group("h") or match.group("b") or match.group("c") or ""
    if match.group("c") and not (label[:1].isupper() or label[:1] > "\x7f"):
        return None  # "else:", "try:" are code, not headings
    label = normalize(strip_markup(label))
    return clip(label, MAX_SECTION_CHARS) if label and not looks_like_code(label) else None


def _first_unique(facts: list[tuple[str, str, str]], limit: int) -> list[tuple[str, str, str]]:
    seen: set[tuple[str, str]] = set()
    result: list[tuple[str, str, str]] = []
    for kind, key, value in facts:
        if (kind, key) in seen or not key:
            continue
        seen.add((kind, key))
        result.append((kind, key, value))
        if len(result) >= limit:
            break
    return result


# ---- JSON ---------------------------------------------------------------------------------------------------


def parse_json(text: str) -> Any:
    """The JSON object or array in `text`, or None: scalars and non-JSON text are not structured output."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[" or len(stripped) > MAX_JSON_CHARS:
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) else None


_HTTP_STATUS_LINE = re.compile(r"HTTP/\d(?:\.\d)? \d{3}\b")
_BLANK_LINE = re.compile(r"\r?\n\r?\n")


def json_body(text: str) -> Any:
    """The JSON of a tool output: the whole text, or the body of an HTTP response printed with its status line and
    headers (`curl -i`, an http tool): what follows the first blank line; inside the `<returncode>`/`<output>`
    wrapper of an agent's shell tool too."""
    data = parse_json(text)
    if data is not None:
        return data
    text = unwrapped(text)
    return parse_json(text) if text.lstrip()[:1] in "{[" else parse_json(http_body(text))


def unwrapped(text: str) -> str:
    """A shell tool's output without its `<returncode>N</returncode>` / `<output>` wrapper (mini-swe-agent, SWE-agent
    style); any other text as it is."""
    if not text.startswith("<returncode>"):
        return text
    start = text.find("<output>", 0, 64)
    end = text.rfind("</output>")
    return text[start + len("<output>"):end if end > start else len(text)].strip("\n") if start >= 0 else text


def http_body(text: str) -> str:
    """An HTTP response printed with its status line and headers, without them (headers are transport detail,
    not facts of the task); any other text as it is."""
    if not _HTTP_STATUS_LINE.match(text.lstrip()[:16]):
        return text
    blank = _BLANK_LINE.search(text, 0, MAX_HTTP_HEADER_CHARS)
    return text[blank.end():] if blank else ""


MAX_HTTP_HEADER_CHARS = 16_384  # headers longer than this are not a response's headers


def json_facts(data: Any, root: str = "", limit: int = MAX_JSON_FACTS,
               named_root: bool = False) -> list[tuple[str, str]]:
    """(key, value) for the scalar leaves of parsed JSON, in document order, at most `limit`.

    An object that names itself (a field `id`, `*_id`, `*_number`, `code`...) qualifies its fields by that
    identifier, so `{"reservation_id": "ZFA04Y", "status": "cancelled"}` gives `ZFA04Y.status` whatever call
    returned it. Inside a named object (or an object the call's arguments name: `named_root`), a named part stays
    under its whole: `ZFA04Y.flights.HAT028.price` (the price paid in that reservation, not the fare searched),
    `mia_li_3668.payment_methods.certificate_7504069.amount`. Other objects and list items are keyed by their
    path from the nearest named object or `root`.
    """
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    _walk(data, root, out, seen, limit, depth=0, anchored=named_root and isinstance(data, dict))
    return out


def _walk(
    value: Any, path: str, out: list[tuple[str, str]], seen: set[str], limit: int, depth: int, named: bool = True,
    anchored: bool = False,
) -> None:
    """Depth-first over `value`; `named` is False for a list item whose identifier repeats among its siblings;
    `anchored` is True under a named object."""
    if len(out) >= limit or depth > MAX_JSON_DEPTH:
        return
    summary = series_summary(value) if isinstance(value, (list, dict)) else None
    if summary is not None:  # a series of numbers is one labelled fact, not a fact per number
        key = clip(path, MAX_KEY_CHARS) or "series"
        if key not in seen:
            seen.add(key)
            out.append((key, clip(summary, MAX_VALUE_CHARS)))
    elif isinstance(value, dict):
        own = identifier(value) if named else None
        if own is None:
            base = path
        elif depth == 0 or not anchored:
            base, anchored = own, True
        else:  # a part of a named whole; a dict keyed by ids already has the id in its path
            base = path if path.endswith("." + own) else f"{path}.{own}"
        for name, child in value.items():
            _walk(child, f"{base}.{name}" if base else str(name), out, seen, limit, depth + 1, anchored=anchored)
    elif isinstance(value, list):
        # Items keep their own identifier only when it tells them apart; otherwise their position does.
        unique = _unique_identifiers(value[:limit])
        for index, item in enumerate(value):
            if len(out) >= limit:
                return
            _walk(item, path if unique else f"{path}[{index}]", out, seen, limit, depth + 1, named=unique,
                  anchored=anchored)
    else:
        key = clip(path, MAX_KEY_CHARS) or "value"
        if key not in seen:
            seen.add(key)
            out.append((key, clip(scalar_text(value), MAX_VALUE_CHARS)))


def identifier(obj: dict[str, Any]) -> str | None:
    """The value of the field that names this object: `id`, else the first `*_id`, `*_number` or `*code`."""
    best: str | None = None
    for name, value in obj.items():
        if not isinstance(name, str) or not _ID_FIELD.match(name):
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
            continue
        if name == "id":
            return clip(str(value), MAX_QUALIFIER_CHARS)
        if best is None:
            best = clip(str(value), MAX_QUALIFIER_CHARS)
    return best


def _unique_identifiers(items: list[Any]) -> bool:
    """True when the items are objects that each have an identifier and no two share one. Only the first
    MAX_JSON_FACTS items are ever passed: no more can be reached within the cap."""
    ids = [identifier(item) for item in items if isinstance(item, dict)]
    return bool(ids) and None not in ids and len(set(ids)) == len(ids) == len(items)


def scalar_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    return str(value)


def argument_root(arguments: str) -> str:
    """An identifier named in the call's JSON arguments (`id`, else the first `*_id`), or ""."""
    data = parse_json(arguments)
    if not isinstance(data, dict):
        return ""
    if isinstance(data.get("id"), (str, int)) and not isinstance(data.get("id"), bool):
        return clip(str(data["id"]), MAX_QUALIFIER_CHARS)
    for name, value in data.items():
        if isinstance(name, str) and _ID_ARGUMENT.match(name) and isinstance(value, str) and value:
            return clip(value, MAX_QUALIFIER_CHARS)
    return ""


MAX_ARGUMENT_STRINGS = 64  # string leaves of one call's arguments that are read (for facts, for names)


def string_leaves(data: Any, limit: int = MAX_ARGUMENT_STRINGS) -> list[str]:
    """The string values inside parsed JSON, depth first, at most `limit`."""
    out: list[str] = []
    stack = [data]
    while stack and len(out) < limit:
        value = stack.pop()
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            stack.extend(reversed(value))
    return out
