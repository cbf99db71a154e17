"""Warehouse tables of model evaluation: LLM-tool trials and capability descriptions (``describe-llm-tools``),
and orchestrator evaluation runs and their episodes (``evaluate-orchestrator``).

Same conventions as ``warehouse/models.py``: explicit keys, DOUBLE floats, JSON payloads as text.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Double
from sqlmodel import Field, SQLModel


class LLMToolTrial(SQLModel, table=True):
    """One evidence episode: an LLM tool (registry endpoint) run as the agent on one published task."""

    __tablename__ = "llm_tool_trials"
    trial_id: str = Field(primary_key=True)  # <run_id>-<endpoint>-<n>
    run_id: str
    created_at: datetime
    endpoint: str
    model: str
    snapshot_id: str
    task_id: str
    domain: str
    kinds: str  # the task's "+"-joined request kinds
    solved: bool
    ended_by: str  # user_stop | turn_limit | token_limit | policy_error | user_error
    turns: int
    format_errors: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float = Field(sa_type=Double)  # the agent's own tokens plus its tool calls
    latency_s: float = Field(sa_type=Double)  # measured agent time plus the tools' latency
    error: str | None = None
    trajectory_json: str  # the episode's messages


class LLMToolDescription(SQLModel, table=True):
    """One describe attempt per endpoint and run: a capability description with its evidence, or why none."""

    __tablename__ = "llm_tool_descriptions"
    run_id: str = Field(primary_key=True)
    endpoint: str = Field(primary_key=True)
    created_at: datetime
    model: str
    status: str  # described | refused (the trials contradict it) | unreachable | writer_failed
    reason: str | None = None  # why not described (health check, writer error, or the contradiction)
    writer_endpoint: str | None = None
    description: str | None = None  # NULL unless described; the previous description stays current
    evidence_trial_ids_json: str  # ["<trial_id>", ...]
    trials: int
    solved: int
    # {"trials", "solved", "timeouts", "per_kind": {kind: [solved, n]}, "per_domain": {...}}; NULL: no trials
    evidence_json: str | None = None
    proposed_description: str | None = None  # what the writer wrote, stored as current only when described


# columns added after warehouses were created (``create_all`` adds tables, never columns)
ADDED_DESCRIPTION_COLUMNS = {"evidence_json": "VARCHAR", "proposed_description": "VARCHAR"}


class EvalRun(SQLModel, table=True):
    """One ``evaluate-orchestrator`` run: a model on a snapshot's evaluation split under held-out pricing."""

    __tablename__ = "eval_runs"
    run_id: str = Field(primary_key=True)
    created_at: datetime
    model: str  # the label: endpoint name or checkpoint folder
    source: str  # endpoint | checkpoint
    snapshot_id: str
    split: str  # test (the snapshot's own split or the derived lowest-hash fifth)
    split_rule: str  # stored | derived
    episodes: int
    accuracy: float = Field(sa_type=Double)
    mean_cost_usd: float = Field(sa_type=Double)
    mean_latency_s: float = Field(sa_type=Double)
    total_cost_usd: float = Field(sa_type=Double)
    format_errors: int
    calls_per_tool_json: str  # {"tool": calls, ...} over the whole run
    preference_json: str  # the preference vector P the score uses
    baseline_run_id: str | None = None  # NULL: the run is its own baseline
    preference_score: float = Field(sa_type=Double)  # Eq. 6, see docs/evaluation.md
    schedules_json: str  # held-out schedules the episodes were priced by
    seed: int
    config_json: str
    plots_json: str  # {"tool_usage": path, "accuracy_cost": path}


class EvalEpisode(SQLModel, table=True):
    __tablename__ = "eval_episodes"
    run_id: str = Field(primary_key=True)
    task_id: str = Field(primary_key=True)
    domain: str
    schedule: str | None = None
    solved: bool
    ended_by: str
    turns: int
    tokens: int
    format_errors: int
    cost_usd: float = Field(sa_type=Double)
    latency_s: float = Field(sa_type=Double)
    tool_calls_json: str  # {"tool": calls, ...}
    features_json: str  # [calls of each tool ..., outcome, -cost, -latency] in the run's tool order
    error: str | None = None
