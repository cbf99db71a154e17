"""A real llama.cpp server for the evaluation tests (one per session: the ``eval_server`` fixture in conftest.py),
and an endpoint registry file naming it and a dead endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import yaml

from inference.endpoints import Endpoint, load_endpoints
from inference.server import ManagedServer, ServerCommand, server_command

SERVER_PORT = 5900
DEAD_PORT = 5903  # nothing listens here


def serve_local() -> Iterator[Endpoint]:
    endpoint = load_endpoints().get("local-smollm2")
    base = server_command(endpoint, SERVER_PORT)
    # llama.cpp's default 2,048-token context is shorter than an episode's system prompt with the tool schemas.
    # That prompt (about 7,600 tokens since the policies list every rule with its alternatives) dominates the tests' time, so the server keeps evaluated prompt states in
    # RAM (--cache): describe and evaluate episodes over one domain's full catalog share it and read it once.
    command = ServerCommand([*base.argv, "--n_ctx", "12288", "--n_threads", "2", "--cache", "true"], base.endpoint)
    with ManagedServer(endpoint, startup_timeout_s=120, command=command) as server:
        yield server.endpoint


def write_registry(folder: Path, live: Endpoint) -> Path:
    """``local`` answers; ``dead`` is a well-formed endpoint that nothing serves."""
    body = {"default": "local", "endpoints": {
        "local": {"base_url": live.base_url, "model": live.model, "provider": "local",
                  "pricing_key": live.pricing_key},
        "dead": {"base_url": f"http://127.0.0.1:{DEAD_PORT}/v1", "model": "nobody", "provider": "local",
                 "pricing_key": "nobody"}}}
    path = folder / "endpoints.yaml"
    path.write_text(yaml.safe_dump(body))
    return path
