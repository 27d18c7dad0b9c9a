"""JSON bytes of any depth a client may send: orjson where it can, an iterative encoder past its 254 levels."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson


def encode_json(value: Any, sort_keys: bool = False) -> bytes:
    """The value as JSON bytes. orjson stops at 254 levels of nesting while a client's JSON may go to 1024 (the
    depth validate.parse_json_object accepts), so deeper values are written by an iterative encoder: workset
    forwards and hashes whatever it accepted, and the provider decides about the depth."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else None)
    except orjson.JSONEncodeError:
        return _encode_iteratively(value, sort_keys)


def _encode_iteratively(value: Any, sort_keys: bool = False) -> bytes:
    """JSON for any depth of plain JSON data (dict, list, str, int, float, bool, None), with an explicit stack."""
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
