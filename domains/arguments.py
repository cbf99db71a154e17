"""Agent arguments: strict JSON parsing, a shape check that runs before any schema, and strict value formats.

Arguments come from a model, so nothing here may raise on odd input except ``parse_arguments``, whose
``ValueError`` carries one readable line. The shape check walks iteratively: a 400-level nested value must be
an error, not a ``RecursionError`` in a recursive validator.
"""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime
from typing import Any

MAX_ARGUMENT_BYTES = 64_000  # JSON text of one call's arguments
MAX_DEPTH = 8  # tool parameters are flat; 8 leaves room for small objects and lists
MAX_ITEMS = 100  # entries in any one object or list
MAX_NODES = 2_000  # values in the whole argument tree
MAX_STRING_CHARS = 2_000
FORMATS = ("date", "date-time", "email")
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_ISO_DATETIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")
_EMAIL = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
                    r"@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+")


def iso_problem(value: str, kind: str) -> str | None:
    """Why ``value`` is not a real calendar date (kind "date") or datetime ("date-time"/"datetime")."""
    is_date = kind == "date"
    if not (_ISO_DATE if is_date else _ISO_DATETIME).fullmatch(value):  # fullmatch: no trailing newline
        shape = "YYYY-MM-DD" if is_date else "YYYY-MM-DDTHH:MM:SS"
        return f"{_clip(value)!r} is not an ISO {'date' if is_date else 'datetime'} ({shape}, ASCII digits)"
    try:
        parsed = date.fromisoformat(value) if is_date else datetime.fromisoformat(value)
    except ValueError as exc:
        return f"{_clip(value)!r} is not a real {'date' if is_date else 'datetime'} ({exc})"
    if parsed.year < 1:
        return f"{value!r} is not a real date"
    return None


def format_problem(fmt: str, value: str) -> str | None:
    """Why ``value`` does not satisfy the declared string ``fmt`` (date, date-time, email); unknown: None."""
    if fmt in ("date", "date-time"):
        return iso_problem(value, fmt)
    if fmt == "email" and (len(value) > 254 or not _EMAIL.fullmatch(value)):
        return f"{_clip(value)!r} is not an e-mail address (name@example.com)"
    return None


def blank_problem(schema: dict[str, Any], value: Any) -> str | None:
    """Text parameters must not be empty or only whitespace, unless the schema says ``minLength: 0``."""
    if schema.get("type") == "string" and isinstance(value, str) and not value.strip() \
            and schema.get("minLength") != 0:
        return "must not be empty or blank"
    return None


def shape_problem(arguments: Any) -> str | None:
    """Why an argument tree is not acceptable before any schema looks at it (depth, size, key types,
    non-finite numbers, invalid Unicode), or None. Iterative, so any depth is safe to inspect."""
    if not isinstance(arguments, dict):
        return f"arguments must be a JSON object, got {type(arguments).__name__}"
    if _plainly_fine(arguments):
        return None
    stack: list[tuple[Any, int]] = [(arguments, 1)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return f"the arguments hold more than {MAX_NODES:,} values"
        if isinstance(value, dict | list | tuple):
            if depth > MAX_DEPTH:
                return f"the arguments are nested deeper than {MAX_DEPTH} levels"
            if len(value) > MAX_ITEMS:
                return f"an object or list in the arguments has more than {MAX_ITEMS} entries"
            if isinstance(value, dict):
                for key in value:
                    if not isinstance(key, str):
                        return f"argument names must be text, got {type(key).__name__}"
                    if len(key) > 200:
                        return "an argument name is longer than 200 characters"
                stack.extend((v, depth + 1) for v in value.values())
            else:
                stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, str):
            if len(value) > MAX_STRING_CHARS:
                return f"an argument is too long (limit {MAX_STRING_CHARS} characters)"
            if not value.isascii() and not _encodable(value):
                return "an argument holds invalid Unicode (a lone surrogate)"
            if "\0" in value:  # SQLite and C readers cut text at a NUL: what is stored would not be what is shown
                return "an argument holds a NUL character (\\x00), which text may not contain"
        elif isinstance(value, float) and not math.isfinite(value):
            return f"an argument is {value!r}; numbers must be finite"
        elif value is not None and not isinstance(value, bool | int | float):
            return f"an argument of type {type(value).__name__} is not JSON"
    return None


def _plainly_fine(arguments: dict[Any, Any]) -> bool:
    """The common case in one flat pass: a small object of short text, integers, finite floats and booleans."""
    if len(arguments) > MAX_ITEMS:
        return False
    for key, value in arguments.items():
        if type(key) is not str or len(key) > 200:
            return False
        kind = type(value)
        if kind is str:
            if len(value) > MAX_STRING_CHARS or not (value.isascii() or _encodable(value)) or "\0" in value:
                return False
        elif kind is float:
            if not math.isfinite(value):
                return False
        elif kind is not int and kind is not bool and value is not None:
            return False
    return True


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {_clip(key)!r} appears twice in one object")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _json_depth(text: str) -> int:
    """The deepest bracket nesting of JSON text, counted outside strings (no recursion, no parsing)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_arguments(text: str) -> dict[str, Any]:
    """Parse an agent's JSON arguments strictly: one object, no duplicate keys, no NaN/Infinity, bounded
    size and depth. Raises ``ValueError`` with one readable line.

    >>> parse_arguments('{"ticket_id": "TK00001"}')
    {'ticket_id': 'TK00001'}
    """
    if not isinstance(text, str):
        raise ValueError(f"arguments must be JSON text, got {type(text).__name__}")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_ARGUMENT_BYTES:
        raise ValueError(f"the arguments are over {MAX_ARGUMENT_BYTES:,} bytes")
    if _json_depth(text) > MAX_DEPTH:
        raise ValueError(f"the arguments are nested deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except ValueError as exc:  # a duplicate key, NaN/Infinity, or an integer of more than 4,300 digits
        raise ValueError(str(exc)) from None
    problem = shape_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _clip(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."
