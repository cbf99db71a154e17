"""Tasks read back from a warehouse snapshot, as ``Task`` objects the LLM stages can rewrite, evolve and verify.
The stored verification contract gives back the user and criteria, the user scenario the persona.

A published task keeps its request text, what the user knows, its gold calls and what must be said; it does not
keep the sampler's per-request structure. A ``StoredTask`` holds the whole request as one ``Request`` whose calls
are the gold calls, so verification, the paraphrase gate and the evolution operators all work on it unchanged.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domains.engine import ToolCall
from synthesis.persona import stored_persona
from synthesis.requests import Request
from synthesis.task import STYLE, Task
from verifiers.types import VerifiableTask
from warehouse.reader import connect_readonly, gold_calls, resolve_snapshot, task_contracts


@dataclass
class StoredTask(Task):
    """A task of a snapshot: its published text and id, whatever the current renderer would make of it."""

    stored_id: str = ""
    text: str = ""

    def reason_for_call(self) -> str:
        return self.text

    @property
    def task_id(self) -> str:  # the id the warehouse knows it by, so lineage points at a real row
        return self.stored_id


@dataclass(frozen=True)
class SnapshotSample:
    snapshot_id: str
    tasks: list[StoredTask]
    available: int  # tasks in the snapshot (after the domain filter) the sample was drawn from


def from_tau2(task_id: str, domain: str, seed: int, tau2: dict[str, object],
              gold_calls: list[ToolCall], communicate_info: list[str],
              contract: dict[str, Any] | None = None) -> StoredTask:
    """Rebuild one published task from its tau2 JSON, gold calls and stored verification contract (its user,
    identification tools and criteria; absent in snapshots written before contracts were stored)."""
    ins = tau2["user_scenario"]["instructions"]  # type: ignore[index]
    known_text = ins.get("known_info") or ""
    known = tuple(known_text.split("; ")) if known_text else ()
    unknown_text = ins.get("unknown_info") or ""
    unknown = (unknown_text.removeprefix("You do not know ").removesuffix("."),) if unknown_text else ()
    style, distractors = _style_of(domain, ins.get("task_instructions") or "")
    request = Request("stored", ins["reason_for_call"], tuple(gold_calls), communicate=tuple(communicate_info),
                      known=known, unknown=unknown)
    verifiable = VerifiableTask(domain, seed, tuple(gold_calls)).with_contract(contract)
    # who asks: with the user from the contract, the realistic evolution operators can grow the task (same user)
    persona = stored_persona(tau2.get("user_scenario")) if verifiable.user else None  # type: ignore[arg-type]
    return StoredTask(domain=domain, seed=seed, requests=[request], style=style, distractors=distractors,
                      persona=persona, user=verifiable.user, identify_tools=verifiable.identify_tools,
                      criteria=verifiable.criteria, setup_calls=verifiable.setup_calls,
                      env_assertions=verifiable.env_assertions, actions=verifiable.actions, stored_id=task_id,
                      text=ins["reason_for_call"])


def sample_snapshot(warehouse: str | Path, n: int, *, seed: int = 0, snapshot: str = "latest",
                    domains: list[str] | None = None) -> SnapshotSample:
    """``n`` tasks drawn at random (seeded) from ``snapshot`` (default: the latest published one)."""
    con = connect_readonly(warehouse)
    try:
        sid = resolve_snapshot(con, snapshot)
        rows = con.execute("SELECT task_id, domain, seed, tau2_json, communicate_info_json FROM tasks "
                           "WHERE snapshot_id = ? ORDER BY task_id", [sid]).fetchall()
        if domains:
            rows = [r for r in rows if r[1] in set(domains)]
        picked = sorted(random.Random(seed).sample(rows, min(n, len(rows))))
        contracts = task_contracts(con, sid)
        tasks = []
        for task_id, domain, task_seed, tau2_json, communicate_json in picked:
            calls = gold_calls(con, sid, task_id).get(task_id, [])
            tasks.append(from_tau2(task_id, domain, int(task_seed), json.loads(tau2_json), calls,
                                   json.loads(communicate_json), contracts.get(task_id)))
    finally:
        con.close()
    return SnapshotSample(sid, tasks, len(rows))


def _style_of(domain: str, task_instructions: str) -> tuple[int, list[str]]:
    """The style index whose text opens ``task_instructions``, and the distractor lines that follow it."""
    for style, text in enumerate(STYLE):
        opening = text.format(domain=domain)
        if task_instructions.startswith(opening):
            rest = task_instructions[len(opening):].strip()
            return style, [rest] if rest else []
    return 0, []  # written by another renderer: the persona text is lost, the gold calls are not


__all__ = ["SnapshotSample", "StoredTask", "from_tau2", "sample_snapshot"]
