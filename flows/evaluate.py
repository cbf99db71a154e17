"""Prefect flow ``evaluate-orchestrator``: a thin wrapper over ``train.evaluation.evaluate.evaluate_orchestrator``.

    from flows.evaluate import evaluate_orchestrator_flow
    evaluate_orchestrator_flow(model="local-smollm2", limit=5)

or as the ``evaluate-orchestrator/evaluate`` deployment in prefect.yaml. ``model`` is an endpoint name of the registry
or a checkpoint folder; the run uses held-out pricing only. The report table is the flow's artifact.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from warehouse.location import default_warehouse
from train.evaluation.evaluate import EvalConfig, evaluate_orchestrator, report_markdown

ARTIFACT_KEY = "evaluate-orchestrator"


@flow(name="evaluate-orchestrator", log_prints=True)
def evaluate_orchestrator_flow(model: str = "local-smollm2", snapshot: str = "latest",
                               domains: list[str] | None = None, limit: int | None = None, seed: int = 0,
                               pricing_seed: int = 0, experts: list[str] | None = None,
                               preference: dict[str, Any] | None = None, baseline_run: str | None = None,
                               max_turns: int = 10, agent_max_tokens: int = 512, timeout_s: float = 120.0,
                               out_dir: str = "work/eval", registry: str | None = None,
                               warehouse: str | None = None) -> dict[str, Any]:
    """Evaluate ``model`` on the snapshot's evaluation split; rows in eval_runs/eval_episodes, two PNGs."""
    cfg = EvalConfig(warehouse=warehouse or default_warehouse(), model=model, registry=registry, snapshot=snapshot,
                     domains=domains, limit=limit, seed=seed, pricing_seed=pricing_seed, experts=list(experts or []),
                     preference=preference, baseline_run=baseline_run, max_turns=max_turns,
                     agent_max_tokens=agent_max_tokens, timeout_s=timeout_s, out_dir=out_dir)
    report = evaluate_orchestrator(cfg, progress=get_run_logger().info)
    create_markdown_artifact(markdown=report_markdown(report), key=ARTIFACT_KEY,
                             description=f"evaluation {report.run_id} of {report.model}")
    return report.to_dict()
