"""The ``describe-llm-tools`` and ``evaluate-orchestrator`` deployments in prefect.yaml point at their flows."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("deployment_name", "flow_name"), [("describe", "describe-llm-tools"),
                                                             ("evaluate", "evaluate-orchestrator")])
def test_the_deployment_points_at_the_flow(deployment_name: str, flow_name: str) -> None:
    config = yaml.safe_load((REPO / "prefect.yaml").read_text())
    names = [d["name"] for d in config["deployments"]]
    assert len(names) == len(set(names)), "deployment names must be unique for `prefect deploy --name`"
    (deployment,) = [d for d in config["deployments"] if d["name"] == deployment_name]
    module, _, name = deployment["entrypoint"].partition(":")
    flow_obj = getattr(importlib.import_module(module.removesuffix(".py").replace("/", ".")), name)
    assert flow_obj.name == flow_name
    assert set(deployment["parameters"]) <= set(flow_obj.parameters.properties)
    assert deployment["work_pool"]["name"] == "toolscale-process" and deployment["concurrency_limit"] == 1
