"""Helpers of the NeMo Gym tests: a small published snapshot exported for Gym, and exported servers run in Gym's
own venv (.venv-gym) with nothing of this project importable."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.gym_venv import ensure_gym_venv

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def neutral_env() -> dict[str, str]:
    """The environment without PYTHONPATH: an exported server must run on Gym, sqlite3 and jsonschema alone."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@contextmanager
def gym_servers(export_dir: Path, domains: list[str], cwd: Path, *options: str) -> Iterator[dict[str, str]]:
    """The domains' exported servers in one process (scripts/gym_serve.py in .venv-gym); yields each base URL."""
    python = ensure_gym_venv()
    port = free_port()
    folders = [str(export_dir / "resources_servers" / f"toolscale_{d}") for d in domains]
    proc = subprocess.Popen([str(python), str(ROOT / "scripts" / "gym_serve.py"), *folders, "--port", str(port),
                             *options], cwd=cwd, env=neutral_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    urls = {d: base if len(domains) == 1 else f"{base}/toolscale_{d}" for d in domains}
    try:
        for url in urls.values():
            wait_until_up(proc, url)
        yield urls
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def wait_until_up(proc: subprocess.Popen[bytes], url: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            error = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"the server for {url} exited: {error[-2000:]}")
        try:
            httpx.post(f"{url}/close_session", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.3)
    raise RuntimeError(f"the server for {url} did not answer within {timeout_s:g} s")
