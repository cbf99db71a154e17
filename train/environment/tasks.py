"""The training set read from a published warehouse snapshot: tasks with their gold calls, and each domain's tools."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from domains.engine import ToolCall
from domains.registry import get_spec
from synthesis.persona import scenario_role
from train.environment.splits import TRAIN, check_split, snapshot_splits
from verifiers.types import VerifiableTask
from warehouse.reader import WarehouseError, connect_readonly, gold_calls, resolve_snapshot, task_contracts


@dataclass(frozen=True)
class CatalogTool:
    """One tool as the agent sees it, with what a call costs (USD) and how long it takes (seconds)."""

    name: str
    description: str
    parameters: dict[str, Any]
    kind: str = "read"
    cost: float = 0.0
    latency: float = 0.0

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True)
class TrainingTask:
    task_id: str
    domain: str
    seed: int
    instruction: str
    gold_calls: tuple[ToolCall, ...]
    communicate_info: tuple[str, ...] = ()
    preference: dict[str, Any] | None = None  # None: the accuracy-first default
    preference_instruction: str | None = None  # the user's preference in words; the system prompt shows it
    user_scenario: dict[str, Any] | None = None  # tau2's user_scenario: persona and instructions (known_info, ...)
    schedule_id: str | None = None  # the pricing schedule drawn for this instance (train/stages/trainset.py)
    cost_scale: float = 1.0  # that schedule's prices relative to the nominal table, applied to every tool's cost
    latency_scale: float = 1.0
    # the stored verification contract (criteria, user, identify_tools); None: a snapshot written before it
    contract: dict[str, Any] | None = None

    @property
    def role(self) -> str | None:
        """The user's spec role (``customer``, ``staff``) from the scenario's data; None for tasks without one."""
        return scenario_role(self.user_scenario)

    @property
    def known_facts(self) -> tuple[str, ...]:
        """What the user knows, one fact per item ("station id: WS0001")."""
        known = ((self.user_scenario or {}).get("instructions") or {}).get("known_info") or ""
        return tuple(k.strip() for k in str(known).split("; ") if k.strip())

    def verifiable(self) -> VerifiableTask:
        """The task as admission judged it: the reward checks the same user identification and criteria."""
        return VerifiableTask(self.domain, self.seed, self.gold_calls, self.communicate_info).with_contract(self.contract)


@dataclass
class TrainingSet:
    snapshot_id: str
    tasks: list[TrainingTask]
    tools: dict[str, list[CatalogTool]] = field(default_factory=dict)  # per domain
    policies: dict[str, str] = field(default_factory=dict)
    # which split the tasks are (None: all), the rule, and each split's size in the snapshot's chosen domains
    splits: dict[str, Any] = field(default_factory=dict)


# Placeholder flat schedule for domain tools until per-instance pricing schedules exist (issue 10): a write is
# dearer and slower than a read, so the cost and latency features are not constant across rollouts.
DEFAULT_PRICE = {"read": (0.0005, 0.2), "write": (0.001, 0.4)}
EXTERNAL_SOURCE = "tau2"  # tasks imported from tau2-bench (synthesis/imported.py): never trained on
SOURCES = (None, "synthesised", EXTERNAL_SOURCE)


def has_source_column(con: Any) -> bool:
    return bool(con.execute("SELECT count(*) FROM information_schema.columns WHERE table_name = 'tasks' "
                            "AND column_name = 'source'").fetchone()[0])


def load_training_set(warehouse: str | Path, snapshot: str = "latest", domains: list[str] | None = None,
                      limit: int | None = None, split: str | None = None, source: str | None = None) -> TrainingSet:
    """Tasks (ordered by task id), tool catalogs and policies of one published snapshot.

    ``split``: ``train`` or ``test`` keeps that split's tasks only (train/environment/splits.py), before ``limit``;
    None: all. ``source``: ``synthesised`` or ``tau2`` keeps the tasks of that origin only; None: both. The
    ``train`` split never holds tau2's imported tasks: written by people, they are an external test set."""
    if split is not None:
        check_split(split)
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(s for s in SOURCES if s)} or None, got {source!r}")
    con = connect_readonly(warehouse)
    try:
        snapshot_id = resolve_snapshot(con, snapshot)
        status = con.execute("SELECT status FROM snapshots WHERE snapshot_id = ?", [snapshot_id]).fetchone()[0]
        if status != "published":
            raise WarehouseError(f"snapshot {snapshot_id} is {status}, not published; train only on published data")
        where, params = "snapshot_id = ?", [snapshot_id]
        if domains:
            where += f" AND domain IN ({', '.join('?' for _ in domains)})"
            params += list(domains)
        if has_source_column(con):  # a warehouse written before imports holds synthesised tasks only
            if source is not None:
                where += " AND source = ?"
                params.append(source)
            if split == TRAIN:
                where += " AND source <> ?"
                params.append(EXTERNAL_SOURCE)
        elif source == EXTERNAL_SOURCE:
            raise WarehouseError(f"warehouse {warehouse} records no task sources: it holds no imported tau2 tasks")
        rows = con.execute(f"SELECT task_id, domain, seed, instruction, communicate_info_json, tau2_json FROM tasks "
                           f"WHERE {where} ORDER BY task_id", params).fetchall()
        rule = snapshot_splits(con, snapshot_id, [r[0] for r in rows])
        splits = {"split": split, "rule": rule.rule, **rule.sizes([r[0] for r in rows])}
        rows = [r for r in rows if split is None or rule.of(r[0]) == split][:limit or None]
        gold = gold_calls(con, snapshot_id)
        contracts = task_contracts(con, snapshot_id)
        tasks = [TrainingTask(tid, dom, int(seed), instr, tuple(gold.get(tid, ())), tuple(json.loads(info or "[]")),
                              user_scenario=json.loads(tau2 or "{}").get("user_scenario"), contract=contracts.get(tid))
                 for tid, dom, seed, instr, info, tau2 in rows]
        used = sorted({t.domain for t in tasks})
        tools: dict[str, list[CatalogTool]] = {d: [] for d in used}
        for dom, name, kind, desc, params_json in con.execute(
                "SELECT domain, name, kind, description, parameters_json FROM tools WHERE snapshot_id = ? "
                "ORDER BY domain, name", [snapshot_id]).fetchall():
            if dom in tools:
                cost, latency = DEFAULT_PRICE.get(kind, DEFAULT_PRICE["read"])
                tools[dom].append(CatalogTool(name, desc, json.loads(params_json), kind, cost, latency))
    finally:
        con.close()
    if not tasks:
        raise WarehouseError(f"snapshot {snapshot_id} has no tasks" + (f" in {', '.join(domains)}" if domains else "")
                             + (f" in its {split} split" if split else ""))
    return TrainingSet(snapshot_id, tasks, tools, {d: get_spec(d).policy for d in used}, splits)
