"""The warehouse schema, defined once as SQLModel models (DDL is generated from these).

Keys are explicit (content hashes, snapshot-scoped ids): DuckDB has no SERIAL. Floats are DOUBLE (SQLModel would
make them 4-byte REAL, and 0.9 would read back as 0.8999...). JSON payloads are stored as JSON text columns so readers can use DuckDB's JSON functions.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Double
from sqlmodel import Field, SQLModel


class Snapshot(SQLModel, table=True):
    __tablename__ = "snapshots"
    snapshot_id: str = Field(primary_key=True)
    parent_id: str | None = None
    created_at: datetime
    code_version: str
    config_hash: str
    config_json: str
    status: str  # building | published | failed
    tasks: int = 0
    candidates: int = 0
    rejected: int = 0
    gold_errors: int = 0
    noop_passes: int = 0
    median_kill_rate: float | None = Field(default=None, sa_type=Double)
    evolved_fraction: float | None = Field(default=None, sa_type=Double)
    yield_rate: float | None = Field(default=None, sa_type=Double)
    seconds: float | None = Field(default=None, sa_type=Double)
    summary_json: str | None = None
    quality_json: str | None = None


class Domain(SQLModel, table=True):
    __tablename__ = "domains"
    snapshot_id: str = Field(primary_key=True)
    domain: str = Field(primary_key=True)
    spec_hash: str
    db_seed: int
    fingerprint: str
    tables: int
    rows: int
    read_tools: int
    write_tools: int
    description: str
    policy: str


class DomainDatabase(SQLModel, table=True):
    """Every database a snapshot's tasks run on (``tasks.seed`` names it): a domain asked for more tasks than one
    database holds has several, each seeded ``db_seed``; ``domains.db_seed`` is its first (index 0). Snapshots
    published before this table have no rows here: their tasks all run on ``domains.db_seed``."""

    __tablename__ = "domain_databases"
    snapshot_id: str = Field(primary_key=True)
    domain: str = Field(primary_key=True)
    db_index: int = Field(primary_key=True)
    db_seed: int
    fingerprint: str
    tasks: int


class Tool(SQLModel, table=True):
    __tablename__ = "tools"
    snapshot_id: str = Field(primary_key=True)
    domain: str = Field(primary_key=True)
    name: str = Field(primary_key=True)
    kind: str
    entity: str
    description: str
    parameters_json: str


class Task(SQLModel, table=True):
    __tablename__ = "tasks"
    snapshot_id: str = Field(primary_key=True)
    task_id: str = Field(primary_key=True)
    content_hash: str
    domain: str
    seed: int
    shard_id: str
    kinds: str  # "+"-joined request kinds, e.g. "lookup_write+question"
    instruction: str
    communicate_info_json: str
    evolved_from: str | None = None
    operator: str | None = None
    depth: int = 0
    calls: int
    distinct_tools: int
    write_calls: int
    tau2_json: str
    source: str = "synthesised"  # or "tau2": imported from tau2's tasks.json (synthesis/imported.py)
    # what the verifier needs besides the gold calls: criteria, user, identify_tools (VerifiableTask.contract);
    # NULL in snapshots written before it was stored
    verification_json: str | None = None
    # where each gold argument and each communicate_info value came from (verifiers/derivability.py):
    # {"calls": [{"name", "arguments": {arg: source}}], "communicate_info": {value: source}}; NULL before it was stored
    argument_sources_json: str | None = None
    # each communicate_info value typed (verifiers/values.py): [{"kind", "canonical", "source"}]; NULL before it was stored
    communicate_values_json: str | None = None


class TaskRule(SQLModel, table=True):
    """Each written rule a task's requests were decided by, in request order (``SELECT ... WHERE rule_id = ?``)."""

    __tablename__ = "task_rules"
    snapshot_id: str = Field(primary_key=True)
    task_id: str = Field(primary_key=True)
    position: int = Field(primary_key=True)
    rule_id: str
    checked_by: str | None = None  # tool | agent; NULL for an id the domain's policy does not write


class GoldCall(SQLModel, table=True):
    __tablename__ = "gold_calls"
    snapshot_id: str = Field(primary_key=True)
    task_id: str = Field(primary_key=True)
    position: int = Field(primary_key=True)
    name: str
    arguments_json: str
    side: str | None = None  # who calls it in a dual-control task ("user"); NULL: the agent


class Verdict(SQLModel, table=True):
    __tablename__ = "verdicts"
    snapshot_id: str = Field(primary_key=True)
    task_id: str = Field(primary_key=True)
    gold_valid: bool
    gold_reason: str
    noop_fails: bool
    noop_reason: str
    mutants: int
    mutants_killed: int
    kill_rate: float = Field(sa_type=Double)
    survivors_json: str


class Rejection(SQLModel, table=True):
    __tablename__ = "rejections"
    snapshot_id: str = Field(primary_key=True)
    candidate_id: str = Field(primary_key=True)  # <shard_id>-<position in shard>
    content_hash: str
    domain: str
    shard_id: str
    reason: str
    detail: str
    kinds: str
    operator: str | None = None
    depth: int = 0
    instruction: str
    gold_json: str
    kill_rate: float | None = Field(default=None, sa_type=Double)
