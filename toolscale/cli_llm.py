"""The LLM commands of the ``toolscale`` CLI: ``endpoints`` (list and health-check), ``serve`` (run a managed
server in the foreground until Ctrl-C) and ``llm-stages`` (the LLM stages of the factory on a snapshot sample)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from dataclasses import asdict
from typing import Any

from toolscale.options import MAX_SEED, int_at_least, number_in

# synthesis.llm_stages.STAGES, spelled out so that building the parser imports no LLM code (a test keeps them equal)
LLM_STAGES = ("paraphrase", "evolve", "propose")


def _endpoints(args: argparse.Namespace) -> int:
    from inference.endpoints import Health, check_health, load_endpoints

    registry = load_endpoints(args.registry)
    rows: list[dict[str, Any]] = []
    for endpoint in registry.endpoints.values():
        try:
            health = check_health(endpoint, timeout=args.timeout)
        except Exception as exc:  # noqa: BLE001 - one endpoint's odd answer is its own line, never the listing's end
            health = Health(endpoint.name, False, f"not checked: {type(exc).__name__}: {str(exc)[:120]}", None)
        rows.append({"name": endpoint.name, "default": endpoint.name == registry.default,
                     "base_url": endpoint.base_url, "model": endpoint.model, "provider": endpoint.provider,
                     "pricing_key": endpoint.pricing_key, "api_key_env": endpoint.api_key_env,
                     "server": endpoint.server, **{k: v for k, v in asdict(health).items() if k != "endpoint"}})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'endpoint':<22}{'model':<26}{'provider':<10}{'server':<10}{'latency':>9}  health")
    for r in rows:
        latency = f"{r['latency_s'] * 1000:.0f} ms" if r["latency_s"] is not None else "-"
        name = r["name"] + (" *" if r["default"] else "")
        print(f"{name:<22}{r['model'][:25]:<26}{r['provider']:<10}{r['server'] or '-':<10}{latency:>9}  {r['reason']}")
    print(f"(* default; registry {registry.source})")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from inference.endpoints import load_endpoints
    from inference.server import ManagedServer, PortTaken, ServerError

    registry = load_endpoints(args.registry)
    endpoint = registry.get(args.model)
    stop = threading.Event()
    # Ctrl-C and SIGTERM both end the wait; the with block then stops the server's process group
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        return _serve_until_stopped(ManagedServer(endpoint, port=args.port, startup_timeout_s=args.startup_timeout),
                                    stop, registry.source)
    except PortTaken as exc:  # the --port (or the registry's port) given is the problem: exit 2, one line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3


def _serve_until_stopped(managed: Any, stop: threading.Event, registry: Any) -> int:
    from inference.serving import clear_serving, record_serving

    endpoint = managed.endpoint
    with managed as server:
        # while it runs, the registry's entry points at this port (toolscale endpoints, --endpoint NAME, ...)
        record_serving(registry, endpoint.name, server.endpoint.base_url, server.pid)
        try:
            print(f"serving {endpoint.name} ({endpoint.model}) at {server.endpoint.base_url} (pid {server.pid}); "
                  f"Ctrl-C stops it", flush=True)
            while not stop.wait(0.5):
                if server.process is not None and server.process.poll() is not None:
                    print(f"error: the server exited with code {server.process.returncode}; last log lines:\n"
                          f"{server.log_tail()}", file=sys.stderr)
                    return 3
        finally:
            clear_serving(registry, endpoint.name)
    print("stopped", flush=True)
    return 0


def _llm_stages(args: argparse.Namespace) -> int:
    from pathlib import Path

    from inference.cost import format_usd
    from inference.endpoints import EndpointError
    from synthesis.llm_stages import LLMStagesConfig
    from toolscale.options import RunFailed, UsageError, check_warehouse_source, check_work_dir
    from warehouse.reader import WarehouseError

    cfg = LLMStagesConfig(warehouse=args.warehouse, work_dir=args.work_dir, stages=list(args.stages),
                          sample=args.sample, proposals=args.proposals, endpoint=args.endpoint,
                          registry=args.registry, budget_usd=args.budget, seed=args.seed, port=args.port,
                          prices=args.prices)
    try:
        cfg.check()  # bad settings (a bad price file, an unpriced budget) fail before a flow run exists
    except (ValueError, EndpointError) as exc:
        raise UsageError(str(exc)) from None
    check_work_dir(cfg.work_dir)
    if any(s in cfg.stages for s in ("paraphrase", "evolve")):
        check_warehouse_source(cfg.warehouse)
    check_endpoint_answers(cfg.registry, cfg.endpoint)
    from toolscale.prefect_local import prefect_api, quiet_prefect_logs

    log = quiet_prefect_logs(Path(cfg.work_dir))  # Prefect's lines (and any traceback) go to the log, not here
    if args.json:
        os.environ["PREFECT_LOGGING_HANDLERS_PROGRESS_LEVEL"] = "CRITICAL"  # stdout holds the JSON report only
    with prefect_api(log):
        from flows.llm_stages import llm_stages_flow

        try:
            report = llm_stages_flow(stages=cfg.stages, sample=cfg.sample, proposals=cfg.proposals,
                                     endpoint=cfg.endpoint, budget_usd=cfg.budget_usd, warehouse=cfg.warehouse,
                                     work_dir=cfg.work_dir, seed=cfg.seed, port=cfg.port, registry=cfg.registry,
                                     prices=cfg.prices)
        except EndpointError as exc:
            raise UsageError(str(exc)) from None
        except WarehouseError as exc:
            raise RunFailed(f"{exc}; details in {log}") from None
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    for stage, s in report["stages"].items():
        reasons = ", ".join(f"{k} {v}" for k, v in s["rejection_reasons"].items()) or "none"
        print(f"{stage:<11} {s['accepted']:>3}/{s['attempted']:<3} accepted ({s['acceptance_rate']:.0%}); "
              f"refused: {reasons}")
    t = report["totals"]
    print(f"run {report['run_id']}: {t['calls']} calls ({t['cache_hits']} cached), "
          f"{t['prompt_tokens'] + t['completion_tokens']} tokens, {format_usd(t['cost_usd'])}")
    return 0


def check_endpoint_answers(registry: str | None, name: str | None, timeout: float = 5.0) -> None:
    """The endpoint exists, has its key, and answers; or the project starts its server itself. Else one line
    (exit 2) before any flow run or warehouse write."""
    from inference.endpoints import EndpointError, check_health, load_endpoints
    from toolscale.options import UsageError

    try:
        endpoint = load_endpoints(registry).get(name)
        endpoint.api_key()
    except EndpointError as exc:
        raise UsageError(str(exc)) from None
    if endpoint.server:
        return  # a managed server: the job starts it when it does not answer
    health = check_health(endpoint, timeout=timeout)
    if not health.ok:
        raise UsageError(f"endpoint {endpoint.name!r} at {endpoint.base_url} does not answer ({health.reason}); "
                         "start its server or choose another with --endpoint (list them: toolscale endpoints)")


def add_parsers(sub: Any) -> None:
    """Add ``endpoints`` and ``serve`` to the CLI's subparsers."""
    p = sub.add_parser("endpoints", help="list the LLM endpoints and health-check each")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.add_argument("--timeout", type=number_in(0, 300, low_open=True), default=3.0,
                   help="seconds to wait for each endpoint (above 0, at most 300)")
    p.add_argument("--registry", default=None, help="endpoint registry file (default: $TOOLSCALE_ENDPOINTS or "
                                                    "inference/endpoints.yaml)")
    p.set_defaults(func=_endpoints)
    p = sub.add_parser("serve", help="run a managed LLM server (llama.cpp or vLLM) in the foreground until Ctrl-C")
    p.add_argument("model", nargs="?", default=None, help="an endpoint name from the registry (default: its default)")
    p.add_argument("--port", type=int_at_least(1, 65535), default=None,
                   help="default: the port in the endpoint's base_url; while it "
                                                          "runs, the registry's entry points at the port given")
    p.add_argument("--startup-timeout", type=number_in(0, 3600, low_open=True), default=120.0,
                   help="seconds to wait for the server to answer (at most 3600)")
    p.add_argument("--registry", default=None, help="endpoint registry file")
    p.set_defaults(func=_serve)
    p = sub.add_parser("llm-stages", help="run the LLM stages (paraphrase, evolve, propose) on a sample of the "
                                          "latest snapshot and record them in the warehouse")
    p.add_argument("--stages", nargs="+", choices=LLM_STAGES, default=list(LLM_STAGES))
    p.add_argument("--sample", type=int_at_least(1, 10_000), default=8, help="snapshot tasks given to paraphrase and evolve")
    p.add_argument("--proposals", type=int_at_least(1, 1_000), default=2, help="domain specs to ask for")
    p.add_argument("--endpoint", default=None, help="an endpoint name from the registry (default: its default)")
    p.add_argument("--budget", type=number_in(0, 1_000_000), default=None,
                   help="USD for the whole run (default: no limit)")
    p.add_argument("--prices", default=None, help="a provider price file for the endpoint's model (the nominal "
                                                  "ToolOrchestra table prices the models it lists)")
    p.add_argument("--seed", type=int_at_least(0, MAX_SEED), default=0, help="which tasks are sampled")
    p.add_argument("--port", type=int_at_least(1, 65535), default=None,
                   help="port for a managed server started for this run")
    p.add_argument("--warehouse", default=os.environ.get("TOOLSCALE_WAREHOUSE", "warehouse/toolscale.duckdb"), help="DuckDB file (default: $TOOLSCALE_WAREHOUSE "
                                                                    "or warehouse/toolscale.duckdb)")
    p.add_argument("--work-dir", default="work", help="LLM cache and accepted domain specs")
    p.add_argument("--registry", default=None, help="endpoint registry file")
    p.add_argument("--json", action="store_true", help="print the run's report as JSON")
    p.set_defaults(func=_llm_stages)
