"""Synthesised telecom tasks (a phone broken by the task's setup calls, diagnosed by the agent and fixed by the user
with the agent's guidance, or with an account change the agent makes) run in tau2 like its own: the export's
initialization actions break the phone in tau2's environment, tau2's ``evaluate_simulation`` scores the gold of
agent and user calls 1.0, the empty trajectory 0 and the gold with one argument of its last write changed 0 (its
last write left undone, where no write takes an argument), and
both sides' end states equal the project's engine's (and the altered gold gets the verifier's reward). Measured on
the 2-core machine: about 60 s."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest

from domains import external
from domains.registry import get_spec
from pipeline.regenerate import RegenerateConfig, regenerate
from tests.warehouse.tau2_export import compare_telecom_replays, run_tau2_check, snapshot_seeds
from train.environment.tasks import load_training_set
from warehouse.exports import export_tau2

pytestmark = pytest.mark.skipif(not all(external.available(s) for s in get_spec("telecom").sources.values()),
                                reason="tau2's telecom data is not installed (scripts/setup_tau2.sh)")

MIN_TASKS = 30


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("tau2-telecom-synthesised")
    cfg = RegenerateConfig(domains=["telecom"], tasks_per_domain=45, workers=1, imported_limit=1,
                           warehouse=str(root / "wh.duckdb"), work_dir=str(root / "work"))
    result, _ = regenerate(cfg, progress=lambda _: None)
    assert result.status == "published", result
    export_tau2(root / "wh.duckdb", "latest", root / "tau2")
    con = duckdb.connect(str(root / "wh.duckdb"), read_only=True)
    try:
        ids = dict(con.execute("SELECT json_extract_string(tau2_json, '$.id'), task_id FROM tasks").fetchall())
    finally:
        con.close()
    stored = {t.task_id: t for t in load_training_set(cfg.warehouse, domains=["telecom"]).tasks}
    tasks = {tau2_id: stored[task_id] for tau2_id, task_id in ids.items()}
    return {"root": root, "out": root / "tau2", "seed": snapshot_seeds(root / "wh.duckdb")["telecom"], "tasks": tasks,
            "synthesised": {i for i, t in tasks.items() if "-tau2-" not in t.task_id}}


@pytest.fixture(scope="module")
def tau2_run(exported: dict[str, Any]) -> dict[str, Any]:
    return run_tau2_check(exported["out"], ["telecom"], exported["root"], "--min-tasks", str(MIN_TASKS))


def test_the_synthesised_tasks_are_dual_control(exported: dict[str, Any]) -> None:
    synthesised = [exported["tasks"][i] for i in exported["synthesised"]]
    assert len(synthesised) >= MIN_TASKS
    for task in synthesised:
        verifiable = task.verifiable()
        assert verifiable.setup_calls[0].name == "set_user_info" and verifiable.env_assertions, task.task_id
        assert any(c.side == "user" for c in task.gold_calls), task.task_id
        assert task.gold_calls[0].name == "get_customer_by_name", task.task_id  # identified first
    # every outcome of the three intents is among them: three phone fixes, a refuel and roaming on the line
    agent_writes = {c.name for t in synthesised for c in t.gold_calls if c.side == "agent"}
    user_writes = {c.name for t in synthesised for c in t.gold_calls if c.side == "user"}
    assert {"refuel_data", "enable_roaming"} <= agent_writes
    assert {"toggle_airplane_mode", "reseat_sim_card", "toggle_data", "toggle_roaming"} <= user_writes


def test_tau2_scores_gold_one_empty_zero_and_altered_zero(exported: dict[str, Any], tau2_run: dict[str, Any]) -> None:
    report = tau2_run["report"]
    assert tau2_run["rc"] == 0 and report["ok"], str(report)[:4000]
    r = report["domains"]["telecom"]
    evaluated = r["evaluated"]
    assert evaluated >= len(exported["synthesised"]) >= MIN_TASKS
    assert r["gold"] == {"1.0": evaluated} and r["empty"] == {"0.0": evaluated}
    # every gold has a one-step-different world: an argument of its last write changed (a refuel, roaming on the
    # line), or, where no write takes one (a phone toggle), its last write left undone; only the one imported task
    # (judged by its assertions alone) may have none
    altered = sum(r["altered"].values())
    assert r["altered"] == {"0.0": altered} and altered >= len(exported["synthesised"])
    assert altered + sum(r["altered_excluded"].values()) == evaluated
    assert r["altered_notes"].get("no write takes an argument: the last write is left undone", 0) >= MIN_TASKS // 2


def test_tau2_end_states_match_the_engine(exported: dict[str, Any], tau2_run: dict[str, Any]) -> None:
    compared, altered = compare_telecom_replays(exported, tau2_run)
    assert compared >= MIN_TASKS and altered >= len(exported["synthesised"])


def test_the_hf_export_keeps_each_calls_side_and_the_start(exported: dict[str, Any]) -> None:
    """The fine-tuning export of the same snapshot: a user's call is marked as theirs, the setup calls and the
    assertions travel with the task, and its gold episode (the agent guiding the user) was verified."""
    import json

    from datasets import load_from_disk

    from warehouse.exports import export_hf

    out = exported["root"] / "hf"
    export_hf(exported["root"] / "wh.duckdb", "latest", out)
    rows = [r for split in load_from_disk(str(out / "dataset")).values() for r in split]
    synthesised = [r for r in rows if r["source"] == "synthesised"]
    assert len(synthesised) >= MIN_TASKS
    user_tools = {t.name for t in get_spec("telecom").side_tools("user")}
    for row in synthesised:
        assert all((c["side"] == "user") == (c["name"] in user_tools) for c in row["gold_calls"]), row["task_id"]
        assert row["verification"]["setup_calls"][0]["name"] == "set_user_info"
        assert row["verification"]["env_assertions_json"] and "assertions" in row["verification"]["criteria"]
        assert json.loads(row["verification"]["env_assertions_json"][0])["func_name"].startswith("assert_")
        assert row["messages_verified"], row["task_id"]
