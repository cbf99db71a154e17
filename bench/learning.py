"""Learning, measured: the base model and each stage's model (SFT, RFT, GRPO) on the snapshot's held-out split.

    python bench/learning.py --profile cpu-learn --warehouse warehouse/toolscale.duckdb --out work/learning
    python bench/learning.py --profile cpu-learn --max-tasks 2 --eval-tasks 2 --sft-steps 2 --grpo-steps 1 ...

Runs the profile's stages through train/stages/sequence.py (every one of sft, rft, grpo, evaluate when the profile names
none; evaluate is added when missing), so the evaluate stage scores the base model first and
then every stage's final model on the test split under held-out pricing. Prints one table: held-out success with a
95% Wilson interval, format errors, calls per tool, cost per episode, training reward, the share of GRPO steps with
a non-zero advantage, and wall time per stage; writes it as ``learning.md`` and the stages plot as ``learning.png``
under ``--out``. A rerun resumes (finished stages are not run again; their wall time then reads as it was recorded).

Every prompt evaluated offers the whole catalog of the task's user role (never a cap chosen with the gold). With a
profile's ``evaluate`` extras (train/stages/learning.py) it also scores each model on a held-out domain never
trained on and on tau2's own tasks (our verifier and tau2's evaluator), the models named in
``evaluate.gold_tools`` with only the gold's tools (the old hint, beside the full catalog), and the final model's
controllability: an expert (``evaluate.control.expert``, served here by the local llama.cpp server and priced as
a frontier model) under a cost-first and an accuracy-first instruction, with expert calls and cost per episode.

    python bench/learning.py --profile cpu-learn-domains --warehouse W --out work/learning-domains
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from train.stages.inputs import check_folder, check_run_inputs, check_text, check_whole, exit_status  # noqa: E402
from train.stages.learning import SetResult, mean_interval, measure_sets  # noqa: E402
from train.stages.profiles import MAX_STEPS, STAGES, Profile, load_profile  # noqa: E402
from train.stages.records import TrainRunConfig, load_built  # noqa: E402
from train.stages.run import holding_run  # noqa: E402
from train.stages.sequence import StageRecord, StagesResult, run_stages  # noqa: E402
from warehouse.location import default_warehouse  # noqa: E402


def with_overrides(profile: Profile, args: argparse.Namespace) -> Profile:
    """The profile at the sizes the command line asks for, with every stage and evaluate last."""
    stages = list(profile.stages or STAGES)
    if "evaluate" not in stages:
        stages.append("evaluate")
    p = replace(profile, stages=stages)
    if args.max_tasks:
        p = replace(p, data=replace(p.data, max_tasks=args.max_tasks))
    if args.eval_tasks:  # every evaluated set, the controllability ones included
        control = replace(p.evaluate.control, max_tasks=args.eval_tasks)
        p = replace(p, evaluate=replace(p.evaluate, max_tasks=args.eval_tasks, control=control))
    if args.max_turns:
        p = replace(p, episode=replace(p.episode, max_turns=args.max_turns))
    if args.sft_steps:
        p = replace(p, sft=replace(p.sft, max_steps=args.sft_steps, save_steps=args.sft_steps))
    if args.rft_samples:
        p = replace(p, rft=replace(p.rft, samples_per_task=args.rft_samples))
    if args.grpo_steps:
        p = replace(p, grpo=replace(p.grpo, max_steps=args.grpo_steps, save_steps=args.grpo_steps))
    return p


def _stage_seconds(record: StageRecord) -> float:
    if record.ran:
        return record.seconds
    started, finished = record.run.get("started_at"), record.run.get("finished_at")
    return (finished - started).total_seconds() if started and finished else float("nan")


def table(result: StagesResult) -> str:
    by_stage = {r.stage: r for r in result.stages}
    evaluations = {e.label: e for e in result.evaluations}
    lines = [f"learning run {result.run_id}",
             f"{'model':<6}{'held-out':>10}{'95% CI':>14}{'format err':>12}{'USD/episode':>13}{'reward':>8}"
             f"{'stage s':>9}{'eval s':>8}  calls per tool"]
    for label in ["base"] + [r.stage for r in result.stages if r.stage != "evaluate"]:
        e, r = evaluations.get(label), by_stage.get(label)
        reward = r.reward if r is not None else None
        seconds = _stage_seconds(r) if r is not None else float("nan")
        if e is None:
            lines.append(f"{label:<6}{'-':>10}")
            continue
        low, high = e.interval
        calls = ", ".join(f"{t} {n}" for t, n in sorted(e.calls_per_tool.items(), key=lambda kv: -kv[1]) if n) or "none"
        lines.append(f"{label:<6}{f'{e.solved}/{e.episodes}':>10}{f'{low:.2f}-{high:.2f}':>14}"
                     f"{f'{e.format_error_episodes}/{e.episodes}':>12}{e.mean_cost_usd:>13.5f}"
                     f"{'-' if reward is None else f'{reward:.3f}':>8}{seconds:>9.0f}{e.seconds:>8.0f}  {calls}")
    grpo = by_stage.get("grpo")
    if grpo is not None and grpo.steps:
        learned = sum(1 for s in grpo.steps if s.get("reward_mean") is not None)
        lines.append(f"GRPO steps with a non-zero advantage: {learned} of {len(grpo.steps)} "
                     f"({learned / len(grpo.steps):.0%})")
    if "rft" in by_stage:
        lines += [f"RFT round {a.round}: accepted {a.accepted} of {a.sampled}" for a in by_stage["rft"].acceptance]
    if "evaluate" in by_stage:
        lines.append(f"evaluate stage: {_stage_seconds(by_stage['evaluate']):.0f} s")
    lines += [f"diagnosis: {line}" for line in result.diagnosis]
    return "\n".join(lines)


def _rate(solved: int, episodes: int) -> str:
    from train.evaluation.report import wilson_interval

    low, high = wilson_interval(solved, episodes)
    return f"{solved}/{episodes} ({low:.2f}-{high:.2f})" if episodes else "-"


def _per_domain(snapshot_id: str, eval_run_id: str, warehouse: str) -> dict[str, tuple[int, int]]:
    from warehouse.eval_store import eval_run_episodes

    tallies: dict[str, list[int]] = {}
    for e in eval_run_episodes(warehouse, eval_run_id)[1]:
        tally = tallies.setdefault(e["domain"], [0, 0])
        tally[0] += int(bool(e["solved"]))
        tally[1] += 1
    return {d: (s, n) for d, (s, n) in tallies.items()}


def sets_table(profile: Profile, result: StagesResult, sets: list[SetResult], warehouse: str) -> str:
    """Per model: the test split per domain, the held-out domain, tau2's tasks (ours and tau2's evaluator), the
    gold-tools hint; then controllability."""
    ev = profile.evaluate
    lines = [f"trained on {', '.join(profile.data.domains or ['every domain'])} (train split, synthesised tasks); "
             f"held out: {', '.join(ev.holdout_domains) or '-'}; tau2's own tasks: {', '.join(ev.external) or '-'}"]
    test = {e.label: e for e in result.evaluations}
    by = {(s.label, s.tasks): s for s in sets}
    per_domain = {label: _per_domain(result.stages[0].run["snapshot_id"], e.eval_run_id, warehouse)
                  for label, e in test.items()}
    domains = sorted({d for tallies in per_domain.values() for d in tallies})
    lines.append(f"{'model':<6}" + "".join(f"{d:>22}" for d in domains) + "   (test split, full catalog)")
    for label, tallies in per_domain.items():
        lines.append(f"{label:<6}" + "".join(f"{_rate(*tallies.get(d, (0, 0))):>22}" for d in domains))
    lines.append(f"{'model':<6}{'held-out domain':>22}{'tau2 (ours)':>20}{'tau2 (tau2)':>20}{'gold tools only':>22}"
                 f"{'full catalog':>22}")
    for label in [e.label for e in result.evaluations]:
        h, x, g, e = by.get((label, "holdout")), by.get((label, "tau2")), by.get((label, "test, gold tools")), test[label]
        lines.append(f"{label:<6}{_rate(h.solved, h.episodes) if h else '-':>22}"
                     f"{_rate(x.solved, x.episodes) if x else '-':>20}"
                     f"{_rate(x.tau2_solved or 0, x.tau2_judged) if x and x.tau2_judged else '-':>20}"
                     f"{_rate(g.solved, g.episodes) if g else '-':>22}{_rate(e.solved, e.episodes):>22}")
    control = [s for s in sets if s.tasks.startswith("control: ")]
    if control:
        c = ev.control
        lines += ["", f"controllability: {control[0].label} with expert-1 = {c.expert} priced as {c.priced_as}",
                  f"{'instruction':<16}{'solved':>18}{'expert calls/episode (95% CI)':>32}{'USD/episode (95% CI)':>30}"]
        for s in control:
            calls, costs = mean_interval([float(n) for n in s.expert_calls]), mean_interval(s.costs)
            lines.append(f"{s.tasks.removeprefix('control: '):<16}{_rate(s.solved, s.episodes):>18}"
                         f"{f'{calls[0]:.2f} ({calls[1]:.2f}-{calls[2]:.2f})':>32}"
                         f"{f'{costs[0]:.5f} ({costs[1]:.5f}-{costs[2]:.5f})':>30}")
    return "\n".join(lines)


@contextmanager
def expert_registry(profile: Profile, registry: str | None) -> Iterator[str | None]:
    """The registry the controllability sets use: the profile's expert served by a local llama.cpp server."""
    if not profile.evaluate.control.expert:
        yield registry
        return
    import yaml

    from inference.endpoints import load_endpoints
    from inference.server import ManagedServer, ServerCommand, server_command

    endpoint = load_endpoints(registry).get(profile.evaluate.control.expert)
    base = server_command(endpoint, endpoint.port)
    command = ServerCommand([*base.argv, "--n_ctx", "4096", "--n_threads", "2"], base.endpoint)
    with ManagedServer(endpoint, startup_timeout_s=180, command=command) as server, \
            tempfile.TemporaryDirectory() as folder:
        live = server.endpoint
        path = Path(folder) / "endpoints.yaml"
        path.write_text(yaml.safe_dump({"default": endpoint.name, "endpoints": {endpoint.name: {
            "base_url": live.base_url, "model": live.model, "provider": "local", "pricing_key": live.pricing_key}}}))
        yield str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-learn")
    parser.add_argument("--warehouse", default=default_warehouse())
    parser.add_argument("--out", default="work/learning", help="the table, the PNG and the stage runs go here")
    parser.add_argument("--work-dir", default="work", help="cache for converted models")
    parser.add_argument("--max-tasks", type=int, help="train-split tasks (data.max_tasks)")
    parser.add_argument("--eval-tasks", type=int, help="held-out tasks per model (evaluate.max_tasks)")
    parser.add_argument("--max-turns", type=int, help="episode.max_turns")
    parser.add_argument("--sft-steps", type=int, help="sft.max_steps")
    parser.add_argument("--rft-samples", type=int, help="rft.samples_per_task")
    parser.add_argument("--grpo-steps", type=int, help="grpo.max_steps")
    parser.add_argument("--registry", default=None, help="endpoint registry naming evaluate.control.expert")
    args = parser.parse_args(argv)
    checked: dict[str, object] = {}

    def check() -> None:  # the options, the profile, the warehouse and snapshot, before a model loads: exit 2
        for option, high in (("max_tasks", 1_000_000), ("eval_tasks", 1_000_000), ("max_turns", 10_000),
                             ("sft_steps", MAX_STEPS), ("rft_samples", 10_000), ("grpo_steps", MAX_STEPS)):
            if getattr(args, option) is not None:
                check_whole(f"--{option.replace('_', '-')}", getattr(args, option), 1, high)
        check_text("--out", args.out)
        check_folder("--out", args.out)
        profile = with_overrides(load_profile(args.profile), args)
        cfg = TrainRunConfig(profile.name, args.warehouse, output_root=str(Path(args.out) / "runs"),
                             work_dir=args.work_dir)
        check_run_inputs(cfg, profile.data.snapshot)
        checked.update(profile=profile, cfg=cfg, built=load_built(cfg, profile))

    def run() -> int:  # a failure from here on is a failed run: exit 3
        profile, cfg, out = checked["profile"], checked["cfg"], Path(args.out)
        progress = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
        with holding_run(cfg, profile, checked["built"]):  # type: ignore[arg-type]
            result = run_stages(cfg, progress, profile, checked["built"])  # type: ignore[arg-type]
            models = [(e.label, e.model) for e in result.evaluations]
            with expert_registry(profile, args.registry) as registry:  # type: ignore[arg-type]
                sets = measure_sets(profile, args.warehouse, result.stages[0].run["snapshot_id"],  # type: ignore[arg-type]
                                    models, out, cfg.pricing_seed, registry, progress)  # type: ignore[attr-defined]
        text = table(result) + "\n\n" + sets_table(profile, result, sets, args.warehouse)  # type: ignore[arg-type]
        out.mkdir(parents=True, exist_ok=True)
        (out / "learning.md").write_text(f"```\n{text}\n```\n")
        shutil.copyfile(result.png, out / "learning.png")
        print(text)
        print(f"table: {out / 'learning.md'}  plot: {out / 'learning.png'}")
        return 0

    return exit_status(run, check)


if __name__ == "__main__":
    raise SystemExit(main())
