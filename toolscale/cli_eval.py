"""``toolscale evaluate`` (an orchestrator on a snapshot's evaluation split) and ``toolscale describe-tools``
(capability descriptions of the registry's LLMs). Both run the plain jobs; scheduled runs use the deployments."""

from __future__ import annotations

import argparse
import json
import sys

from toolscale.options import MAX_SEED, int_at_least, number_in, preference_json


def _warehouse_arg(parser: argparse.ArgumentParser) -> None:
    from warehouse.location import default_warehouse

    parser.add_argument("--warehouse", default=default_warehouse(),
                        help="DuckDB file (default: $TOOLSCALE_WAREHOUSE or warehouse/toolscale.duckdb)")


def _evaluate(args: argparse.Namespace) -> int:
    from train.evaluation.evaluate import EvalConfig, evaluate_orchestrator, report_table

    preference = args.preference
    cfg = EvalConfig(warehouse=args.warehouse, model=args.model, registry=args.registry, snapshot=args.snapshot,
                     domains=args.domains, limit=args.limit, seed=args.seed, pricing_seed=args.pricing_seed,
                     experts=args.expert or [], preference=preference, baseline_run=args.baseline,
                     max_turns=args.max_turns, agent_max_tokens=args.max_tokens, timeout_s=args.timeout,
                     out_dir=args.out)
    report = evaluate_orchestrator(cfg, progress=lambda m: None if args.quiet else print(m))
    print(json.dumps(report.to_dict(), indent=2) if args.json else report_table(report))
    return 0


def _describe(args: argparse.Namespace) -> int:
    from train.evaluation.describe import DescribeConfig, describe_llm_tools

    cfg = DescribeConfig(warehouse=args.warehouse, registry=args.registry, endpoints=args.endpoint,
                         writer=args.writer, snapshot=args.snapshot, tasks=args.tasks, seed=args.seed,
                         max_turns=args.max_turns, agent_max_tokens=args.max_tokens, timeout_s=args.timeout)
    # one line per trial as it ends (stderr under --json, so that stdout stays one JSON document)
    out = sys.stderr if args.json else sys.stdout
    report = describe_llm_tools(cfg, progress=lambda line: print(line, file=out, flush=True))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
        return 0
    print("summary:")
    for o in report.endpoints:
        print(f"{o.endpoint}: {o.status}, {o.solved}/{o.trials} solved, {o.timeouts} timed out "
              f"(after {args.timeout:g} s; --timeout raises it)" + (f"; {o.reason}" if o.reason else ""))
        if o.evidence:
            kinds = "; ".join(f"{k} {s}/{n}" for k, (s, n) in sorted(o.evidence["per_kind"].items()))
            print(f"  evidence per task kind: {kinds}")
        if o.status == "refused" and o.proposed:
            print(f"  refused: {o.proposed}")
        if o.description:
            print(f"  {'current' if o.status == 'described' else 'kept (previous)'}: {o.description}")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("evaluate", help="run an orchestrator on a snapshot's evaluation split (held-out pricing)")
    p.add_argument("model", help="an endpoint name of the registry, or a checkpoint folder")
    p.add_argument("--snapshot", default="latest")
    p.add_argument("--domains", nargs="+")
    p.add_argument("--limit", type=int_at_least(1, 1_000_000), help="at most this many tasks of the split")
    p.add_argument("--seed", type=int_at_least(0, MAX_SEED), default=0)
    p.add_argument("--pricing-seed", type=int_at_least(0, MAX_SEED), default=0, help="seed of the synthetic schedules")
    p.add_argument("--expert", action="append", help="a registry endpoint offered as an expert (repeatable)")
    p.add_argument("--preference", type=preference_json, help='P as JSON, e.g. \'{"outcome": 1, "cost": 0.5, "tools": {"expert-1": -1}}\'')
    p.add_argument("--baseline", help="an earlier evaluation run id whose features normalise Eq. 6")
    p.add_argument("--max-turns", type=int_at_least(1, 1_000), default=10)
    p.add_argument("--max-tokens", type=int_at_least(1, 1_000_000), default=512, help="per agent turn")
    p.add_argument("--timeout", type=number_in(0, 3600, low_open=True), default=120.0,
                   help="seconds per agent call (above 0, at most 3600)")
    p.add_argument("--out", default="work/eval", help="folder for the plots (one subfolder per run)")
    p.add_argument("--registry", help="endpoint registry file")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no per-task progress lines")
    _warehouse_arg(p)
    p.set_defaults(func=_evaluate)

    p = sub.add_parser("describe-tools", help="describe the registry's LLMs from trials on published tasks")
    p.add_argument("--endpoint", action="append", help="describe only this endpoint (repeatable)")
    p.add_argument("--writer", help="the endpoint that writes the descriptions (default: the registry's default)")
    p.add_argument("--snapshot", default="latest")
    p.add_argument("--tasks", type=int_at_least(1, 10_000), default=10)
    p.add_argument("--seed", type=int_at_least(0, MAX_SEED), default=0)
    p.add_argument("--max-turns", type=int_at_least(1, 1_000), default=8)
    p.add_argument("--max-tokens", type=int_at_least(1, 1_000_000), default=256, help="per agent turn")
    p.add_argument("--timeout", type=number_in(0, 3600, low_open=True), default=60.0,
                   help="seconds per agent call (above 0, at most 3600); a trial whose call times out is counted and reported")
    p.add_argument("--registry", help="endpoint registry file")
    p.add_argument("--json", action="store_true")
    _warehouse_arg(p)
    p.set_defaults(func=_describe)
