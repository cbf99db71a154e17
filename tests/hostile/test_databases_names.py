"""Hostile database counts and names: ``--tasks-per-database`` far below the task count asks for no database
that no shard runs on, a domain named like a database folder (``weather_db1``) is refused when its spec loads, and
``export`` reads a user's own domain with ``--domains-dir`` (without it: one line, exit 2, nothing written)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from domains.registry import spec_path
from pipeline.regenerate import RegenerateConfig, initial_plan, regenerate
from tests.hostile.conftest import spec_error, weather_raw
from tests.hostile.test_cli import assert_one_error_line, folder_state, run_cli

COUNTS = [  # tasks, tasks per database
    (40, 1), (300, 1), (40, 2), (40, 15), (1_000, 1), (5, 1), (1, 1), (2_000, 7), (100_000, 1), (100_000, 1_000),
]


@pytest.mark.parametrize(("tasks", "per_database"), COUNTS, ids=[f"{t}-tasks-{p}-per-db" for t, p in COUNTS])
def test_no_database_is_planned_without_a_shard_to_run_on_it(tasks: int, per_database: int) -> None:
    cfg = RegenerateConfig(domains=["weather", "sport"], tasks_per_domain=tasks, tasks_per_database=per_database)
    for domain in cfg.domains:
        plan = [s for s in initial_plan(cfg) if s.domain == domain]
        used = {s.seed for s in plan}
        assert 1 <= cfg.databases(domain) <= len(plan)
        assert used == {cfg.database_seed(k) for k in range(cfg.databases(domain))}  # every database runs a shard
        assert cfg.databases(domain) <= max(1, -(-tasks // per_database))


def test_forty_tasks_at_one_a_database_plan_two_databases_not_forty() -> None:
    cfg = RegenerateConfig(domains=["weather"], tasks_per_domain=40, tasks_per_database=1)
    assert cfg.databases("weather") == cfg.planned_shards("weather") == 2


COLLIDING = ["weather_db1", "weather_db0", "sport_db12", "x_db1", "my_domain_db999"]
NOT_COLLIDING = ["weather_db", "weatherdb1", "db1", "weather_dbx"]


@pytest.mark.parametrize("name", COLLIDING)
def test_a_domain_named_like_a_database_folder_is_refused_when_its_spec_loads(name: str) -> None:
    raw = weather_raw()
    raw["domain"] = name
    line = spec_error(raw)
    assert f"domain: {name!r} is written like a database folder" in line


@pytest.mark.parametrize("name", NOT_COLLIDING)
def test_names_that_only_look_close_still_load(name: str) -> None:
    from domains.spec import parse_spec

    raw = weather_raw()
    raw["domain"] = name
    assert parse_spec(raw, label="x.yaml").name == name


def test_a_colliding_users_domain_is_refused_by_the_cli_in_one_line(tmp_path: Path) -> None:
    raw = yaml.safe_load(spec_path("weather").read_text())
    raw["domain"] = "weather_db1"
    (tmp_path / "mine" / "weather_db1").mkdir(parents=True)
    (tmp_path / "mine" / "weather_db1" / "weather_db1.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    out = run_cli("tools", "weather_db1", "--domains-dir", str(tmp_path / "mine"))
    assert_one_error_line(out, 2, "written like a database folder")


@pytest.fixture(scope="module")
def own_domain_snapshot(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A published snapshot of a user's own domain (weather under the name skyline, 8 tasks)."""
    import os

    root = tmp_path_factory.mktemp("own-domain")
    raw = yaml.safe_load(spec_path("weather").read_text())
    raw["domain"] = "skyline"
    (root / "mine" / "skyline").mkdir(parents=True)
    (root / "mine" / "skyline" / "skyline.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    before = os.environ.get("TOOLSCALE_DOMAINS_DIR")
    os.environ["TOOLSCALE_DOMAINS_DIR"] = str(root / "mine")
    try:
        cfg = RegenerateConfig(domains=["skyline"], tasks_per_domain=8, workers=1, warehouse=str(root / "wh.duckdb"),
                               work_dir=str(root / "work"))
        result, _ = regenerate(cfg, progress=lambda _: None)
    finally:
        if before is None:
            os.environ.pop("TOOLSCALE_DOMAINS_DIR")
        else:
            os.environ["TOOLSCALE_DOMAINS_DIR"] = before
    assert result.status == "published", result.quality
    return {"root": root, "warehouse": root / "wh.duckdb", "mine": root / "mine"}


@pytest.mark.parametrize("fmt", ["tau2", "hf", "nemo-gym", "steps"])
def test_export_of_a_users_domain_without_domains_dir_is_one_line(fmt: str, own_domain_snapshot: dict[str, Path],
                                                                  tmp_path: Path) -> None:
    before = folder_state(own_domain_snapshot["warehouse"].parent / "work")
    out = run_cli("export", "latest", "--format", fmt, "--out", str(tmp_path / "out"),
                  "--warehouse", str(own_domain_snapshot["warehouse"]), env={"TOOLSCALE_DOMAINS_DIR": ""})
    assert_one_error_line(out, 2, "'skyline'", "--domains-dir")
    assert not (tmp_path / "out").exists()
    assert folder_state(own_domain_snapshot["warehouse"].parent / "work") == before


def test_export_takes_domains_dir(own_domain_snapshot: dict[str, Path], tmp_path: Path) -> None:
    out = run_cli("export", "latest", "--format", "tau2", "--out", str(tmp_path / "out"),
                  "--warehouse", str(own_domain_snapshot["warehouse"]),
                  "--domains-dir", str(own_domain_snapshot["mine"]))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "out" / "skyline" / "tasks.json").is_file()
    assert not any(p.name.startswith("skyline_db") for p in (tmp_path / "out").iterdir())
