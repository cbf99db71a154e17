"""Where ``toolscale serve`` is serving: one small record per running server, so that the endpoint registry points
the served endpoint at the port it was given (``--port``) for as long as that server runs.

A record is a JSON file in ``$TOOLSCALE_SERVING_DIR`` (default ``~/.cache/toolscale/serving``), keyed by the
registry file and the endpoint name; it holds the base URL and the server's pid. A record whose process is gone
(a server killed with ``kill -9``) is ignored and removed the next time it is read.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from toolscale.pids import pid_alive

SERVING_DIR_ENV = "TOOLSCALE_SERVING_DIR"


def serving_dir() -> Path:
    return Path(os.environ.get(SERVING_DIR_ENV, Path.home() / ".cache" / "toolscale" / "serving"))


def _record_path(registry: Path, name: str) -> Path:
    key = hashlib.sha256(f"{registry.resolve()}\0{name}".encode()).hexdigest()[:16]
    return serving_dir() / f"{name}-{key}.json"


def record_serving(registry: Path, name: str, base_url: str, pid: int) -> Path:
    """Note that ``name`` of ``registry`` is served at ``base_url`` by process ``pid``; returns the record's path."""
    path = _record_path(registry, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"endpoint": name, "registry": str(registry.resolve()), "base_url": base_url,
                               "pid": pid}))
    tmp.replace(path)
    return path


def clear_serving(registry: Path, name: str) -> None:
    _record_path(registry, name).unlink(missing_ok=True)


def served_base_url(registry: Path, name: str) -> str | None:
    """The base URL a running ``toolscale serve`` gave ``name``, or None when none runs."""
    path = _record_path(registry, name)
    try:
        record = json.loads(path.read_text())
        base_url, pid = str(record["base_url"]), int(record["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not pid_alive(pid):
        path.unlink(missing_ok=True)
        return None
    return base_url
