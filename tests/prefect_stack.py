"""A real Prefect stack for deployment tests: a server on loopback, the `toolscale-process` work pool, the
deployments from prefect.yaml and a process worker, all stopped (by process group) when the test ends."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class PrefectStack:
    api: str
    env: dict[str, str]
    logs: Path  # server.log and worker.log

    def cli(self, *args: str, timeout: float = 60) -> str:
        return prefect_cli(*args, env=self.env, timeout=timeout)

    def worker_log(self) -> str:
        return (self.logs / "worker.log").read_text()[-3000:]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    # a session of its own: the Prefect CLI ignores SIGINT when started in the background, so it is stopped
    # by signalling its whole process group (the worker's flow-run subprocesses included)
    with open(log, "wb") as handle:
        return subprocess.Popen(args, cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True)


def stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def prefect_cli(*args: str, env: dict[str, str], timeout: float = 60) -> str:
    done = subprocess.run([sys.executable, "-m", "prefect", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@contextmanager
def prefect_stack(tmp_path: Path, deploy: tuple[str, ...] = ("--all",), port: int | None = None,
                  health_s: float = 90, deploy_timeout: float = 180) -> Iterator[PrefectStack]:
    """Server healthy, pool created, ``prefect deploy <deploy>`` done, worker started; everything stopped after."""
    port = port or free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "home"), PREFECT_API_URL=api, PREFECT_UI_ENABLED="false",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_WORKER_QUERY_SECONDS="1",
               PREFECT_CLI_COLORS="false")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                            "--port", str(port)], env, tmp_path / "server.log"))
        deadline = time.monotonic() + health_s
        while True:
            assert procs[0].poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"server not healthy after {health_s:g}s"
            time.sleep(0.5)
        prefect_cli("work-pool", "create", "toolscale-process", "--type", "process", env=env)
        prefect_cli("--no-prompt", "deploy", *deploy, env=env, timeout=deploy_timeout)
        procs.append(start([sys.executable, "-m", "prefect", "worker", "start", "--pool", "toolscale-process"],
                           env, tmp_path / "worker.log"))
        yield PrefectStack(api, env, tmp_path)
    finally:
        for proc in reversed(procs):
            stop(proc)
