"""``toolscale preferences`` (build, store and sample preference pairs) and ``toolscale pricing`` (price tables)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from toolscale.options import MAX_SEED, fraction, int_at_least

MAX_PAIRS = 100_000  # about a second per thousand pairs: a larger build is a mistake, not a request
MAX_TRAINING_SCHEDULES = 100


def _warehouse_arg(parser: argparse.ArgumentParser) -> None:
    from warehouse.location import default_warehouse

    parser.add_argument("--warehouse", default=default_warehouse(),
                        help="DuckDB file (default: $TOOLSCALE_WAREHOUSE or warehouse/toolscale.duckdb)")


def _build(args: argparse.Namespace) -> int:
    # the plain job, not the flow: one process and about a second of work needs no Prefect server;
    # scheduled runs use the `build-preference-pairs` deployment
    from synthesis.preferences.build import PreferenceConfig, build_and_store

    cfg = PreferenceConfig(count=args.count, seed=args.seed, eval_fraction=args.eval_fraction,
                           training_schedules=args.training_schedules)
    summary = build_and_store(cfg, args.warehouse)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"preference run {summary['run_id']}: {summary['pairs']} pairs "
          f"({', '.join(f'{k} {v}' for k, v in summary['per_split'].items())}), "
          f"{summary['inconsistent']} inconsistent, stored in {summary['warehouse']}")
    train = [k for k, v in summary["schedules"].items() if v == "train"]
    held = [k for k, v in summary["schedules"].items() if v == "heldout"]
    print(f"  pricing schedules (synthetic): {len(train)} for training, held out for eval: {', '.join(held)}")
    print(f"  {'split':<7}{'family':<38}{'pairs':>6}")
    for key, n in summary["per_family"].items():
        split, family = key.split(":", 1)
        print(f"  {split:<7}{family:<38}{n:>6}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from warehouse.pricing_store import read_pairs

    pairs = read_pairs(args.warehouse, run_id=args.run, split=args.split, family=args.family, limit=args.n,
                       seed=args.seed)
    if args.json:
        print(json.dumps(pairs, indent=2))
        return 0
    for p in pairs:
        label = "synthetic" if p["schedule_synthetic"] else "provider"
        print(f"[{p['split']}] {p['family']} ({p['template_ids']}); pricing {p['schedule_id']} ({label})")
        print(f"  PI: {p['instruction']}")
        print(f"  tools: {', '.join(p['tools'])}")
        print(f"  P: {p['vector']}  (tools..., accuracy, cost, latency)")
    return 0


def _pricing(args: argparse.Namespace) -> int:
    from inference.pricing import nominal_schedule, synthetic_schedules

    schedules = [nominal_schedule(), *synthetic_schedules(args.seed).all]
    if args.schedule:
        matches = [s for s in schedules if args.schedule in (s.name, s.schedule_id)]
        if not matches:
            raise ValueError(f"no schedule {args.schedule!r}; known: {', '.join(s.name for s in schedules)}")
        schedules = matches
    rows: list[dict[str, Any]] = [{"schedule": s.name, "schedule_id": s.schedule_id, "kind": s.kind,
                                   "split": s.split, "synthetic": s.synthetic, "model": p.model,
                                   "input_usd_per_1M": p.input_usd_per_1m, "output_usd_per_1M": p.output_usd_per_1m,
                                   "source": p.source} for s in schedules for p in s.prices]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not args.schedule:
        for s in schedules:
            print(f"{s.name:<30} {s.kind:<10} {s.split:<10} {len(s.prices):>3} models  {s.schedule_id}")
        return 0
    print(f"{'model':<48}{'in $/1M':>10}{'out $/1M':>10}  kind")
    for r in rows:
        print(f"{r['model']:<48}{r['input_usd_per_1M']:>10.4g}{r['output_usd_per_1M']:>10.4g}  {r['kind']}")
    return 0


def _pricing_load(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from inference.pricing import load_provider_file, nominal_schedule, schedule_rows
    from warehouse.pricing_store import PricingRows, store_pricing

    schedule = load_provider_file(args.file, split=args.split)
    _refuse_provider_clash(args.warehouse, schedule)
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    store_pricing(args.warehouse, PricingRows(**schedule_rows([nominal_schedule(), schedule], now)))
    print(f"stored provider schedule {schedule.schedule_id} ({len(schedule.prices)} models, split {schedule.split}, "
          f"not synthetic) and the nominal table in {args.warehouse}")
    return 0


def _refuse_provider_clash(warehouse: str, schedule: Any) -> None:
    """Two spellings of a provider ("Open AI", "open-ai") name one schedule: refuse the second, in one line."""
    from pathlib import Path

    from inference.pricing import provider_of
    from toolscale.options import UsageError, check_warehouse_source
    from warehouse.pricing_store import list_schedules

    if not Path(warehouse).exists():
        return
    check_warehouse_source(warehouse)
    spelled = provider_of(schedule.source)
    for stored in list_schedules(warehouse):
        if stored["kind"] == "provider" and stored["name"] == schedule.name and provider_of(stored["source"]) != spelled:
            raise UsageError(f"provider {spelled!r} would be stored as schedule {schedule.name}, which already holds "
                             f"provider {provider_of(stored['source'])!r}; spell the provider as it was spelled before")


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("preferences", help="build preference pairs into the warehouse (or `show` some)")
    p.add_argument("--count", type=int_at_least(2, MAX_PAIRS), default=1000,
                   help=f"pairs to build (default 1000, at most {MAX_PAIRS:,})")
    p.add_argument("--seed", type=int_at_least(0, MAX_SEED), default=0)
    p.add_argument("--eval-fraction", type=fraction, default=0.2)
    p.add_argument("--training-schedules", type=int_at_least(1, MAX_TRAINING_SCHEDULES), default=10,
                   help=f"synthetic training pricing schedules (at most {MAX_TRAINING_SCHEDULES})")
    p.add_argument("--json", action="store_true", help="print the run's summary as JSON")
    _warehouse_arg(p)
    p.set_defaults(func=_build)
    psub = p.add_subparsers(dest="preferences_command")
    show = psub.add_parser("show", help="print a seeded sample of stored pairs")
    show.add_argument("-n", type=int_at_least(1, 10_000), default=5, help="how many (default 5)")
    show.add_argument("--split", choices=("train", "eval"))
    show.add_argument("--family", help="e.g. avoid_tools or mix:local_only+tight_budget")
    show.add_argument("--run", help="a run id (default: the latest run)")
    show.add_argument("--seed", type=int_at_least(0, MAX_SEED), default=0, help="which sample")
    show.add_argument("--json", action="store_true")
    _warehouse_arg(show)
    show.set_defaults(func=_show)

    p = sub.add_parser("pricing", help="the nominal price table and the synthetic schedules (or `load` a file)")
    p.add_argument("--schedule", help="a schedule name or id: print its prices")
    p.add_argument("--seed", type=int_at_least(0, MAX_SEED), default=0, help="seed of the synthetic schedules")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_pricing)
    psub = p.add_subparsers(dest="pricing_command")
    load = psub.add_parser("load", help="validate a provider price file and store it in the warehouse")
    load.add_argument("file", help="YAML or JSON in the format of data/pricing/provider_template.yaml")
    load.add_argument("--split", choices=("reference", "train", "heldout"), default="train")
    _warehouse_arg(load)
    load.set_defaults(func=_pricing_load)
