"""Server-sent events: reading a provider's stream into events, whatever its chunking, and writing one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson


async def events(chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple[str, bytes]]:
    """(event name, data) of each event of a byte stream: the name "" when the event has none, the data lines
    joined by newlines; events without data are skipped."""
    # Linear in the stream however it is cut: the buffer grows in place, and an event's end is looked for once in
    # each byte (a megabyte event in small chunks would otherwise be copied and searched once per chunk).
    buffer = bytearray()
    carried = b""  # a chunk's last \r, in case its \n starts the next chunk
    async for chunk in chunks:
        searched = max(0, len(buffer) - 1)
        chunk = carried + chunk
        carried = b"\r" if chunk.endswith(b"\r") else b""
        buffer += chunk[:len(chunk) - len(carried)].replace(b"\r\n", b"\n")  # CRLF lines are lines too
        while True:
            cut = buffer.find(b"\n\n", searched)
            if cut < 0:
                break
            block = bytes(buffer[:cut])
            del buffer[:cut + 2]
            searched = 0
            event = _parse(block)
            if event is not None:
                yield event
    event = _parse((bytes(buffer) + carried).strip())
    if event is not None:
        yield event


def whole_events(piece: bytes) -> list[tuple[str, bytes]]:
    """The events of a piece of a stream held whole in memory (a piece cut mid-event yields a part of one)."""
    parsed = (_parse(block) for block in piece.replace(b"\r\n", b"\n").split(b"\n\n"))
    return [event for event in parsed if event is not None]


def _parse(block: bytes) -> tuple[str, bytes] | None:
    name, data = "", []
    for line in block.split(b"\n"):
        if line.startswith(b"event:"):
            name = line[6:].strip().decode("utf-8", "replace")
        elif line.startswith(b"data:"):
            data.append(line[5:].lstrip())
    return (name, b"\n".join(data)) if data else None


def json_object(data: bytes) -> dict[str, Any] | None:
    """An event's data as a JSON object, or None (not JSON, or not an object)."""
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def boundary(tail: bytes) -> bytes:
    """What starts a new event after `tail` (the end of what was sent so far): nothing when it ended one."""
    return b"" if tail.endswith(b"\n\n") else b"\n\n"


def event(name: str, data: dict[str, Any]) -> bytes:
    """One named event."""
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
