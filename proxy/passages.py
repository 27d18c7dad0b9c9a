"""Passages of a stored text for recall: pages, line ranges and the lines that match a query.

A stored text is cut into numbered pieces: one per line, except that a line longer than a page is cut by tokens
into parts. Pages are pieces packed in order up to a token limit, so page N is the same on every call. A query
picks pieces holding its words (case-insensitive; a word of CJK characters matches anywhere, any other word at
the start of a word), ranked by how many of the words they hold, then by how rare those words are in the text;
they are shown in document order with a few pieces of context. All work is linear in the text per query word.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tokens import TokenCounter

GAP = "…"
_EDGE_PUNCTUATION = "\"'`.,;:!?()[]{}<>，。；：！？（）「」『』【】、《》"
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LINES = re.compile(r"(\d+)\s*(?:(?:-|–|:|\.\.|to)\s*[Ll]?(\d*))?")


@dataclass(frozen=True)
class Piece:
    """One line of a stored text, or one part of a line too long for a page."""

    line: int  # 1-based line number
    part: int  # 1-based part of a long line; 1 of 1 for a whole line
    parts: int
    text: str
    tokens: int  # tokens of the piece as shown, numbered, with its newline

    def shown(self) -> str:
        where = f"{self.line} (part {self.part} of {self.parts})" if self.parts > 1 else str(self.line)
        return f"{where}| {self.text}"


@dataclass(frozen=True)
class Layout:
    """A stored text as numbered pieces and the pages they fall on."""

    pieces: tuple[Piece, ...]
    pages: tuple[tuple[int, int], ...]  # [start, end) piece indexes of each page
    lines: int

    def page_of(self, piece: int) -> int:
        """1-based page holding piece index `piece`."""
        return next(number for number, (start, end) in enumerate(self.pages, 1) if start <= piece < end)


@dataclass(frozen=True)
class Selection:
    """The pieces a query picked (document order) and how many matching pieces did not fit."""

    pieces: tuple[Piece, ...]
    matched: int
    left_out: int


def split_lines(text: str) -> list[str]:
    """Lines as a reader numbers them (a final newline does not start another line)."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def layout(text: str, page_tokens: int, counter: TokenCounter) -> Layout:
    """`text` cut into pieces of at most `page_tokens` and packed into pages of about `page_tokens`."""
    pieces: list[Piece] = []
    lines = split_lines(text)
    for number, line in enumerate(lines, 1):
        whole = Piece(number, 1, 1, line, 0)
        tokens = counter.text(whole.shown()) + 1
        if tokens <= page_tokens:
            pieces.append(Piece(number, 1, 1, line, tokens))
            continue
        widest = Piece(number, tokens, tokens, "", 0).shown()  # the longest prefix a part can have
        parts = cut_by_tokens(line, max(1, page_tokens - counter.text(widest) - 1), counter)
        for part, chunk in enumerate(parts, 1):
            piece = Piece(number, part, len(parts), chunk, 0)
            pieces.append(Piece(number, part, len(parts), chunk, counter.text(piece.shown()) + 1))
    pages: list[tuple[int, int]] = []
    start, used = 0, 0
    for index, piece in enumerate(pieces):
        if index > start and used + piece.tokens > page_tokens:
            pages.append((start, index))
            start, used = index, 0
        used += piece.tokens
    pages.append((start, len(pieces)))
    return Layout(tuple(pieces), tuple(pages), len(lines))


def cut_by_tokens(text: str, size: int, counter: TokenCounter) -> list[str]:
    """`text` in consecutive parts of at most `size` tokens, never cutting inside a character."""
    encoding = counter.encoding
    tokens = encoding.encode_ordinary(text)
    raw = encoding.decode_tokens_bytes(tokens)
    parts: list[str] = []
    start = 0
    while start < len(tokens):
        end = min(start + size, len(tokens))
        # a token starting with a UTF-8 continuation byte would split a character: end the part before it
        while start + 1 < end < len(tokens) and raw[end][:1] and raw[end][0] & 0xC0 == 0x80:
            end -= 1
        parts.append(b"".join(raw[start:end]).decode("utf-8", errors="replace"))
        start = end
    return parts


MAX_QUERY_WORDS = 16  # a query is a few words: each is one scan of the text, so their number is bounded


def query_words(query: str) -> list[str]:
    """The words of a query, lower-cased, without edge punctuation and control characters, each once, in order,
    at most MAX_QUERY_WORDS."""
    words: list[str] = []
    for raw in query.split():
        word = "".join(char for char in raw if char.isprintable()).strip(_EDGE_PUNCTUATION).lower()
        if word and word not in words:
            words.append(word)
            if len(words) == MAX_QUERY_WORDS:
                break
    return words


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


def word_pattern(word: str) -> re.Pattern[str]:
    """A CJK word matches anywhere (CJK text has no spaces); any other word at the start of a word, so that
    "lane" finds "lanes" but not "planet" (an underscore counts as a boundary: "value" finds "max_value")."""
    escaped = re.escape(word)
    if has_cjk(word) or not word[:1].isalnum():  # no word start to look for
        return re.compile(escaped, re.IGNORECASE)
    # the boundary is checked behind the word, not before it, so that the word's literal leads the scan (fast)
    return re.compile(rf"{escaped}(?<![^\W_]{escaped})", re.IGNORECASE)


def matching(pieces: Sequence[Piece], words: Sequence[str]) -> tuple[list[int], int]:
    """(indexes of the pieces to show, best first; how many pieces hold only some of the words and are left out).

    Pieces holding every word are the answer when there are any (a query names what it wants); otherwise every
    piece holding any word, ranked by how many of the words it holds, then by how rare they are in the text."""
    starts: list[int] = []  # where each piece begins in the joined text: one scan per word, not one per piece
    offset = 0
    for piece in pieces:
        starts.append(offset)
        offset += len(piece.text) + 1
    joined = "\n".join(piece.text for piece in pieces)
    held: dict[int, set[int]] = {}
    frequency: list[int] = []
    for number, word in enumerate(words):
        found = {bisect_right(starts, match.start()) - 1 for match in word_pattern(word).finditer(joined)}
        frequency.append(len(found))
        for index in found:
            held.setdefault(index, set()).add(number)

    def rank(index: int) -> tuple[int, float, int]:
        kinds = held[index]
        return -len(kinds), -sum(1 / frequency[k] for k in kinds), index

    ranked = sorted(held, key=rank)
    complete = [index for index in ranked if len(held[index]) == len(words)]
    return (complete, len(ranked) - len(complete)) if complete else (ranked, 0)


def select(pieces: Sequence[Piece], ranked: Sequence[int], context: int, limit: int) -> Selection:
    """The best matches with `context` pieces either side, within `limit` tokens; a match whose context does
    not fit is shown alone."""
    chosen: set[int] = set()
    used = shown = 0
    for index in ranked:
        if index in chosen:
            shown += 1
            continue
        for window in (range(max(0, index - context), min(len(pieces), index + context + 1)), (index,)):
            new = [i for i in window if i not in chosen]
            cost = sum(pieces[i].tokens for i in new) + 1  # + a gap marker
            if used + cost <= limit:
                chosen.update(new)
                used += cost
                shown += 1
                break
    return Selection(tuple(pieces[i] for i in sorted(chosen)), len(ranked), len(ranked) - shown)


def render(pieces: Sequence[Piece]) -> str:
    """Numbered pieces, with a gap marker where lines are skipped."""
    out: list[str] = []
    previous: Piece | None = None
    for piece in pieces:
        follows = previous is not None and (piece.line == previous.line + 1 and piece.part == 1
                                            or piece.line == previous.line and piece.part == previous.part + 1)
        if previous is not None and not follows:
            out.append(GAP)
        out.append(piece.shown())
        previous = piece
    return "\n".join(out)


def span(pieces: Sequence[Piece]) -> str:
    """"lines A-B" (or "line A") of a run of pieces."""
    first, last = pieces[0].line, pieces[-1].line
    return f"line {first}" if first == last else f"lines {first}-{last}"


def in_range(pieces: Sequence[Piece], first: int, last: int, limit: int) -> tuple[list[Piece], bool]:
    """The pieces of lines first..last, in order, within `limit` tokens (at least one); whether all fit."""
    wanted = [piece for piece in pieces if first <= piece.line <= last]
    out: list[Piece] = []
    used = 0
    for piece in wanted:
        if out and used + piece.tokens > limit:
            return out, False
        out.append(piece)
        used += piece.tokens
    return out, True


def parse_lines(value: object) -> tuple[int, int | None] | None:
    """(first, last or None for "to the end") from "120-180", "120:180", "120..180", "120-", "120" or 120."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value, value) if value > 0 else None
    if isinstance(value, (list, tuple)) and value and all(type(v) is int for v in value):  # not bools
        return (value[0], value[-1]) if value[0] > 0 and value[-1] >= value[0] else None
    found = _LINES.search(str(value)[:40]) if isinstance(value, str) else None
    if found is None:
        return None
    first = int(found.group(1))
    last = first if found.group(2) is None else int(found.group(2)) if found.group(2) else None
    if first < 1 or (last is not None and last < first):
        return None  # line numbers start at 1
    return first, last
