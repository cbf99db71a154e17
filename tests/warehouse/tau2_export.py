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


def compare_telecom_replays(exported: dict[str, Any], tau2_run: dict[str, Any]) -> tuple[int, int]:
    """Assert that tau2's replay of each scored telecom task ends in the engine's end state on both sides (operator
    and device), with the same observations, and that the altered gold gets the verifier's reward; returns (tasks
    compared, altered golds compared)."""
    from domains.engine import ToolCall
    from domains.registry import get_engine, get_spec
    from verifiers.replay import replay
    from verifiers.types import Trajectory
    from verifiers.verify import outcome_reward
    from warehouse.tau2_package.build import keyed_db

    spec, engine = get_spec("telecom"), get_engine("telecom", exported["seed"])
    agent_tables = [t.name for t in spec.side_tables("agent")]
    user_tables = [t.name for t in spec.side_tables("user")]
    compared = altered = 0
    for tau2_id, tau2_replay in tau2_run["replays"]["telecom"].items():
        task = exported["tasks"][tau2_id]
        verifiable = task.verifiable()
        ours = replay(engine, task.gold_calls, verifiable.setup_calls)
        try:
            assert all(r.ok for r in ours.setup_results), tau2_id
            rows = {t.name: ours.db.table_rows(t.name) for t in spec.tables}
            final = keyed_db(spec, rows)
            assert tau2_replay["final_db"] == {t: final[t] for t in agent_tables}, tau2_id
            assert tau2_replay["final_user_db"] == {t: final[t] for t in user_tables}, tau2_id
            assert [_json(o) for o in tau2_replay["observations"]] == \
                [_json(observation(r)) for r in ours.results], tau2_id
        finally:
            ours.db.close()
        compared += 1
        change = tau2_replay["altered"]
        if change is None:
            continue
        calls = list(task.gold_calls)
        side = calls[change["position"]].side
        if change.get("dropped"):  # a gold whose writes take no argument: its last write left undone
            del calls[change["position"]]
        else:
            calls[change["position"]] = ToolCall(change["tool"], change["arguments"], side)
        said = " ".join(verifiable.communicate_info) or "Done."
        assert outcome_reward(verifiable, Trajectory(tuple(calls), said)) == change["reward"], tau2_id
        altered += 1
    return compared, altered


def _json(text: str) -> Any:
    return text if text.startswith("Error:") else json.loads(text)
