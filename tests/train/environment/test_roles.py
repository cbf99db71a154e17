"""The user's role survives a real regeneration as data: warehouse tau2 JSON -> training tasks, the agent's tool
menu, the audit and the tau2 export; snapshots written before keep working from the persona text."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import duckdb
import pytest

from domains.registry import get_spec
from synthesis.realism_audit import staff_only_tools
from toolscale.cli_audit import recompute
from tests.snapshots import published_warehouse
from train.environment.env import role_tools
from train.environment.tasks import TrainingTask, load_training_set
from warehouse.exports import export_tau2
from warehouse.reader import connect_readonly, resolve_snapshot


@pytest.fixture(scope="module")
def medicine(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A published medicine snapshot (20 tasks asked; about 10 s)."""
    return published_warehouse(tmp_path_factory.mktemp("roles"), ["medicine"])


def _by_role(tasks: list[TrainingTask]) -> dict[str | None, list[TrainingTask]]:
    out: dict[str | None, list[TrainingTask]] = {}
    for t in tasks:
        out.setdefault(t.role, []).append(t)
    return out


def test_training_tasks_read_the_role_from_the_stored_scenario(medicine: str) -> None:
    roles = _by_role(load_training_set(medicine).tasks)
    assert set(roles) == {"customer", "staff"}
    assert all(t.user_scenario["role"] == t.role for ts in roles.values() for t in ts)  # type: ignore[index]
    assert all(", a doctor: " in t.user_scenario["persona"] for t in roles["staff"])  # type: ignore[index]
    assert not any("a staff" in json.dumps(t.user_scenario) for ts in roles.values() for t in ts)
    staff_only = staff_only_tools(get_spec("medicine"))
    assert set(role_tools(roles["staff"][0]) or ()) & staff_only  # a doctor is offered the clinicians' tools
    assert not set(role_tools(roles["customer"][0]) or ()) & staff_only


def test_the_audit_and_the_tau2_export_use_the_role(medicine: str, tmp_path: Path) -> None:
    con = connect_readonly(medicine)
    try:
        row = recompute(con, resolve_snapshot(con, "latest"))[0]
    finally:
        con.close()
    assert row["tasks"] >= 20 and row["staff_only_calls"] == 0  # the doctors' own tools are no customer's slip
    export_tau2(medicine, "latest", tmp_path / "tau2")  # validates every task against the tau2 schema
    exported = json.loads((tmp_path / "tau2" / "medicine" / "tasks.json").read_text())
    assert {t["user_scenario"]["role"] for t in exported} == {"customer", "staff"}


def test_a_snapshot_written_before_the_role_field_still_has_roles(medicine: str, tmp_path: Path) -> None:
    old = tmp_path / "old.duckdb"
    shutil.copy(medicine, old)
    con = duckdb.connect(str(old))
    try:  # as the old renderer wrote them: no role field, the role word in the persona
        for task_id, tau2_json in con.execute("SELECT task_id, tau2_json FROM tasks").fetchall():
            task = json.loads(tau2_json)
            scenario = task["user_scenario"]
            role = scenario.pop("role")
            scenario["persona"] = re.sub(r", an? [a-z ]+: ", f", a {role}: ", scenario["persona"], count=1)
            con.execute("UPDATE tasks SET tau2_json = ? WHERE task_id = ?", [json.dumps(task), task_id])
    finally:
        con.close()
    fresh = {t.task_id: t.role for t in load_training_set(medicine).tasks}
    assert {t.task_id: t.role for t in load_training_set(old).tasks} == fresh
