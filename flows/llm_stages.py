"""Prefect flow ``llm-stages``: the LLM stages of the factory (paraphrase, evolve, propose) on a sample of the latest
snapshot, under one budget; a thin wrapper over ``synthesis.llm_stages.run_llm_stages``.

    from flows.llm_stages import llm_stages_flow
    llm_stages_flow(stages=["paraphrase", "evolve"], sample=8, budget_usd=0.5)

or as a deployment (``prefect.yaml``: ``llm-stages/local``). The flow takes names and paths only; the LLM client,
the server it may start and the warehouse write all live in the job. One writer: the job writes the warehouse once,
at the end, in one transaction.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from inference.cost import format_usd
from synthesis.llm_stages import STAGES, LLMStagesConfig, LLMStagesReport, run_llm_stages
from warehouse.location import default_warehouse

ARTIFACT_KEY = "toolscale-llm-stages"


@flow(name="llm-stages", log_prints=True)
def llm_stages_flow(stages: list[str] | None = None, sample: int = 8, proposals: int = 2,
                    endpoint: str | None = None, budget_usd: float | None = None, warehouse: str | None = None,
                    work_dir: str = "work", seed: int = 0, snapshot: str = "latest",
                    domains: list[str] | None = None, kill_threshold: float = 0.9,
                    port: int | None = None, registry: str | None = None,
                    propose_max_tokens: int = 400, prices: str | None = None) -> dict[str, Any]:
    """Run the LLM stages and record calls, acceptance per stage and refusals in the warehouse."""
    logger = get_run_logger()
    cfg = LLMStagesConfig(warehouse=warehouse or default_warehouse(), work_dir=work_dir,
                          stages=list(stages or STAGES), sample=sample, proposals=proposals, endpoint=endpoint,
                          registry=registry, budget_usd=budget_usd, seed=seed, snapshot=snapshot, domains=domains,
                          kill_threshold=kill_threshold, port=port,
                          propose_max_tokens=propose_max_tokens, prices=prices)
    report = run_llm_stages(cfg, progress=logger.info)
    create_markdown_artifact(markdown=report_markdown(report), key=ARTIFACT_KEY,
                             description=f"LLM stages run {report.run_id}")
    return report.to_dict()


def report_markdown(report: LLMStagesReport) -> str:
    t = report.totals
    lines = [f"# LLM stages run `{report.run_id}`", "",
             f"- **endpoint:** {report.endpoint}; **snapshot:** {report.snapshot_id or '-'}",
             f"- **calls:** {t['calls']} ({t['cache_hits']} from cache), {t['prompt_tokens']} + "
             f"{t['completion_tokens']} tokens, {format_usd(t['cost_usd'])}", "",
             "| stage | attempted | accepted | acceptance | refusals |", "|---|---:|---:|---:|---|"]
    for stage, s in report.stages.items():
        reasons = ", ".join(f"{k} {v}" for k, v in s["rejection_reasons"].items()) or "none"
        lines.append(f"| {stage} | {s['attempted']} | {s['accepted']} | {s['acceptance_rate']:.2f} | {reasons} |")
    if report.proposed_specs:
        lines += ["", "**Accepted domain specs:**", *(f"- `{p}`" for p in report.proposed_specs)]
    return "\n".join(lines) + "\n"
