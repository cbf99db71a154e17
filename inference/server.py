"""Servers the project starts itself: llama.cpp (CPU, the offline default) and vLLM (GPU), one interface.

A managed server runs in its own process group, is told by the kernel to die with the thread that started it
(PR_SET_PDEATHSIG), is waited on until ``/v1/models`` answers, and is stopped by its process group id when the
``with`` block ends, whatever happens inside it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from inference.endpoints import Endpoint, EndpointError, check_health

PR_SET_PDEATHSIG = 1


class ServerError(RuntimeError):
    """A managed server did not come up (or could not be started); the message says why."""


class PortTaken(ServerError):
    """The port a server was to listen on is already in use (one line, naming the port)."""


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something already listens on ``host:port`` (a bind there fails with EADDRINUSE)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


@dataclass(frozen=True)
class ServerCommand:
    argv: list[str]
    endpoint: Endpoint  # the endpoint as served (its base_url carries the port actually used)


def server_command(endpoint: Endpoint, port: int | None = None, python: str = sys.executable) -> ServerCommand:
    """The command line that serves ``endpoint`` on 127.0.0.1 (on ``port`` if given, else its registry port)."""
    if endpoint.server is None:
        raise EndpointError(f"endpoint {endpoint.name!r} is not started by the project (no 'server' in the "
                            f"registry); start it yourself or pick a llama_cpp or vllm endpoint")
    served = endpoint.with_port(port) if port is not None else endpoint
    if served.host not in ("127.0.0.1", "localhost"):
        raise EndpointError(f"endpoint {endpoint.name!r} is not local ({served.host}); the project serves only "
                            f"on 127.0.0.1")
    if endpoint.server == "llama_cpp":
        # inference.llama_server is llama-cpp-python's server with the project's chat format registered
        argv = [python, "-m", "inference.llama_server", "--model", str(endpoint.gguf_path()),
                "--model_alias", endpoint.model, "--host", "127.0.0.1", "--port", str(served.port),
                # SmolLM2 was trained on 8k tokens; llama.cpp's default 2k window cannot hold a policy plus tools
                "--n_ctx", "8192"]
        if endpoint.chat_format:
            argv += ["--chat_format", endpoint.chat_format]
    elif endpoint.server == "vllm":
        argv = ["vllm", "serve", endpoint.model, "--host", "127.0.0.1", "--port", str(served.port),
                "--served-model-name", endpoint.model]
    else:
        raise EndpointError(f"endpoint {endpoint.name!r}: unknown server kind {endpoint.server!r}")
    return ServerCommand(argv, served)


def _die_with_parent() -> None:
    """Runs in the child before exec: the kernel sends SIGTERM when the parent goes away."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class ManagedServer:
    """``with ManagedServer(endpoint, port=8310) as server: LLMClient(server.endpoint) ...``"""

    def __init__(self, endpoint: Endpoint, port: int | None = None, startup_timeout_s: float = 120.0,
                 log_path: str | Path | None = None, command: ServerCommand | None = None) -> None:
        self.command = command or server_command(endpoint, port)
        self.endpoint = self.command.endpoint
        self.startup_timeout_s = startup_timeout_s
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix=f"{endpoint.name}-",
                                                                              suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ManagedServer:
        self.start()
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        health = check_health(self.endpoint, timeout=1.0)
        if health.ok:
            raise PortTaken(f"port {self.endpoint.port} is taken: an LLM server already answers on "
                            f"{self.endpoint.base_url}; use it, or pick another port (--port N)")
        if port_in_use(self.endpoint.port):
            raise PortTaken(f"port {self.endpoint.port} on 127.0.0.1 is taken by another program; pick another "
                            f"port (--port N)")
        with open(self.log_path, "ab") as log:
            try:
                self.process = subprocess.Popen(self.command.argv, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, start_new_session=True,
                                                preexec_fn=_die_with_parent)
            except FileNotFoundError as exc:
                raise ServerError(f"cannot start {self.command.argv[0]!r} for endpoint {self.endpoint.name!r}: "
                                  f"not installed") from exc

    def wait_healthy(self) -> float:
        """Poll until the server answers; returns the seconds it took. Raises ServerError on exit or timeout."""
        if self.process is None:
            raise ServerError("the server was never started")
        start = time.monotonic()
        while True:
            if self.process.poll() is not None:
                raise ServerError(f"{self.endpoint.name} server exited with code {self.process.returncode} before "
                                  f"answering; last log lines:\n{self.log_tail()}")
            health = check_health(self.endpoint, timeout=2.0)
            if health.ok:
                return time.monotonic() - start
            if time.monotonic() - start > self.startup_timeout_s:
                raise ServerError(f"{self.endpoint.name} server on {self.endpoint.base_url} not healthy within "
                                  f"{self.startup_timeout_s:g}s ({health.reason}); last log lines:\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the server's process group, SIGKILL it after ``grace_s``; safe to call twice."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)  # start_new_session: its pid is its group id
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
