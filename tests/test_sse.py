"""Reading a provider's event stream gives the same events however the bytes are cut."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from hypothesis import given
from hypothesis import strategies as st

from proxy.sse import events

EVENTS = [("", b'{"a": 1}'), ("message_start", b'{"type": "message_start"}'), ("", b"[DONE]"),
          ("ping", b"{}"), ("", b'{"text": "' + b"x" * 3000 + b'"}')]


def stream_bytes() -> bytes:
    out = b""
    for name, data in EVENTS:
        out += (b"event: " + name.encode() + b"\n" if name else b"") + b"data: " + data + b"\n\n"
    return out + b": a comment\n\n"


async def read(data: bytes, cuts: list[int]) -> list[tuple[str, bytes]]:
    async def chunks() -> AsyncIterator[bytes]:
        start = 0
        for cut in sorted(cuts) + [len(data)]:
            yield data[start:cut]
            start = cut
    return [event async for event in events(chunks())]


@given(st.lists(st.integers(0, len(stream_bytes())), max_size=40), st.booleans())
def test_events_are_the_same_however_the_stream_is_cut(cuts: list[int], crlf: bool) -> None:
    data = stream_bytes().replace(b"\n", b"\r\n") if crlf else stream_bytes()
    assert asyncio.run(read(data, [min(cut, len(data)) for cut in cuts])) == EVENTS


def test_crlf_lines_and_a_last_event_without_its_blank_line() -> None:
    data = b"event: a\r\ndata: 1\r\n\r\ndata: 2"
    assert asyncio.run(read(data, [])) == [("a", b"1"), ("", b"2")]
