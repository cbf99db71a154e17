"""LLM-proposed domain specs: an LLM writes a small domain spec (YAML); it is accepted only if it loads through the
spec loader's checks, materialises, and yields verified tasks from the generic synthesis.

The LLM's YAML is untrusted data. It is parsed by the size- and alias-limited loader, validated by
``domains.spec.parse_spec`` (schema, references, SQL compiled and guarded, parameters declared), seeded by the
engine (SQL with bound parameters only; seed formulas are a restricted expression language, never ``eval``).
Accepted specs are written under the caller's work folder, never into the shipped ``domains/``; refusals are
kept with their reasons.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from domains.engine import DomainEngine
from domains.registry import DOMAIN_NAMES
from domains.safeyaml import YamlLimitError, load_yaml
from domains.spec import DomainSpec, SpecError, parse_spec
from inference.client import ChatRequest, LLMClient
from inference.stage_tally import StageTally
from synthesis.generate import _base_candidate
from synthesis.toolgraph import ToolGraph
from verifiers.verify import check_task

STAGE = "propose"
THEMES = ("a public library that lends books to members", "a gym with members, classes and bookings",
          "a parking garage that sells permits", "a veterinary clinic with pets and appointments",
          "a bike rental shop with bikes, customers and rentals", "a theatre selling seats for shows")
MAX_OUTPUT_CHARS = 4000  # what is kept of a refused answer in llm_stage_rejections
SYSTEM = ("You design small databases for a customer-support simulator. Reply with one YAML document only, in the "
          "format shown, with no explanation.")
# the shape only: with '...' left in, a copy of this outline never validates
OUTLINE = """domain: library
description: A public library.
now: "2025-06-15T12:00:00"
tables:
  - name: members
    noun: member
    rows: 30
    primary_key: member_id
    columns:
      - {name: member_id, type: text, seed: {kind: sequence, prefix: MB, width: 4}}
      - {name: name, type: text, seed: {kind: provider, provider: full_name}}
      - {name: status, type: text, enum: [active, blocked], seed: {kind: choice, values: [active, blocked]}}
  - ...
tools:
  - name: get_member
    kind: read
    entity: members
    description: Return one member.
    parameters:
      type: object
      properties:
        member_id: {type: string, description: "Member id."}
      required: [member_id]
    preconditions:
      - {sql: "SELECT 1 FROM members WHERE member_id = :member_id", error: "Member {member_id} not found."}
    returns: {sql: "SELECT * FROM members WHERE member_id = :member_id"}
  - name: block_member
    kind: write
    ...
utterances:
  get_member: ["look up {member_id}"]
  block_member: ["block {member_id}"]
"""


@dataclass(frozen=True)
class Proposal:
    """An accepted spec: where it was stored and what it yielded."""

    subject_id: str
    name: str
    spec_hash: str
    path: str
    tables: int
    tools: int
    verified_tasks: int
    candidates: int


@dataclass(frozen=True)
class Rejection:
    subject_id: str
    reason: str  # llm_error | budget_exceeded | empty | not_yaml | invalid_spec | name_taken | not_materialised
    # | invariants_broken | synthesis_failed | too_few_tasks
    detail: str
    output: str | None


@dataclass
class ProposeResult(StageTally):
    stage: ClassVar[str] = STAGE
    accepted: list[Proposal] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)


@dataclass(frozen=True)
class GateConfig:
    min_tasks: int = 3  # verified tasks a spec must yield
    candidates: int = 24  # task candidates sampled to find them
    kill_threshold: float = 0.9


def extract_yaml(text: str) -> str:
    """The YAML inside a fenced block if there is one, else the whole answer."""
    fenced = re.search(r"```(?:ya?ml)?\s*\n(.*?)(?:```|\Z)", text, flags=re.S)
    return (fenced.group(1) if fenced else text).strip()


def judge_spec(subject_id: str, text: str, gate: GateConfig = GateConfig()) -> DomainSpec | Rejection:
    """The loaded spec when ``text`` passes every check up to materialisation, else the first reason it does not."""
    source = extract_yaml(text)
    kept = text[:MAX_OUTPUT_CHARS]
    if not source:
        return Rejection(subject_id, "empty", "the model returned no YAML", kept)
    try:
        raw = load_yaml(source)
    except YamlLimitError as exc:
        return Rejection(subject_id, "not_yaml", str(exc), kept)
    except Exception as exc:  # noqa: BLE001 - the YAML library raises several unrelated types on bad input
        return Rejection(subject_id, "not_yaml", _one_line(f"{type(exc).__name__}: {exc}"), kept)
    try:
        spec = parse_spec(raw, label=subject_id, source=source)
    except SpecError as exc:
        more = f" (+{len(exc.problems) - 3} more)" if len(exc.problems) > 3 else ""
        return Rejection(subject_id, "invalid_spec", _one_line("; ".join(exc.problems[:3])) + more, kept)
    if spec.name in DOMAIN_NAMES:
        return Rejection(subject_id, "name_taken", f"{spec.name!r} is a shipped domain", kept)
    return spec


def try_spec(subject_id: str, text: str, gate: GateConfig = GateConfig()) -> tuple[DomainSpec, int, int] | Rejection:
    """Load, materialise and synthesise: (spec, verified tasks, candidates) or the reason for refusal."""
    judged = judge_spec(subject_id, text, gate)
    if isinstance(judged, Rejection):
        return judged
    kept = text[:MAX_OUTPUT_CHARS]
    try:
        engine = DomainEngine(judged, seed=0)
    except Exception as exc:  # noqa: BLE001 - any failure to seed is the spec's fault and is reported, not raised
        return Rejection(subject_id, "not_materialised", _one_line(f"{type(exc).__name__}: {exc}"), kept)
    broken = _broken_invariants(engine)
    if broken:
        return Rejection(subject_id, "invariants_broken", "seeded data still breaks " + ", ".join(
            f"{name} ({rows} rows)" for name, rows in sorted(broken.items())), kept)
    try:
        verified = verified_tasks(engine, gate)
    except Exception as exc:  # noqa: BLE001 - the generic sampler meeting a spec shape it cannot use
        return Rejection(subject_id, "synthesis_failed", _one_line(f"{type(exc).__name__}: {exc}"), kept)
    if verified < gate.min_tasks:
        return Rejection(subject_id, "too_few_tasks", f"{verified} of {gate.candidates} candidates verified; "
                                                      f"needs {gate.min_tasks}", kept)
    return judged, verified, gate.candidates


def _broken_invariants(engine: DomainEngine) -> dict[str, int]:
    """The spec's own invariants that its seeded data breaks even after repair (name -> violating rows)."""
    from domains.invariants import violation_counts

    with engine.fresh() as db:
        return {name: rows for name, rows in violation_counts(db.conn, engine.spec).items() if rows}


def verified_tasks(engine: DomainEngine, gate: GateConfig) -> int:
    """How many of ``gate.candidates`` generic task candidates pass the publication checks on ``engine``."""
    graph = ToolGraph(engine)
    rng = random.Random(f"propose:{engine.spec.spec_hash}")
    verified = 0
    for _ in range(gate.candidates):
        task = _base_candidate(graph, rng, engine.seed)
        if task is not None and check_task(task.verifiable(), engine).admissible(gate.kill_threshold)[0]:
            verified += 1
            if verified >= gate.min_tasks:
                break  # enough evidence: the rest would only cost time
    return verified


def store(spec: DomainSpec, source: str, out_dir: str | Path, meta: dict[str, Any]) -> Path:
    """Write an accepted spec to ``out_dir/<name>-<hash>/<name>.yaml`` with a ``proposal.json`` beside it."""
    folder = Path(out_dir) / f"{spec.name}-{spec.spec_hash}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{spec.name}.yaml"
    path.write_text(source, encoding="utf-8")
    (folder / "proposal.json").write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")
    return path


def propose_domains(llm: LLMClient, out_dir: str | Path, *, count: int = 2, gate: GateConfig = GateConfig(),
                    temperature: float = 0.7, max_tokens: int = 400) -> ProposeResult:
    """Ask ``llm`` for ``count`` domain specs (one per theme) and keep those that pass the gate under ``out_dir``."""
    themes = [THEMES[i % len(THEMES)] for i in range(count)]
    subjects = [f"proposal-{i}" for i in range(count)]
    requests = [ChatRequest(messages=prompt(theme), params={"temperature": temperature, "max_tokens": max_tokens,
                                                            "seed": i},
                            stage=STAGE, task_id=subject) for i, (theme, subject) in enumerate(zip(themes, subjects))]
    result = ProposeResult()
    for subject, theme, reply in zip(subjects, themes, llm.chat_many(requests)):
        if not reply.ok:
            reason = "budget_exceeded" if reply.error_kind == "budget_exceeded" else "llm_error"
            result.rejections.append(Rejection(subject, reason, f"{reply.error_kind}: {reply.error_detail}", None))
            continue
        text = reply.text or ""
        tried = try_spec(subject, text, gate)
        if isinstance(tried, Rejection):
            result.rejections.append(tried)
            continue
        spec, verified, candidates = tried
        meta = {"subject_id": subject, "theme": theme, "endpoint": llm.endpoint.name, "model": llm.endpoint.model,
                "run_id": llm.run_id, "spec_hash": spec.spec_hash, "verified_tasks": verified,
                "candidates": candidates}
        path = store(spec, extract_yaml(text), out_dir, meta)
        result.accepted.append(Proposal(subject, spec.name, spec.spec_hash, str(path), len(spec.tables),
                                        len(spec.tools), verified, candidates))
    return result


def prompt(theme: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Format:\n{OUTLINE}\nWrite a complete spec for {theme}: 3 tables linked "
                                        f"by references, 2 read tools and 2 write tools with preconditions."}]


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 400 else text[:397] + "..."


__all__ = ["GateConfig", "ProposeResult", "Proposal", "Rejection", "THEMES", "extract_yaml", "judge_spec",
           "propose_domains", "store", "try_spec", "verified_tasks"]
