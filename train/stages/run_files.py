"""Records read back from a run folder (a round's acceptance and solved counts, the evaluations, a checkpoint's
trainer state), each checked for its shape: a file cut short by a kill, or edited by hand, is a ``RunFileError``
that names the file and what is wrong with it, never a bare "Unterminated string" or a TypeError."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any


class RunFileError(ValueError):
    """A record in a run folder cannot be used: the message names the file."""


def read_json(path: Path) -> Any:
    """The JSON a run file holds; a ``RunFileError`` naming it when it cannot be read or parsed."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(f"{path} cannot be read: {exc}") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        where = f" at line {exc.lineno}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deep"
        raise RunFileError(f"{path} is not valid JSON ({why}{where}): cut short by a kill or edited; move it aside "
                           "and rerun to redo that part") from None


def record_of(path: Path, kind: type, data: Any) -> Any:
    """``kind(**data)`` for a dataclass ``kind``, with exactly its fields, each of the type it declares."""
    names = [f.name for f in fields(kind)]
    if not isinstance(data, dict):
        raise RunFileError(f"{path}: expected a JSON object with {', '.join(names)}, got {type(data).__name__}")
    unknown, missing = sorted(set(data) - set(names)), [n for n in names if n not in data]
    if unknown or missing:
        said = "; ".join(p for p in (f"unknown key(s) {', '.join(map(repr, unknown))}" if unknown else "",
                                     f"missing {', '.join(missing)}" if missing else "") if p)
        raise RunFileError(f"{path}: {said} (a {kind.__name__} has {', '.join(names)})")
    for f in fields(kind):
        declared = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        if not _fits(data[f.name], declared):
            raise RunFileError(f"{path}: {f.name} must be {f.type}, got {type(data[f.name]).__name__}")
    return kind(**data)


def _fits(value: Any, declared: str) -> bool:
    """Whether a JSON value fits a declared type as written in the dataclass (``int``, ``dict[str, int]``, ...)."""
    kinds = {"int": int, "float": (int, float), "str": str, "bool": bool}
    if declared in kinds:
        return isinstance(value, kinds[declared]) and (declared == "bool" or not isinstance(value, bool))
    if declared.startswith("dict"):
        return isinstance(value, dict)
    if declared.startswith("list"):
        return isinstance(value, list)
    return True  # a type this reader does not know: the record's own code takes it as it is


def counts(path: Path, data: Any) -> dict[str, int]:
    """A ``{task id: count}`` object with whole, non-negative counts."""
    if not isinstance(data, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                             for v in data.values()):
        raise RunFileError(f"{path}: expected a JSON object of task ids to whole counts")
    return {str(k): int(v) for k, v in data.items()}
