"""Cache-aware accounting: what a request cost as workset forwarded it, and what it would have cost forwarded whole.

The provider's own usage is the truth for what was sent (OpenAI's prompt_tokens_details.cached_tokens, Anthropic's
cache_read_input_tokens and cache_creation_input_tokens, Responses' input_tokens_details). The whole request is an
estimate with the cache model of `workset eval`: a prompt cache would have held the leading messages it shares with
the session's previous whole request, and the tool definitions. It is counted in the provider's tokens (workset's
count scaled by the ratio the provider reported for what was sent), and cached only where the provider reports
caching at all. Money uses per-model prices from litellm's price map, overridable in config (`prices`).
"""

from __future__ import annotations

import fnmatch
from collections import deque
from dataclasses import dataclass
from typing import Any, AsyncIterator, Mapping

from .config import PriceSettings
from .sse import json_object, whole_events

PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Usage:
    """A response's token usage in one shape, whatever the wire format: `input` counts every prompt token, cached
    and cache-written ones included; None where the provider did not say."""

    input: int
    output: int
    cached: int | None = None
    written: int | None = None


@dataclass(frozen=True)
class Prices:
    """US dollars per token."""

    input: float
    output: float
    cached: float
    written: float


@dataclass(frozen=True)
class Account:
    """One request's accounting, as stored with its decision record."""

    input: int  # prompt tokens sent (provider's count; workset's own when the provider gave none)
    cached: int  # of those, read from the provider's prompt cache
    written: int  # of those, written to it
    output: int
    reported: bool  # the provider reported usage
    whole: int  # prompt tokens had the request been forwarded whole (estimated, provider's count)
    whole_cached: int  # of those, what a prompt cache would have held
    whole_written: int
    cost: float | None  # dollars of what was sent; None without a price for the model
    cost_whole: float | None

    @property
    def saved(self) -> float | None:
        return saving(self.cost, self.cost_whole)


def saving(cost: float | None, cost_whole: float | None) -> float | None:
    """Dollars workset saved: what forwarding everything would have cost less what was sent; negative when workset
    cost more; None without a price."""
    return None if cost is None or cost_whole is None else cost_whole - cost


def usage_of(data: Any) -> Usage | None:
    """The usage in a chat completion, an Anthropic message or a Responses object (or their stream events' usage)."""
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return None
    if "prompt_tokens" in usage:  # chat completions (litellm adds Anthropic's cache fields at the top level)
        details = usage.get("prompt_tokens_details")
        cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else None
        cached = cached if cached is not None else _int(usage.get("cache_read_input_tokens"))
        return Usage(_int(usage.get("prompt_tokens")) or 0, _int(usage.get("completion_tokens")) or 0, cached,
                     _int(usage.get("cache_creation_input_tokens")))
    if "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:  # Anthropic: input excludes them
        read = _int(usage.get("cache_read_input_tokens")) or 0
        written = _int(usage.get("cache_creation_input_tokens")) or 0
        return Usage((_int(usage.get("input_tokens")) or 0) + read + written, _int(usage.get("output_tokens")) or 0,
                     read, written)
    if "input_tokens" in usage:  # Responses, or Anthropic without cache fields
        details = usage.get("input_tokens_details")
        cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else None
        return Usage(_int(usage.get("input_tokens")) or 0, _int(usage.get("output_tokens")) or 0, cached, None)
    return None


def prices_for(model: str, upstream_model: str, overrides: Mapping[str, PriceSettings],
               price_map: Mapping[str, Any]) -> Prices | None:
    """The model's prices: the first `prices` entry whose glob matches the model name, else litellm's price map
    under the upstream model's name (with or without its provider prefix). None when neither knows it."""
    for pattern, price in overrides.items():
        if fnmatch.fnmatchcase(model, pattern):
            return Prices(price.input / PER_MILLION, price.output / PER_MILLION,
                          (price.cached_input if price.cached_input is not None else price.input) / PER_MILLION,
                          (price.cache_write if price.cache_write is not None else price.input) / PER_MILLION)
    for name in dict.fromkeys((upstream_model, upstream_model.split("/", 1)[-1], model)):
        entry = price_map.get(name)
        if isinstance(entry, dict) and isinstance(entry.get("input_cost_per_token"), (int, float)):
            unit = float(entry["input_cost_per_token"])
            return Prices(unit, float(entry.get("output_cost_per_token") or 0.0),
                          float(entry.get("cache_read_input_token_cost") or unit),
                          float(entry.get("cache_creation_input_token_cost") or unit))
    return None


def account(usage: Usage | None, tokens_sent: int, tokens_whole: int, whole_reused: int, rounds: int,
            prices: Prices | None) -> Account:
    """Accounting for one request. `tokens_sent`/`tokens_whole` are workset's counts of what it forwarded and of
    the agent's request; `whole_reused` is the part of the latter a prompt cache would have held; `rounds` the
    extra rounds recall made (their tokens are in the provider's usage, not in `tokens_sent`)."""
    if usage is None:
        sent, cached, written, output, scale = tokens_sent, 0, 0, 0, 1.0
    else:
        sent, cached, written, output = usage.input, usage.cached or 0, usage.written or 0, usage.output
        # the provider's tokens per workset token, read off a request of one round (a tokenizer's difference)
        scale = sent / tokens_sent if tokens_sent > 0 and sent > 0 and rounds == 0 else 1.0
    whole = round(tokens_whole * scale)
    caches = usage is not None and (usage.cached is not None or usage.written is not None)
    whole_cached = min(whole, round(whole_reused * scale)) if caches else 0
    whole_written = whole - whole_cached if usage is not None and usage.written else 0
    cost = cost_whole = None
    if prices is not None:
        cost = _dollars(sent, cached, written, output, prices)
        # forwarded whole, the model would have answered the same: one round's output at most
        cost_whole = _dollars(whole, whole_cached, whole_written, output if rounds == 0 else 0, prices)
        if rounds:
            cost_whole += output / (rounds + 1) * prices.output
    return Account(sent, cached, written, output, usage is not None, whole, whole_cached, whole_written, cost,
                   cost_whole)


def _dollars(tokens: int, cached: int, written: int, output: int, prices: Prices) -> float:
    plain = max(0, tokens - cached - written)
    return plain * prices.input + cached * prices.cached + written * prices.written + output * prices.output


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class UsageTap:
    """Watches a streamed answer for its usage without holding the stream: its head (Anthropic's message_start
    carries the prompt's usage) and its tail (the usage chunk, message_delta, response.completed), read once the
    stream has ended."""

    HEAD_BYTES = 16 * 1024
    TAIL_BYTES = 64 * 1024

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self._tail_size = 0

    async def watch(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for chunk in chunks:
            if len(self.head) < self.HEAD_BYTES:
                self.head += chunk
            else:
                self.tail.append(chunk)
                self._tail_size += len(chunk)
                while self._tail_size - len(self.tail[0]) >= self.TAIL_BYTES:
                    self._tail_size -= len(self.tail.popleft())
            yield chunk

    def usage(self) -> Usage | None:
        """The usage the stream reported, last word winning (Anthropic's message_delta is cumulative)."""
        found: dict[str, Any] = {}
        for part in (bytes(self.head), b"".join(self.tail)):
            for _, data in whole_events(part):
                if b'"usage"' not in data:
                    continue
                event = json_object(data)
                if event is None:
                    continue
                kind = event.get("type")
                inner = event.get("message") if kind == "message_start" else event.get("response")
                usage = (inner if isinstance(inner, dict) else event).get("usage")
                if isinstance(usage, dict):
                    found.update({key: value for key, value in usage.items() if value is not None})
        return usage_of({"usage": found}) if found else None

