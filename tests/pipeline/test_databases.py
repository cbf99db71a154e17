"""A domain asked for more tasks than one database holds gets several: its tasks spread over them, the warehouse
lists each, dedup compares only tasks of one database, and the tau2 export writes each as a domain tau2 runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from domains.registry import get_engine
from pipeline.regenerate import DATABASE_SEED_STRIDE, RegenerateConfig, initial_plan, regenerate
from synthesis.dedup import dedup
from tests.warehouse.tau2_export import run_tau2_check
from warehouse.exports import export_tau2

SMALL = {"domains": ["weather", "sport"], "tasks_per_domain": 40, "workers": 1, "base_per_shard": 8}
SEEDS = [0, DATABASE_SEED_STRIDE, 2 * DATABASE_SEED_STRIDE]


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("databases")
    cfg = RegenerateConfig(**SMALL, tasks_per_database=15, warehouse=str(root / "wh.duckdb"),
                           work_dir=str(root / "work"))
    result, summary = regenerate(cfg, progress=lambda _: None)
    assert result.status == "published", result.quality
    return {"root": root, "cfg": cfg, "summary": summary}


def test_shards_take_the_domains_databases_in_turn() -> None:
    cfg = RegenerateConfig(**SMALL, tasks_per_database=15)
    assert cfg.databases("weather") == 3  # 40 tasks, 15 per database
    plan = [s for s in initial_plan(cfg) if s.domain == "weather"]
    assert [s.seed for s in plan] == [SEEDS[i % 3] for i in range(len(plan))]
    assert len({s.shard_id for s in plan}) == len(plan)
    # a run that fits one database per domain is the run it was: the same shards, the same identity
    one = RegenerateConfig(**SMALL)
    assert {s.seed for s in initial_plan(one)} == {0} and "tasks_per_database" not in one.identity()
    assert "tasks_per_database" in cfg.identity() and cfg.config_hash() != one.config_hash()
    # the largest seed the CLI takes: the next databases' seeds wrap, within the warehouse's 32-bit column
    top = RegenerateConfig(**{**SMALL, "seed": 2**31 - 1}, tasks_per_database=15)
    assert [top.database_seed(k) for k in range(3)] == [2**31 - 1, DATABASE_SEED_STRIDE - 1, 2 * DATABASE_SEED_STRIDE - 1]
    # records from outside (tau2's retail) do not change with the seed: such a domain keeps its one database
    assert RegenerateConfig(domains=["retail"], tasks_per_domain=40, tasks_per_database=15).databases("retail") == 1
    with pytest.raises(ValueError, match="tasks_per_database must be a positive whole number"):
        RegenerateConfig(**SMALL, tasks_per_database=0)


def test_the_warehouse_lists_every_database_and_each_task_runs_on_its_own(spread: dict[str, Any]) -> None:
    con = duckdb.connect(spread["cfg"].warehouse, read_only=True)
    try:
        listed = con.execute("SELECT domain, db_index, db_seed, fingerprint, tasks FROM domain_databases "
                             "ORDER BY domain, db_index").fetchall()
        per_seed = dict(((d, s), n) for d, s, n in con.execute(
            "SELECT domain, seed, COUNT(*) FROM tasks GROUP BY ALL").fetchall())
        first = dict(con.execute("SELECT domain, db_seed FROM domains").fetchall())
    finally:
        con.close()
    assert [(d, i, s) for d, i, s, _, _ in listed] == [(d, i, SEEDS[i]) for d in ("sport", "weather")
                                                       for i in range(3)]
    for domain, _, seed, fingerprint, tasks in listed:
        assert fingerprint == get_engine(domain, seed).fingerprint
        assert tasks == per_seed[(domain, seed)] > 0
    assert first == {"sport": 0, "weather": 0}  # the domain's row names its first database
    # the databases differ: the same key holds another record on each
    rows = [get_engine("weather", s).fresh() for s in SEEDS]
    try:
        assert len({json.dumps(db.table_rows("stations")[:3], default=str) for db in rows}) == 3
    finally:
        for db in rows:
            db.close()


def test_the_same_gold_and_words_on_two_databases_are_not_duplicates() -> None:
    def record(i: int, seed: int) -> dict[str, Any]:
        return {"task_id": f"t{i}", "domain": "weather", "seed": seed, "accepted": True, "evolved_from": None,
                "canonical_gold": "[[\"get_station\", {\"station_id\": \"ST0001\"}]]",
                "instruction": "What is the weather at station ST0001?"}

    records = [record(0, 0), record(1, DATABASE_SEED_STRIDE), record(2, 0)]
    counts = dedup(records, 0.9, embed=lambda texts: pytest.fail("nothing can collide across databases"))
    assert counts["exact_duplicate"] == 1 and [r["accepted"] for r in records] == [True, True, False]


def test_the_tau2_export_writes_a_domain_per_database_that_tau2_scores(spread: dict[str, Any]) -> None:
    root = spread["root"]
    summary = export_tau2(root / "wh.duckdb", "latest", root / "tau2")
    folders = summary["domains"]
    assert sorted(folders) == ["sport", "sport_db1", "sport_db2", "weather", "weather_db1", "weather_db2"]
    assert sum(f["tasks"] for f in folders.values()) == summary["rows"] == spread["summary"]["tasks"]
    for name, info in folders.items():
        assert info["tau2_domain"] == f"toolscale_{name}"
        assert info["db_seed"] == SEEDS[int(name[-1]) if "_db" in name else 0]
        db = json.loads((root / "tau2" / name / "db.json").read_text())
        with get_engine(info["domain"], info["db_seed"]).fresh() as fresh:
            assert db == json.loads(json.dumps({t: fresh.table_rows(t) for t in db}, default=str)), name
    # tau2 itself registers the second database's package under its own name and scores its golds 1
    work = root / "check"
    work.mkdir()
    run = run_tau2_check(root / "tau2", ["weather_db1", "sport_db2"], work, "--min-tasks", "1")
    assert run["rc"] == 0 and run["report"]["ok"], json.dumps(run["report"], indent=1)[:3000]
    for name in ("weather_db1", "sport_db2"):
        r = run["report"]["domains"][name]
        assert r["tau2_domain"] == f"toolscale_{name}" and r["evaluated"] > 0
        assert r["gold"] == {"1.0": r["evaluated"]} and r["empty"] == {"0.0": r["evaluated"]}
