"""JSON written ahead and in steps (proxy.jsonbytes) is byte for byte what orjson writes in one call: the provider
gets the body it would have got, whoever encoded it, in one call or in pieces."""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy import jsonbytes
from proxy.jsonbytes import encode_json, encoded_ahead

TRICKY = ["中", "a", '"', "\\", "\n", "\t", "\x01", "\x1f", "\x7f", "：", "😀", "é", "\u2028", "\u2029", "/", "<"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from(TRICKY) | st.characters(blacklist_categories=("Cs",)), max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(value=json_values, in_steps=st.booleans())
def test_a_body_written_ahead_is_what_orjson_writes(value: Any, in_steps: bool) -> None:
    body = {"model": "m", "messages": value, "stream": False, "temperature": 0.5}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonbytes, "STEP_CHARS", 3)  # short pieces, so that small strings are cut too
        assert encode_json(encoded_ahead(body, in_steps)) == orjson.dumps(body)
        assert jsonbytes._encode_iteratively(value) == orjson.dumps(value)
        assert jsonbytes._encode_iteratively(value, sort_keys=True) == orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def test_a_megabyte_string_is_written_in_pieces_that_join_into_the_same_bytes() -> None:
    text = "".join(random.Random(7).choice(TRICKY) for _ in range(1_000_000))
    body = {"model": "m", "messages": [{"role": "tool", "tool_call_id": "c", "content": text}], "input": text}
    assert encode_json(encoded_ahead(body, in_steps=True)) == orjson.dumps(body)


def test_a_message_with_a_long_text_hashes_as_before() -> None:
    """Messages are hashed and stored by their JSON: written in steps, the bytes (so the store's hashes) are the
    same as orjson's in one call."""
    text = "".join(random.Random(5).choice(TRICKY) for _ in range(200_000))
    for message in ({"role": "tool", "tool_call_id": "c", "content": text},
                    {"role": "user", "content": [{"type": "text", "text": text}, {"type": "text", "text": "b"}]},
                    {"role": "user", "content": "short", "name": "x"}):
        assert jsonbytes.encode_message(message, sort_keys=True) == orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    assert jsonbytes._holds_long_text({"role": "tool", "content": text})
    assert jsonbytes._holds_long_text({"role": "user", "content": [{"type": "text", "text": text}]})
    assert not jsonbytes._holds_long_text({"role": "user", "content": text[:1000]})


def test_written_ahead_keeps_the_model_and_the_flags_readable() -> None:
    """The send path reads `model` and `stream` (Anthropic's model swap, the stream switch): they stay plain."""
    ahead = encoded_ahead({"model": "m", "stream": True, "n": 2, "messages": [], "metadata": {"a": 1}}, False)
    assert ahead["model"] == "m" and ahead["stream"] is True and ahead["n"] == 2
    assert isinstance(ahead["messages"], jsonbytes.Encoded) and isinstance(ahead["metadata"], jsonbytes.Encoded)


def test_written_ahead_inside_json_deeper_than_orjson_writes() -> None:
    deep: Any = {"leaf": "中\n"}
    for level in range(300):
        deep = {"level": level, "inner": deep}
    body = {"model": "m", "messages": [{"role": "user", "content": "x", "schema": deep}], "huge": 2**70}
    assert json.loads(encode_json(encoded_ahead(body, in_steps=False))) == body
    assert json.loads(encode_json(encoded_ahead(body, in_steps=True))) == body
