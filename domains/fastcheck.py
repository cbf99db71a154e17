"""A fast yes/no check for the small JSON-Schema subset tool parameters use.

``compile_check(schema)`` returns a function that says True only when the arguments are certainly valid;
on False (or for a schema using keywords outside the subset, where it returns None) the engine asks
jsonschema for the authoritative verdict and message. It never accepts what jsonschema would reject,
including the engine's two additions to it: asserted formats and no blank text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from domains.arguments import blank_problem, format_problem

ANNOTATIONS = {"description", "examples", "default", "title", "format"}
SUPPORTED = ANNOTATIONS | {"type", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern"}
Check = Callable[[Any], bool]


def _value_check(schema: dict[str, Any]) -> Check | None:
    if set(schema) - SUPPORTED:
        return None
    kind = schema.get("type")
    if isinstance(kind, list) or kind not in (None, "string", "integer", "number", "boolean"):
        return None
    enum = schema.get("enum")
    lo, hi = schema.get("minimum"), schema.get("maximum")
    min_len, max_len = schema.get("minLength"), schema.get("maxLength")
    pattern = re.compile(schema["pattern"]) if "pattern" in schema else None
    fmt = schema.get("format") if isinstance(schema.get("format"), str) else None

    def check(v: Any) -> bool:
        if kind == "string" and not isinstance(v, str):
            return False
        if kind == "integer" and (not isinstance(v, int) or isinstance(v, bool)):
            return False
        if kind == "number" and (not isinstance(v, (int, float)) or isinstance(v, bool)):
            return False
        if kind == "boolean" and not isinstance(v, bool):
            return False
        if kind is None and not isinstance(v, (str, int, float, bool)):
            return False
        if enum is not None and not any(v == e and type(v) is type(e) for e in enum):
            return False
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                return False
        if isinstance(v, str):
            if (min_len is not None and len(v) < min_len) or (max_len is not None and len(v) > max_len):
                return False
            if pattern is not None and not pattern.search(v):
                return False
            if fmt is not None and format_problem(fmt, v) is not None:
                return False
            if blank_problem(schema, v) is not None:
                return False
        return True

    return check


def compile_check(parameters: dict[str, Any]) -> Callable[[dict[str, Any]], bool] | None:
    """A checker for an object schema of simple properties, or None if the schema is outside the subset."""
    if set(parameters) - {"type", "properties", "required", "additionalProperties", "description"}:
        return None
    if parameters.get("additionalProperties", True) is not False:
        return None
    props: dict[str, Check] = {}
    for name, sub in parameters.get("properties", {}).items():
        check = _value_check(sub)
        if check is None:
            return None
        props[name] = check
    required = tuple(parameters.get("required", ()))

    def check_args(args: dict[str, Any]) -> bool:
        if any(r not in args for r in required):
            return False
        for key, value in args.items():
            check = props.get(key)
            if check is None or not check(value):
                return False
        return True

    return check_args
