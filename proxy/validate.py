"""Checks of a client's request body: what fails here gets a 400 naming the problem, never a traceback."""

from __future__ import annotations

from typing import Any

import orjson

from .errors import bad_request
from .messages import KNOWN_ROLES


def parse_json_object(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        raise bad_request("request body is empty; expected a JSON object", code="invalid_json")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise bad_request(f"request body is not valid JSON: {error}", code="invalid_json") from error
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


def check_chat(body: dict[str, Any]) -> None:
    """model and messages present and well-typed; every message an object with a known role."""
    check_model(body)
    messages = body.get("messages")
    if messages is None:
        raise bad_request("missing required parameter: 'messages'", param="messages", code="missing_required_parameter")
    if not isinstance(messages, list):
        raise bad_request(f"'messages' must be an array, got {_kind(messages)}", param="messages", code="invalid_type")
    if not messages:
        raise bad_request("'messages' must contain at least one message", param="messages", code="empty_array")
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise bad_request(f"{where} must be an object, got {_kind(message)}", param=where, code="invalid_type")
        role = message.get("role")
        if role not in KNOWN_ROLES:
            known = ", ".join(sorted(KNOWN_ROLES))
            raise bad_request(f"{where}.role {role!r} is not a known role (expected one of {known})",
                              param=f"{where}.role", code="invalid_value")
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise bad_request(f"{where}.content must be a string, an array of parts or null, got {_kind(content)}",
                              param=f"{where}.content", code="invalid_type")
        if role == "tool" and not isinstance(message.get("tool_call_id"), str):
            raise bad_request(f"{where}.tool_call_id must be a string for a tool message", param=f"{where}.tool_call_id",
                              code="invalid_type")
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise bad_request(f"{where}.tool_calls must be an array", param=f"{where}.tool_calls", code="invalid_type")
        for number, call in enumerate(calls or ()):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise bad_request(f"{where}.tool_calls[{number}] must be an object with a function {{name, arguments}}",
                                  param=f"{where}.tool_calls[{number}]", code="invalid_type")
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise bad_request(f"'metadata' must be an object, got {_kind(metadata)}", param="metadata", code="invalid_type")
    if isinstance(metadata, dict) and "session_id" in metadata and not isinstance(metadata["session_id"], str):
        raise bad_request("'metadata.session_id' must be a string", param="metadata.session_id", code="invalid_type")


def _kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number" if isinstance(value, (int, float)) else type(value).__name__
    )
