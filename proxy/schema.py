"""Typed settings from YAML: dataclasses are the schema, and a bad value stops start-up naming its key.

Each setting is a dataclass field whose `doc` metadata says what it does, so the schema is the documentation.
Bounds go in metadata too (`min`, `max`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any, Literal, TypeVar, get_args, get_origin

T = TypeVar("T")


class ConfigError(ValueError):
    """A setting is missing, unknown or of the wrong type or range; the message names the key."""


def setting(default: Any, doc: str, *, min: float | None = None, max: float | None = None) -> Any:
    """A field with its one-line documentation and optional bounds."""
    metadata = {"doc": doc, "min": min, "max": max}
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    if dataclasses.is_dataclass(default):
        return dataclasses.field(default_factory=lambda: default, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def build(cls: type[T], data: Any, where: str = "") -> T:
    """An instance of dataclass `cls` from a mapping; unknown keys and bad values raise ConfigError."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'top level'} must be a mapping, got {_show(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"unknown key {_join(where, str(unknown[0]))} (known: {', '.join(sorted(fields))})")
    values: dict[str, Any] = {}
    hints = _hints(cls)
    for name, field in fields.items():
        if name not in data:
            continue
        key = _join(where, name)
        value = _convert(hints[name], data[name], key)
        _check_bounds(field, value, key)
        values[name] = value
    return cls(**values)


def _convert(kind: Any, value: Any, key: str) -> Any:
    origin = get_origin(kind)
    if dataclasses.is_dataclass(kind):
        return build(kind, value, key)
    if origin is Literal:
        if value not in get_args(kind):
            raise ConfigError(f"{key} must be one of {', '.join(map(repr, get_args(kind)))}, got {_show(value)}")
        return value
    if origin in (typing.Union, types.UnionType):
        wanted = []
        for option in get_args(kind):
            try:
                return _convert(option, value, key)
            except ConfigError as error:
                wanted.append(str(error).removeprefix(f"{key} must be ").split(", got ")[0])
        raise ConfigError(f"{key} must be {' or '.join(wanted)}, got {_show(value)}")
    if kind is type(None):
        if value is not None:
            raise ConfigError(f"{key} must be null, got {_show(value)}")
        return None
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {_show(value)}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} must be an integer, got {_show(value)}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} must be a number, got {_show(value)}")
        return float(value)
    if kind is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be a string, got {_show(value)}")
        return value
    if kind is Any:
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise ConfigError(f"{key} must be a list, got {_show(value)}")
        (item,) = get_args(kind)[:1]
        return tuple(_convert(item, v, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be a mapping, got {_show(value)}")
        key_kind, value_kind = get_args(kind)
        return {_convert(key_kind, k, key): _convert(value_kind, v, _join(key, str(k))) for k, v in value.items()}
    raise TypeError(f"schema type {kind!r} of {key} is not supported")


def _check_bounds(field: dataclasses.Field, value: Any, key: str) -> None:
    low, high = field.metadata.get("min"), field.metadata.get("max")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    if low is not None and value < low:
        raise ConfigError(f"{key} must be at least {low}, got {value}")
    if high is not None and value > high:
        raise ConfigError(f"{key} must be at most {high}, got {value}")


def describe(cls: type, where: str = "") -> list[tuple[str, Any, str]]:
    """(key, default, doc) for every setting of `cls`, nested ones included: the reference for README and docs."""
    rows: list[tuple[str, Any, str]] = []
    hints = _hints(cls)
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = _join(where, field.name)
        if dataclasses.is_dataclass(hints[field.name]):
            rows.extend(describe(hints[field.name], key))
            continue
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()  # type: ignore[misc]
        rows.append((key, default, field.metadata.get("doc", "")))
    return rows


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
