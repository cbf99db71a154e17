"""The ``build-preference-pairs`` flow stores a full run with its artifact, and its deployment in prefect.yaml
points at it and runs on a real Prefect server through a process worker."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey
from prefect.settings import PREFECT_HOME, PREFECT_LOCAL_STORAGE_PATH, temporary_settings
from prefect.testing.utilities import prefect_test_harness
from prefect.utilities.asyncutils import run_coro_as_sync

from flows.preferences import ARTIFACT_KEY, preference_pairs_flow
from tests.prefect_stack import prefect_stack

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    home = tmp_path_factory.mktemp("prefect-home")
    with temporary_settings(updates={PREFECT_HOME: home, PREFECT_LOCAL_STORAGE_PATH: home / "storage"}):
        with prefect_test_harness(server_startup_timeout=90):
            yield


@pytest.mark.slow
def test_flow_stores_1000_pairs_and_leaves_an_artifact(harness: None, tmp_path: Path) -> None:
    wh = tmp_path / "wh.duckdb"
    state = preference_pairs_flow(count=1000, seed=0, warehouse=str(wh), return_state=True)
    assert state.is_completed(), state.message
    result: dict[str, Any] = state.result()
    assert result["pairs"] == 1000 and result["inconsistent"] == 0 and result["per_split"] == {"eval": 200,
                                                                                                "train": 800}
    con = duckdb.connect(str(wh), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM preference_pairs WHERE run_id = ?",
                           [result["run_id"]]).fetchone() == (1000,)
        assert con.execute("SELECT count(DISTINCT schedule_id) FROM pricing_schedules WHERE synthetic").fetchone() == (11,)
    finally:
        con.close()

    async def artifacts() -> list[Any]:
        async with get_client() as client:
            return await client.read_artifacts(artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[ARTIFACT_KEY]),
                flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id])))

    (artifact,) = run_coro_as_sync(artifacts())
    assert result["run_id"] in artifact.data and "synthetic-heldout-deepinfra" in artifact.data
    assert "mix:local_only+fast_answers" in artifact.data


def test_flow_refuses_bad_parameters_before_any_work(harness: None, tmp_path: Path) -> None:
    state = preference_pairs_flow(count=0, warehouse=str(tmp_path / "wh.duckdb"), return_state=True)
    assert state.is_failed() and "count must be at least 2" in str(state.message)
    assert not (tmp_path / "wh.duckdb").exists()


def test_the_deployment_in_prefect_yaml_points_at_the_flow() -> None:
    config = yaml.safe_load((REPO / "prefect.yaml").read_text())
    (deployment,) = [d for d in config["deployments"] if d["name"] == "preferences"]
    module, _, name = deployment["entrypoint"].partition(":")
    flow_obj = getattr(importlib.import_module(module.removesuffix(".py").replace("/", ".")), name)
    assert flow_obj.name == "build-preference-pairs"
    assert set(deployment["parameters"]) <= set(flow_obj.parameters.properties)
    assert deployment["parameters"]["count"] >= 1000 and deployment["work_pool"]["name"] == "toolscale-process"
    assert os.path.exists(REPO / module)


@pytest.mark.server
def test_preferences_deployment_runs_on_a_real_server_through_a_process_worker(tmp_path: Path) -> None:
    import json

    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId


    with prefect_stack(tmp_path, deploy=("--name", "preferences"), health_s=90, deploy_timeout=120) as stack:
        wh = tmp_path / "out" / "wh.duckdb"
        stack.cli("deployment", "run", "build-preference-pairs/preferences", "--params",
                 json.dumps({"warehouse": str(wh)}), "--watch", "--watch-interval", "1", "--watch-timeout", "150",
                  timeout=180)
        with SyncPrefectClient(stack.api) as client:
            deployment = client.read_deployment_by_name("build-preference-pairs/preferences")
            (run,) = client.read_flow_runs(
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id])))
        assert run.state is not None and run.state.is_completed(), stack.worker_log()
        con = duckdb.connect(str(wh), read_only=True)
        try:
            assert con.execute("SELECT pairs, inconsistent FROM preference_runs").fetchall() == [(1000, 0)]
        finally:
            con.close()
