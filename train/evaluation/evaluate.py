"""The ``evaluate-orchestrator`` job: a checkpoint folder or any OpenAI-compatible endpoint as the agent on a
snapshot's evaluation split, under held-out pricing only.

Reports accuracy, cost, latency, calls per tool (the distribution that shows self- and other-enhancement bias) and
the Eq. 6 preference score against a baseline run (train/evaluation/preference_score.py); draws two PNGs (tool usage;
accuracy against cost); stores ``eval_runs`` and ``eval_episodes`` rows. No Prefect here: ``flows/evaluate.py``
wraps this.

The evaluation split is the snapshot's ``test`` split (train/environment/splits.py, the rule that keeps it out of training): its
own when its ``tasks`` table carries a ``split`` column, else the tau2 export's rule (``test`` is the fifth of task
ids with the lowest hashes), so the same task is in the same split in every snapshot.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from inference.client import LLMClient
from inference.endpoints import load_endpoints
from inference.pricing import synthetic_schedules
from train.evaluation.agent_runs import MeasuredEpisode, run_measured
from train.models.checkpoints import evaluation_problems
from train.evaluation.diagnose import diagnose_eval
from train.environment.env import EnvConfig, Environment, EpisodeResult
from train.environment.experts import ExpertPool, ExpertSpec
from train.environment.policies import LLMPolicy, Policy
from train.evaluation.preference_score import EpisodeFeatures, preference_score
from train.evaluation.report import draw_diagnosis, save_figure
from train.environment.rewards import Preference
from train.environment.splits import TEST, check_split, snapshot_splits
from train.environment.tasks import TrainingSet, TrainingTask, load_training_set
from warehouse.eval_store import EvalRows, eval_run_episodes, store_eval
from warehouse.reader import connect_readonly


@dataclass
class EvalConfig:
    warehouse: str
    model: str  # an endpoint name of the registry, or a checkpoint folder (transformers)
    registry: str | None = None
    snapshot: str = "latest"
    domains: list[str] | None = None
    limit: int | None = None  # at most this many tasks of the split (the first by task id)
    split: str | None = TEST  # None: every split, only for tasks never trained on (a held-out domain, tau2's own)
    source: str | None = None  # synthesised | tau2 (tau2's imported tasks) | None: both
    tau2_judge: bool = False  # also score tau2's imported tasks with tau2's own evaluator (train/evaluation/tau2_judge.py)
    expert_priced_as: str | None = None  # the schedule model the experts are priced as (e.g. gpt-5); None: their own key
    seed: int = 0  # per-instance draws (tool subset off; the held-out schedule)
    pricing_seed: int = 0  # seed of the synthetic schedules; only the held-out ones are used
    experts: list[str] = field(default_factory=list)  # registry endpoints offered as expert-1..n
    preference: dict[str, Any] | None = None  # P; None: accuracy first
    baseline_run: str | None = None  # an eval_runs run_id on the same split; None: this run is its own baseline
    max_turns: int = 10
    agent_max_tokens: int = 512
    max_tools: int | None = None  # refused: evaluation offers the role's whole catalog (a cap would need the gold)
    catalog: str = "role"  # role: the user role's whole catalog, gold-blind; gold: only the gold's tools (a hint)
    local_search: bool = False  # offered with the domain's tools when the profile enables it
    code_interpreter: bool = False
    tool_format: str = "json"  # json | lines: how the prompt writes the tools (a profile's environment.tool_format)
    preference_instruction: str | None = None  # the user's preference in words, in every task's prompt
    timeout_s: float = 120.0
    out_dir: str = "work/eval"
    cache_dir: str | None = None
    bf16: bool = False  # a checkpoint folder sampled under CPU bf16 autocast (a profile's model.mixed_precision)

    def validate(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be at least 1, got {self.limit}")
        if self.split is not None:
            check_split(self.split)
        if self.max_turns < 1 or self.agent_max_tokens < 1:
            raise ValueError("max_turns and agent_max_tokens must be at least 1")
        Preference.from_dict(self.preference)  # a bad preference vector fails before any episode runs
        self.env_config()  # a cap on tools or an unknown catalog: one line before any episode
        if Path(self.model).is_dir() and (problems := evaluation_problems(self.model)):
            # a checkpoint a kill left half-written: one line now, not a traceback from from_pretrained later
            raise ValueError(f"cannot evaluate {self.model}: incomplete checkpoint ({'; '.join(problems)})")

    def env_config(self) -> EnvConfig:
        """The episode configuration of every evaluation: held-out pricing, and the tools the catalog names, whole
        and in the spec's order (no random subset, no cap: nothing is chosen by the gold)."""
        return EnvConfig(max_turns=self.max_turns, mode="eval", run_seed=self.seed, subset_tools=False,
                         max_tools=self.max_tools, catalog=self.catalog, local_search=self.local_search,
                         code_interpreter=self.code_interpreter, preference_instruction=self.preference_instruction,
                         tool_format=self.tool_format)

    def catalog_label(self) -> str:
        extras = [n for n, on in (("search", self.local_search), ("code", self.code_interpreter),
                                  (f"{len(self.experts)} expert(s)", bool(self.experts))) if on]
        base = "the role's whole catalog (gold-blind)" if self.catalog == "role" else "the gold's tools only (a hint)"
        return base + (f" + {', '.join(extras)}" if extras else "")


@dataclass
class EvalReport:
    run_id: str
    model: str
    source: str
    snapshot_id: str
    split_rule: str
    episodes: int
    accuracy: float
    mean_cost_usd: float
    mean_latency_s: float
    total_cost_usd: float
    format_errors: int
    calls_per_tool: dict[str, int]
    preference_score: float
    baseline_run_id: str | None
    schedules: list[str]
    per_domain: dict[str, dict[str, float]]
    plots: dict[str, str]
    warehouse: str
    diagnosis: list[str] = field(default_factory=list)  # what went wrong, in words (train/evaluation/diagnose.py)
    splits: dict[str, Any] = field(default_factory=dict)  # the split evaluated, its rule, train and test sizes
    catalog: str = ""  # which tools each prompt offered (EvalConfig.catalog_label)
    tau2_verdicts: dict[str, bool] = field(default_factory=dict)  # task id -> tau2's evaluator's verdict
    tools_offered: float = 0.0  # tools listed per prompt, on average

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluation_split(warehouse: str, snapshot_id: str, tasks: list[TrainingTask]) -> tuple[list[TrainingTask], str]:
    """The ``test`` tasks among ``tasks`` and where the split came from (``stored`` or ``derived``): the same rule
    that keeps them out of training (train/environment/splits.py)."""
    con = connect_readonly(warehouse)
    try:
        rule = snapshot_splits(con, snapshot_id, [t.task_id for t in tasks])
    finally:
        con.close()
    return [t for t in tasks if rule.of(t.task_id) == TEST], rule.rule


def evaluation_set(cfg: EvalConfig) -> TrainingSet:
    """The tasks ``cfg`` evaluates: the snapshot's ``test`` split only (at most ``cfg.limit`` of them, taken in turn
    from each domain, each domain's first by task id, so that a limit still covers every domain)."""
    data = load_training_set(cfg.warehouse, cfg.snapshot, cfg.domains, None, split=cfg.split, source=cfg.source)
    if cfg.limit is not None:
        data.tasks = in_turns(data.tasks, cfg.limit)
    return data


def in_turns(tasks: list[TrainingTask], n: int) -> list[TrainingTask]:
    """The first ``n`` tasks taking one from each domain in turn (each domain in task-id order), by task id."""
    queues: dict[str, list[TrainingTask]] = {}
    for task in tasks:
        queues.setdefault(task.domain, []).append(task)
    chosen: list[TrainingTask] = []
    while len(chosen) < n and any(queues.values()):
        for queue in queues.values():
            if queue and len(chosen) < n:
                chosen.append(queue.pop(0))
    return sorted(chosen, key=lambda t: t.task_id)


def make_policy(cfg: EvalConfig, stack: ExitStack) -> tuple[Policy, str]:
    """The agent and its source: a folder is a transformers checkpoint; anything else an endpoint name."""
    if Path(cfg.model).is_dir():
        from train.models.checkpoint_policy import CheckpointPolicy

        return CheckpointPolicy.load(cfg.model, cfg.agent_max_tokens, cfg.bf16), "checkpoint"
    endpoint = load_endpoints(cfg.registry).get(cfg.model)
    client = stack.enter_context(LLMClient(endpoint, cache_dir=cfg.cache_dir, stage="orchestrator-eval",
                                           timeout_s=cfg.timeout_s, max_retries=1))
    return LLMPolicy(client, None, {"temperature": 0.0, "max_tokens": cfg.agent_max_tokens}), "endpoint"


def features(run: MeasuredEpisode) -> EpisodeFeatures:
    return EpisodeFeatures({n: u.calls for n, u in run.result.usage.items() if u.calls}, run.result.solved,
                           run.cost_usd, run.latency_s)


def evaluate_orchestrator(cfg: EvalConfig, progress: Any = print) -> EvalReport:
    cfg.validate()
    preference = Preference.from_dict(cfg.preference)
    data = evaluation_set(cfg)  # a snapshot whose test split is empty is one WarehouseError line
    split, rule = data.tasks, str(data.splits["rule"])
    baseline = None
    if cfg.baseline_run:  # read first: a missing baseline fails before any episode runs
        _, stored = eval_run_episodes(cfg.warehouse, cfg.baseline_run)
        baseline = [EpisodeFeatures(r["tool_calls"], r["solved"], r["cost_usd"], r["latency_s"]) for r in stored]
    registry = load_endpoints(cfg.registry) if cfg.experts else None
    schedules = synthetic_schedules(cfg.pricing_seed)
    run_id = datetime.now(timezone.utc).strftime("eval-%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6]
    runs: list[MeasuredEpisode] = []
    with ExitStack() as stack:
        policy, source = make_policy(cfg, stack)
        experts = None
        if registry is not None:
            experts = stack.enter_context(ExpertPool([ExpertSpec(registry.get(n), cfg.expert_priced_as)
                                                      for n in cfg.experts],
                                                     cache_dir=cfg.cache_dir, timeout_s=cfg.timeout_s))
        env = Environment(cfg.env_config(), schedules, experts)
        for n, task in enumerate(split, 1):
            if isinstance(policy, LLMPolicy):
                policy.task_id = task.task_id
            run = run_measured(env, task, policy)
            progress(f"[{n}/{len(split)}] {task.task_id}: {'solved' if run.result.solved else 'failed'} "
                     f"({run.result.ended_by}, {run.result.turns} turns)")
            runs.append(run)
    feats = [features(r) for r in runs]
    score = preference_score(feats, baseline if baseline is not None else feats, preference)
    report = summarise(cfg, run_id, source, data.snapshot_id, rule, runs, score)
    report.diagnosis, report.splits = diagnose_eval([r.result for r in runs]), data.splits
    report.catalog = cfg.catalog_label()
    if cfg.tau2_judge:
        report.tau2_verdicts = tau2_verdicts([r.result for r in runs])
    report.tools_offered = sum(len(r.result.tools) for r in runs) / len(runs) if runs else 0.0
    report.plots = draw_plots(report, Path(cfg.out_dir) / run_id, baseline_point(cfg))
    store_eval(cfg.warehouse, eval_rows(cfg, report, runs, feats, preference))
    return report


def tau2_verdicts(results: list[EpisodeResult]) -> dict[str, bool]:
    """tau2's evaluator's verdict on each episode it can judge (tau2's own airline and retail tasks)."""
    from train.evaluation.tau2_judge import Tau2Judge

    judge = Tau2Judge()
    try:
        return {r.task_id: verdict for r in results if (verdict := judge.solved(r)) is not None}
    finally:
        judge.close()


def summarise(cfg: EvalConfig, run_id: str, source: str, snapshot_id: str, rule: str, runs: list[MeasuredEpisode],
              score: float) -> EvalReport:
    n = len(runs)
    calls: Counter[str] = Counter()
    for r in runs:
        calls.update({name: u.calls for name, u in r.result.usage.items()})
    per_domain: dict[str, dict[str, float]] = {}
    for domain in sorted({r.result.domain for r in runs}):
        mine = [r for r in runs if r.result.domain == domain]
        per_domain[domain] = {"episodes": len(mine), "accuracy": sum(r.result.solved for r in mine) / len(mine),
                              "mean_cost_usd": sum(r.cost_usd for r in mine) / len(mine)}
    total = sum(r.cost_usd for r in runs)
    return EvalReport(run_id, cfg.model, source, snapshot_id, rule, n, sum(r.result.solved for r in runs) / n,
                      total / n, sum(r.latency_s for r in runs) / n, total,
                      sum(r.result.format_errors for r in runs), dict(sorted(calls.items())), score, cfg.baseline_run,
                      sorted({r.result.schedule for r in runs if r.result.schedule}), per_domain, {},
                      str(cfg.warehouse))


def baseline_point(cfg: EvalConfig) -> tuple[str, float, float] | None:
    if not cfg.baseline_run:
        return None
    run, _ = eval_run_episodes(cfg.warehouse, cfg.baseline_run)
    return (f"baseline {run['model']}", run["mean_cost_usd"], run["accuracy"])


def usage_figure(report: EvalReport) -> Any:
    """Calls per tool as a share of all calls; with no call at all, says so in words instead of empty bars."""
    import matplotlib

    matplotlib.use("Agg")  # no display on workers
    import matplotlib.pyplot as plt

    total = sum(report.calls_per_tool.values())
    names = [n for n, c in report.calls_per_tool.items() if c]
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(names) + 2), 4 + 0.2 * len(report.diagnosis)))
    if total:
        ax.bar(range(len(names)), [report.calls_per_tool[n] / total for n in names], color="#4c72b0")
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
        ax.set_ylabel("share of all tool calls")
        ax.set_ylim(0, 1)
    else:
        ax.set_axis_off()
        ax.text(0.5, 0.6, f"no tool calls in {report.episodes} episodes", ha="center", va="center", fontsize=12)
    ax.set_title(f"{report.model}: {total} tool calls on {report.episodes} tasks", fontsize=10)
    fig.tight_layout(rect=(0, 0.04 * len(report.diagnosis), 1, 1))
    draw_diagnosis(fig, report.diagnosis)
    return fig


def tradeoff_figure(report: EvalReport, baseline: tuple[str, float, float] | None) -> Any:
    """Accuracy against mean cost per episode (x: per domain), on a cost axis that starts at 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4 + 0.2 * len(report.diagnosis)))
    ax.scatter([report.mean_cost_usd], [report.accuracy], s=80, label=report.model, zorder=3)
    costs = [report.mean_cost_usd]
    for domain, d in report.per_domain.items():
        ax.scatter([d["mean_cost_usd"]], [d["accuracy"]], s=25, marker="x", color="gray")
        ax.annotate(domain, (d["mean_cost_usd"], d["accuracy"]), fontsize=7)
        costs.append(d["mean_cost_usd"])
    if baseline is not None:
        ax.scatter([baseline[1]], [baseline[2]], s=80, marker="s", label=baseline[0], zorder=3)
        costs.append(baseline[1])
    top = max(costs)
    ax.set_xlim(0, top * 1.15 if top > 0 else 0.001)  # a cost is never negative; all-free runs get a small axis
    ax.set_xlabel("mean cost per task (USD, held-out pricing)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=8)
    ax.set_title("accuracy against cost (x: per domain)")
    fig.tight_layout(rect=(0, 0.05 * len(report.diagnosis), 1, 1))
    draw_diagnosis(fig, report.diagnosis)
    return fig


def draw_plots(report: EvalReport, folder: Path, baseline: tuple[str, float, float] | None) -> dict[str, str]:
    """Two PNGs: calls per tool (share of all calls), and accuracy against mean cost per episode, each with the
    report's diagnosis written beneath."""
    import matplotlib.pyplot as plt

    paths = {"tool_usage": folder / "tool_usage.png", "accuracy_cost": folder / "accuracy_cost.png"}
    for key, fig in (("tool_usage", usage_figure(report)), ("accuracy_cost", tradeoff_figure(report, baseline))):
        try:
            save_figure(fig, paths[key])
        finally:
            plt.close(fig)
    return {k: str(v) for k, v in paths.items()}


def eval_rows(cfg: EvalConfig, report: EvalReport, runs: list[MeasuredEpisode], feats: list[EpisodeFeatures],
         preference: Preference) -> EvalRows:
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    tools = list(report.calls_per_tool)
    config = {k: v for k, v in asdict(cfg).items() if k not in ("warehouse", "cache_dir")} | {"splits": report.splits}
    run = {"run_id": report.run_id, "created_at": now, "model": report.model, "source": report.source,
           "snapshot_id": report.snapshot_id, "split": "test", "split_rule": report.split_rule,
           "episodes": report.episodes, "accuracy": report.accuracy, "mean_cost_usd": report.mean_cost_usd,
           "mean_latency_s": report.mean_latency_s, "total_cost_usd": report.total_cost_usd,
           "format_errors": report.format_errors, "calls_per_tool_json": json.dumps(report.calls_per_tool),
           "preference_json": json.dumps(asdict(preference)), "baseline_run_id": report.baseline_run_id,
           "preference_score": report.preference_score, "schedules_json": json.dumps(report.schedules),
           "seed": cfg.seed, "config_json": json.dumps(config, default=str), "plots_json": json.dumps(report.plots)}
    episodes = [{"run_id": report.run_id, "task_id": r.result.task_id, "domain": r.result.domain,
                 "schedule": r.result.schedule, "solved": r.result.solved, "ended_by": r.result.ended_by,
                 "turns": r.result.turns, "tokens": r.result.tokens, "format_errors": r.result.format_errors,
                 "cost_usd": r.cost_usd, "latency_s": r.latency_s, "tool_calls_json": json.dumps(f.tool_calls),
                 "features_json": json.dumps(f.vector(tools)), "error": r.result.error}
                for r, f in zip(runs, feats)]
    return EvalRows(run, episodes)


def _split_sizes(report: EvalReport) -> str:
    s = report.splits
    return f"{s.get('test')} test tasks; the {s.get('train')} train tasks left out" if s else "sizes not recorded"


def report_table(report: EvalReport) -> str:
    """The plain-text table the CLI prints (and the artifact's body)."""
    lines = [f"evaluation {report.run_id}: {report.model} ({report.source}) on {report.snapshot_id}, "
             f"{report.split_rule} test split ({_split_sizes(report)}), "
             f"held-out pricing {', '.join(report.schedules) or '-'}",
             f"tools offered: {report.catalog or '-'}, {report.tools_offered:.1f} per prompt",
             *([f"tau2's evaluator: {sum(report.tau2_verdicts.values())} of {len(report.tau2_verdicts)} judged solved"]
               if report.tau2_verdicts else []),
             f"{'metric':<28}{'value':>14}",
             f"{'episodes':<28}{report.episodes:>14}",
             f"{'accuracy':<28}{report.accuracy:>14.3f}",
             f"{'mean cost (USD)':<28}{report.mean_cost_usd:>14.6f}",
             f"{'mean latency (s)':<28}{report.mean_latency_s:>14.2f}",
             f"{'total cost (USD)':<28}{report.total_cost_usd:>14.6f}",
             f"{'format errors':<28}{report.format_errors:>14}",
             f"{'preference score (Eq. 6)':<28}{report.preference_score:>14.4f}",
             f"{'baseline':<28}{report.baseline_run_id or '(this run)':>14}",
             "", f"{'tool':<36}{'calls':>7}{'share':>8}"]
    total = sum(report.calls_per_tool.values())
    for name, calls in sorted(report.calls_per_tool.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"{name:<36}{calls:>7}{(calls / total if total else 0.0):>8.2f}")
    lines += ["", f"{'domain':<20}{'episodes':>9}{'accuracy':>10}{'mean USD':>12}"]
    for domain, d in report.per_domain.items():
        lines.append(f"{domain:<20}{int(d['episodes']):>9}{d['accuracy']:>10.3f}{d['mean_cost_usd']:>12.6f}")
    lines += ["", f"plots: {report.plots.get('tool_usage')}  {report.plots.get('accuracy_cost')}"]
    lines += [f"diagnosis: {line}" for line in report.diagnosis]
    return "\n".join(lines)


def report_markdown(report: EvalReport) -> str:
    return f"# evaluate-orchestrator `{report.run_id}`\n\n```\n{report_table(report)}\n```\n"
