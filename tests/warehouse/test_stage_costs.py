"""What a regeneration costs: CPU seconds per stage stored with the snapshot, LLM spend beside it, and the cost per
verified task at a configurable CPU price whose default is marked as an assumption."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import pytest

from inference.records import CallRecord, write_llm_calls
from pipeline.stage_cost import CPU_PRICE_ENV, DEFAULT_CPU_USD_PER_HOUR, STAGES, cpu_price
from tests.snapshots import published_warehouse


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A published weather snapshot regenerated at 3.6 USD per CPU hour (so one CPU second costs 0.001 USD)."""
    folder = tmp_path_factory.mktemp("stage-costs")
    with pytest.MonkeyPatch.context() as env:
        env.setenv(CPU_PRICE_ENV, "3.6")
        path = published_warehouse(folder, ["weather"])
    con = duckdb.connect(path, read_only=True)
    try:
        sid, tasks, candidates = con.execute("SELECT snapshot_id, tasks, candidates FROM snapshots").fetchone()
        stages = con.execute("SELECT stage, cpu_s, wall_s, items, cpu_usd_per_hour, price_note FROM stage_costs "
                             "WHERE snapshot_id = ? ORDER BY position", [sid]).fetchall()
    finally:
        con.close()
    shards = [json.loads(p.read_text()) for p in (folder / "work").glob("*/shards/*.json")]
    return {"path": path, "sid": sid, "tasks": tasks, "candidates": candidates, "stages": stages, "shards": shards}


def test_every_stage_records_its_cpu_seconds(priced: dict[str, Any]) -> None:
    stages = {stage: (cpu, wall, items) for stage, cpu, wall, items, _, _ in priced["stages"]}
    assert [s[0] for s in priced["stages"]] == list(STAGES)
    assert all(cpu > 0 for cpu, _, _ in stages.values())
    assert stages["synthesis"][2] == stages["verification"][2] == stages["dedup"][2] == priced["candidates"]
    assert stages["gate"][2] == stages["publish"][2] == priced["tasks"]
    # the shards' own CPU clocks, per thread: never more than the wall time the shards took
    for stage in ("synthesis", "verification"):
        assert stages[stage][0] == pytest.approx(sum(s["cpu_s"][stage] for s in priced["shards"]), abs=1e-3)
    assert stages["synthesis"][0] + stages["verification"][0] <= sum(s["seconds"] for s in priced["shards"]) + 0.05
    assert stages["synthesis"][1] is None and stages["dedup"][1] > 0 and stages["gate"][1] > 0


def test_the_cost_per_verified_task_counts_cpu_and_llm_at_the_configured_price(priced: dict[str, Any],
                                                                              tmp_path: Path) -> None:
    assert {(price, note) for *_, price, note in priced["stages"]} == {(3.6, f"${CPU_PRICE_ENV}")}
    path = tmp_path / "wh.duckdb"
    path.write_bytes(Path(priced["path"]).read_bytes())
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    calls = [CallRecord(f"run-{i}", "run", now, "local", "m", "local", "paraphrase", f"h{i}", 100, 20, cost, 0.1,
                        False, 1, snapshot_id=priced["sid"]) for i, cost in enumerate((0.002, 0.003, None))]
    calls.append(CallRecord("other-0", "other", now, "local", "m", "local", "judge", "h", 5, 5, 9.0, 0.1, False, 1))
    write_llm_calls(path, calls)  # the last call names no snapshot: it is no part of this one's cost
    con = duckdb.connect(str(path), read_only=True)
    try:
        cost = con.execute("SELECT * FROM cost_per_verified_task WHERE snapshot_id = ?", [priced["sid"]]).fetchone()
        names = [d[0] for d in con.description]
        rows = con.execute("SELECT stage, resource, cpu_s, prompt_tokens, usd FROM pipeline_costs "
                           "WHERE snapshot_id = ? ORDER BY resource, stage", [priced["sid"]]).fetchall()
    finally:
        con.close()
    cost = dict(zip(names, cost))
    cpu_s = sum(s[1] for s in priced["stages"])
    assert cost["verified_tasks"] == priced["tasks"] and cost["cpu_s"] == pytest.approx(cpu_s)
    assert cost["cpu_usd"] == pytest.approx(cpu_s / 1000)  # 3.6 USD an hour is 0.001 USD a second
    assert cost["llm_calls"] == 3 and cost["prompt_tokens"] == 300 and cost["completion_tokens"] == 60
    assert cost["llm_usd"] == pytest.approx(0.005) and cost["unpriced_llm_calls"] == 1
    assert cost["total_usd"] == pytest.approx(cpu_s / 1000 + 0.005)
    assert cost["usd_per_verified_task"] == pytest.approx((cpu_s / 1000 + 0.005) / priced["tasks"])
    assert [r[:2] for r in rows] == [(s, "cpu") for s in sorted(STAGES)] + [("paraphrase", "llm")]
    assert rows[-1][3] == 300 and rows[-1][4] == pytest.approx(0.005)


def test_the_default_cpu_price_is_labelled_an_assumption(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CPU_PRICE_ENV, raising=False)
    default = cpu_price()
    assert default.usd_per_hour == DEFAULT_CPU_USD_PER_HOUR and default.note.startswith("assumption:")
    monkeypatch.setenv(CPU_PRICE_ENV, "0.12")
    assert cpu_price().usd_per_hour == 0.12 and "assumption" not in cpu_price().note
    for bad in ("abc", "-1", "nan", "inf"):
        monkeypatch.setenv(CPU_PRICE_ENV, bad)
        with pytest.raises(ValueError, match=CPU_PRICE_ENV):
            cpu_price()


def test_regenerate_refuses_a_cpu_price_that_is_not_one_before_any_work(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "toolscale.cli", "regenerate", "--domains", "weather",
                          "--tasks-per-domain", "5", "--warehouse", str(tmp_path / "wh.duckdb"),
                          "--work-dir", str(tmp_path / "work")], capture_output=True, text=True, timeout=300,
                         env={**os.environ, CPU_PRICE_ENV: "cheap"})
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and CPU_PRICE_ENV in out.stderr, out.stderr
    assert not (tmp_path / "wh.duckdb").exists() and not (tmp_path / "work").exists()
