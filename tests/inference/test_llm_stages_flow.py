"""The ``llm-stages`` flow under Prefect's test harness on a small published snapshot against the real llama.cpp
server: calls, per-stage acceptance and refusals land in the warehouse; the two documented example queries run on
that warehouse; the CLI refuses a bad setting in one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from prefect.settings import PREFECT_HOME, PREFECT_LOCAL_STORAGE_PATH, temporary_settings
from prefect.testing.utilities import prefect_test_harness

from synthesis.llm_stages import STAGES
from tests.inference.conftest import Local
from toolscale.cli import main
from toolscale.cli_llm import LLM_STAGES
from pipeline.regenerate import RegenerateConfig, regenerate
from warehouse.llm_queries import COST_PER_VERIFIED_TASK_BY_STAGE, MODELS_BY_SUCCESS_PER_DOLLAR

REPO = Path(__file__).resolve().parents[2]
SAMPLE = 2


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("llm-stages")
    path = root / "wh.duckdb"
    result, _ = regenerate(RegenerateConfig(domains=["weather"], tasks_per_domain=12, warehouse=str(path),
                                            work_dir=str(root / "work"), workers=1), progress=lambda _: None)
    assert result.status == "published"
    return {"root": root, "warehouse": path, "snapshot_id": result.snapshot_id}


@pytest.fixture(scope="module")
def flow_run(local: Local, snapshot: dict[str, Any]) -> dict[str, Any]:
    """One run of the flow, all three stages, against the session's llama.cpp server (through its proxy)."""
    root: Path = snapshot["root"]
    registry = root / "endpoints.yaml"
    e = local.endpoint
    registry.write_text(yaml.safe_dump({"default": "proxied", "endpoints": {"proxied": {
        "base_url": e.base_url, "model": e.model, "api_key_env": None, "provider": "local",
        "pricing_key": e.pricing_key}}}))
    from flows.llm_stages import llm_stages_flow

    home = root / "prefect-home"
    with temporary_settings(updates={PREFECT_HOME: home, PREFECT_LOCAL_STORAGE_PATH: home / "storage"}):
        with prefect_test_harness(server_startup_timeout=90):
            state = llm_stages_flow(sample=SAMPLE, proposals=1, budget_usd=1.0, warehouse=str(snapshot["warehouse"]),
                                    work_dir=str(root / "work"), registry=str(registry), propose_max_tokens=64,
                                    return_state=True)
            assert state.is_completed(), state.message
            return state.result()


@pytest.mark.llm
def test_the_flow_records_calls_acceptance_and_refusals(flow_run: dict[str, Any], snapshot: dict[str, Any]) -> None:
    print("llm-stages:", json.dumps(flow_run["stages"]))
    assert list(flow_run["stages"]) == list(STAGES) and flow_run["snapshot_id"] == snapshot["snapshot_id"]
    con = duckdb.connect(str(snapshot["warehouse"]), read_only=True)
    try:
        runs = con.execute("SELECT stage, attempted, accepted, acceptance_rate, snapshot_id FROM llm_stage_runs "
                           "WHERE run_id = ? ORDER BY stage", [flow_run["run_id"]]).fetchall()
        calls = dict(con.execute("SELECT stage, COUNT(*) FROM llm_calls WHERE run_id = ? GROUP BY stage",
                                 [flow_run["run_id"]]).fetchall())
        refusals = con.execute("SELECT stage, COUNT(*) FROM llm_stage_rejections WHERE run_id = ? GROUP BY stage",
                               [flow_run["run_id"]]).fetchall()
    finally:
        con.close()
    expected = {s: (v["attempted"], v["accepted"]) for s, v in flow_run["stages"].items()}
    assert {r[0]: (r[1], r[2]) for r in runs} == expected
    assert {r[0]: r[1] for r in runs} == {"evolve": SAMPLE, "paraphrase": SAMPLE, "propose": 1}
    assert all(r[3] == pytest.approx(r[2] / r[1]) and r[4] == snapshot["snapshot_id"] for r in runs)
    # evolve asks the model only where the menu offers children (none for a stored task of a realistic domain)
    assert calls["paraphrase"] == SAMPLE and calls["propose"] == 1 and calls.get("evolve", 0) <= SAMPLE
    assert dict(refusals) == {s: a - k for s, (a, k) in expected.items() if a - k}
    assert flow_run["calls_written"] == sum(calls.values())


@pytest.mark.llm
def test_the_documented_queries_run_on_the_flows_warehouse(flow_run: dict[str, Any],
                                                            snapshot: dict[str, Any]) -> None:
    docs = (REPO / "docs" / "warehouse.md").read_text() + (REPO / "docs" / "llm.md").read_text()
    for query in (COST_PER_VERIFIED_TASK_BY_STAGE, MODELS_BY_SUCCESS_PER_DOLLAR):
        assert docs.count(query.strip()) == 2  # quoted verbatim in both documents
    con = duckdb.connect(str(snapshot["warehouse"]), read_only=True)
    try:
        by_stage = {r[0]: r for r in con.execute(COST_PER_VERIFIED_TASK_BY_STAGE).fetchall()}
        models = con.execute(MODELS_BY_SUCCESS_PER_DOLLAR).fetchall()
    finally:
        con.close()
    for stage, s in flow_run["stages"].items():
        _, attempted, verified, calls, unpriced, usd, per_verified = by_stage[stage]
        assert (attempted, verified, unpriced, usd) == (s["attempted"], s["accepted"], 0, 0.0)
        assert per_verified == (0.0 if verified else None)  # a local model costs nothing
    # the ranking joins runs to the calls they made: a stage that asked the model nothing is not in it
    asked = [s for stage, s in flow_run["stages"].items() if by_stage[stage][3]]
    total_attempted = sum(s["attempted"] for s in asked)
    total_accepted = sum(s["accepted"] for s in asked)
    assert [(m[0], m[1], m[2]) for m in models] == [("SmolLM2-135M-Instruct", total_attempted, total_accepted)]
    assert models[0][5] == float("inf")


def test_the_cli_knows_the_stages_and_refuses_bad_settings_in_one_line(capsys: pytest.CaptureFixture[str],
                                                                       tmp_path: Path) -> None:
    assert LLM_STAGES == STAGES
    with pytest.raises(SystemExit) as exit_:
        main(["llm-stages", "--sample", "0", "--warehouse", str(tmp_path / "none.duckdb")])
    assert exit_.value.code == 2  # README: bad options exit 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: argument --sample: 0 is out of range; it must be between 1 and 10000 "
                   "(see: toolscale llm-stages --help)")
