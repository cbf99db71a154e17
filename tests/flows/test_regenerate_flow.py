"""The ``regenerate-toolscale`` flow: threads and Dask runs publish the same snapshot, with its artifact, and
the ``smoke`` deployment from prefect.yaml runs on a real Prefect server through a process worker."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey,
                                           DeploymentFilter, DeploymentFilterId)
from prefect.settings import PREFECT_HOME, PREFECT_LOCAL_STORAGE_PATH, temporary_settings
from prefect.testing.utilities import prefect_test_harness

from flows.regenerate import ARTIFACT_KEY, make_task_runner, regenerate_flow
from tests.prefect_stack import prefect_stack

REPO = Path(__file__).resolve().parents[2]
SMOKE = {"domains": ["weather"], "tasks_per_domain": 20}


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    home = tmp_path_factory.mktemp("prefect-home")
    saved = os.environ.get("PREFECT_HOME")
    os.environ["PREFECT_HOME"] = str(home)  # for processes this test starts (Dask workers)
    try:
        with temporary_settings(updates={PREFECT_HOME: home, PREFECT_LOCAL_STORAGE_PATH: home / "storage"}):
            with prefect_test_harness(server_startup_timeout=90):
                yield
    finally:
        if saved is None:
            os.environ.pop("PREFECT_HOME", None)
        else:
            os.environ["PREFECT_HOME"] = saved


def run_flow(out: Path, **params: Any) -> tuple[dict[str, Any], str]:
    """Run the flow into ``out``; returns its result and the id of its flow run."""
    state = regenerate_flow(**{**SMOKE, **params}, warehouse=str(out / "toolscale.duckdb"),
                            work_dir=str(out / "work"), return_state=True)
    assert state.is_completed(), state.message
    return state.result(), str(state.state_details.flow_run_id)


def published_hashes(warehouse: Path, snapshot_id: str) -> list[str]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        status = con.execute("SELECT status FROM snapshots WHERE snapshot_id = ?", [snapshot_id]).fetchone()
        assert status == ("published",)
        return [h for (h,) in con.execute("SELECT content_hash FROM tasks WHERE snapshot_id = ? ORDER BY content_hash",
                                          [snapshot_id]).fetchall()]
    finally:
        con.close()


@pytest.fixture(scope="module")
def threads_run(harness: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Path]:
    out = tmp_path_factory.mktemp("threads")
    result, flow_run_id = run_flow(out)
    return result, flow_run_id, out


def test_threads_run_publishes_and_leaves_a_snapshot_artifact(threads_run: tuple[dict[str, Any], str, Path]) -> None:
    result, flow_run_id, out = threads_run
    assert result["status"] == "published" and result["tasks"] >= 20
    assert len(published_hashes(out / "toolscale.duckdb", result["snapshot_id"])) == result["tasks"]

    async def artifacts() -> list[Any]:
        async with get_client() as client:
            return await client.read_artifacts(artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[ARTIFACT_KEY]), flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))

    from prefect.utilities.asyncutils import run_coro_as_sync

    (artifact,) = run_coro_as_sync(artifacts())
    assert artifact.type == "markdown"
    assert result["snapshot_id"] in artifact.data
    for fact in ("published", "weather", "gold errors", "no-op passes", "median kill rate", "evolved fraction",
                 "yield", "Rejection reasons", "Timings"):
        assert fact in artifact.data


def test_dask_cluster_run_matches_the_threads_run(threads_run: tuple[dict[str, Any], str, Path],
                                                  tmp_path: Path) -> None:
    from distributed import LocalCluster

    threads_result, _, threads_out = threads_run
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        result, _ = run_flow(tmp_path, task_runner=f"dask:{cluster.scheduler_address}")
    assert result["status"] == "published"
    assert result["snapshot_id"] == threads_result["snapshot_id"]
    assert published_hashes(tmp_path / "toolscale.duckdb", result["snapshot_id"]) == \
        published_hashes(threads_out / "toolscale.duckdb", threads_result["snapshot_id"])


def test_unknown_task_runner_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown task_runner"):
        make_task_runner("ray")
    assert make_task_runner("dask:tcp://127.0.0.1:8786").address == "tcp://127.0.0.1:8786"


@pytest.mark.server
def test_smoke_deployment_runs_on_a_real_server_through_a_process_worker(tmp_path: Path) -> None:
    with prefect_stack(tmp_path, deploy=("--all",), health_s=60, deploy_timeout=120) as stack:
        out = tmp_path / "smoke"
        params = {"warehouse": str(out / "toolscale.duckdb"), "work_dir": str(out / "work")}
        stack.cli("deployment", "run", "regenerate-toolscale/smoke", "--params", json.dumps(params),
                  "--watch", "--watch-interval", "1", "--watch-timeout", "120", timeout=150)

        with SyncPrefectClient(stack.api) as client:
            smoke = client.read_deployment_by_name("regenerate-toolscale/smoke")
            (run,) = client.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[smoke.id])))
            weekly = client.read_deployment_by_name("regenerate-toolscale/weekly")
        assert run.state is not None and run.state.is_completed(), stack.worker_log()
        assert run.parameters["domains"] == ["weather"] and run.parameters["tasks_per_domain"] == 20
        assert weekly.work_pool_name == smoke.work_pool_name == "toolscale-process"
        assert [s.schedule.cron for s in weekly.schedules] == ["0 3 * * 1"]

        con = duckdb.connect(str(out / "toolscale.duckdb"), read_only=True)
        try:
            published = con.execute("SELECT count(*) FROM snapshots WHERE status = 'published'").fetchone()
        finally:
            con.close()
        assert published == (1,)


def test_shipped_regenerate_deployments_use_the_fastest_runner_for_one_machine() -> None:
    """A deployment runs on one worker's machine unless given a cluster's address: ``processes`` there (a
    temporary local Dask cluster was the slowest runner measured), Dask only as ``dask:<address>``."""
    import yaml

    config = yaml.safe_load((REPO / "prefect.yaml").read_text())
    runners = {d["name"]: d["parameters"].get("task_runner") for d in config["deployments"]
               if d["entrypoint"].startswith("flows/regenerate.py")}
    assert runners["weekly"] == "processes"
    assert all(r in ("processes", "threads") or r.startswith("dask:") for r in runners.values()), runners


def test_shards_run_as_a_few_batch_tasks(harness: None, tmp_path: Path) -> None:
    """One task run per batch of shards, not per shard; the run publishes the same snapshot either way."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    # 14 weather shards: more than six per worker, so batches of two
    result, flow_run_id = run_flow(tmp_path, task_runner="processes", tasks_per_domain=560)
    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    names = sorted(r.name for r in runs)
    assert names and all(r.task_key.startswith("shard_batch_task") for r in runs), names
    shards = len(list((tmp_path / "work").glob("*/shards/*.json")))
    assert len(runs) < shards, (names, shards)  # fewer task runs than shards
    assert any("shards)" in n for n in names), names
    assert result["status"] == "published"
