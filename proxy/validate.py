"""Checks of a client's request body: what fails here gets a 400 naming the problem, never a traceback."""

from __future__ import annotations

import json
from typing import Any

import orjson

from .errors import bad_request
from .jsonbytes import leaves
from .messages import KNOWN_ROLES, call_body

SESSION_HEADER = "x-workset-session"


def _has_huge_float(value: Any) -> bool:
    """Whether the parsed JSON holds a float outside the 64-bit integers (what orjson makes of a longer integer)."""
    for leaf in leaves(value):
        if type(leaf) is float and not -(2**63) <= leaf < 2**64:
            return True
    return False


def parse_json_object(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        raise bad_request("request body is empty; expected a JSON object", code="invalid_json")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise bad_request(f"request body is not valid JSON: {error}", code="invalid_json") from error
    if _has_huge_float(body):
        # orjson reads an integer beyond 64 bits as a float, which would change a number on its way to the
        # provider; the standard library keeps it exact (and encode_json writes it back digit for digit). Only
        # then: it holds the interpreter for the whole parse. (Looking for such floats costs a step per JSON
        # value; scanning the bytes for long digit runs cost up to 20 ms per megabyte of hex.)
        try:
            body = json.loads(raw)
        except RecursionError:
            pass  # nested too deep for the standard library: orjson's reading stands
    if not isinstance(body, dict):
        raise bad_request(f"request body must be a JSON object, got {type(body).__name__}", code="invalid_json")
    return body


def check_model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if model is None:
        raise bad_request("missing required parameter: 'model'", param="model", code="missing_required_parameter")
    if not isinstance(model, str) or not model.strip():
        raise bad_request(f"'model' must be a non-empty string, got {_kind(model)}", param="model",
                          code="invalid_type")
    return model


def check_common(body: dict[str, Any]) -> None:
    """What every wire format's request must have, well-typed: a model, tools as an array of objects, a boolean
    stream (workset reads it to choose how to relay the answer)."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_request("'model' must be a non-empty string", param="model", code="invalid_type")
    tools = body.get("tools")
    if tools is not None and (type(tools) is not list or any(type(tool) is not dict for tool in tools)):
        raise bad_request("'tools' must be an array of objects", param="tools", code="invalid_type")
    if body.get("stream") is not None and type(body["stream"]) is not bool:
        raise bad_request("'stream' must be a boolean", param="stream", code="invalid_type")


def check_chat(body: dict[str, Any]) -> None:
    """model and messages present and well-typed. The messages themselves are checked by check_messages, from
    the first one workset has not seen on this conversation path (seen ones were checked when they arrived)."""
    check_model(body)
    messages = body.get("messages")
    if messages is None:
        raise bad_request("missing required parameter: 'messages'", param="messages", code="missing_required_parameter")
    if not isinstance(messages, list):
        raise bad_request(f"'messages' must be an array, got {_kind(messages)}", param="messages", code="invalid_type")
    if not messages:
        raise bad_request("'messages' must contain at least one message", param="messages", code="empty_array")
    stream = body.get("stream")
    if stream is not None and type(stream) is not bool:  # workset reads it to choose how to relay the answer
        raise bad_request(f"'stream' must be a boolean, got {_kind(stream)}", param="stream", code="invalid_type")
    _check_tools(body)
    _check_metadata(body)


def check_messages(messages: list[Any], start: int = 0) -> None:
    """Every message from `start` an object with a known role and well-typed content and tool calls."""
    for index in range(start, len(messages)):
        message = messages[index]
        # Runs on every message of every request: cheap checks first, messages built only for errors.
        if type(message) is not dict:
            raise bad_request(f"messages[{index}] must be an object, got {_kind(message)}", param=f"messages[{index}]",
                              code="invalid_type")
        role = message.get("role")
        if type(role) is not str or role not in KNOWN_ROLES:
            known = ", ".join(sorted(KNOWN_ROLES))
            raise bad_request(f"messages[{index}].role {role!r} is not a known role (expected one of {known})",
                              param=f"messages[{index}].role", code="invalid_value")
        content = message.get("content")
        if content is not None and type(content) is not str and type(content) is not list:
            raise bad_request(f"messages[{index}].content must be a string, an array of parts or null, got "
                              f"{_kind(content)}", param=f"messages[{index}].content", code="invalid_type")
        if role == "tool" and type(message.get("tool_call_id")) is not str:
            raise bad_request(f"messages[{index}].tool_call_id must be a string for a tool message",
                              param=f"messages[{index}].tool_call_id", code="invalid_type")
        calls = message.get("tool_calls")
        if calls is not None:
            _check_tool_calls(index, calls)


def _check_tool_calls(index: int, calls: Any) -> None:
    if type(calls) is not list:
        where = f"messages[{index}].tool_calls"
        raise bad_request(f"{where} must be an array", param=where, code="invalid_type")
    for number, call in enumerate(calls):
        custom, body = call_body(call)  # a function call, or a GPT-5 custom tool call with free-form input
        if body is None or type(body.get("name")) is not str:
            where = f"messages[{index}].tool_calls[{number}]"
            shape = "a custom {name, input}" if custom else "a function {name, arguments}"
            raise bad_request(f"{where} must be an object with {shape}", param=where, code="invalid_type")


def _check_tools(body: dict[str, Any]) -> None:
    """Function and custom tool definitions well-formed (workset reads their names, and adds its recall tool to
    them); definitions of other types (a provider's built-in tools) pass as they are."""
    tools = body.get("tools")
    if tools is not None and type(tools) is not list:
        raise bad_request(f"'tools' must be an array, got {_kind(tools)}", param="tools", code="invalid_type")
    for number, tool in enumerate(tools or ()):
        where = f"tools[{number}]"
        if type(tool) is not dict:
            raise bad_request(f"{where} must be an object, got {_kind(tool)}", param=where, code="invalid_type")
        if tool.get("type", "function") not in ("function", "custom") and "function" not in tool:
            continue
        custom, definition = call_body(tool)  # a tool definition has a call's shape: function or custom {name, …}
        if definition is None or type(definition.get("name")) is not str:
            shape = "a custom {name, …}" if custom else "a function {name, …}"
            raise bad_request(f"{where} must be an object with {shape}", param=where, code="invalid_type")
    choice = body.get("tool_choice")
    if choice is None or type(choice) is str:
        return
    if type(choice) is not dict or any(type(choice.get(key, {})) is not dict for key in ("function", "custom")):
        raise bad_request("'tool_choice' must be a string or an object naming a tool", param="tool_choice",
                          code="invalid_type")


def _check_metadata(body: dict[str, Any]) -> None:
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise bad_request(f"'metadata' must be an object, got {_kind(metadata)}", param="metadata", code="invalid_type")
    if isinstance(metadata, dict) and "session_id" in metadata and not isinstance(metadata["session_id"], str):
        raise bad_request("'metadata.session_id' must be a string", param="metadata.session_id", code="invalid_type")


MAX_SESSION_ID_CHARS = 512  # OpenAI's limit for a metadata value, so any id a client can send there fits


def explicit_session(header: str | None, body: dict[str, Any]) -> str | None:
    """The client's own session id: the x-workset-session header, else metadata.session_id, without surrounding
    whitespace; None when both are absent or blank. It is echoed in a response header, so anything but printable
    ASCII is a 400 here, before the provider is called (not a failed response after it answered)."""
    if header is not None and header.strip():
        value, where = header, SESSION_HEADER
    else:
        metadata = body.get("metadata")
        value = metadata.get("session_id") if isinstance(metadata, dict) else None
        where = "metadata.session_id"
        if not isinstance(value, str) or not value.strip():
            return None
    value = value.strip()
    if len(value) > MAX_SESSION_ID_CHARS:
        raise bad_request(f"{where} is {len(value)} characters long; at most {MAX_SESSION_ID_CHARS} are accepted",
                          param=where, code="invalid_value")
    if not (value.isascii() and value.isprintable()):  # C-level checks; the loop below only finds the culprit
        position, char = next((i, c) for i, c in enumerate(value) if not " " <= c <= "~")
        raise bad_request(f"{where} must be printable ASCII (it is echoed in the {SESSION_HEADER} response "
                          f"header); found {char!r} at position {position}", param=where, code="invalid_value")
    return value


def _kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number" if isinstance(value, (int, float)) else type(value).__name__
    )
