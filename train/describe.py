"""The ``describe-llm-tools`` job: run each LLM tool of the endpoint registry as the agent on a sample of published
tasks, record the trials, and have a writer LLM describe its capabilities from that evidence.

An endpoint that fails its health check gets a ``unreachable`` row and no trials; its previous description stays
the current one (``warehouse.eval_store.current_descriptions`` reads only ``described`` rows). No Prefect here:
``flows/describe.py`` wraps this.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from inference.client import LLMClient
from inference.endpoints import Endpoint, check_health, load_endpoints
from train.agent_runs import MeasuredEpisode, run_measured, sample_across_domains, task_kinds
from train.env import EnvConfig, Environment
from train.policies import LLMPolicy
from train.tasks import TrainingTask, load_training_set
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
    status: str  # described | unreachable | writer_failed
    reason: str | None
    trials: int
    solved: int
    description: str | None  # the new one, or the previous one kept
    evidence_trial_ids: list[str] = field(default_factory=list)


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
        lines.append(f"- {t['domain']} | {t['kinds']} | {'yes' if t['solved'] else 'no'} | {t['ended_by']} | "
                     f"{t['turns']} | {t['format_errors']}")
    for key in ("domain", "kinds"):
        tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for t in trials:
            tally[t[key]][0] += int(t["solved"])
            tally[t[key]][1] += 1
        label = "domain" if key == "domain" else "task kind"
        lines.append(f"Solved per {label}: " + "; ".join(f"{k} {s}/{n}" for k, (s, n) in sorted(tally.items())))
    return "\n".join(lines)


def writer_prompt(alias: str, trials: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"role": "system", "content": WRITER_SYSTEM},
            {"role": "user", "content": f"Model {alias} acted as a customer-service agent on these tasks.\n"
                                        f"{evidence_text(trials)}\n\nDescribe its strengths and weaknesses by "
                                        "domain and task kind in three to five sentences."}]


def describe_endpoint(cfg: DescribeConfig, endpoint: Endpoint, tasks: list[TrainingTask], kinds: dict[str, str],
                      snapshot_id: str, run_id: str, writer: Endpoint,
                      rows: DescribeRows) -> EndpointOutcome:
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    base = {"run_id": run_id, "endpoint": endpoint.name, "created_at": now, "model": endpoint.model}
    health = check_health(endpoint, timeout=min(cfg.timeout_s, 5.0))
    if not health.ok:
        rows.descriptions.append({**base, "status": "unreachable", "reason": health.reason, "writer_endpoint": None,
                                  "description": None, "evidence_trial_ids_json": "[]", "trials": 0, "solved": 0})
        return EndpointOutcome(endpoint.name, "unreachable", health.reason, 0, 0, None)
    env = Environment(EnvConfig(max_turns=cfg.max_turns, subset_tools=False, run_seed=cfg.seed))
    trials = []
    with LLMClient(endpoint, cache_dir=cfg.cache_dir, stage="describe-agent", timeout_s=cfg.timeout_s,
                   max_retries=1, snapshot_id=snapshot_id) as client:
        for n, task in enumerate(tasks):
            policy = LLMPolicy(client, task.task_id, {"temperature": 0.0, "max_tokens": cfg.agent_max_tokens})
            run = run_measured(env, task, policy)
            trials.append(trial_row(run_id, endpoint, n, snapshot_id, kinds.get(task.task_id, ""), run, now))
    rows.trials += trials
    ids = [t["trial_id"] for t in trials]
    solved = sum(int(t["solved"]) for t in trials)
    # the writer never sees the model's name: the description is about behaviour, not reputation
    with LLMClient(writer, cache_dir=cfg.cache_dir, stage="describe-writer", timeout_s=cfg.timeout_s,
                   max_retries=1) as client:
        reply = client.chat(writer_prompt("X", trials), temperature=0.0, max_tokens=cfg.writer_max_tokens)
    text = (reply.text or "").strip() if reply.ok else ""
    status = "described" if text else "writer_failed"
    reason = None if text else (f"writer {writer.name}: {reply.error_kind or 'empty answer'}: "
                                f"{reply.error_detail or ''}").strip()[:300]
    rows.descriptions.append({**base, "status": status, "reason": reason, "writer_endpoint": writer.name,
                              "description": text or None, "evidence_trial_ids_json": json.dumps(ids),
                              "trials": len(trials), "solved": solved})
    return EndpointOutcome(endpoint.name, status, reason, len(trials), solved, text or None, ids)


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
        progress(f"{endpoint.name}: {len(tasks)} trials from {data.snapshot_id}")
        outcome = describe_endpoint(cfg, endpoint, tasks, kinds, data.snapshot_id, run_id, writer, rows)
        if outcome.status != "described" and endpoint.name in previous:
            outcome.description = previous[endpoint.name]["description"]  # kept, not replaced
        progress(f"{endpoint.name}: {outcome.status}" + (f" ({outcome.reason})" if outcome.reason else "")
                 + f", {outcome.solved}/{outcome.trials} solved")
        outcomes.append(outcome)
    store_describe(cfg.warehouse, rows)
    return DescribeReport(run_id, data.snapshot_id, str(Path(cfg.warehouse)), outcomes)


def report_markdown(report: DescribeReport) -> str:
    lines = [f"# describe-llm-tools `{report.run_id}`", "", f"snapshot `{report.snapshot_id}`", "",
             "| endpoint | status | solved | description |", "|---|---|---:|---|"]
    for o in report.endpoints:
        text = (o.description or "-").replace("\n", " ").replace("|", "/")[:300]
        lines.append(f"| {o.endpoint} | {o.status} | {o.solved}/{o.trials} | {text} |")
    return "\n".join(lines) + "\n"
