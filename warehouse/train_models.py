"""Warehouse tables of training: one row per training run (a GRPO run, or one stage of a staged run) and one per
optimizer step.

Same conventions as ``warehouse/models.py``: explicit keys, DOUBLE floats, JSON payloads as text.
"""

from __future__ import annotations

from datetime import datetime

import duckdb

from sqlalchemy import Double
from sqlmodel import Field, SQLModel


class TrainingRunRow(SQLModel, table=True):
    __tablename__ = "training_runs"
    run_id: str = Field(primary_key=True)  # train-<profile>-<snapshot>-<config hash>: a rerun resumes the same run
    snapshot_id: str
    profile: str
    config_hash: str
    config_json: str  # profile, snapshot, pricing seed, preference run, per-instance draws
    code_version: str
    status: str  # running | finished | failed
    output_dir: str
    started_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None
    global_step: int
    max_steps: int
    resumes: int  # how many times the run was resumed from a checkpoint
    resumed_from: str | None = None  # the checkpoint the latest attempt resumed from
    checkpoints_json: str  # checkpoint folders present at the last write
    final_checkpoint: str | None = None
    instances: int
    dropped_json: str  # tasks left out of the training set, by reason
    preference_run_id: str | None = None
    pricing_seed: int
    reward_curve_png: str | None = None
    error: str | None = None
    # last, where ADD COLUMN puts it in an older warehouse (whose rows were all GRPO runs)
    stage: str = Field(default="grpo", sa_column_kwargs={"server_default": "grpo"})  # sft | rft | grpo | evaluate


class TrainingStepRow(SQLModel, table=True):
    __tablename__ = "training_steps"
    run_id: str = Field(primary_key=True)
    step: int = Field(primary_key=True)
    reward_mean: float | None = Field(default=None, sa_type=Double)  # over rollouts the filters kept
    reward_std: float | None = Field(default=None, sa_type=Double)
    outcome_rate: float | None = Field(default=None, sa_type=Double)  # share of rollouts that solved their task
    cost_mean: float | None = Field(default=None, sa_type=Double)  # USD per rollout
    completion_tokens: float | None = Field(default=None, sa_type=Double)  # tokens of the step's completions
    tokens_seen: float | None = Field(default=None, sa_type=Double)  # TRL's running count of input tokens
    drop_format_error: int = 0
    drop_no_final_output: int = 0
    drop_low_std_group: int = 0
    groups_dropped: int = 0
    loss: float | None = Field(default=None, sa_type=Double)
    learning_rate: float | None = Field(default=None, sa_type=Double)
    seconds: float | None = Field(default=None, sa_type=Double)  # NULL: the step ran in an attempt that was killed
    recorded_at: datetime
    # last, where ADD COLUMN puts them in an older warehouse: both orders agree
    rollouts: int | None = None  # rollouts scored in the step, over every process; NULL: recorded before it was
    endings_json: str | None = None  # how those rollouts ended: {"token_limit": 2, ...} (train/environment/env.py ENDINGS)
    stage: str = Field(default="grpo", sa_column_kwargs={"server_default": "grpo"})  # the run's stage


# columns added after warehouses were created (``create_all`` adds tables, never columns): name -> DuckDB type
ADDED_STEP_COLUMNS = {"rollouts": "INTEGER", "endings_json": "VARCHAR", "stage": "VARCHAR DEFAULT 'grpo'"}
ADDED_RUN_COLUMNS = {"stage": "VARCHAR DEFAULT 'grpo'"}  # every run before stages was a GRPO run


def add_missing_columns(con: duckdb.DuckDBPyConnection) -> None:
    """Bring an older warehouse's ``training_runs`` and ``training_steps`` up to the model (its earlier rows read
    NULL there, or the column's default)."""
    for table, columns in (("training_runs", ADDED_RUN_COLUMNS), ("training_steps", ADDED_STEP_COLUMNS)):
        for name, sql_type in columns.items():
            con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {name} {sql_type}")
