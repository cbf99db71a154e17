"""Prefect flow ``train-orchestrator``: the plain job in ``train.stages.run`` (GRPO from a published snapshot, or every stage
a profile's ``stages:`` names, train/stages/sequence.py) as one flow run.

    from flows.train_orchestrator import train_flow
    train_flow(profile="cpu-smoke", warehouse="warehouse/toolscale.duckdb")

or as the ``cpu-smoke`` / ``h100`` deployments in prefect.yaml
(``prefect deployment run 'train-orchestrator/cpu-smoke' --watch``). A rerun with the same parameters resumes the
same run from its last checkpoint (a staged run: its unfinished stages). The run's markdown artifact links the
reward-curve PNG saved beside it (a staged run: the one plot of held-out success, reward and format errors per stage).

Named train_orchestrator.py, not train.py: Prefect puts this folder first on ``sys.path`` when it loads the
entrypoint, and a ``flows/train.py`` would shadow the ``train`` package.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from train.stages.launch import launch_training, needs_launch
from train.stages.profiles import load_profile
from train.stages.records import TrainRunConfig
from train.stages.run import run_training
from warehouse.location import default_warehouse

ARTIFACT_KEY = "train-orchestrator-run"


# no log_prints: a library on the datasets path prints bytecode listings to stdout, which would flood the run log
@flow(name="train-orchestrator")
def train_flow(profile: str = "cpu-smoke", snapshot: str = "latest", warehouse: str | None = None,
               output_root: str = "work/train", work_dir: str = "work", pricing_seed: int = 0,
               preference_run: str | None = None) -> dict[str, Any]:
    """Train an orchestrator with GRPO on ``snapshot`` (default the latest published) under ``profile``
    (``cpu-smoke``, ``h100``, or a staged one such as ``cpu-learn``); ``warehouse``: default ``$TOOLSCALE_WAREHOUSE`` or warehouse/toolscale.duckdb;
    ``preference_run``: a preference run id, ``none``, or the latest run when there is one."""
    logger = get_run_logger()
    cfg = TrainRunConfig(profile, warehouse or default_warehouse(), snapshot, output_root, work_dir, pricing_seed,
                         preference_run)
    if needs_launch(load_profile(profile)):  # every rank under accelerate (or slurm); rank 0's lines come here
        result = launch_training(cfg, progress=logger.info)
    else:  # one process: training runs in the flow-run process, the one writer of the warehouse
        result = run_training(cfg, progress=logger.info)
    run = result.run
    create_markdown_artifact(markdown=result.markdown, key=ARTIFACT_KEY,
                             description=f"training run {run['run_id']}: {run['status']} at step {run['global_step']}")
    return {k: run[k] for k in ("run_id", "status", "global_step", "final_checkpoint", "reward_curve_png",
                                "output_dir")} | {"steps_this_attempt": result.steps_this_attempt}
