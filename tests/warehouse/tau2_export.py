"""Helpers of the tests that run an exported snapshot inside tau2 (scripts/tau2_check.py in .venv-tau2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

from tests.tau2_venv import ensure_tau2_venv

ROOT = Path(__file__).resolve().parents[2]


def run_tau2_check(export_dir: Path, domains: list[str], work: Path, *options: str) -> dict[str, Any]:
    """scripts/tau2_check.py on ``export_dir`` in tau2's venv: its exit code, JSON report and replays."""
    python = ensure_tau2_venv()  # created by the setup script when missing (tests/tau2_venv.py)
    replays = work / "replays.json"
    # no PYTHONPATH and a neutral cwd: the package must work with tau2, sqlite3 and jsonschema alone
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    started = time.perf_counter()
    proc = subprocess.run([str(python), str(ROOT / "scripts" / "tau2_check.py"), str(export_dir), *domains,
                           "--replays", str(replays), *options],
                          capture_output=True, text=True, cwd=work, env=env, timeout=600)
    assert proc.stdout, f"tau2_check.py printed nothing (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    report = json.loads(proc.stdout)
    print(f"tau2 check: {time.perf_counter() - started:.1f}s, " + json.dumps(
        {d: {k: v for k, v in r.items() if k != "failures"} for d, r in report["domains"].items()}), file=sys.stderr)
    return {"rc": proc.returncode, "report": report, "replays": json.loads(replays.read_text())}


def observation(result: Any) -> str:
    """What tau2 shows the agent for an engine result: the JSON output, or ``Error: <message>``."""
    return result.to_json() if result.ok else f"Error: {result.error}"


def snapshot_seeds(warehouse: Path) -> dict[str, int]:
    """The database seed of each domain of the latest snapshot's ``domains`` rows."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return dict(con.execute("SELECT domain, db_seed FROM domains").fetchall())
    finally:
        con.close()
