"""The exports of a real (tiny) published snapshot: HF dataset + parquet + card, and tau2 task files."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import jsonschema
import pyarrow.parquet as pq
import pytest
from datasets import load_from_disk

from domains.registry import get_spec
from pipeline.regenerate import RegenerateConfig, regenerate
from warehouse.exports import TAU2_SCHEMA_PATH, TaskSchemaError, export_hf, export_tau2
from warehouse.reader import WarehouseError

COLUMNS = {"task_id", "domain", "seed", "kinds", "instruction", "user_scenario", "gold_calls", "communicate_info",
           "evolved_from", "operator", "depth", "calls", "distinct_tools", "write_calls", "kill_rate", "tau2_json",
           "verification_json", "argument_sources_json"}


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("exports")
    path = root / "wh.duckdb"
    result, _ = regenerate(RegenerateConfig(domains=["weather"], tasks_per_domain=30, warehouse=str(path),
                                            work_dir=str(root / "work")), progress=lambda _: None)
    assert result.status == "published"
    con = duckdb.connect(str(path), read_only=True)
    try:
        tasks = con.execute("SELECT COUNT(*) FROM tasks WHERE snapshot_id = ?", [result.snapshot_id]).fetchone()[0]
        config_hash = con.execute("SELECT config_hash FROM snapshots WHERE snapshot_id = ?",
                                  [result.snapshot_id]).fetchone()[0]
    finally:
        con.close()
    return {"path": path, "root": root, "snapshot_id": result.snapshot_id, "tasks": tasks, "config_hash": config_hash}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return json.loads(TAU2_SCHEMA_PATH.read_text())


def test_hf_export_loads_with_every_published_task(warehouse: dict[str, Any]) -> None:
    out = warehouse["root"] / "hf"
    summary = export_hf(warehouse["path"], "latest", out)
    assert summary["snapshot_id"] == warehouse["snapshot_id"] and summary["rows"] == warehouse["tasks"] > 0
    dataset = load_from_disk(str(out / "dataset"))
    assert len(dataset) == warehouse["tasks"]
    assert set(dataset.column_names) == COLUMNS
    first = dataset[0]
    assert first["gold_calls"] and set(first["gold_calls"][0]) == {"name", "arguments_json"}
    assert isinstance(json.loads(first["gold_calls"][0]["arguments_json"]), dict)
    assert "instructions" in json.loads(first["user_scenario"])
    assert json.loads(first["tau2_json"])["id"] == first["task_id"]
    contract = json.loads(first["verification_json"])  # what a reward needs to judge as admission did
    assert contract["criteria"] == ["execution", "fidelity", "completeness", "identification"]
    assert sum(pq.read_table(p).num_rows for p in (out / "parquet").glob("*.parquet")) == warehouse["tasks"]
    sources = json.loads(first["argument_sources_json"])  # where each gold value came from
    assert [c["name"] for c in sources["calls"]] == [c["name"] for c in first["gold_calls"]]
    assert set(sources["communicate_info"]) == set(first["communicate_info"])


def test_the_warehouse_stores_every_tasks_argument_sources(warehouse: dict[str, Any]) -> None:
    con = duckdb.connect(str(warehouse["path"]), read_only=True)
    try:
        rows = con.execute("SELECT argument_sources_json, tau2_json FROM tasks WHERE snapshot_id = ?",
                           [warehouse["snapshot_id"]]).fetchall()
        audit = con.execute("SELECT underivable_arguments FROM snapshot_audit WHERE snapshot_id = ?",
                            [warehouse["snapshot_id"]]).fetchall()
    finally:
        con.close()
    assert rows and audit == [(0,)]
    for stored, tau2 in rows:
        sources = json.loads(stored)
        values = [s for c in sources["calls"] for s in c["arguments"].values()]
        values += list(sources["communicate_info"].values())
        assert values and all(values)  # every value has a source
        assert json.loads(tau2)["evaluation_criteria"]["argument_sources"] == sources


def test_dataset_card_reports_counts_and_config(warehouse: dict[str, Any]) -> None:
    out = warehouse["root"] / "hf-card"
    export_hf(warehouse["path"], warehouse["snapshot_id"], out)
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "\n---\n" in card[4:]
    assert f"| tasks | {warehouse['tasks']} |" in card and f"| weather | {warehouse['tasks']} |" in card
    for needle in ("evolved fraction", "median kill rate", "Rejected candidates by reason", warehouse["snapshot_id"],
                   warehouse["config_hash"], "code version", '"kill_threshold": 0.9'):
        assert needle in card


def test_tau2_export_writes_valid_tasks_db_and_policy(warehouse: dict[str, Any], schema: dict[str, Any]) -> None:
    out = warehouse["root"] / "tau2"
    summary = export_tau2(warehouse["path"], "latest", out)
    assert summary["rows"] == warehouse["tasks"]
    tasks = json.loads((out / "weather" / "tasks.json").read_text())
    assert len(tasks) == warehouse["tasks"]
    for task in tasks:
        jsonschema.validate(task, schema, cls=jsonschema.Draft202012Validator)
    spec = get_spec("weather")
    db = json.loads((out / "weather" / "db.json").read_text())
    assert {t.name: len(db.get(t.name, [])) for t in spec.tables} == {t.name: t.rows for t in spec.tables}
    policy = (out / "weather" / "policy.md").read_text()
    write_tool = next(t for t in spec.tools if t.kind == "write" and t.preconditions)
    assert write_tool.preconditions[0].error in policy and spec.policy.strip() in policy


def test_unknown_snapshot_is_a_warehouse_error(warehouse: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match="no snapshot 'ts-missing'"):
        export_hf(warehouse["path"], "ts-missing", tmp_path / "hf")
    with pytest.raises(WarehouseError, match="no snapshot 'ts-missing'"):
        export_tau2(warehouse["path"], "ts-missing", tmp_path / "tau2")
    assert not (tmp_path / "hf").exists() and not (tmp_path / "tau2").exists()


def test_schema_rejects_a_task_without_user_scenario(warehouse: dict[str, Any], schema: dict[str, Any]) -> None:
    out = warehouse["root"] / "tau2-schema"
    export_tau2(warehouse["path"], "latest", out)
    task = json.loads((out / "weather" / "tasks.json").read_text())[0]
    broken = copy.deepcopy(task)
    del broken["user_scenario"]
    with pytest.raises(jsonschema.ValidationError, match="user_scenario"):
        jsonschema.validate(broken, schema, cls=jsonschema.Draft202012Validator)
    misspelt = copy.deepcopy(task)
    misspelt["evaluation_criteria"]["actions"][0]["argument"] = misspelt["evaluation_criteria"]["actions"][0].pop(
        "arguments")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(misspelt, schema, cls=jsonschema.Draft202012Validator)


def test_an_invalid_task_or_unpublished_snapshot_exports_nothing(warehouse: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "edited.duckdb"
    shutil.copyfile(warehouse["path"], path)
    con = duckdb.connect(str(path))
    try:
        task_id = con.execute("SELECT MIN(task_id) FROM tasks").fetchone()[0]
        con.execute("UPDATE tasks SET tau2_json = json_object('id', task_id) WHERE task_id = ?", [task_id])
    finally:
        con.close()
    with pytest.raises(TaskSchemaError, match=f"(?s)task {task_id} .*user_scenario"):
        export_tau2(path, "latest", tmp_path / "tau2")
    assert not (tmp_path / "tau2").exists()
    con = duckdb.connect(str(path))
    try:
        con.execute("UPDATE snapshots SET status = 'failed'")
    finally:
        con.close()
    with pytest.raises(WarehouseError, match="not published"):
        export_hf(path, warehouse["snapshot_id"], tmp_path / "hf")
