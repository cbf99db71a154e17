"""Prefect flow ``build-preference-pairs``: the plain job in ``synthesis.preferences.build``, as one flow run.

    from flows.preferences import preference_pairs_flow
    preference_pairs_flow(count=1000, seed=0, warehouse="warehouse/toolscale.duckdb")

or as the ``preferences`` deployment in prefect.yaml (``prefect deployment run 'build-preference-pairs/preferences'``).
Offline by default: instructions come from templates and are checked by rules only.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE

from synthesis.preferences.build import PreferenceConfig, build_and_store, summary_markdown
from warehouse.location import default_warehouse

ARTIFACT_KEY = "preference-pairs"


@task(name="build-and-store-pairs", cache_policy=NONE, persist_result=False)
def build_and_store_task(cfg: PreferenceConfig, warehouse: str) -> dict[str, Any]:
    return build_and_store(cfg, warehouse)


@flow(name="build-preference-pairs", log_prints=True)
def preference_pairs_flow(count: int = 1000, seed: int = 0, eval_fraction: float = 0.2, training_schedules: int = 10,
                          warehouse: str | None = None) -> dict[str, Any]:
    """Build ``count`` preference pairs (seeded; synthetic pricing schedules) and store them in ``warehouse``
    (default ``$TOOLSCALE_WAREHOUSE`` or ``warehouse/toolscale.duckdb``)."""
    cfg = PreferenceConfig(count=count, seed=seed, eval_fraction=eval_fraction, training_schedules=training_schedules)
    cfg.validate()  # bad parameters fail before any work
    summary = build_and_store_task(cfg, warehouse or default_warehouse())
    create_markdown_artifact(markdown=summary_markdown(summary), key=ARTIFACT_KEY,
                             description=f"preference pairs {summary['run_id']}")
    get_run_logger().info(f"preference run {summary['run_id']}: {summary['pairs']} pairs {summary['per_split']}, "
                          f"{summary['inconsistent']} inconsistent")
    return {k: summary[k] for k in ("run_id", "warehouse", "pairs", "per_split", "inconsistent")}
