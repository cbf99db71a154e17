"""Warehouse tables for pricing schedules (with a source on every figure) and preference pairs.

Same conventions as ``warehouse/models.py``: explicit keys, DOUBLE floats, JSON payloads as text.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Double
from sqlmodel import Field, SQLModel


class PricingScheduleRow(SQLModel, table=True):
    __tablename__ = "pricing_schedules"
    schedule_id: str = Field(primary_key=True)
    name: str  # synthetic ones are named synthetic-...
    kind: str  # nominal | provider | synthetic
    split: str  # reference | train | heldout
    synthetic: bool
    seed: int | None = None
    source: str
    params_json: str
    loaded_at: datetime


class ModelPriceRow(SQLModel, table=True):
    __tablename__ = "model_prices"
    schedule_id: str = Field(primary_key=True)
    model: str = Field(primary_key=True)
    input_usd_per_1m: float = Field(sa_type=Double)
    output_usd_per_1m: float = Field(sa_type=Double)
    synthetic: bool
    source: str
    note: str | None = None


class ModelLatencyRow(SQLModel, table=True):
    __tablename__ = "model_latencies"
    schedule_id: str = Field(primary_key=True)
    model: str = Field(primary_key=True)
    alias: str = Field(primary_key=True)  # the tool role (answer-1, search-2, ...) or "any"
    latency_s: float = Field(sa_type=Double)
    synthetic: bool
    source: str


class PreferenceRunRow(SQLModel, table=True):
    __tablename__ = "preference_runs"
    run_id: str = Field(primary_key=True)
    created_at: datetime
    seed: int
    requested: int
    pairs: int
    train_pairs: int
    eval_pairs: int
    inconsistent: int  # dropped by the rule checks or the judge; never stored as pairs
    code_version: str
    config_json: str
    summary_json: str


class PreferencePairRow(SQLModel, table=True):
    __tablename__ = "preference_pairs"
    run_id: str = Field(primary_key=True)
    pair_id: str = Field(primary_key=True)
    position: int
    split: str  # train | eval
    family: str  # a single family (avoid_tools) or a mixture (mix:local_only+tight_budget)
    components: str  # "+"-joined single families
    template_ids: str  # "+"-joined template ids, one per component
    instruction: str
    template_instruction: str  # before any paraphrase
    paraphrased: bool
    named_tools_json: str
    tool_set_id: str
    tools_json: str  # the tool set, in the vector's order
    vector_json: str  # [p_tool_1..p_tool_n, p_accuracy, p_cost, p_latency]
    p_accuracy: float = Field(sa_type=Double)
    p_cost: float = Field(sa_type=Double)
    p_latency: float = Field(sa_type=Double)
    schedule_id: str
    schedule_synthetic: bool
    judge_verdict: str | None = None  # consistent | unclear; None when no judge ran
