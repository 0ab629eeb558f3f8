"""The config's error messages: pydantic's report turned into one `ConfigError` line
with a dotted key (`remote[1].poll_seconds`) and a hint (did you mean ...?)."""

from __future__ import annotations

import datetime as dt
import difflib
from collections.abc import Callable

from pydantic import ValidationError

from memsync.errors import ConfigError


class KeyedValueError(ValueError):
    """A check that spans fields: `subloc` says which key, below where pydantic reports it."""

    def __init__(self, subloc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.subloc = subloc


_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "tuple_type": "an array",
    "model_type": "a table",
    "dict_type": "a table",
}


def config_error(
    file: str, exc: ValidationError, known_keys: Callable[[tuple[str | int, ...]], list[str]]
) -> ConfigError:
    """Given pydantic's report, return a ConfigError for its first error: dotted key, one line."""
    error = exc.errors(include_url=False)[0]
    loc: tuple[str | int, ...] = tuple(error["loc"])
    kind = error["type"]
    value = error.get("input")
    cause = error.get("ctx", {}).get("error")
    if kind == "extra_forbidden":
        unknown = str(loc[-1])
        known = known_keys(loc[:-1])
        close = difflib.get_close_matches(unknown, known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else "known keys: " + ", ".join(known)
        return ConfigError(file, _dotted(loc), f"unknown key {unknown!r} ({hint})")
    if isinstance(cause, KeyedValueError):
        return ConfigError(file, _dotted(loc + cause.subloc), str(cause))
    if isinstance(cause, ValueError):
        return ConfigError(file, _dotted(loc), str(cause))
    if kind == "missing":
        return ConfigError(file, _dotted(loc), f"required key {str(loc[-1])!r} is missing")
    if kind == "too_short":
        hint = "; write a [[memory]] table, or leave the key out" if loc == ("memory",) else ""
        return ConfigError(file, _dotted(loc), f"must not be empty{hint}")
    if kind in _EXPECTED:
        message = f"expected {_EXPECTED[kind]}, got {describe(value)}"
        if isinstance(value, dict) and kind == "tuple_type" and loc:
            name = loc[-1]
            message += f"; write [[{name}]] (an array of tables), not [{name}]"
        return ConfigError(file, _dotted(loc), message)
    message = str(error["msg"]).replace("Input should be", "must be", 1)
    return ConfigError(file, _dotted(loc), f"{message}, got {describe(value)}")


def _dotted(loc: tuple[str | int, ...]) -> str:
    """("remote", 1, "poll_seconds") -> "remote[1].poll_seconds"."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def describe(value: object) -> str:
    """Name a TOML value's type, with a short repr for scalars: `string '30'`."""
    if isinstance(value, bool):
        kind = "boolean"
    elif isinstance(value, int):
        kind = "integer"
    elif isinstance(value, float):
        kind = "float"
    elif isinstance(value, str):
        kind = "string"
    elif isinstance(value, dt.date | dt.time):
        kind = "date/time"
    elif isinstance(value, list | tuple):
        return "an array"
    elif isinstance(value, dict):
        return "a table"
    else:
        kind = type(value).__name__
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"{kind} {shown}"
