"""What a learning run is measured on beyond the test split of the domains it trained on (bench/learning.py):

- ``holdout``: a domain never trained on (leave one out; the profile check keeps it out of ``data.domains``);
- ``tau2``: tau2's own airline/retail/telecom tasks, written by people and never trained on (the ``train`` split
  never holds them), scored by our verifier and by tau2's evaluator;
- ``test, gold tools``: a model scored with only the gold's tools, beside the same model on the role's whole
  catalog, so that the size of the old hint is on record;
- ``control: <instruction>``: the final model with an expert in its catalog, priced as a frontier model, under
  each preference instruction (cost first, accuracy first): its expert calls and cost per episode.

Each set is one ``evaluate-orchestrator`` run (``eval_runs``); what was measured is kept in ``<out>/sets.json``,
and a rerun scores only what is missing.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from train.evaluation.evaluate import EvalConfig, evaluate_orchestrator
from train.evaluation.report import wilson_interval
from train.stages.profiles import Profile
from train.stages.sequence import stage_eval_config
from warehouse.eval_store import eval_run_episodes

SETS_JSON = "sets.json"
EXPERT = "expert-1"


@dataclass
class SetResult:
    """One model on one set of tasks: the totals and, per episode, what controllability needs."""

    label: str  # base, sft, rft, grpo
    tasks: str  # test | holdout | tau2 | test, gold tools | control: cost first | control: accuracy first
    model: str
    eval_run_id: str
    episodes: int
    solved: int
    format_error_episodes: int
    per_domain: dict[str, list[int]]  # domain -> [solved, episodes]
    calls_per_tool: dict[str, int]
    catalog: str
    tools_offered: float
    seconds: float
    costs: list[float] = field(default_factory=list)  # USD per episode
    expert_calls: list[int] = field(default_factory=list)  # calls of expert-1 per episode
    tau2_solved: int | None = None  # tau2's evaluator: solved of ``tau2_judged``
    tau2_judged: int = 0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.solved, self.episodes)


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean with a 95% normal interval (1.96 standard errors), never below 0; (0, 0, 0) for no values."""
    if not values:
        return 0.0, 0.0, 0.0
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    half = 1.96 * sd / math.sqrt(len(values))
    return mean, max(0.0, mean - half), mean + half


def planned_sets(profile: Profile, labels: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """(model label, set name, EvalConfig changes) for every set the profile asks for, in order."""
    ev, final = profile.evaluate, labels[-1]
    plan: list[tuple[str, str, dict[str, Any]]] = []
    for label in labels:
        if ev.holdout_domains:
            plan.append((label, "holdout", {"domains": list(ev.holdout_domains), "split": None,
                                            "source": "synthesised"}))
        if ev.external:
            plan.append((label, "tau2", {"domains": list(ev.external), "split": None, "source": "tau2",
                                         "tau2_judge": True}))
        if label in ev.gold_tools:
            plan.append((label, "test, gold tools", {"catalog": "gold"}))
    control = ev.control
    if control.expert:
        for name, text in (("cost first", control.cost_first), ("accuracy first", control.accuracy_first)):
            plan.append((final, f"control: {name}", {"experts": [control.expert], "expert_priced_as": control.priced_as,
                                                    "preference_instruction": text,
                                                    "limit": control.max_tasks or ev.max_tasks}))
    return plan


def set_result(cfg: EvalConfig, label: str, tasks: str, seconds: float, report: Any) -> SetResult:
    _, episodes = eval_run_episodes(cfg.warehouse, report.run_id)
    per_domain: dict[str, list[int]] = {}
    for e in episodes:
        tally = per_domain.setdefault(e["domain"], [0, 0])
        tally[0] += int(bool(e["solved"]))
        tally[1] += 1
    verdicts = report.tau2_verdicts
    return SetResult(label, tasks, cfg.model, report.run_id, len(episodes), sum(1 for e in episodes if e["solved"]),
                     sum(1 for e in episodes if e["format_errors"]), dict(sorted(per_domain.items())),
                     report.calls_per_tool, report.catalog, report.tools_offered, round(seconds, 1),
                     [float(e["cost_usd"]) for e in episodes], [int(e["tool_calls"].get(EXPERT, 0)) for e in episodes],
                     sum(verdicts.values()) if cfg.tau2_judge else None, len(verdicts))


def measure_sets(profile: Profile, warehouse: str, snapshot_id: str, models: list[tuple[str, str]], out: Path,
                 pricing_seed: int = 0, registry: str | None = None,
                 progress: Callable[[str], None] = print) -> list[SetResult]:
    """Score each (label, model) of the chain on the profile's extra sets; a set measured before is kept."""
    path = out / SETS_JSON
    done = {(r["label"], r["tasks"], r["model"]): SetResult(**r) for r in
            (json.loads(path.read_text()) if path.exists() else [])}
    store = dict(done)  # what sets.json holds: earlier sets and this run's
    chain = dict(models)
    results: list[SetResult] = []
    for label, tasks, changes in planned_sets(profile, [label for label, _ in models]):
        model = chain[label]
        key = (label, tasks, model)
        if key in done:
            progress(f"{label} on {tasks}: measured earlier ({done[key].eval_run_id}), kept")
            results.append(done[key])
            continue
        base = stage_eval_config(profile, warehouse, snapshot_id, model, out / "sets", pricing_seed)
        cfg = replace(base, registry=registry, **changes)
        started = time.perf_counter()
        report = evaluate_orchestrator(cfg, progress=lambda m: None)
        result = set_result(cfg, label, tasks, time.perf_counter() - started, report)
        low, high = result.interval
        progress(f"{label} on {tasks}: {result.solved} of {result.episodes} solved (95% CI {low:.0%}-{high:.0%})"
                 + (f"; tau2's evaluator {result.tau2_solved} of {result.tau2_judged}" if result.tau2_judged else ""))
        results.append(result)
        store[key] = result
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([asdict(r) for r in store.values()], indent=1))
    return results
