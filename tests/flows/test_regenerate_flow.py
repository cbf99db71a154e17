"""The ``regenerate-toolscale`` flow: threads and Dask runs publish the same snapshot, with its artifact, and
the ``smoke`` deployment from prefect.yaml runs on a real Prefect server through a process worker."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey,
                                           DeploymentFilter, DeploymentFilterId)
from prefect.settings import PREFECT_HOME, PREFECT_LOCAL_STORAGE_PATH, temporary_settings
from prefect.testing.utilities import prefect_test_harness

from flows.regenerate import ARTIFACT_KEY, make_task_runner, regenerate_flow

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
    state = regenerate_flow(**SMOKE, warehouse=str(out / "toolscale.duckdb"), work_dir=str(out / "work"),
                            return_state=True, **params)
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    # a session of its own: the Prefect CLI ignores SIGINT when started in the background, so it is stopped
    # by signalling its whole process group (the worker's flow-run subprocesses included)
    with open(log, "wb") as handle:
        return subprocess.Popen(args, cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _prefect(*args: str, env: dict[str, str], timeout: float = 60) -> str:
    done = subprocess.run([sys.executable, "-m", "prefect", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.server
def test_smoke_deployment_runs_on_a_real_server_through_a_process_worker(tmp_path: Path) -> None:
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "home"), PREFECT_API_URL=api, PREFECT_UI_ENABLED="false",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_WORKER_QUERY_SECONDS="1",
               PREFECT_CLI_COLORS="false")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(_start([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                             "--port", str(port)], env, tmp_path / "server.log"))
        deadline = time.monotonic() + 60
        while True:
            assert procs[0].poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "server not healthy after 60s"
            time.sleep(0.5)

        _prefect("work-pool", "create", "toolscale-process", "--type", "process", env=env)
        _prefect("--no-prompt", "deploy", "--all", env=env, timeout=120)
        procs.append(_start([sys.executable, "-m", "prefect", "worker", "start", "--pool", "toolscale-process"],
                            env, tmp_path / "worker.log"))
        out = tmp_path / "smoke"
        params = {"warehouse": str(out / "toolscale.duckdb"), "work_dir": str(out / "work")}
        _prefect("deployment", "run", "regenerate-toolscale/smoke", "--params", json.dumps(params),
                 "--watch", "--watch-interval", "1", "--watch-timeout", "120", env=env, timeout=150)

        with SyncPrefectClient(api) as client:
            smoke = client.read_deployment_by_name("regenerate-toolscale/smoke")
            (run,) = client.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[smoke.id])))
            weekly = client.read_deployment_by_name("regenerate-toolscale/weekly")
        assert run.state is not None and run.state.is_completed(), (tmp_path / "worker.log").read_text()[-3000:]
        assert run.parameters["domains"] == ["weather"] and run.parameters["tasks_per_domain"] == 20
        assert weekly.work_pool_name == smoke.work_pool_name == "toolscale-process"
        assert [s.schedule.cron for s in weekly.schedules] == ["0 3 * * 1"]

        con = duckdb.connect(str(out / "toolscale.duckdb"), read_only=True)
        try:
            published = con.execute("SELECT count(*) FROM snapshots WHERE status = 'published'").fetchone()
        finally:
            con.close()
        assert published == (1,)
    finally:
        for proc in reversed(procs):
            _stop(proc)
