"""Passages of a stored text for recall: pages, line ranges and the lines that match a query.

A stored text is cut into numbered pieces: one per line, except that a line longer than a page is cut by tokens
into parts. Pages are pieces packed in order up to a token limit, so page N is the same on every call. A query
picks pieces holding its words (case-insensitive; a word of CJK characters matches anywhere, any other word at
the start of a word), ranked by how many of the words they hold, then by how rare those words are in the text;
they are shown in document order with a few pieces of context. All work is linear in the text per query word.

A long text (over the counter's exact_chars, or EXACT_LINES lines) is laid out without counting each line: its
pieces are made when asked for, their tokens estimated from the text's rate of tokens per character (an estimate
that errs high: a page of mixed text can still exceed its size by a few percent), pages found by binary search
over character positions, and a line too long for a page cut by characters. Nothing is done per line, so a
megabyte of any text is laid out in well under 50 ms.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

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

    pieces: Sequence[Piece]
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
    """Lines as a reader numbers them (a final newline does not start another line), without the "\r" of "\r\n"."""
    lines = (text.replace("\r\n", "\n") if "\r" in text else text).split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    elif lines[-1].endswith("\r"):
        lines[-1] = lines[-1][:-1]
    return lines


EXACT_LINES = 2048  # a text of more lines is laid out with estimated counts (see the module's docstring)


def layout(text: str, page_tokens: int, counter: TokenCounter) -> Layout:
    """`text` cut into pieces of at most `page_tokens` and packed into pages of about `page_tokens`."""
    if len(text) > counter.exact_chars or text.count("\n") > EXACT_LINES:
        return _estimated_layout(text, page_tokens, counter)
    lines = split_lines(text)
    pieces: list[Piece] = []
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
    tokens = counter.encode(text)
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
MAX_MATCHES = 4096  # matches of one word looked at (in text order): a word on every line of a megabyte is no lead


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


def word_pattern(word: str, flags: int = re.IGNORECASE) -> re.Pattern[str]:
    """A CJK word matches anywhere (CJK text has no spaces); any other word at the start of a word, so that
    "lane" finds "lanes" but not "planet" (an underscore counts as a boundary: "value" finds "max_value").
    Case-insensitive unless `flags` says otherwise (for a text already lower-cased: a faster scan)."""
    escaped = re.escape(word)
    if has_cjk(word) or not word[:1].isalnum():  # no word start to look for
        return re.compile(escaped, flags)
    # the boundary is checked behind the word, not before it, so that the word's literal leads the scan (fast)
    return re.compile(rf"{escaped}(?<![^\W_]{escaped})", flags)


def matching(pieces: Sequence[Piece], words: Sequence[str]) -> tuple[list[int], int]:
    """(indexes of the pieces to show, best first; how many pieces hold only some of the words and are left out).

    Pieces holding every word are the answer when there are any (a query names what it wants); otherwise every
    piece holding any word, ranked by how many of the words it holds, then by how rare they are in the text."""
    if isinstance(pieces, _Lines):
        joined, pieces_at = pieces.joined, pieces.pieces_at
    else:
        starts: list[int] = []  # where each piece begins in the joined text: one scan per word, not one per piece
        offset = 0
        for piece in pieces:
            starts.append(offset)
            offset += len(piece.text) + 1
        joined = "\n".join(piece.text for piece in pieces)

        def pieces_at(positions: Iterator[int]) -> Iterator[int]:
            return (bisect_right(starts, position) - 1 for position in positions)

    lowered = joined.lower()  # the words are lower-cased: a plain scan of this is faster than a case-blind one
    text, flags = (lowered, 0) if len(lowered) == len(joined) else (joined, re.IGNORECASE)
    held: dict[int, set[int]] = {}
    frequency: list[int] = []
    for number, word in enumerate(words):
        matches = zip(word_pattern(word, flags).finditer(text), range(MAX_MATCHES))
        found = set(pieces_at(match.start() for match, _ in matches))
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
    if isinstance(pieces, _Lines):
        wanted: Iterator[Piece] | list[Piece] = pieces.of_lines(first, last)
    else:
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


# --- long texts: pieces made when asked for, counts estimated --------------------------------------------------


def _estimated_layout(text: str, page_tokens: int, counter: TokenCounter) -> Layout:
    """The layout of a long text (see the module's docstring): no line is counted, only the text as a whole."""
    rate = max(counter.text(text) / max(1, len(text)), 1e-3)  # tokens per character; an estimate errs high
    pieces = _Lines(_joined_lines(text), rate, page_tokens)
    return Layout(pieces, pieces.pages, pieces.lines)


def _joined_lines(text: str) -> str:
    """"\n".join(split_lines(text)), without splitting the text into lines."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    return text[:-1] if text.endswith(("\n", "\r")) else text


class _Lines(Sequence[Piece]):
    """The pieces of a long text (its lines joined by "\n"), each made when asked for: one per line, and a line
    longer than `part_chars` cut into parts of that many characters. A piece's tokens are estimated as rate x
    characters shown, rounded up, plus one; pages are packed by a bound of that, so the estimated pieces of a page
    stay within it. Nothing is done per line: newlines are counted and found by C-level searches, pages by a
    binary search over character positions, and a piece's line is reached from the start of its page."""

    def __init__(self, joined: str, rate: float, page_tokens: int) -> None:
        self.joined = joined
        self.text = joined + "\n"  # every line ends with a newline here
        self.rate = rate
        self.lines = joined.count("\n") + 1
        self.digits = len(str(self.lines))
        self.per_line = rate * (self.digits + 1) + 2  # a bound of a whole line's tokens: rate x chars + this
        # "N (part a of b)| " around a part: at most this many characters
        self.part_label = self.digits + 14 + 2 * len(str(len(joined)))
        self.part_chars = max(16, int((page_tokens - 2) / rate) - self.part_label)
        # the lines longer than part_chars: their index, start, parts and first piece
        self.long: list[int] = []
        self.long_start: list[int] = []
        self.long_end: list[int] = []
        self.parts: list[int] = []
        self.first: list[int] = []
        extra = line = counted = 0  # pieces beyond one per line so far; newlines counted up to `counted`
        for match in re.finditer(rf"^[^\n]{{{self.part_chars + 1},}}", self.text, re.M):  # tried at line starts only
            line += self.text.count("\n", counted, match.start())
            counted = match.start()
            self.long.append(line)
            self.long_start.append(match.start())
            self.long_end.append(match.end())
            self.first.append(line + extra)
            self.parts.append(math.ceil((match.end() - match.start()) / self.part_chars))
            extra += self.parts[-1] - 1
        self.count = self.lines + extra
        self.marks: list[tuple[int, int]] = [(0, 0)]  # (line index, start) of lines on the way: where pieces are found
        self._cursor = (0, 0)
        self.pages = tuple(self._pages(page_tokens))

    def __len__(self) -> int:
        return self.count

    @overload
    def __getitem__(self, index: int) -> Piece: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Piece, ...]: ...

    def __getitem__(self, index: int | slice) -> Piece | tuple[Piece, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self.count)))
        if index < 0:
            index += self.count
        if not 0 <= index < self.count:
            raise IndexError(index)
        line, part, parts = self.locate(index)
        if parts > 1:
            k = bisect_right(self.long, line) - 1
            start = self.long_start[k] + (part - 1) * self.part_chars
            text = self.text[start:min(start + self.part_chars, self.long_end[k])]
        else:
            start = self.line_start(line)
            text = self.text[start:self.text.index("\n", start)]
        piece = Piece(line + 1, part, parts, text, 0)
        return Piece(line + 1, part, parts, text, math.ceil(self.rate * len(piece.shown())) + 1)

    def index(self, piece: object, start: int = 0, stop: int | None = None) -> int:
        if isinstance(piece, Piece) and 1 <= piece.line <= self.lines:
            found = self.piece_of(piece.line - 1) + piece.part - 1
            if found < self.count and self[found] == piece and start <= found < (stop or self.count):
                return found
        raise ValueError(f"{piece!r} is not among the pieces")

    def locate(self, index: int) -> tuple[int, int, int]:
        """(line index, part, parts) of piece `index`."""
        k = bisect_right(self.first, index) - 1
        if k < 0:
            return index, 1, 1
        if index < self.first[k] + self.parts[k]:
            return self.long[k], index - self.first[k] + 1, self.parts[k]
        return self.long[k] + index - self.first[k] - self.parts[k] + 1, 1, 1

    def piece_of(self, line: int) -> int:
        """The index of the (first) piece of line index `line`."""
        k = bisect_right(self.long, line) - 1
        if k < 0:
            return line
        if self.long[k] == line:
            return self.first[k]
        return self.first[k] + self.parts[k] + line - self.long[k] - 1

    def line_start(self, line: int) -> int:
        """Where line index `line` starts: walked to from the nearest line known before it (a page's first line,
        or the last line looked up)."""
        known_line, position = self.marks[bisect_right(self.marks, (line, len(self.text))) - 1]
        if known_line < self._cursor[0] <= line:
            known_line, position = self._cursor
        for _ in range(line - known_line):
            position = self.text.index("\n", position) + 1
        self._cursor = (line, position)
        return position

    def pieces_at(self, positions: Iterator[int]) -> Iterator[int]:
        """The piece that holds `joined[position]` for each of `positions`, which ascend: the lines between two
        of them are counted in C, so a word's matches cost one pass over the text."""
        line = counted = 0
        long_lines = {long: (start, parts) for long, start, parts in zip(self.long, self.long_start, self.parts)}
        for position in positions:
            line += self.text.count("\n", counted, position)
            counted = position
            piece = self.piece_of(line)
            if line in long_lines:
                start, parts = long_lines[line]
                piece += min(parts - 1, (position - start) // self.part_chars)
            yield piece

    def of_lines(self, first: int, last: int) -> Iterator[Piece]:
        """The pieces of lines first..last (1-based), in order."""
        if first > self.lines or last < first:
            return
        stop = self.piece_of(min(last, self.lines) - 1)
        stop += self.locate(stop)[2]  # past the last part of the last line
        for index in range(self.piece_of(max(1, first) - 1), stop):
            yield self[index]

    def _pages(self, page_tokens: int) -> Iterator[tuple[int, int]]:
        """[start, end) piece indexes of each page, packed as the exact layout packs them (a piece joins the page
        while the page's estimated tokens stay within `page_tokens`): whole lines by `_fit`, a long line's parts
        one by one. Marks where each page's first line starts, for finding pieces later."""
        start, used = 0, 0.0
        line = position = 0
        text = self.text
        for long_start, long_end, parts in [*zip(self.long_start, self.long_end, self.parts), (len(text), 0, 0)]:
            while position < long_start:  # whole lines, up to the next long line
                piece = self.piece_of(line)
                if piece > start and used + self.rate * (text.index("\n", position) + 1 - position) + \
                        self.per_line > page_tokens:
                    yield start, piece
                    start, used = piece, 0.0
                    self.marks.append((line, position))
                end, lines = self._fit(position, long_start, page_tokens - used)
                used += self.rate * (end - position) + self.per_line * lines
                line, position = line + lines, end
            if parts:
                piece = self.piece_of(line)
                for offset in range(parts):
                    size = min(self.part_chars, long_end - long_start - offset * self.part_chars)
                    cost = self.rate * (size + self.part_label) + 2
                    if piece + offset > start and used + cost > page_tokens:
                        yield start, piece + offset
                        start, used = piece + offset, 0.0
                        self.marks.append((line, long_start))
                    used += cost
                line, position = line + 1, long_end + 1
        yield start, self.count

    def _fit(self, position: int, end: int, room: float) -> tuple[int, int]:
        """(end, lines) of the longest run of whole lines from `position` (one at least, up to `end`) whose
        estimated tokens fit in `room`. Tokens are at least rate x characters, so the run ends within room / rate
        characters: a binary search over character positions there, each step counting newlines in C."""
        text = self.text
        low = text.index("\n", position) + 1  # the first line always goes
        low_lines = 1
        ceiling = min(end, position + int(room / self.rate) + 1)
        high = text.rfind("\n", low, ceiling) + 1  # the last line end within reach
        while high > low:
            middle = (low + high + 1) // 2
            candidate = text.rfind("\n", low, middle) + 1
            if candidate <= low:
                candidate = text.index("\n", middle - 1) + 1  # the first line end after `low`
            lines = low_lines + text.count("\n", low, candidate)
            if self.rate * (candidate - position) + self.per_line * lines <= room:
                low, low_lines = candidate, lines
            else:
                high = text.rfind("\n", low, candidate - 1) + 1
        return low, low_lines
