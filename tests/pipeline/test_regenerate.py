"""The main job end to end: deterministic, resumable after SIGKILL, and safe for concurrent readers."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pipeline.regenerate import RegenerateConfig, finalize, initial_plan, regenerate

SMALL = {"domains": ["weather", "sport"], "tasks_per_domain": 40, "workers": 1, "base_per_shard": 8}


def _cfg(tmp: Path, **over: Any) -> RegenerateConfig:
    return RegenerateConfig(**{**SMALL, **over}, warehouse=str(tmp / "wh.duckdb"), work_dir=str(tmp / "work"))


def _hashes(warehouse: str, snapshot_id: str) -> list[str]:
    con = duckdb.connect(warehouse, read_only=True)
    try:
        return [r[0] for r in con.execute("SELECT content_hash FROM tasks WHERE snapshot_id = ? ORDER BY content_hash",
                                          [snapshot_id]).fetchall()]
    finally:
        con.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[RegenerateConfig, Any, dict[str, Any]]:
    cfg = _cfg(tmp_path_factory.mktemp("reference"))
    result, summary = regenerate(cfg, progress=lambda m: None)
    return cfg, result, summary


def test_small_regeneration_publishes_a_gated_snapshot(reference: Any) -> None:
    cfg, result, summary = reference
    assert result.status == "published", result.quality
    assert all(summary["per_domain"][d] >= 40 for d in ("weather", "sport"))
    assert summary["gold_errors"] == 0 and summary["noop_passes"] == 0
    assert summary["median_kill_rate"] >= 0.95
    assert summary["evolved_fraction"] >= 0.3
    # the bf16 screen's figures: of the tasks that can collide, only some are embedded again in fp32
    assert 0 <= summary["dedup_screen"]["embedded_exact"] <= summary["dedup"]["compared"]
    con = duckdb.connect(cfg.warehouse, read_only=True)
    try:
        n, distinct = con.execute("SELECT COUNT(*), COUNT(DISTINCT task_id) FROM latest_tasks").fetchone()
        assert n == distinct == summary["tasks"]
        rejected = con.execute("SELECT SUM(candidates) FROM rejection_reasons").fetchone()[0]
        assert rejected == summary["candidates"] - summary["tasks"]  # nothing disappears silently
        roots = con.execute("SELECT COUNT(*) FROM evolution_lineage WHERE depth = 2 AND root_id != parent_id"
                            ).fetchone()[0]
        assert roots > 0
    finally:
        con.close()


def test_same_seed_and_code_give_identical_task_hashes(reference: Any, tmp_path: Path) -> None:
    cfg, result, _ = reference
    again, _ = regenerate(_cfg(tmp_path), progress=lambda m: None)
    assert again.snapshot_id == result.snapshot_id
    assert _hashes(str(tmp_path / "wh.duckdb"), again.snapshot_id) == _hashes(cfg.warehouse, result.snapshot_id)
    other, _ = regenerate(_cfg(tmp_path / "other", seed=1), progress=lambda m: None)
    assert set(_hashes(str(tmp_path / "other" / "wh.duckdb"), other.snapshot_id)).isdisjoint(
        _hashes(cfg.warehouse, result.snapshot_id))


def test_rerunning_a_published_config_is_a_no_op(reference: Any) -> None:
    cfg, result, _ = reference
    again, _ = regenerate(cfg, progress=lambda m: None)
    assert again.already_existed and again.snapshot_id == result.snapshot_id


KILLER = """
import os, signal, sys
from pipeline.regenerate import RegenerateConfig, finalize, initial_plan, regenerate
import pipeline.regenerate as job
cfg = RegenerateConfig(**json.loads(sys.argv[1]))
mode = sys.argv[2]
seen = []
def progress(message):
    print(message, flush=True)
    seen.append(message)
    if mode == "shards" and sum(m.startswith("shard ") for m in seen) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
if mode == "publish":
    def killing_suite(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    job.run_quality_suite = killing_suite
regenerate(cfg, progress=progress)
"""


def _run_and_kill(cfg: RegenerateConfig, mode: str) -> str:
    params = {k: getattr(cfg, k) for k in (*SMALL, "seed", "warehouse", "work_dir")}
    proc = subprocess.run([sys.executable, "-c", "import json\n" + KILLER, json.dumps(params), mode],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    return proc.stdout


def test_sigkill_mid_shards_then_rerun_matches_an_uninterrupted_run(reference: Any, tmp_path: Path) -> None:
    ref_cfg, ref_result, _ = reference
    cfg = _cfg(tmp_path)
    _run_and_kill(cfg, "shards")
    finished = {p: p.stat().st_mtime_ns for p in cfg.shard_dir().glob("*.json")}
    assert len(finished) == 3 and not Path(cfg.warehouse).exists()
    messages: list[str] = []
    result, _ = regenerate(cfg, progress=messages.append)
    resumed = [m for m in messages if "resumed from its file" in m]
    assert len(resumed) == 3  # the shards that finished before the kill were loaded, not recomputed
    assert all(p.stat().st_mtime_ns == t for p, t in finished.items())
    assert result.snapshot_id == ref_result.snapshot_id
    assert _hashes(cfg.warehouse, result.snapshot_id) == _hashes(ref_cfg.warehouse, ref_result.snapshot_id)
    con = duckdb.connect(cfg.warehouse, read_only=True)
    try:
        assert con.execute("SELECT COUNT(*) FROM snapshots").fetchone()[0] == 1
        n, distinct = con.execute("SELECT COUNT(*), COUNT(DISTINCT task_id) FROM tasks").fetchone()
        assert n == distinct
    finally:
        con.close()


def test_sigkill_while_publishing_leaves_the_warehouse_as_it_was(reference: Any, tmp_path: Path) -> None:
    _, ref_result, _ = reference
    cfg = _cfg(tmp_path)
    first, _ = regenerate(_cfg(tmp_path, seed=3), progress=lambda m: None)  # an existing published snapshot
    before = Path(cfg.warehouse).read_bytes()
    _run_and_kill(cfg, "publish")
    assert Path(cfg.warehouse).read_bytes() == before  # the half-built copy never replaced the file
    assert list(tmp_path.glob("wh.duckdb.tmp-*"))  # ... it was left behind as a temporary file
    result, _ = regenerate(cfg, progress=lambda m: None)
    assert result.status == "published" and result.snapshot_id == ref_result.snapshot_id
    assert not list(tmp_path.glob("wh.duckdb.tmp-*"))
    con = duckdb.connect(cfg.warehouse, read_only=True)
    try:
        rows = con.execute("SELECT snapshot_id, parent_id, status FROM snapshots ORDER BY created_at").fetchall()
        assert rows == [(first.snapshot_id, None, "published"), (result.snapshot_id, first.snapshot_id, "published")]
    finally:
        con.close()


def _poll(warehouse: str, stop: Any, out: Any) -> None:
    views = 0
    while not stop.is_set():
        if not os.path.exists(warehouse):
            continue
        try:
            con = duckdb.connect(warehouse, read_only=True)
        except duckdb.Error:
            continue
        try:
            for sid, status, tasks in con.execute("SELECT snapshot_id, status, tasks FROM snapshots").fetchall():
                n = con.execute("SELECT COUNT(*) FROM tasks WHERE snapshot_id = ?", [sid]).fetchone()[0]
                if status != "published" or n != tasks:
                    out.put(f"partial: {sid} {status} {n}/{tasks}")
            views += 1
        finally:
            con.close()
    out.put(views)


def test_a_reader_never_sees_a_partial_snapshot(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, domains=["weather"])
    regenerate(cfg, progress=lambda m: None)
    ctx = mp.get_context("spawn")
    stop, out = ctx.Event(), ctx.Queue()
    reader = ctx.Process(target=_poll, args=(cfg.warehouse, stop, out))
    reader.start()
    time.sleep(3)
    regenerate(_cfg(tmp_path, domains=["weather"], seed=5), progress=lambda m: None)
    time.sleep(0.5)
    stop.set()
    reader.join(60)
    seen = []
    while not out.empty():
        seen.append(out.get())
    partial = [s for s in seen if isinstance(s, str)]
    views = [s for s in seen if isinstance(s, int)]
    assert partial == []
    assert views and views[0] > 5  # the reader really was reading throughout


def test_the_documented_example_queries_run(reference: Any) -> None:
    cfg, _, _ = reference
    doc = (Path(__file__).resolve().parents[2] / "docs" / "warehouse.md").read_text()
    queries = [block.split("```", 1)[0] for block in doc.split("```sql\n")[1:]]
    assert len(queries) >= 5
    con = duckdb.connect(cfg.warehouse, read_only=True)
    try:
        for sql in queries:
            con.execute(sql).fetchall()
        assert con.execute(queries[0]).fetchall()  # per-domain summary of the latest snapshot is not empty
    finally:
        con.close()


def test_a_run_with_top_up_rounds_publishes_what_one_round_of_the_same_shards_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an optimistic yield plans too few shards, so the run tops up (and dedups each round's shards alone)
    monkeypatch.setattr("pipeline.regenerate.DOMAIN_TASKS_PER_BASE", {"weather": 3.0})
    lines: list[str] = []
    topped, summary = regenerate(_cfg(tmp_path / "a", domains=["weather"], tasks_per_domain=60), progress=lines.append)
    assert any(line.startswith("short of the requested counts") for line in lines)
    final = summary["shards"]
    assert final > 3  # ceil(60 / (8 * 3.0)) shards were planned first
    # the plan that needs no top-up: exactly the shards the first run ended with
    monkeypatch.setattr("pipeline.regenerate.DOMAIN_TASKS_PER_BASE", {"weather": 60 / (8 * final) * 1.0001})
    lines.clear()
    one, again = regenerate(_cfg(tmp_path / "b", domains=["weather"], tasks_per_domain=60), progress=lines.append)
    assert not any(line.startswith("short of the requested counts") for line in lines)
    assert again["shards"] == final
    assert one.snapshot_id == topped.snapshot_id
    assert again["dedup"] == summary["dedup"] and again["rejection_reasons"] == summary["rejection_reasons"]


def test_the_run_holding_slim_records_writes_the_rows_a_run_holding_whole_records_does(
        reference: Any, tmp_path: Path) -> None:
    # a regeneration holds only what dedup and the gate read, and reads the rest back from the shard files as
    # it writes; loading whole records (finalize without deduped records) must write the very same rows
    cfg, result, summary = reference
    shards = initial_plan(cfg)
    assert len(shards) == summary["shards"]  # the reference needed no top-up: these are all its shards
    whole = replace(cfg, warehouse=str(tmp_path / "whole.duckdb"))
    again, _ = finalize(whole, shards, time.perf_counter(), progress=lambda m: None)
    assert again.snapshot_id == result.snapshot_id and again.status == result.status == "published"
    con = duckdb.connect(str(tmp_path / "whole.duckdb"))
    try:
        con.execute("ATTACH ? AS slim (READ_ONLY)", [cfg.warehouse])
        for table in ("tasks", "gold_calls", "verdicts", "task_rules", "rejections"):
            rows = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            assert rows > 0, table
            assert rows == con.execute(f"SELECT count(*) FROM slim.{table}").fetchone()[0], table
            differ = con.execute(f"SELECT count(*) FROM (SELECT * FROM {table} EXCEPT ALL "
                                 f"SELECT * FROM slim.{table})").fetchone()[0]
            assert differ == 0, f"{differ} of {rows} {table} rows differ"
    finally:
        con.close()
