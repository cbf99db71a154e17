"""The ``toolscale`` command: one CLI for the project.

Exit status: 0 ok; 1 the quality gate failed (``regenerate``) or the tool returned an error (``call``);
2 bad options or input; 3 the run itself failed (the message names the log to read); 130 interrupted.
Every error is one line on stderr (``TOOLSCALE_DEBUG=1`` adds the traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import Any, NoReturn

from toolscale import cli_eval, cli_prefs
from toolscale.cli_audit import add_parsers as add_audit_parsers
from toolscale.cli_llm import add_parsers as add_llm_parsers
from toolscale.failures import in_user_terms
from toolscale.options import (RunFailed, UsageError, check_domains_dir, check_external_site, check_warehouse_source, fraction, int_at_least,
                               json_object)

MAX_SEED = 2**31 - 1


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (with where to find help), not the whole usage block."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message} (see: {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def _domains(args: argparse.Namespace) -> int:
    from domains.registry import available_domains, get_spec

    rows = [domain_row(get_spec(name), name) for name in available_domains()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'domain':<15}{'tables':>7}{'rows':>7}{'read':>6}{'write':>7}{'tools':>7}")
    for r in rows:
        shown = "-" if r["rows"] is None else r["rows"]
        print(f"{r['domain']:<15}{r['tables']:>7}{shown:>7}{r['read_tools']:>6}{r['write_tools']:>7}"
              f"{r['read_tools'] + r['write_tools']:>7}")
    print(f"{'total':<15}{sum(r['tables'] for r in rows):>7}{sum(r['rows'] or 0 for r in rows):>7}"
          f"{sum(r['read_tools'] for r in rows):>6}{sum(r['write_tools'] for r in rows):>7}"
          f"{sum(r['read_tools'] + r['write_tools'] for r in rows):>7}")
    for r in rows:
        if r["external_data"] == "missing":
            print(f"note: {r['domain']} shows '-' rows because its external data is not installed: {r['install']}")
    return 0


def domain_row(spec: Any, name: str | None = None) -> dict[str, Any]:
    """One line of ``toolscale domains``: a domain seeded from external data counts the records it would load,
    or says (``external_data: missing``, ``rows: null``) that they are not installed and how to install them.
    ``name``: the name the domain is known by (its folder), which a copied spec's own ``domain:`` may not match."""
    from domains import external

    row: dict[str, Any] = {"domain": name or spec.name, "tables": len(spec.tables), "rows": sum(t.rows for t in spec.tables),
                           "read_tools": sum(t.kind == "read" for t in spec.tools),
                           "write_tools": sum(t.kind == "write" for t in spec.tools),
                           "external_data": None, "install": None}
    if not spec.sources:
        return row
    try:
        row["rows"] += sum(len(external.records(external.load(spec.sources[t.source.source]), t.source))
                           for t in spec.tables if t.source is not None)
        row["external_data"] = "installed"
    except external.ExternalDataMissing as exc:
        row.update(rows=None, external_data="missing", install=str(exc))
    return row


def _known_domain(name: str) -> None:
    from domains.registry import available_domains, unknown_domain

    if name not in available_domains():
        raise UsageError(unknown_domain(name))


def _tools(args: argparse.Namespace) -> int:
    from toolscale.tools_cmd import as_json, describe, render

    _known_domain(args.domain)
    info = describe(args.domain, args.seed)
    print(as_json(info) if args.json else render(info))
    return 0


def _call(args: argparse.Namespace) -> int:
    from domains.registry import get_engine

    arguments = json_object(args.args)
    _known_domain(args.domain)
    engine = get_engine(args.domain, args.seed)
    if args.tool not in engine.tools:
        raise UsageError(f"{args.domain} has no tool {args.tool!r}; list them with: toolscale tools {args.domain}")
    with engine.fresh() as db:
        result = db.call(args.tool, arguments, args.side)
    if result.ok:
        print(json.dumps(result.output, indent=2, ensure_ascii=False, default=str))
        return 0
    print(f"error: {result.error}", file=sys.stderr)
    return 1


_SKIP_TEARDOWN: list[bool] = []  # set by a command whose process is left with nothing to tear down but loaded modules


def _regenerate(args: argparse.Namespace) -> int:
    from toolscale.regenerate_cmd import run

    status = run(args)
    _SKIP_TEARDOWN.append(True)  # the warehouse is closed and replaced; only torch, Prefect and the model remain
    return status


def _snapshots(args: argparse.Namespace) -> int:
    from warehouse.reader import connect_readonly, list_snapshots

    check_warehouse_source(args.warehouse)
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

    check_warehouse_source(args.warehouse)
    if args.format == "hf":
        from datasets import disable_progress_bars

        disable_progress_bars()  # one line per export, not a bar per parquet file
    if args.format in ("nemo-gym", "steps"):
        from warehouse.gym_export import export_gym, export_steps

        exporter = export_gym if args.format == "nemo-gym" else export_steps
    else:
        exporter = export_hf if args.format == "hf" else export_tau2
    result = exporter(args.warehouse, args.snapshot, args.out, overwrite=args.overwrite)
    splits = ", ".join(f"{name} {n}" for name, n in result.get("splits", {}).items())
    if args.format == "steps":
        print(f"exported {result['rows']} step rows of {result['tasks']} tasks of {result['snapshot_id']} to "
              f"{args.out}")
        for domain, c in result["per_domain"].items():
            print(f"  {domain}: {c['rows']} rows (train {c.get('train', 0)}, test {c.get('test', 0)}), "
                  f"{c['mutating']} mutating ({c['mutating_share']:.1%})")
        return 0
    print(f"exported {result['rows']} tasks of {result['snapshot_id']} as {args.format} to {args.out}"
          + (f" ({splits})" if splits else ""))
    return 0


def _serve_env(args: argparse.Namespace) -> int:
    from interop.mcp_env import DomainEnv, EnvLimits, serve

    _known_domain(args.domain)
    tasks: dict[str, Any] = {}
    if os.path.exists(args.warehouse):  # the snapshot's tasks, for start_task and verify
        from train.environment.tasks import load_training_set

        check_warehouse_source(args.warehouse)
        loaded = load_training_set(args.warehouse, args.snapshot, domains=[args.domain])
        tasks = {t.task_id: t.verifiable() for t in loaded.tasks}
    limits = EnvLimits(args.max_calls, args.max_session_s, args.max_idle_s)
    seed = next(iter(tasks.values())).seed if tasks else 0
    print(f"serving {args.domain} over MCP at http://{args.host}:{args.port}/mcp ({len(tasks)} tasks; per session "
          f"at most {limits.max_calls} calls and {limits.max_session_s:g} s)", flush=True)
    serve(DomainEnv(args.domain, tasks, seed, limits), args.host, args.port)
    return 0


def _warehouse_arg(parser: argparse.ArgumentParser) -> None:
    default = os.environ.get("TOOLSCALE_WAREHOUSE", "warehouse/toolscale.duckdb")
    parser.add_argument("--warehouse", default=default,
                        help="DuckDB file (default: $TOOLSCALE_WAREHOUSE or warehouse/toolscale.duckdb)")


def _domains_dir_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--domains-dir", metavar="DIR",
                        help="a folder of your own domains (DIR/<name>/<name>.yaml), besides the shipped ones; "
                             "also $TOOLSCALE_DOMAINS_DIR")
    parser.add_argument("--external-site", metavar="DIR",
                        help="a site-packages folder holding the data of imported domains (tau2's, for retail); "
                             "also $TOOLSCALE_EXTERNAL_SITE")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="toolscale", description="ToolScale Factory: domains, tool calls, regeneration, exports",
                    epilog="exit status: 0 ok, 1 quality gate failed / tool returned an error, 2 bad options or "
                           "input, 3 the run failed")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    seed = int_at_least(0, MAX_SEED)

    p = sub.add_parser("domains", help="per domain: tables, rows, read tools, write tools")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    _domains_dir_arg(p)
    p.set_defaults(func=_domains)

    p = sub.add_parser("tools", help="a domain's tools: parameters, a working example call, sample ids")
    p.add_argument("domain")
    p.add_argument("--json", action="store_true", help="print JSON instead of a listing")
    p.add_argument("--seed", type=seed, default=0)
    _domains_dir_arg(p)
    p.set_defaults(func=_tools)

    p = sub.add_parser("call", help="run one tool call on a fresh seeded database")
    p.add_argument("domain")
    p.add_argument("tool")
    p.add_argument("--args", default="{}", help="the call's arguments as a JSON object")
    p.add_argument("--side", choices=["agent", "user"], default="agent",
                   help="who calls: the agent (default) or the user, on their own device (dual-control domains)")
    p.add_argument("--seed", type=seed, default=0)
    _domains_dir_arg(p)
    p.set_defaults(func=_call)

    p = sub.add_parser("regenerate", help="run the regenerate-toolscale flow locally and publish a snapshot")
    p.add_argument("--domains", nargs="+", metavar="DOMAIN", help="default: the ten shipped domains")
    p.add_argument("--tasks-per-domain", type=int_at_least(1), default=None,
                   help="the least number of tasks per domain (more may come); default: ToolScale's Table 5 counts")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--evolution-rounds", type=int_at_least(0, 10), default=2)
    p.add_argument("--kill-threshold", type=fraction, default=0.9, help="0 to 1")
    p.add_argument("--near-dup-threshold", type=fraction, default=0.9, help="0 to 1")
    p.add_argument("--tasks-per-database", type=int_at_least(1), default=None,
                   help="a domain asked for more tasks than this gets another database per this many (default 1000)")
    p.add_argument("--work-dir", default="work", help="shard files and the Prefect log; a rerun resumes from them")
    p.add_argument("--task-runner", default="processes",
                   help="processes (default) | threads | dask | dask:<scheduler address>")
    _warehouse_arg(p)
    _domains_dir_arg(p)
    p.set_defaults(func=_regenerate)

    p = sub.add_parser("snapshots", help="list the warehouse's snapshots")
    p.add_argument("--json", action="store_true")
    _warehouse_arg(p)
    p.set_defaults(func=_snapshots)

    p = sub.add_parser("export", help="export a snapshot: a Hugging Face dataset, tau2 packages, NeMo Gym servers "
                                      "or step rows")
    p.add_argument("snapshot", help="a snapshot id, or 'latest'")
    p.add_argument("--format", choices=("hf", "tau2", "nemo-gym", "steps"), required=True,
                   help="hf: datasets + parquet; tau2: tau2-bench packages; nemo-gym: a NeMo Gym resources server "
                        "per domain with its rows; steps: one row per gold step (docs/gym.md)")
    p.add_argument("--out", required=True, help="output directory (absent or empty, unless --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier export in --out as one unit (only a folder an export wrote)")
    _warehouse_arg(p)
    _domains_dir_arg(p)  # a snapshot of a user's own domain exports its spec's policy and package
    p.set_defaults(func=_export)

    p = sub.add_parser("serve-env", help="serve a domain's tools over MCP: a database per session, a verify tool")
    p.add_argument("domain")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--snapshot", default="latest", help="whose tasks start_task and verify know (default latest)")
    p.add_argument("--max-calls", type=int, default=800, help="tool calls per session (default 800)")
    p.add_argument("--max-session-s", type=float, default=300.0, help="seconds a session may run (default 300)")
    p.add_argument("--max-idle-s", type=float, default=300.0, help="an idle session is reaped after this (300)")
    _warehouse_arg(p)
    p.set_defaults(func=_serve_env)
    add_llm_parsers(sub)
    cli_prefs.add_parsers(sub)
    add_audit_parsers(sub)
    cli_eval.add_parsers(sub)
    return parser


def _first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def main(argv: list[str] | None = None) -> int:
    try:
        status = _dispatch(argv)
        sys.stdout.flush()  # a closed pipe (| head) must show up here, not at interpreter exit
        return status
    except BrokenPipeError:
        # the reader stopped reading (| head): quietly stop writing too
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _dispatch(argv: list[str] | None) -> int:
    from domains.spec import SpecError
    from toolscale.prefect_local import ServerError
    from warehouse.reader import WarehouseError

    args = build_parser().parse_args(argv)
    try:
        check_domains_dir(getattr(args, "domains_dir", None))
        check_external_site(getattr(args, "external_site", None))
        return int(args.func(args))
    except BrokenPipeError:
        raise
    except UsageError as exc:
        return _fail(str(exc), 2)
    except RunFailed as exc:
        return _fail(in_user_terms(exc), 3)
    except SpecError as exc:
        more = f" (and {len(exc.problems) - 1} more; run: python -m domains.check)" if len(exc.problems) > 1 else ""
        return _fail(f"a domain spec is invalid: {_first_line(exc.problems[0])}{more}", 2)
    except (WarehouseError, ValueError) as exc:
        return _fail(in_user_terms(exc), 2)
    except ServerError as exc:
        return _fail(str(exc), 3)
    except KeyboardInterrupt:
        return _fail("interrupted; rerun the same command to resume", 130)
    except Exception as exc:  # anything else: one line in the user's terms, and where to look
        where = getattr(args, "work_dir", None)
        hint = f"; details in {os.path.join(where, 'prefect.log')}" if where and os.path.isdir(where) else ""
        return _fail(f"{in_user_terms(exc)}{hint}", 3)


def _fail(message: str, status: int) -> int:
    if os.environ.get("TOOLSCALE_DEBUG"):
        traceback.print_exc()
    print(f"error: {message}", file=sys.stderr)
    return status


def entry() -> NoReturn:
    """The ``toolscale`` console script: ``main``, then, after ``regenerate``, an exit without the interpreter's
    teardown. Tearing down what a run loaded (torch, the embedding model, Prefect's threads) took 2.4 s after the
    last line was printed. What an ordinary exit does before that teardown is still done, in its order: threading's
    exit hooks and the join of other threads (``threading._shutdown``, as the interpreter calls it), the exit
    handlers (log handlers flush), and stdout and stderr are flushed. Prefect's senders were drained before the
    run's server stopped (toolscale/prefect_local.py)."""
    import atexit
    import threading

    status = main()
    if not _SKIP_TEARDOWN:
        sys.exit(status)
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that stopped reading, a closed stream: nothing to keep
            pass
    os._exit(status)


if __name__ == "__main__":
    entry()
