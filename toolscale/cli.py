"""The ``toolscale`` command: one CLI for the project."""

from __future__ import annotations

import argparse
import json
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
    return parser


def main(argv: list[str] | None = None) -> int:
    from domains.spec import SpecError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SpecError as exc:
        print("error: a domain spec is invalid:\n  " + "\n  ".join(exc.problems), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
