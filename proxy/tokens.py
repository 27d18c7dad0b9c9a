"""Token counting with tiktoken, using the BPE files litellm ships (there is no network at start-up)."""

from __future__ import annotations

import importlib.util
import math
import os
import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .config import TokenSettings
from .jsonbytes import encode_json
from .messages import tool_call
from .records import Message

# Per-message framing tokens, as in OpenAI's cookbook counting (role, separators).
MESSAGE_OVERHEAD = 4
TOOL_CALL_OVERHEAD = 8
SECTION_BREAK = "\n\n"  # between the sections of a message workset writes (see TokenCounter.sections)


class TokenizerUnavailable(RuntimeError):
    """The BPE file of an encoding could not be loaded (offline and not shipped by litellm)."""


def litellm_tokenizers_dir() -> Path | None:
    """litellm's folder of shipped tiktoken files, found without importing litellm (which is slow)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


def _point_tiktoken_at_litellm_files() -> None:
    if "TIKTOKEN_CACHE_DIR" in os.environ or "DATA_GYM_CACHE_DIR" in os.environ:
        return
    folder = litellm_tokenizers_dir()
    if folder is not None:
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)


_point_tiktoken_at_litellm_files()

import tiktoken  # noqa: E402  (must follow the cache-dir setup above)


@lru_cache(maxsize=8)
def load_encoding(name: str) -> tiktoken.Encoding:
    try:
        return tiktoken.get_encoding(name)
    except Exception as error:  # tiktoken raises plain errors (network, KeyError, ValueError)
        raise TokenizerUnavailable(
            f"tiktoken encoding {name!r} could not be loaded ({error.__class__.__name__}: {error}); "
            f"TIKTOKEN_CACHE_DIR={os.environ.get('TIKTOKEN_CACHE_DIR')!r} must hold its BPE file "
            "(litellm ships cl100k_base and o200k_base)"
        ) from error


class TokenCounter:
    """Counts tokens of texts and messages with one encoding; caches generated texts that recur every call.

    A text of up to `exact_chars` characters is counted exactly. A longer one is estimated from exact counts of
    ESTIMATE_SAMPLES evenly spaced samples of `exact_chars` characters in all (tiktoken reads a megabyte of hostile
    text in up to a second): the rate of tokens per character of the samples, raised by ESTIMATE_MARGIN standard
    errors (a text whose parts differ is overestimated rather than under), times the text's length. The budget
    takes an estimate as a count, so it errs on the high side: on the runs of the traces (joined, 32k to 1M
    characters) the estimate was 1% to 13% above the count, 5% in the median, and never below."""

    def __init__(self, encoding: str = "o200k_base", cache_size: int = 65536,
                 exact_chars: int = TokenSettings().exact_chars) -> None:
        self.encoding_name = encoding
        self.encoding = load_encoding(encoding)
        self.exact_chars = exact_chars
        self._cache: dict[str, int] = {}
        self._cache_size = cache_size
        self._tools_cache: dict[bytes, int] = {}
        self._heading_split: bool | None = None
        self._estimates: dict[str, int] = {}  # of long texts: a str keeps its hash, so a hit costs no reading

    def text(self, text: str) -> int:
        if not text:
            return 0
        if len(text) > self.exact_chars:
            return self.estimate(text)
        return len(self.encode(text))

    def estimate(self, text: str) -> int:
        """The tokens of a long text, estimated from evenly spaced samples (see the class). The last few are
        remembered: a long message is counted when it arrives, then again when it is excerpted."""
        known = self._estimates.get(text)
        if known is not None:
            return known
        if len(self._estimates) >= ESTIMATES_KEPT:
            self._estimates.clear()
        count = self._estimates[text] = self._sampled(text)
        return count

    def _sampled(self, text: str) -> int:
        size = max(1, self.exact_chars // ESTIMATE_SAMPLES)
        last = len(text) - size
        rates = [len(self.encode(text[start:start + size])) / size
                 for start in (last * i // (ESTIMATE_SAMPLES - 1) for i in range(ESTIMATE_SAMPLES))]
        mean = sum(rates) / len(rates)
        spread = math.sqrt(sum((rate - mean) ** 2 for rate in rates) / (len(rates) - 1))
        return math.ceil(len(text) * (mean + ESTIMATE_MARGIN * spread / math.sqrt(len(rates))))

    def encode(self, text: str) -> list[int]:
        """The text's tokens. A text longer than PIECE_CHARS is encoded in pieces cut before a space where there
        is one (where the tokenizer splits anyway), and a long run of spaces every SPACE_PIECE characters:
        tiktoken's work grows faster than the length of what it reads at once (quadratic on a run of spaces, which
        panics, an exception `except Exception` does not catch, past about a megabyte of them). The pieces decode
        to the same text; only the count inside a run or a word longer than a piece may differ."""
        if len(text) <= PIECE_CHARS and SPACE_BLOCK not in text:
            return self.encoding.encode_ordinary(text)
        tokens: list[int] = []
        for piece in _pieces(text):
            tokens.extend(self.encoding.encode_ordinary(piece))
        return tokens

    def first_tokens(self, text: str, count: int, max_chars: int | None = None) -> list[int]:
        """At least `count` tokens from the start of `text` (all of them when it has fewer), as `encode` gives
        them, read piece by piece: a long text is not encoded whole for its head. With `max_chars`, reading stops
        once the pieces read hold that many characters, with fewer tokens if need be."""
        return [token for piece in self._read(_pieces(text), count, max_chars) for token in piece]

    def last_tokens(self, text: str, count: int, max_chars: int | None = None) -> list[int]:
        """At least `count` tokens from the end of `text` (all of them when it has fewer), read piece by piece
        from the end; `max_chars` as for first_tokens."""
        return [token for piece in reversed(self._read(_pieces_from_end(text), count, max_chars)) for token in piece]

    def _read(self, pieces: Iterator[str], count: int, max_chars: int | None) -> list[list[int]]:
        """The pieces' tokens, piece by piece in the order read, until `count` tokens or `max_chars` characters."""
        read: list[list[int]] = []
        tokens = chars = 0
        for piece in pieces:
            read.append(self.encoding.encode_ordinary(piece))
            tokens += len(read[-1])
            chars += len(piece)
            if tokens >= count or (max_chars is not None and chars >= max_chars):
                break
        return read

    def cached_text(self, text: str) -> int:
        """For texts workset generates (placeholders, digests): counted once, then looked up."""
        count = self._cache.get(text)
        if count is None:
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            count = self._cache[text] = self.text(text)
        return count

    def sections(self, texts: Sequence[str]) -> list[int]:
        """Each text's share of the tokens of SECTION_BREAK.join(texts), the break counted with the text before
        it, each share cached. Every text after the first starts with a Markdown heading ("#"), before which the
        pre-tokenizers of o200k_base and cl100k_base always split after a line break: the shares then add up to
        the count of the whole, which a changed first section no longer makes workset encode again. An encoding
        that splits otherwise (checked once) gets the whole counted, the difference added to the first share."""
        shares = [self.cached_text(text + SECTION_BREAK) for text in texts[:-1]] + [self.cached_text(texts[-1])]
        if len(texts) > 1 and not (self._splits_before_headings and all(t.startswith("#") for t in texts[1:])):
            shares[0] += self.text(SECTION_BREAK.join(texts)) - sum(shares)
        return shares

    @property
    def _splits_before_headings(self) -> bool:
        if self._heading_split is None:
            endings = ("word", "ref]", "x ", "42", "…", "a.", "\t", "")
            self._heading_split = all(
                self.text(f"{end}{SECTION_BREAK}## Next") == self.text(end + SECTION_BREAK) + self.text("## Next")
                for end in endings)
        return self._heading_split

    def head(self, text: str, limit: int) -> tuple[str, int]:
        """The first `limit` tokens of `text`, and how many tokens were left out."""
        if len(text) <= self.exact_chars:
            tokens = self.encode(text)
            if len(tokens) <= limit:
                return text, 0
            return self.encoding.decode(tokens[:limit], errors="replace"), len(tokens) - limit
        tokens = self.first_tokens(text, limit + 1)
        if len(tokens) <= limit:
            return text, 0
        return self.encoding.decode(tokens[:limit], errors="replace"), max(1, self.text(text) - limit)

    def message(self, message: Message, generated: bool = False) -> int:
        count = self.cached_text if generated else self.text
        total = MESSAGE_OVERHEAD
        content = message.get("content")
        if isinstance(content, str):
            total += count(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += count(part["text"])
                elif isinstance(part, dict) and isinstance(part.get("thinking"), str):
                    total += count(part["thinking"])  # a reasoning block: its text, not its signature
                else:
                    # images and other parts: count their JSON; a rough but stable figure
                    total += count(encode_json(part).decode())
        for entry in message.get("tool_calls") or ():
            call = tool_call(entry)  # function and custom calls alike
            total += TOOL_CALL_OVERHEAD + (count(call.name) + count(call.arguments) if call is not None else 0)
        name = message.get("name")
        if isinstance(name, str):
            total += count(name)
        return total

    def tools(self, tools: object) -> int:
        """Tool definitions count toward the input, in the compact form OpenAI renders them in (not their JSON)."""
        if not tools or not isinstance(tools, list):
            return 0
        key = encode_json(tools)
        count = self._tools_cache.get(key)
        if count is None:
            if len(self._tools_cache) >= 256:
                self._tools_cache.clear()
            count = self._tools_cache[key] = self.text(render_tools(tools))
        return count


def render_tools(tools: list[Any]) -> str:
    """Function tools as OpenAI shows them to the model (a TypeScript-like namespace), for counting only."""
    lines = ["namespace functions {", ""]
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            continue
        if function.get("description"):
            lines.append(f"// {function['description']}")
        parameters = function.get("parameters")
        body = _render_object(parameters, 0) if isinstance(parameters, dict) else ""
        lines.append(f"type {function['name']} = (_: {{\n{body}\n}}) => any;" if body else f"type {function['name']} = () => any;")
        lines.append("")
    lines.append("} // namespace functions")
    return "\n".join(lines)


RENDER_DEPTH = 32  # deeper schemas (a client may nest ~500 levels) render as `any`: a count, and no RecursionError


def _render_object(schema: dict[str, Any], indent: int) -> str:
    properties = schema.get("properties")
    if not isinstance(properties, dict) or indent > 2 * RENDER_DEPTH:
        return ""
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    lines = []
    for name, prop in properties.items():
        if isinstance(prop, dict) and prop.get("description"):
            lines.append(f"// {prop['description']}")
        lines.append(f"{name}{'' if name in required else '?'}: {_render_type(prop, indent)},")
    return "\n".join(" " * indent + line for line in lines)


def _render_type(prop: Any, indent: int, depth: int = 0) -> str:
    if not isinstance(prop, dict) or depth > RENDER_DEPTH:
        return "any"
    kind, enum = prop.get("type"), prop.get("enum")
    if isinstance(enum, list):
        return " | ".join("any" if isinstance(item, (list, dict)) else f'"{item}"' for item in enum)
    if kind == "array":
        return f"{_render_type(prop.get('items'), indent, depth + 1)}[]"
    if kind == "object":
        return "{\n" + _render_object(prop, indent + 2) + "\n}"
    return {"string": "string", "integer": "number", "number": "number", "boolean": "boolean", "null": "null"}.get(
        kind if isinstance(kind, str) else "", "any")


ESTIMATE_SAMPLES = 64  # samples a long text's count is estimated from (see TokenCounter)
ESTIMATES_KEPT = 8  # long texts whose estimate is remembered: references, held until 8 more came (memory)
ESTIMATE_MARGIN = 2.0  # standard errors of the sampled rate added to it: on the traces, never below the count
PIECE_CHARS = 4096  # a longer text is encoded in pieces of about this size (see TokenCounter.encode)
# An excerpt of a long text reads about this many characters per token it keeps, at most: prose has 4, and a run of
# one punctuation mark 64, where 1,200 tokens of head would mean reading (and showing) 77 KB of it.
EXCERPT_CHARS_PER_TOKEN = 16
SPACE_PIECE = 128  # a run of spaces at least this long is encoded in pieces of this size (longer ones cost 10x)
SPACE_BLOCK = " " * SPACE_PIECE
_NOT_SPACE = re.compile(r"[^ ]")


def _pieces(text: str) -> Iterator[str]:
    """The text in pieces of at most PIECE_CHARS, each cut before a space in its second half when there is one,
    and inside every run of SPACE_PIECE spaces or more every SPACE_PIECE characters. Linear: C-level searches for
    the cuts."""
    for block in _space_pieces(text):
        start = 0
        while len(block) - start > PIECE_CHARS:
            end = start + PIECE_CHARS
            space = block.rfind(" ", start + PIECE_CHARS // 2, end)
            cut = space if space > start else end
            yield block[start:cut]
            start = cut
        yield block[start:]


def _pieces_from_end(text: str) -> Iterator[str]:
    """The text's last pieces first, cut as `_pieces` cuts from the start (before a space, in the first half of a
    piece counted from its end), for reading its tail without encoding it whole."""
    end = len(text)
    while end > 0:
        start = max(0, end - PIECE_CHARS)
        if start > 0:
            space = text.find(" ", start, end - PIECE_CHARS // 2)
            start = space if space >= 0 else start
        piece = text[start:end]
        if SPACE_BLOCK in piece:
            yield from reversed(list(_space_pieces(piece)))
        else:
            yield piece
        end = start


def _space_pieces(text: str) -> Iterator[str]:
    """The text cut inside every run of SPACE_PIECE spaces or more, every SPACE_PIECE characters: linear (C-level
    searches for the runs and their ends)."""
    start = 0
    run = text.find(SPACE_BLOCK)
    while run != -1:
        after = _NOT_SPACE.search(text, run)
        end = after.start() if after else len(text)
        for cut in range(run + SPACE_PIECE, end, SPACE_PIECE):
            yield text[start:cut]
            start = cut
        run = text.find(SPACE_BLOCK, end)
    yield text[start:]


class Excerpter:
    """Head and tail of an oversized text, cut on token boundaries; memoised because recent outputs recur every call.
    Of a text longer than the counter's `exact_chars`, only the pieces at its ends are encoded, and the number of
    tokens left out is estimated (see TokenCounter)."""

    def __init__(self, counter: TokenCounter, cache_size: int = 1024, cache_chars: int = 64_000_000) -> None:
        self._counter = counter
        self._encoding = counter.encoding
        self._cache: dict[tuple[str, int, int], tuple[str, str, int]] = {}
        self._cache_size = cache_size
        # the texts the cache holds as keys, in characters: 1024 tool outputs of 32 MB each would be 32 GB, held
        # after their conversations were let go from memory
        self._cache_chars = cache_chars
        self._held_chars = 0

    def __call__(self, text: str, head_tokens: int, tail_tokens: int) -> tuple[str, str, int]:
        """(head text, tail text, number of tokens left out)."""
        key = (text, head_tokens, tail_tokens)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if len(text) <= self._counter.exact_chars:
            tokens = self._counter.encode(text)
            total, first, last = len(tokens), tokens[:head_tokens], tokens[len(tokens) - tail_tokens:]
        else:
            total = self._counter.estimate(text)
            first = self._counter.first_tokens(text, head_tokens, head_tokens * EXCERPT_CHARS_PER_TOKEN)[:head_tokens]
            last = self._counter.last_tokens(text, tail_tokens, tail_tokens * EXCERPT_CHARS_PER_TOKEN)[-tail_tokens:] \
                if tail_tokens else []
        elided = max(0, total - len(first) - len(last))
        if elided == 0:
            result = (text, "", 0)
        else:
            head = self._encoding.decode(first, errors="replace") if head_tokens else ""
            tail = self._encoding.decode(last, errors="replace") if tail_tokens else ""
            result = (head, tail, elided)
        if len(self._cache) >= self._cache_size or self._held_chars + len(text) > self._cache_chars:
            self._cache.clear()
            self._held_chars = 0
        self._cache[key] = result
        self._held_chars += len(text)
        return result
