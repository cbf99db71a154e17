"""The LLM commands of the ``toolscale`` CLI: ``endpoints`` (list and health-check) and ``serve`` (run a managed
server in the foreground until Ctrl-C)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from dataclasses import asdict
from typing import Any


def _endpoints(args: argparse.Namespace) -> int:
    from inference.endpoints import check_health, load_endpoints

    registry = load_endpoints(args.registry)
    rows: list[dict[str, Any]] = []
    for endpoint in registry.endpoints.values():
        health = check_health(endpoint, timeout=args.timeout)
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
    from inference.server import ManagedServer, ServerError

    endpoint = load_endpoints(args.registry).get(args.model)
    stop = threading.Event()
    # Ctrl-C and SIGTERM both end the wait; the with block then stops the server's process group
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        return _serve_until_stopped(ManagedServer(endpoint, port=args.port, startup_timeout_s=args.startup_timeout),
                                    stop)
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _serve_until_stopped(managed: Any, stop: threading.Event) -> int:
    endpoint = managed.endpoint
    with managed as server:
        print(f"serving {endpoint.name} ({endpoint.model}) at {server.endpoint.base_url} (pid {server.pid}); "
              f"Ctrl-C stops it", flush=True)
        while not stop.wait(0.5):
            if server.process is not None and server.process.poll() is not None:
                print(f"error: the server exited with code {server.process.returncode}; last log lines:\n"
                      f"{server.log_tail()}", file=sys.stderr)
                return 1
    print("stopped", flush=True)
    return 0


def add_parsers(sub: Any) -> None:
    """Add ``endpoints`` and ``serve`` to the CLI's subparsers."""
    p = sub.add_parser("endpoints", help="list the LLM endpoints and health-check each")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for each endpoint")
    p.add_argument("--registry", default=None, help="endpoint registry file (default: $TOOLSCALE_ENDPOINTS or "
                                                    "inference/endpoints.yaml)")
    p.set_defaults(func=_endpoints)
    p = sub.add_parser("serve", help="run a managed LLM server (llama.cpp or vLLM) in the foreground until Ctrl-C")
    p.add_argument("model", nargs="?", default=None, help="an endpoint name from the registry (default: its default)")
    p.add_argument("--port", type=int, default=None, help="default: the port in the endpoint's base_url")
    p.add_argument("--startup-timeout", type=float, default=120.0, help="seconds to wait for the server to answer")
    p.add_argument("--registry", default=None, help="endpoint registry file")
    p.set_defaults(func=_serve)
