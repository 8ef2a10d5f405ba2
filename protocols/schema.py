"""A small validator for msgpack maps: required fields, types, sizes, choices.
Unknown fields are ignored so that minor protocol versions can add fields."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class ProtocolError(ValueError):
    """A message that is malformed, oversized, unsigned or otherwise unacceptable."""


@dataclass(frozen=True)
class Field:
    name: str
    type: type | tuple[type, ...]
    required: bool = True
    max_len: int | None = None          # for str / bytes / list / dict
    choices: tuple[Any, ...] | None = None
    schema: "Schema | None" = None      # nested map
    items: "Schema | type | None" = None  # list element schema or type
    min_value: float | None = None
    max_value: float | None = None


@dataclass(frozen=True)
class Schema:
    name: str
    fields: tuple[Field, ...]


def validate(schema: Schema, data: Any, where: str = "") -> dict:
    where = where or schema.name
    if not isinstance(data, dict):
        raise ProtocolError(f"{where}: expected a map, got {type(data).__name__}")
    for f in schema.fields:
        if f.name not in data or data[f.name] is None:
            if f.required:
                raise ProtocolError(f"{where}: missing field {f.name!r}")
            continue
        _check(f, data[f.name], f"{where}.{f.name}")
    return data


def _check(f: Field, value: Any, where: str) -> None:
    types = f.type if isinstance(f.type, tuple) else (f.type,)
    # bool is an int in Python; do not let True pass as a number or a number as a bool
    if isinstance(value, bool) and bool not in types:
        raise ProtocolError(f"{where}: expected {_names(types)}, got bool")
    if not isinstance(value, types):
        raise ProtocolError(f"{where}: expected {_names(types)}, got {type(value).__name__}")
    if f.max_len is not None and hasattr(value, "__len__") and len(value) > f.max_len:
        raise ProtocolError(f"{where}: too long ({len(value)} > {f.max_len})")
    if f.choices is not None and value not in f.choices:
        raise ProtocolError(f"{where}: {value!r} is not one of {', '.join(map(str, f.choices))}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if f.min_value is not None and value < f.min_value:
            raise ProtocolError(f"{where}: {value} < {f.min_value}")
        if f.max_value is not None and value > f.max_value:
            raise ProtocolError(f"{where}: {value} > {f.max_value}")
    if f.schema is not None:
        validate(f.schema, value, where)
    if f.items is not None:
        for i, item in enumerate(value):
            if isinstance(f.items, Schema):
                validate(f.items, item, f"{where}[{i}]")
            elif not isinstance(item, f.items) or isinstance(item, bool) and f.items is not bool:
                raise ProtocolError(f"{where}[{i}]: expected {_names((f.items,))}")


def _names(types: tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in types)
