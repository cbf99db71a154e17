"""``evaluate-orchestrator`` through ``toolscale evaluate`` against the REAL local llama.cpp server (SmolLM2-135M)
on a small derived split: the report table, both PNGs and the warehouse rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python[server] is not installed (pip install -e .[llm])")

from inference.endpoints import Endpoint  # noqa: E402
from inference.pricing import HELDOUT_NAME  # noqa: E402
from tests.train.llm_registry import write_registry  # noqa: E402
from toolscale.cli import main  # noqa: E402
from train.evaluation.evaluate import EvalConfig, evaluate_orchestrator, evaluation_split  # noqa: E402
from train.environment.tasks import load_training_set  # noqa: E402
from warehouse.errors import WarehouseError  # noqa: E402
from warehouse.tau2_package.build import task_splits  # noqa: E402

pytestmark = pytest.mark.llm
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def served(eval_server: Endpoint) -> Endpoint:
    return eval_server


def test_the_derived_split_is_the_tau2_export_rule(snapshot_warehouse: str) -> None:
    data = load_training_set(snapshot_warehouse)
    split, rule = evaluation_split(snapshot_warehouse, data.snapshot_id, data.tasks)
    expected = task_splits([{"id": t.task_id} for t in data.tasks])["test"]
    assert rule == "derived" and [t.task_id for t in split] == expected
    assert 0 < len(split) < len(data.tasks)


def test_toolscale_evaluate_reports_plots_and_stores_rows(served: Endpoint, snapshot_warehouse: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = tmp_path / "wh.duckdb"
    shutil.copyfile(snapshot_warehouse, warehouse)
    registry = write_registry(tmp_path, served)
    code = main(["evaluate", "local", "--registry", str(registry), "--warehouse", str(warehouse), "--limit", "3",
                 "--max-turns", "1", "--max-tokens", "16", "--timeout", "180",
                 "--out", str(tmp_path / "plots"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "accuracy" in out and "preference score (Eq. 6)" in out and HELDOUT_NAME in out
    con = duckdb.connect(str(warehouse), read_only=True)
    run = con.execute("SELECT run_id, episodes, accuracy, schedules_json, plots_json, calls_per_tool_json, "
                      "preference_score, split_rule FROM eval_runs").fetchone()
    episodes = con.execute("SELECT task_id, schedule, solved, ended_by, latency_s, features_json, error "
                           "FROM eval_episodes WHERE run_id = ?", [run[0]]).fetchall()
    con.close()
    assert run[0] in out and run[1] == 3 == len(episodes) and run[7] == "derived"
    assert json.loads(run[3]) == [HELDOUT_NAME]  # only held-out pricing in evaluation
    assert all(e[1] == HELDOUT_NAME for e in episodes)
    assert all(e[3] != "policy_error" for e in episodes), [e[6] for e in episodes]
    assert all(e[4] > 0 for e in episodes)  # the agent's measured time
    assert run[2] == pytest.approx(sum(e[2] for e in episodes) / 3)
    assert run[6] == pytest.approx(run[2])  # accuracy-first P, own baseline: Eq. 6 is the accuracy
    tools = json.loads(run[5])
    assert all(len(json.loads(e[5])) == len(tools) + 3 for e in episodes)
    plots = json.loads(run[4])
    for key in ("tool_usage", "accuracy_cost"):
        path = Path(plots[key])
        assert path.read_bytes()[:8] == PNG and path.stat().st_size > 2_000 and str(path) in out


def test_a_missing_baseline_fails_before_any_episode(snapshot_warehouse: str, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh.duckdb"
    shutil.copyfile(snapshot_warehouse, warehouse)
    cfg = EvalConfig(warehouse=str(warehouse), model="no-such-endpoint", baseline_run="eval-nope", limit=1)
    with pytest.raises(WarehouseError, match="no evaluation run 'eval-nope'"):
        evaluate_orchestrator(cfg, progress=lambda m: None)
    assert main(["evaluate", "no-such-endpoint", "--baseline", "eval-nope", "--warehouse", str(warehouse)]) == 2
