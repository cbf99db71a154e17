"""Invalid spec files fail to load with a message naming the file and the path inside the spec."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from domains.registry import spec_path
from domains.spec import SpecError, load_spec

BASE: dict[str, Any] = yaml.safe_load(spec_path("weather").read_text())


def _tool(spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in spec["tools"] if t["name"] == name)


def _table(spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in spec["tables"] if t["name"] == name)


def _set(fn: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    return fn


MISTAKES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("unknown column in an effect",
     lambda s: _tool(s, "cancel_alert")["effects"].__setitem__(0, "UPDATE alerts SET seat = 1 WHERE alert_id = :alert_id"),
     "tools[15].effects[0]: unknown column seat"),
    ("unknown table in a precondition",
     lambda s: _tool(s, "cancel_alert")["preconditions"][0].__setitem__("sql", "SELECT 1 FROM alertz WHERE alert_id = :alert_id"),
     "tools[15].preconditions[0].sql: unknown table alertz"),
    ("undeclared SQL parameter",
     lambda s: _tool(s, "cancel_alert")["returns"].__setitem__("sql", "SELECT * FROM alerts WHERE alert_id = :alert"),
     "tools[15].returns.sql: parameter :alert is not declared"),
    ("foreign key to a missing table",
     lambda s: _table(s, "stations")["columns"][2].__setitem__("references", "zones.region_id"),
     "tables[2].columns[2].references: unknown table 'zones'"),
    ("foreign key to a non-key column",
     lambda s: _table(s, "stations")["columns"][2].__setitem__("references", "regions.name"),
     "tables[2].columns[2].references: regions.name is not the primary key"),
    ("primary key that is not a column",
     lambda s: _table(s, "regions").__setitem__("primary_key", "code"),
     "tables[1].primary_key: regions has no column 'code'"),
    ("missing required field",
     lambda s: _tool(s, "get_alert").pop("description"),
     "tools[11]: 'description' is a required property"),
    ("wrong tool kind",
     lambda s: _tool(s, "get_alert").__setitem__("kind", "mutate"),
     "tools[11].kind: 'mutate' is not one of"),
    ("candidates query naming no parameter",
     lambda s: _tool(s, "cancel_alert").__setitem__("candidates", ["SELECT alert_id AS alert FROM alerts"]),
     "tools[15].candidates[0]: none of its columns (alert) is a parameter of the tool"),
    ("candidates query with an unknown column",
     lambda s: _tool(s, "cancel_alert").__setitem__("candidates", ["SELECT alert_idd AS alert_id FROM alerts"]),
     "tools[15].candidates[0]: unknown column alert_idd"),
    ("write tool without effects",
     lambda s: _tool(s, "cancel_alert").__setitem__("effects", []),
     "tools[15].effects: a write tool needs at least one effect"),
    ("utterance slot that is not a parameter",
     lambda s: s["utterances"].__setitem__("cancel_alert", ["cancel {ticket_id}"]),
     "utterances.cancel_alert[0]: slot {ticket_id} is not a parameter"),
    ("tool without utterances",
     lambda s: s["utterances"].pop("get_alert"),
     "utterances: no utterances for tool 'get_alert'"),
    ("unknown seed provider",
     lambda s: _table(s, "forecasters")["columns"][1]["seed"].__setitem__("provider", "galaxy"),
     "tables[0].columns[1].seed.provider: unknown provider 'galaxy'"),
    ("formula over an unknown column",
     lambda s: _table(s, "alerts")["columns"][5]["seed"].__setitem__("expr", "datetime_add(begins_at, 60)"),
     "tables[5].columns[5].seed.expr: unknown column begins_at"),
    ("formula calling a forbidden function",
     lambda s: _table(s, "alerts")["columns"][5]["seed"].__setitem__("expr", "__import__('os').getcwd()"),
     "tables[5].columns[5].seed.expr: formula"),
    ("duplicate tool name",
     lambda s: _tool(s, "get_station").__setitem__("name", "get_alert"),
     "tools: duplicate tool name 'get_alert'"),
    ("parameters that are not JSON Schema",
     lambda s: _tool(s, "get_alert")["parameters"]["properties"].__setitem__("alert_id", {"type": "strng"}),
     "tools[11].parameters: not a valid JSON Schema"),
    ("effect that is not a write statement",
     lambda s: _tool(s, "cancel_alert")["effects"].__setitem__(0, "DROP TABLE alerts"),
     "tools[15].effects[0]: 'DROP TABLE alerts' does not match"),
    ("enum column seeded outside its enum",
     lambda s: _table(s, "stations")["columns"][4]["seed"].__setitem__("values", ["active", "tropical"]),
     "tables[2].columns[4].seed.values: ['tropical'] are not in the column's enum"),
    ("seed recipe missing its parameters",
     lambda s: _table(s, "stations")["columns"][3].__setitem__("seed", {"kind": "randint", "min": 0}),
     "tables[2].columns[3].seed: invalid seed recipe of kind 'randint'"),
]


@pytest.mark.parametrize("label,mutate,expected", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_invalid_spec_names_file_and_path(tmp_path: Path, label: str, mutate: Callable[[dict[str, Any]], None],
                                          expected: str) -> None:
    spec = copy.deepcopy(BASE)
    mutate(spec)
    path = tmp_path / "railway.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert any(p.startswith("railway.yaml: ") and expected in p for p in info.value.problems), info.value.problems


def test_not_yaml_and_not_a_mapping(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables: [unclosed")
    with pytest.raises(SpecError, match="bad.yaml: not valid YAML"):
        load_spec(bad)
    bad.write_text("- just\n- a list\n")
    with pytest.raises(SpecError, match=r"bad.yaml: \(root\): expected a mapping"):
        load_spec(bad)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    spec = copy.deepcopy(BASE)
    _tool(spec, "cancel_alert")["effects"][0] = "UPDATE alerts SET seat = 1 WHERE alert_id = :alert_id"
    spec["utterances"].pop("get_alert")
    path = tmp_path / "weather.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert len(info.value.problems) == 2
