"""Warehouse tables of the LLM layer: one row per LLM call (tokens, cost, latency, cache hit, error kind)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Double
from sqlmodel import Field, SQLModel


class LLMCall(SQLModel, table=True):
    __tablename__ = "llm_calls"
    call_id: str = Field(primary_key=True)  # <run_id>-<position in the run>
    run_id: str
    created_at: datetime
    endpoint: str
    model: str
    provider: str
    stage: str  # which part of the factory asked: paraphrase, judge, preference, ...
    request_hash: str  # the cache key: equal hashes are the same request
    snapshot_id: str | None = None
    task_id: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = Field(default=None, sa_type=Double)  # NULL: no price known for the model
    latency_s: float = Field(sa_type=Double)
    cache_hit: bool
    attempts: int  # HTTP requests made (0 on a cache hit or a refused call)
    error_kind: str | None = None  # NULL on success; see docs/llm.md for the kinds
    error_detail: str | None = None
    finish_reason: str | None = None


class LLMStageRun(SQLModel, table=True):
    """One run of an LLM stage of the factory (paraphrase, evolution, ...): how many outputs passed the gate."""

    __tablename__ = "llm_stage_runs"
    run_id: str = Field(primary_key=True)
    stage: str = Field(primary_key=True)
    created_at: datetime
    endpoint: str
    snapshot_id: str | None = None
    attempted: int
    accepted: int
    acceptance_rate: float = Field(sa_type=Double)
    rejection_reasons_json: str  # {"lost_value": 5, ...}


class LLMStageRejection(SQLModel, table=True):
    """An LLM output that a stage's gate refused, with the reason, kept for inspection."""

    __tablename__ = "llm_stage_rejections"
    run_id: str = Field(primary_key=True)
    stage: str = Field(primary_key=True)
    subject_id: str = Field(primary_key=True)  # what the output was for, e.g. the task id
    reason: str
    detail: str
    output: str | None = None
