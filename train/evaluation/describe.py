"""The ``describe-llm-tools`` job: run each LLM tool of the endpoint registry as the agent on a sample of published
tasks, record the trials, and have a writer LLM describe its capabilities from that evidence.

Each trial is reported as it ends (one progress line, with its elapsed time); trials whose agent call timed out
are counted. A description is stored with its evidence (solved k of n per task kind and per domain,
``train/evaluation/describe_evidence.py``); one that the trials contradict is ``refused`` with the reason. An endpoint that
fails its health check gets a ``unreachable`` row and no trials. Whenever no new description is accepted, the
previous one stays the current one (``warehouse.eval_store.current_descriptions`` reads only ``described`` rows).
No Prefect here: ``flows/describe.py`` wraps this.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from inference.client import LLMClient
from inference.endpoints import Endpoint, check_health, load_endpoints
from train.evaluation.describe_evidence import Evidence, contradiction, evidence_of, timed_out
from train.evaluation.agent_runs import MeasuredEpisode, run_measured, sample_across_domains, task_kinds
from train.environment.env import EnvConfig, Environment
from train.environment.policies import LLMPolicy
from train.environment.tasks import TrainingTask, load_training_set
from warehouse.eval_store import DescribeRows, current_descriptions, store_describe

WRITER_SYSTEM = ("You write short capability descriptions of language models that an orchestrator will read when "
                 "deciding which model to call. Use only the evidence given.")


@dataclass
class DescribeConfig:
    warehouse: str
    registry: str | None = None  # endpoint registry file; None: $TOOLSCALE_ENDPOINTS or inference/endpoints.yaml
    endpoints: list[str] | None = None  # None: every endpoint of the registry
    writer: str | None = None  # writer endpoint name; None: the registry's default
    snapshot: str = "latest"
    tasks: int = 10
    seed: int = 0
    max_turns: int = 8
    agent_max_tokens: int = 256
    writer_max_tokens: int = 256
    timeout_s: float = 60.0
    cache_dir: str | None = None

    def validate(self) -> None:
        if self.tasks < 1:
            raise ValueError(f"tasks must be at least 1, got {self.tasks}")
        if self.max_turns < 1 or self.agent_max_tokens < 1 or self.writer_max_tokens < 1:
            raise ValueError("max_turns, agent_max_tokens and writer_max_tokens must be at least 1")


@dataclass
class EndpointOutcome:
    endpoint: str
    status: str  # described | refused | unreachable | writer_failed
    reason: str | None
    trials: int
    solved: int
    description: str | None  # the new one, or the previous one kept
    evidence_trial_ids: list[str] = field(default_factory=list)
    timeouts: int = 0  # trials whose agent call timed out
    evidence: dict[str, Any] | None = None  # Evidence.to_dict() of this run's trials
    proposed: str | None = None  # what the writer wrote (refused: the text that was not stored as current)


@dataclass
class DescribeReport:
    run_id: str
    snapshot_id: str
    warehouse: str
    endpoints: list[EndpointOutcome]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def trial_row(run_id: str, endpoint: Endpoint, n: int, snapshot_id: str, kinds: str, run: MeasuredEpisode,
              now: datetime) -> dict[str, Any]:
    r = run.result
    return {"trial_id": f"{run_id}-{endpoint.name}-{n}", "run_id": run_id, "created_at": now,
            "endpoint": endpoint.name, "model": endpoint.model, "snapshot_id": snapshot_id, "task_id": r.task_id,
            "domain": r.domain, "kinds": kinds, "solved": r.solved, "ended_by": r.ended_by, "turns": r.turns,
            "format_errors": r.format_errors, "prompt_tokens": run.prompt_tokens,
            "completion_tokens": run.completion_tokens, "cost_usd": run.cost_usd, "latency_s": run.latency_s,
            "error": r.error, "trajectory_json": json.dumps(r.messages, ensure_ascii=False)}


def evidence_text(trials: list[dict[str, Any]]) -> str:
    """The evidence the writer sees: one line per trial and a tally per domain and per task kind."""
    lines = ["Trials (domain | task kinds | solved | how it ended | turns | format errors):"]
    for t in trials:
        ended = "timed out" if timed_out(t) else t["ended_by"]
        lines.append(f"- {t['domain']} | {t['kinds']} | {'yes' if t['solved'] else 'no'} | {ended} | "
                     f"{t['turns']} | {t['format_errors']}")
    ev = evidence_of(trials)
    for label, tally in (("domain", ev.per_domain), ("task kind", ev.per_kind)):
        lines.append(f"Solved per {label}: " + "; ".join(f"{k} {s}/{n}" for k, (s, n) in sorted(tally.items())))
    lines.append(f"Solved in all: {ev.solved}/{ev.trials}; timed out: {ev.timeouts}")
    return "\n".join(lines)


def writer_prompt(alias: str, trials: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"role": "system", "content": WRITER_SYSTEM},
            {"role": "user", "content": f"Model {alias} acted as a customer-service agent on these tasks.\n"
                                        f"{evidence_text(trials)}\n\nDescribe its strengths and weaknesses by "
                                        "domain and task kind in three to five sentences. Quote only the counts "
                                        "above."}]


def trial_line(endpoint: str, n: int, total: int, trial: dict[str, Any], elapsed_s: float) -> str:
    """One progress line per trial, e.g. ``local-smollm2: trial 3/10 weather (identify+intent): not solved,
    turn_limit, 41.2 s``."""
    outcome = "solved" if trial["solved"] else ("timed out" if timed_out(trial) else f"not solved, {trial['ended_by']}")
    return f"{endpoint}: trial {n}/{total} {trial['domain']} ({trial['kinds'] or '-'}): {outcome}, {elapsed_s:.1f} s"


def describe_endpoint(cfg: DescribeConfig, endpoint: Endpoint, tasks: list[TrainingTask], kinds: dict[str, str],
                      snapshot_id: str, run_id: str, writer: Endpoint,
                      rows: DescribeRows, progress: Any = print) -> EndpointOutcome:
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    base = {"run_id": run_id, "endpoint": endpoint.name, "created_at": now, "model": endpoint.model}
    health = check_health(endpoint, timeout=min(cfg.timeout_s, 5.0))
    if not health.ok:
        rows.descriptions.append({**base, "status": "unreachable", "reason": health.reason, "writer_endpoint": None,
                                  "description": None, "evidence_trial_ids_json": "[]", "trials": 0, "solved": 0,
                                  "evidence_json": None, "proposed_description": None})
        return EndpointOutcome(endpoint.name, "unreachable", health.reason, 0, 0, None)
    env = Environment(EnvConfig(max_turns=cfg.max_turns, subset_tools=False, run_seed=cfg.seed))
    trials = []
    with LLMClient(endpoint, cache_dir=cfg.cache_dir, stage="describe-agent", timeout_s=cfg.timeout_s,
                   max_retries=1, snapshot_id=snapshot_id) as client:
        for n, task in enumerate(tasks):
            policy = LLMPolicy(client, task.task_id, {"temperature": 0.0, "max_tokens": cfg.agent_max_tokens})
            start = time.monotonic()
            run = run_measured(env, task, policy)
            trials.append(trial_row(run_id, endpoint, n, snapshot_id, kinds.get(task.task_id, ""), run, now))
            progress(trial_line(endpoint.name, n + 1, len(tasks), trials[-1], time.monotonic() - start))
    rows.trials += trials
    ids = [t["trial_id"] for t in trials]
    evidence = evidence_of(trials)
    solved = evidence.solved
    # the writer never sees the model's name: the description is about behaviour, not reputation
    with LLMClient(writer, cache_dir=cfg.cache_dir, stage="describe-writer", timeout_s=cfg.timeout_s,
                   max_retries=1) as client:
        reply = client.chat(writer_prompt("X", trials), temperature=0.0, max_tokens=cfg.writer_max_tokens)
    text = (reply.text or "").strip() if reply.ok else ""
    status, reason = judge(text, evidence, writer, reply)
    accepted = text if status == "described" else None
    rows.descriptions.append({**base, "status": status, "reason": reason, "writer_endpoint": writer.name,
                              "description": accepted, "evidence_trial_ids_json": json.dumps(ids),
                              "trials": len(trials), "solved": solved,
                              "evidence_json": json.dumps(evidence.to_dict()), "proposed_description": text or None})
    return EndpointOutcome(endpoint.name, status, reason, len(trials), solved, accepted, ids, evidence.timeouts,
                           evidence.to_dict(), text or None)


def judge(text: str, evidence: Evidence, writer: Endpoint, reply: Any) -> tuple[str, str | None]:
    """``described`` when the writer's text is there and the trials do not contradict it; else why not."""
    if not text:
        return "writer_failed", (f"writer {writer.name}: {reply.error_kind or 'empty answer'}: "
                                 f"{reply.error_detail or ''}").strip()[:300]
    why = contradiction(text, evidence)
    return ("refused", f"contradicted by the trials: {why}"[:300]) if why else ("described", None)


def describe_llm_tools(cfg: DescribeConfig, progress: Any = print) -> DescribeReport:
    """Describe every (selected) registry endpoint; one warehouse write at the end."""
    cfg.validate()
    registry = load_endpoints(cfg.registry)
    names = cfg.endpoints or sorted(registry.endpoints)
    endpoints = [registry.get(n) for n in names]  # an unknown name fails here, before any work
    writer = registry.get(cfg.writer)
    data = load_training_set(cfg.warehouse, cfg.snapshot)
    tasks = sample_across_domains(data.tasks, cfg.tasks, cfg.seed)
    kinds = task_kinds(cfg.warehouse, data.snapshot_id)
    previous = current_descriptions(cfg.warehouse)
    run_id = datetime.now(timezone.utc).strftime("describe-%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6]
    rows = DescribeRows()
    outcomes = []
    for endpoint in endpoints:
        progress(f"{endpoint.name}: {len(tasks)} trials from {data.snapshot_id} ({cfg.timeout_s:g} s per agent call)")
        outcome = describe_endpoint(cfg, endpoint, tasks, kinds, data.snapshot_id, run_id, writer, rows, progress)
        if outcome.status != "described" and endpoint.name in previous:
            outcome.description = previous[endpoint.name]["description"]  # kept, not replaced
        progress(f"{endpoint.name}: {outcome.status}" + (f" ({outcome.reason})" if outcome.reason else "")
                 + f", {outcome.solved}/{outcome.trials} solved, {outcome.timeouts} timed out")
        outcomes.append(outcome)
    store_describe(cfg.warehouse, rows)
    return DescribeReport(run_id, data.snapshot_id, str(Path(cfg.warehouse)), outcomes)


def report_markdown(report: DescribeReport) -> str:
    lines = [f"# describe-llm-tools `{report.run_id}`", "", f"snapshot `{report.snapshot_id}`", "",
             "| endpoint | status | solved | timed out | description |", "|---|---|---:|---:|---|"]
    for o in report.endpoints:
        text = (o.description or "-").replace("\n", " ").replace("|", "/")[:300]
        lines.append(f"| {o.endpoint} | {o.status} | {o.solved}/{o.trials} | {o.timeouts} | {text} |")
    return "\n".join(lines) + "\n"
