"""``export --format steps``: one row per gold step of the dialogue oracle, split like the tasks; replaying a row's
conversation (its calls) plus its expected action reproduces the gold's state after that step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from domains.engine import ToolCall
from domains.registry import get_engine
from tests.snapshots import published_warehouse
from train.environment.tasks import load_training_set
from verifiers.replay import replay
from warehouse.gym_export import export_steps
from warehouse.tau2_package.build import task_splits

DOMAINS = ["weather", "finance"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("steps")
    warehouse = published_warehouse(root, DOMAINS, tasks_per_domain=12)
    summary = export_steps(warehouse, "latest", root / "steps")
    rows = [json.loads(line) for f in sorted((root / "steps").glob("*/*.jsonl")) for line in f.read_text().splitlines()]
    return {"summary": summary, "rows": rows, "tasks": {t.task_id: t for t in load_training_set(warehouse).tasks},
            "root": root}


def test_rows_count_every_gold_call_and_answer(exported: dict[str, Any]) -> None:
    rows, tasks = exported["rows"], exported["tasks"]
    calls = [r for r in rows if r["expected_action"]["type"] == "function_call"]
    answers = [r for r in rows if r["expected_action"]["type"] == "message"]
    assert len(calls) == sum(len(t.gold_calls) for t in tasks.values())
    assert len(answers) == len(tasks)
    summary = exported["summary"]
    assert summary["rows"] == len(rows)
    for domain in DOMAINS:
        mine = [r for r in rows if r["domain"] == domain]
        share = sum(r["mutating"] for r in mine) / len(mine)
        assert summary["per_domain"][domain]["mutating_share"] == round(share, 4)
        print(f"{domain}: {len(mine)} step rows, {share:.1%} mutating")
    test_ids = set(task_splits([{"id": t} for t in tasks])["test"])
    for row in rows:
        assert row["split"] == ("test" if row["task_id"] in test_ids else "train")
        assert Path(exported["root"] / "steps" / row["split"] / f"{row['domain']}.jsonl").exists()
        if row["expected_action"]["type"] == "message":
            assert all(v.lower() in row["expected_action"]["content"].lower() for v in row["communicate_info"])


def test_replaying_a_rows_prefix_and_action_reproduces_the_gold_state(exported: dict[str, Any]) -> None:
    checked = 0
    for row in exported["rows"]:
        action = row["expected_action"]
        if action["type"] != "function_call":
            continue
        task = exported["tasks"][row["task_id"]]
        made = [ToolCall(i["name"], json.loads(i["arguments"]))
                for i in row["responses_create_params"]["input"] if i.get("type") == "function_call"]
        made.append(ToolCall(action["name"], json.loads(action["arguments"])))
        assert row["mutating"] == (get_engine(task.domain, task.seed).tools[action["name"]].kind == "write")
        engine = get_engine(task.domain, task.seed)
        step = row["gold_step"]
        mine, gold = replay(engine, made), replay(engine, task.gold_calls[:step + 1])
        try:
            assert mine.all_ok and mine.db.fingerprint() == gold.db.fingerprint(), (row["task_id"], step)
        finally:
            mine.close()
            gold.close()
        checked += 1
    assert checked >= 50
