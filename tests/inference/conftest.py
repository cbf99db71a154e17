"""The real local llama.cpp server (SmolLM2-135M GGUF) shared by the LLM tests: started once per session on port
8310, reached through a counting proxy on loopback so tests can see what reached the server."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from inference.endpoints import Endpoint, load_endpoints
from inference.server import ManagedServer
from tests.inference.counting_proxy import CountingProxy

SERVER_PORT = 8310


@dataclass
class Local:
    server: ManagedServer
    proxy: CountingProxy
    endpoint: Endpoint  # reaches the server through the proxy


@pytest.fixture(scope="session")
def local() -> Iterator[Local]:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python[server] is not installed (pip install -e .[llm])")
    endpoint = load_endpoints().get("local-smollm2")
    with ManagedServer(endpoint, port=SERVER_PORT, startup_timeout_s=120) as server:
        with CountingProxy(SERVER_PORT) as proxy:
            yield Local(server, proxy, endpoint.with_port(proxy.port))
