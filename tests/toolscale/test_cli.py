"""The ``toolscale`` command as a user runs it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from domains.registry import TABLE5, data_available

CLI = [sys.executable, "-m", "toolscale.cli"]
REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


def test_domains_json_reports_every_domain_at_or_above_table5() -> None:
    out = _run("domains", "--json")
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    rows = [r for r in listed if r["domain"] in TABLE5]  # imported domains (tau2's retail) are listed too
    assert {r["domain"] for r in rows} == set(TABLE5) and len(rows) == 10
    assert {r["domain"] for r in listed} - set(TABLE5) >= {"retail"}
    assert set(rows[0]) == {"domain", "tables", "rows", "read_tools", "write_tools", "external_data", "install"}
    assert sum(r["read_tools"] + r["write_tools"] for r in rows) >= 197
    assert sum(r["rows"] for r in rows) >= 7048
    for r in rows:
        tools, db_rows, _ = TABLE5[r["domain"]]
        assert r["read_tools"] + r["write_tools"] >= tools and r["rows"] >= db_rows


def test_domains_table_has_a_total_line() -> None:
    out = _run("domains")
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and any(line.startswith("total") for line in lines)
    after = lines[next(i for i, line in enumerate(lines) if line.startswith("total")) + 1:]
    assert all(line.startswith("note: ") for line in after)  # only notes on missing external data follow


def test_domains_says_when_external_data_is_missing_and_how_to_install_it(tmp_path: Path) -> None:
    """A domain seeded from external data (as retail is from tau2's db.json) whose file is not on this machine."""
    spec = (REPO / "domains" / "retail" / "retail.yaml").read_text()
    spec = spec.replace("domain: retail", "domain: shopfront", 1)
    spec = re.sub(r"package: tau2\n    resource: [^\n]+", "path: absent/db.json", spec)  # under the named site
    (tmp_path / "site").mkdir()
    (tmp_path / "mine" / "shopfront").mkdir(parents=True)
    (tmp_path / "mine" / "shopfront" / "shopfront.yaml").write_text(spec)
    env = {"TOOLSCALE_DOMAINS_DIR": str(tmp_path / "mine"), "TOOLSCALE_EXTERNAL_SITE": str(tmp_path / "site")}
    listed = {r["domain"]: r for r in json.loads(_run("domains", "--json", env=env).stdout)}
    assert listed["shopfront"]["external_data"] == "missing" and listed["shopfront"]["rows"] is None
    assert "absent/db.json" in listed["shopfront"]["install"] and "setup_tau2.sh" in listed["shopfront"]["install"]
    assert listed["retail"]["external_data"] == ("installed" if data_available("retail") else "missing")
    assert listed["weather"]["external_data"] is None and listed["weather"]["install"] is None
    table = _run("domains", env=env)
    assert table.returncode == 0
    row = next(line for line in table.stdout.splitlines() if line.startswith("shopfront"))
    assert row.split()[2] == "-"
    note = table.stdout.splitlines()[-1]
    assert note.startswith("note: shopfront shows '-' rows because its external data is not installed")
    assert "setup_tau2.sh" in note


def test_call_prints_the_result_or_the_error() -> None:
    ok = _run("call", "weather", "get_alert", "--args", '{"alert_id": "AL0002"}')
    assert ok.returncode == 0 and json.loads(ok.stdout)["alert_id"] == "AL0002"
    bad = _run("call", "weather", "cancel_alert", "--args", '{"alert_id": "AL0001"}')
    assert bad.returncode == 1 and "Alert AL0001 is not active." in bad.stderr
    notjson = _run("call", "weather", "get_alert", "--args", "{alert_id: AL0002")
    assert notjson.returncode == 2 and "not valid JSON" in notjson.stderr
    unknown = _run("call", "atlantis", "get_alert")
    assert unknown.returncode == 2 and "unknown domain 'atlantis'" in unknown.stderr


def test_warehouse_commands_without_a_warehouse_say_so(tmp_path: Path) -> None:
    out = _run("snapshots", "--warehouse", str(tmp_path / "none.duckdb"))
    assert out.returncode == 2 and "no warehouse at" in out.stderr


@pytest.mark.slow
def test_regenerate_then_snapshots_then_export(tmp_path: Path) -> None:
    env = {"TOOLSCALE_WAREHOUSE": str(tmp_path / "wh.duckdb"), "PREFECT_HOME": str(tmp_path / "prefect")}
    out = _run("regenerate", "--domains", "weather", "--tasks-per-domain", "25", "--work-dir", str(tmp_path / "work"),
               env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "published" in out.stdout and "weather" in out.stdout
    assert "shard weather-s0-0000" in out.stdout + out.stderr  # progress is visible
    snaps = json.loads(_run("snapshots", "--json", env=env).stdout)
    assert len(snaps) == 1
    snap = snaps[0]
    for key in ("snapshot_id", "status", "tasks", "per_domain", "gold_errors", "noop_passes", "median_kill_rate",
                "evolved_fraction", "yield", "seconds"):
        assert key in snap
    assert snap["status"] == "published" and snap["per_domain"]["weather"] >= 25
    exported = _run("export", "latest", "--format", "tau2", "--out", str(tmp_path / "tau2"), env=env)
    assert exported.returncode == 0, exported.stderr
    tasks = json.loads((tmp_path / "tau2" / "weather" / "tasks.json").read_text())
    assert len(tasks) == snap["tasks"]
    missing = _run("export", "ts-nope", "--format", "hf", "--out", str(tmp_path / "hf"), env=env)
    assert missing.returncode == 2 and "ts-nope" in missing.stderr
