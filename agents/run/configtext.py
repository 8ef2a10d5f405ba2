"""How a wrong option reads: msgspec's validation errors as one line that names the option and says what it
must be (agents/run/runconfig.py raises them as ConfigError)."""
from __future__ import annotations

import typing
from typing import Any

import msgspec

_NOUNS = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false",
          "array": "a list of strings", "object": "a table"}


def explain(exc: msgspec.ValidationError, data: dict, sections: dict[str, type]) -> str:
    """msgspec's 'Expected `int` >= 1 - at `$.budget.iterations`' as 'iterations must be an integer >= 1, not 0'."""
    message, _, at = str(exc).partition(" - at `$")
    path = [p for p in at.rstrip("`").split(".") if p]
    name = path[-1] if path else "config"
    value: Any = data
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    if message.startswith("Object contains unknown field"):
        field = message.split("`")[1]
        where = f"[{'.'.join(path)}]" if path else "the configuration"
        return f"unknown option {field!r} in {where}"
    if message.startswith("Invalid enum value"):
        choices = _choices(path, sections)
        return f"{name} must be {' or '.join(choices) if choices else 'another value'}, not {value!r}"
    if message.startswith("Expected `array` of length >="):
        return f"at least one --{name.replace('_', '-')} is needed"
    if message.startswith("Expected `"):
        kind, _, rest = message[len("Expected `"):].partition("`")
        bound = rest.partition(", got")[0]
        return f"{name} must be {_NOUNS.get(kind, kind)}{bound}, not {value!r}"
    return f"{name}: {message}"


def _choices(path: list[str], sections: dict[str, type]) -> list[str]:
    if len(path) == 2 and path[0] in sections:
        hint = typing.get_type_hints(sections[path[0]]).get(path[1])
        return [repr(a) for a in typing.get_args(hint) if isinstance(a, str)] or \
            [repr(c) for a in typing.get_args(hint) for c in typing.get_args(a) if isinstance(c, str)]
    return []
