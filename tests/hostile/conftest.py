"""Shared helpers for the hostile-input tests: a real domain spec to mutate, and one-line error assertions."""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any

import yaml

from domains.engine import DomainEngine
from domains.registry import get_engine, spec_path
from domains.spec import DomainSpec, SpecError, Tool, parse_spec

LABEL = "weather.yaml"
_WEATHER_RAW: dict[str, Any] = yaml.safe_load(spec_path("weather").read_text())


def weather_raw() -> dict[str, Any]:
    """A fresh, mutable copy of the weather spec as parsed YAML."""
    return copy.deepcopy(_WEATHER_RAW)


def tool_of(raw: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in raw["tools"] if t["name"] == name)


def column_of(raw: dict[str, Any], table: str, column: str) -> dict[str, Any]:
    t = next(t for t in raw["tables"] if t["name"] == table)
    return next(c for c in t["columns"] if c["name"] == column)


def one_problem(exc: SpecError) -> str:
    """The single problem line of a spec error (fails when there is not exactly one)."""
    assert len(exc.problems) == 1, exc.problems
    line = exc.problems[0]
    assert "\n" not in line and "Traceback" not in line, line
    return line


def spec_error(raw: dict[str, Any], build_engine: bool = False) -> str:
    """The one problem a mutated spec is refused with, at load or (``build_engine``) when it is seeded."""
    try:
        spec = parse_spec(raw, label=LABEL)
        if build_engine:
            DomainEngine(spec, 0)
    except SpecError as exc:
        return one_problem(exc)
    raise AssertionError("the mutated spec was accepted")


def with_tool(spec: DomainSpec, name: str, **changes: Any) -> DomainSpec:
    """``spec`` with one tool changed, bypassing the load-time checks (to test the call-time guards)."""
    tools = tuple(dataclasses.replace(t, **changes) if t.name == name else t for t in spec.tools)
    return dataclasses.replace(spec, tools=tools)


def weather_engine() -> DomainEngine:
    return get_engine("weather")


def tool(engine: DomainEngine, name: str) -> Tool:
    return engine.tools[name]


def located(text: str) -> str:
    """Expected messages name tools and columns (``tools[<get_alert>]``, ``tables[<stations>].columns[<stations.x>]``);
    this turns the names into the positions they have in the current weather spec, so the cases survive edits."""
    raw = weather_raw()
    tools = {t["name"]: i for i, t in enumerate(raw["tools"])}
    tables = {t["name"]: i for i, t in enumerate(raw["tables"])}
    columns = {f"{t['name']}.{c['name']}": j for t in raw["tables"] for j, c in enumerate(t["columns"])}
    text = re.sub(r"tools\[<(\w+)>\]", lambda m: f"tools[{tools[m.group(1)]}]", text)
    text = re.sub(r"columns\[<(\w+\.\w+)>\]", lambda m: f"columns[{columns[m.group(1)]}]", text)
    return re.sub(r"tables\[<(\w+)>\]", lambda m: f"tables[{tables[m.group(1)]}]", text)
