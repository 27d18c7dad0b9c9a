"""JSON bytes of any depth a client may send: orjson where it can, an iterative encoder past its 254 levels; and
a body's JSON made ahead, on a worker, so that the event loop only copies bytes when it sends it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

# Strings are written in pieces of this many characters by the iterative encoder: orjson holds the interpreter lock
# for a whole call, 3-8 ms for a megabyte of CJK or full-width text, and every other request waits for the lock.
STEP_CHARS = 65_536
# Bodies over this many bytes have their JSON made in steps (each short); below it, one orjson call is quicker.
IN_STEPS_OVER_BYTES = 262_144


@dataclass(frozen=True)
class Encoded:
    """A value's JSON, made ahead: written as these bytes wherever it stands in a value encode_json is given."""

    json: bytes


def leaves(value: Any) -> Iterator[Any]:
    """The strings, numbers, booleans and nulls of parsed JSON, at any depth (an explicit stack: a client may nest
    1024 levels); dict keys aside. Exact types, as a JSON parser makes them: this runs over every request."""
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is dict:
            extend(item.values())
        elif kind is list:
            extend(item)
        else:
            yield item


def text_size(value: Any) -> int:
    """About how many characters of memory parsed JSON holds: its strings' lengths, and one for any other leaf. A
    step per value, never per character."""
    return sum(len(leaf) if isinstance(leaf, str) else 1 for leaf in leaves(value))


def _written_ahead(value: Any) -> orjson.Fragment:
    if isinstance(value, Encoded):
        return orjson.Fragment(value.json)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def encode_json(value: Any, sort_keys: bool = False) -> bytes:
    """The value as JSON bytes. orjson stops at 254 levels of nesting while a client's JSON may go to 1024 (the
    depth validate.parse_json_object accepts), so deeper values are written by an iterative encoder: workset
    forwards and hashes whatever it accepted, and the provider decides about the depth."""
    try:
        return orjson.dumps(value, default=_written_ahead, option=orjson.OPT_SORT_KEYS if sort_keys else None)
    except orjson.JSONEncodeError:
        return _encode_iteratively(value, sort_keys)


def encode_message(message: Any, sort_keys: bool = False) -> bytes:
    """encode_json for one message, in steps when a text of it is long (a megabyte tool output): hashed and stored
    on threads beside the ones serving other requests, which need the interpreter lock in the meantime."""
    return _encode_iteratively(message, sort_keys) if _holds_long_text(message) else encode_json(message, sort_keys)


def _holds_long_text(message: Any) -> bool:
    """A string over STEP_CHARS: the message itself, or among its fields or its content parts' (a few lookups: no
    walk)."""
    if isinstance(message, str):
        return len(message) > STEP_CHARS
    if not isinstance(message, dict):
        return False
    for value in message.values():
        if isinstance(value, str) and len(value) > STEP_CHARS:
            return True
        if isinstance(value, list) and any(isinstance(part, dict) and any(
                isinstance(field, str) and len(field) > STEP_CHARS for field in part.values()) for part in value):
            return True
    return False


def encoded_ahead(body: dict[str, Any], in_steps: bool) -> dict[str, Any]:
    """A copy of `body` whose members (`model` aside) hold their JSON already (Encoded): encoding the copy
    then only copies bytes, so the sender (the event loop) does not pay for a megabyte. `in_steps` for a large body:
    no single call holds the interpreter lock for long."""
    encode = _encode_in_pieces if in_steps else encode_json
    return {key: Encoded(encode(value)) if key != "model" and isinstance(value, (dict, list, str)) else value
            for key, value in body.items()}


def _encode_in_pieces(value: Any) -> bytes:
    """A large body's member: a list item by item (a message each), every item in one orjson call unless a text of
    it is long. Walking every node in Python instead would cost 5 ms for 300 messages."""
    if isinstance(value, list):
        return b"[" + b",".join(encode_message(item) for item in value) + b"]"
    return encode_message(value)


def _encode_iteratively(value: Any, sort_keys: bool = False) -> bytes:
    """JSON for any depth of plain JSON data (dict, list, str, int, float, bool, None, and Encoded), with an
    explicit stack; a long string in pieces of STEP_CHARS (JSON escapes each character on its own, so the pieces
    join into the same bytes)."""
    out: list[bytes] = []
    # Each entry: (iterator over a container's items, closing bracket, is the container a dict, items written so far)
    stack: list[tuple[Iterator[Any], bytes, bool, list[int]]] = []
    pending: list[Any] = [value]
    while pending or stack:
        if pending:
            item = pending.pop()
            if isinstance(item, dict):
                out.append(b"{")
                pairs = sorted(item.items(), key=lambda pair: str(pair[0])) if sort_keys else item.items()
                stack.append((iter(pairs), b"}", True, [0]))
            elif isinstance(item, (list, tuple)):
                out.append(b"[")
                stack.append((iter(item), b"]", False, [0]))
            elif isinstance(item, str) and len(item) > STEP_CHARS:
                out.append(b'"')
                out.extend(orjson.dumps(item[start:start + STEP_CHARS])[1:-1]
                           for start in range(0, len(item), STEP_CHARS))
                out.append(b'"')
            elif isinstance(item, Encoded):
                out.append(item.json)
            else:
                out.append(orjson.dumps(item) if not isinstance(item, int) or isinstance(item, bool) else
                           str(item).encode())
            continue
        items, closing, is_dict, written = stack[-1]
        entry = next(items, _END)
        if entry is _END:
            out.append(closing)
            stack.pop()
            continue
        if written[0]:
            out.append(b",")
        written[0] += 1
        if is_dict:
            out.append(orjson.dumps(str(entry[0])) + b":")
            pending.append(entry[1])
        else:
            pending.append(entry)
    return b"".join(out)


_END = object()  # the end of a container's items in _encode_iteratively
