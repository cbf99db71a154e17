"""Managed servers without a model: command lines, health waiting with a timeout, stop by process group, and
death with the parent. (The real llama.cpp server is exercised in test_llama_cpp.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from inference.endpoints import EndpointError, load_endpoints
from inference.server import ManagedServer, ServerCommand, ServerError, server_command

# a fake port nothing listens on (discard); a "server" that never answers HTTP
UNREACHABLE_PORT = 9
SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")  # a zombie has exited; only its parent's bookkeeping remains


def _wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


def test_vllm_command_serves_the_model_on_loopback() -> None:
    vllm = load_endpoints().get("vllm-qwen3-8b")
    command = server_command(vllm, port=8312)
    assert command.argv == ["vllm", "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", "8312",
                            "--served-model-name", "Qwen/Qwen3-8B"]
    assert command.endpoint.base_url == "http://127.0.0.1:8312/v1"


def test_llama_cpp_command_and_non_managed_endpoints(tmp_path: Path) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    local = replace(load_endpoints().get("local-smollm2"), model_file=str(gguf))
    argv = server_command(local, port=8313, python="/usr/bin/python3").argv
    assert argv == ["/usr/bin/python3", "-m", "inference.llama_server", "--model", str(gguf), "--model_alias",
                    "SmolLM2-135M-Instruct", "--host", "127.0.0.1", "--port", "8313", "--n_ctx", "8192",
                    "--chat_format", "chatml-tools"]
    with pytest.raises(EndpointError, match="is not started by the project"):
        server_command(load_endpoints().get("openai-gpt-4o-mini"))


def test_vllm_health_wait_times_out_with_a_clear_error_and_stops_the_server() -> None:
    vllm = load_endpoints().get("vllm-qwen3-8b").with_port(UNREACHABLE_PORT)
    command = ServerCommand(SLEEPER, vllm)  # vllm cannot run here; the waiting and stopping are what is tested
    managed = ManagedServer(vllm, command=command, startup_timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(ServerError, match=r"not healthy within 1s \(unreachable: connection refused\)"):
        with managed:
            pass
    assert time.monotonic() - started < 10
    assert managed.process is None


def test_a_server_that_exits_early_is_reported_with_its_log() -> None:
    vllm = load_endpoints().get("vllm-qwen3-8b").with_port(UNREACHABLE_PORT)
    command = ServerCommand([sys.executable, "-c", "print('no GPU found'); raise SystemExit(3)"], vllm)
    with pytest.raises(ServerError, match=r"(?s)exited with code 3 before answering.*no GPU found"):
        with ManagedServer(vllm, command=command, startup_timeout_s=30):
            pass


def test_a_missing_server_program_is_named() -> None:
    vllm = load_endpoints().get("vllm-qwen3-8b").with_port(UNREACHABLE_PORT)
    command = ServerCommand(["no-such-vllm-h4"], vllm)
    with pytest.raises(ServerError, match="cannot start 'no-such-vllm-h4'.*not installed"):
        with ManagedServer(vllm, command=command):
            pass


def test_stop_kills_the_whole_process_group() -> None:
    vllm = load_endpoints().get("vllm-qwen3-8b").with_port(UNREACHABLE_PORT)
    # the "server" forks a grandchild, as real servers do (workers); both must go
    spawner = [sys.executable, "-c", "import subprocess, sys, time; "
               "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
               "print(p.pid, flush=True); time.sleep(60)"]
    managed = ManagedServer(vllm, command=ServerCommand(spawner, vllm))
    managed.start()
    deadline = time.monotonic() + 20
    while not managed.log_path.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(managed.log_path.read_text().split()[0])
    server_pid = managed.pid
    assert server_pid is not None and os.getpgid(grandchild) == server_pid
    managed.stop()
    assert _wait_gone(server_pid) and _wait_gone(grandchild)
    managed.stop()  # twice is harmless


def test_the_server_dies_with_its_parent(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG: a parent killed with SIGKILL (no cleanup runs) still takes its server down."""
    script = textwrap.dedent(f"""
        import sys, time
        from inference.endpoints import load_endpoints
        from inference.server import ManagedServer, ServerCommand
        vllm = load_endpoints().get("vllm-qwen3-8b").with_port({UNREACHABLE_PORT})
        managed = ManagedServer(vllm, command=ServerCommand({SLEEPER!r}, vllm))
        managed.start()
        print(managed.pid, flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        server_pid = int(parent.stdout.readline())
        assert not _gone(server_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _wait_gone(server_pid), "the server outlived its parent"
    finally:
        parent.kill()
