"""The ``toolscale`` command: one CLI for the project."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


def _domains(args: argparse.Namespace) -> int:
    from domains.registry import available_domains, get_spec

    rows = []
    for name in available_domains():
        spec = get_spec(name)
        rows.append({"domain": name, "tables": len(spec.tables), "rows": sum(t.rows for t in spec.tables),
                     "read_tools": sum(t.kind == "read" for t in spec.tools),
                     "write_tools": sum(t.kind == "write" for t in spec.tools)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'domain':<15}{'tables':>7}{'rows':>7}{'read':>6}{'write':>7}{'tools':>7}")
    for r in rows:
        print(f"{r['domain']:<15}{r['tables']:>7}{r['rows']:>7}{r['read_tools']:>6}{r['write_tools']:>7}"
              f"{r['read_tools'] + r['write_tools']:>7}")
    print(f"{'total':<15}{sum(r['tables'] for r in rows):>7}{sum(r['rows'] for r in rows):>7}"
          f"{sum(r['read_tools'] for r in rows):>6}{sum(r['write_tools'] for r in rows):>7}"
          f"{sum(r['read_tools'] + r['write_tools'] for r in rows):>7}")
    return 0


def _call(args: argparse.Namespace) -> int:
    from domains.registry import get_engine

    try:
        arguments: Any = json.loads(args.args)
    except json.JSONDecodeError as exc:
        print(f"error: --args is not valid JSON: {exc}", file=sys.stderr)
        return 2
    try:
        engine = get_engine(args.domain, args.seed)
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    with engine.fresh() as db:
        result = db.call(args.tool, arguments)
    if result.ok:
        print(json.dumps(result.output, indent=2, ensure_ascii=False, default=str))
        return 0
    print(f"error: {result.error}", file=sys.stderr)
    return 1


def _warehouse_arg(parser: argparse.ArgumentParser) -> None:
    from toolscale.regenerate import default_warehouse

    parser.add_argument("--warehouse", default=default_warehouse(),
                        help="DuckDB file (default: $TOOLSCALE_WAREHOUSE or warehouse/toolscale.duckdb)")


def _regenerate(args: argparse.Namespace) -> int:
    # with no Prefect server configured the flow starts a temporary one; on a fresh PREFECT_HOME and a busy
    # 2-core machine that takes longer than Prefect's default 20 s wait
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    from flows.regenerate import run_regenerate

    params: dict[str, Any] = {"tasks_per_domain": args.tasks_per_domain, "seed": args.seed,
                              "evolution_rounds": args.evolution_rounds, "kill_threshold": args.kill_threshold,
                              "near_dup_threshold": args.near_dup_threshold, "warehouse": args.warehouse,
                              "work_dir": args.work_dir, "task_runner": args.task_runner}
    if args.domains:
        params["domains"] = args.domains
    outcome = run_regenerate(**params)
    from warehouse.reader import connect_readonly, list_snapshots

    con = connect_readonly(args.warehouse)
    try:
        snap = next(s for s in list_snapshots(con) if s["snapshot_id"] == outcome["snapshot_id"])
    finally:
        con.close()
    print(f"snapshot {snap['snapshot_id']} {snap['status']}: {snap['tasks']} tasks from {snap['candidates']} "
          f"candidates (yield {snap['yield']:.1%}), evolved {snap['evolved_fraction']:.1%}, "
          f"median kill rate {snap['median_kill_rate']:.3f}, gold errors {snap['gold_errors']}, "
          f"no-op passes {snap['noop_passes']}, {outcome['seconds']}s")
    for domain, n in sorted(snap["per_domain"].items()):
        print(f"  {domain:<15}{n:>6}")
    if snap["rejection_reasons"]:
        print("  rejected: " + ", ".join(f"{k} {v}" for k, v in snap["rejection_reasons"].items()))
    return 0 if snap["status"] == "published" else 1


def _snapshots(args: argparse.Namespace) -> int:
    from warehouse.reader import connect_readonly, list_snapshots

    con = connect_readonly(args.warehouse)
    try:
        snaps = list_snapshots(con)
    finally:
        con.close()
    if args.json:
        print(json.dumps(snaps, indent=2, default=str))
        return 0
    print(f"{'snapshot':<17}{'status':<11}{'created (UTC)':<21}{'tasks':>7}{'yield':>8}{'evolved':>9}{'kill':>7}")
    for s in snaps:
        print(f"{s['snapshot_id']:<17}{s['status']:<11}{s['created_at'][:19]:<21}{s['tasks']:>7}"
              f"{(s['yield'] or 0):>8.1%}{(s['evolved_fraction'] or 0):>9.1%}{(s['median_kill_rate'] or 0):>7.2f}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from warehouse.exports import export_hf, export_tau2

    exporter = export_hf if args.format == "hf" else export_tau2
    result = exporter(args.warehouse, args.snapshot, args.out)
    print(f"exported {result['rows']} tasks of {result['snapshot_id']} as {args.format} to {args.out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolscale", description="ToolScale Factory")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("domains", help="per domain: tables, rows, read tools, write tools")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.set_defaults(func=_domains)
    p = sub.add_parser("call", help="run one tool call on a fresh seeded database")
    p.add_argument("domain")
    p.add_argument("tool")
    p.add_argument("--args", default="{}", help="the call's arguments as a JSON object")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_call)

    from domains.registry import DOMAIN_NAMES

    p = sub.add_parser("regenerate", help="run the regenerate-toolscale flow locally and publish a snapshot")
    p.add_argument("--domains", nargs="+", choices=DOMAIN_NAMES, help="default: all ten")
    p.add_argument("--tasks-per-domain", type=int, default=None, help="default: ToolScale's Table 5 counts")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--evolution-rounds", type=int, default=2)
    p.add_argument("--kill-threshold", type=float, default=0.9)
    p.add_argument("--near-dup-threshold", type=float, default=0.9)
    p.add_argument("--work-dir", default="work", help="shard files; a rerun resumes from them")
    p.add_argument("--task-runner", default="processes",
                   help="processes (default) | threads | dask | dask:<scheduler address>")
    _warehouse_arg(p)
    p.set_defaults(func=_regenerate)

    p = sub.add_parser("snapshots", help="list the warehouse's snapshots")
    p.add_argument("--json", action="store_true")
    _warehouse_arg(p)
    p.set_defaults(func=_snapshots)

    p = sub.add_parser("export", help="export a snapshot as a Hugging Face dataset or tau2 task JSON")
    p.add_argument("snapshot", help="a snapshot id, or 'latest'")
    p.add_argument("--format", choices=("hf", "tau2"), required=True)
    p.add_argument("--out", required=True, help="output directory")
    _warehouse_arg(p)
    p.set_defaults(func=_export)
    from toolscale.cli_audit import add_parsers as add_audit_parsers

    add_audit_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from domains.spec import SpecError
    from warehouse.reader import WarehouseError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SpecError as exc:
        print("error: a domain spec is invalid:\n  " + "\n  ".join(exc.problems), file=sys.stderr)
        return 2
    except (WarehouseError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
