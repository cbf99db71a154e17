"""Prefect flow ``describe-llm-tools``: a thin wrapper over ``train.evaluation.describe.describe_llm_tools``.

    from flows.describe import describe_llm_tools_flow
    describe_llm_tools_flow(tasks=10)

or as the ``describe-llm-tools/describe`` deployment in prefect.yaml. The endpoints must already be serving; one that
does not answer its health check is recorded as unreachable and keeps its previous description.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from warehouse.location import default_warehouse
from train.evaluation.describe import DescribeConfig, describe_llm_tools, report_markdown

ARTIFACT_KEY = "describe-llm-tools"


@flow(name="describe-llm-tools", log_prints=True)
def describe_llm_tools_flow(endpoints: list[str] | None = None, writer: str | None = None, tasks: int = 10,
                            seed: int = 0, snapshot: str = "latest", max_turns: int = 8, agent_max_tokens: int = 256,
                            writer_max_tokens: int = 256, timeout_s: float = 60.0, registry: str | None = None,
                            warehouse: str | None = None) -> dict[str, Any]:
    """Describe each registry endpoint (default: all) from ``tasks`` trials on the latest published snapshot."""
    cfg = DescribeConfig(warehouse=warehouse or default_warehouse(), registry=registry, endpoints=endpoints,
                         writer=writer, snapshot=snapshot, tasks=tasks, seed=seed, max_turns=max_turns,
                         agent_max_tokens=agent_max_tokens, writer_max_tokens=writer_max_tokens, timeout_s=timeout_s)
    report = describe_llm_tools(cfg, progress=get_run_logger().info)
    create_markdown_artifact(markdown=report_markdown(report), key=ARTIFACT_KEY,
                             description=f"LLM tool descriptions {report.run_id}")
    return report.to_dict()
