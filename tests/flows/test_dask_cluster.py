"""A real Dask cluster on loopback (``dask scheduler`` plus ``dask worker`` processes, as on many machines): the
CLI's ``--task-runner dask:ADDRESS`` publishes the same snapshot as ``processes``, and the speed-up of two
workers over one is measured and printed.

The speed-up compares warm workers: a worker's first batch of a domain imports the pipeline and builds the domain's
engine (about 5 s here), which a long-lived cluster pays once. Timing a fresh two-worker cluster against the one
worker left after it (as this test once did) measured that start-up, not the parallelism: it read 0.5x."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DASK = str(Path(sys.executable).parent / "dask")
CONFIG = ["--domains", "weather", "railway", "--tasks-per-domain", "120"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(tmp: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PREFECT_HOME": str(tmp / "prefect"),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    return env


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def cluster(tmp: Path, workers: int) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A scheduler on 127.0.0.1 and ``workers`` single-threaded worker processes, each in a session of its own.
    The workers know no Prefect server and may not start one: each task carries the flow's settings."""
    address = f"tcp://127.0.0.1:{_free_port()}"
    log = open(tmp / "dask.log", "ab")
    env = {**_env(tmp), "PREFECT_SERVER_ALLOW_EPHEMERAL_MODE": "false"}
    started = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                                 "--dashboard-address", ":0"], stdout=log, stderr=log, env=env, cwd=REPO,
                                start_new_session=True)]
    try:
        for _ in range(workers):
            started.append(subprocess.Popen([DASK, "worker", address, "--nthreads", "1", "--nworkers", "1",
                                             "--no-dashboard"], stdout=log, stderr=log, env=env, cwd=REPO,
                                            start_new_session=True))
        _wait_for_workers(address, workers)
        yield address, started[1:]
    finally:
        for proc in reversed(started):
            _stop(proc)
        log.close()


def _wait_for_workers(address: str, count: int, timeout: float = 120) -> None:
    from distributed import Client

    deadline = time.monotonic() + timeout
    with Client(address, timeout=timeout) as client:
        while len(client.scheduler_info()["workers"]) < count:
            assert time.monotonic() < deadline, f"{count} Dask workers did not join {address}"
            time.sleep(0.5)


def regenerate(tmp: Path, name: str, runner: str) -> tuple[str, float]:
    """``toolscale regenerate`` into ``tmp/name``; returns the published snapshot id and the shards' wall time."""
    out = subprocess.run([sys.executable, "-m", "toolscale.cli", "regenerate", *CONFIG, "--task-runner", runner,
                          "--warehouse", str(tmp / name / "wh.duckdb"), "--work-dir", str(tmp / name / "work")],
                         capture_output=True, text=True, timeout=900, env=_env(tmp), cwd=REPO)
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-3000:])
    snapshot = re.search(r"^snapshot (\S+) published", out.stdout, re.M)
    shards = re.search(r"^published \S+ in \S+ \(shards_s ([0-9.]+)", out.stdout, re.M)
    assert snapshot and shards, out.stdout[-2000:]
    return snapshot[1], float(shards[1])


@pytest.mark.slow
def test_a_dask_cluster_on_loopback_publishes_the_process_runners_snapshot(tmp_path: Path) -> None:
    expected, _ = regenerate(tmp_path, "processes", "processes")
    with cluster(tmp_path, workers=2) as (address, workers):
        cold, cold_s = regenerate(tmp_path, "dask2-cold", f"dask:{address}")  # both workers import and build engines
        two, two_s = regenerate(tmp_path, "dask2", f"dask:{address}")
        _stop(workers[1])  # the same scheduler, one warm worker left
        one, one_s = regenerate(tmp_path, "dask1", f"dask:{address}")
    assert cold == two == one == expected
    print(f"\nDask on loopback, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}: shards {cold_s:.1f}s on two "
          f"fresh workers; warm: {one_s:.1f}s on one worker, {two_s:.1f}s on two: speed-up {one_s / two_s:.2f}x")
