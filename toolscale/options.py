"""Checks on the CLI's options, run before any work starts; each failure is one ``UsageError`` line."""

from __future__ import annotations

import argparse
import math
import os
import socket
from pathlib import Path
from typing import Any

TASK_RUNNERS = "processes | threads | dask | dask:<scheduler address>"
DASK_DEFAULT_PORT = 8786
PROBE_SECONDS = 3.0
MAX_SEED = 2**31 - 1


class UsageError(ValueError):
    """Bad options or input: the CLI prints the message and exits with status 2."""


def int_at_least(low: int, high: int | None = None) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            bound = f">= {low}" if high is None else f"between {low} and {high}"
            raise argparse.ArgumentTypeError(f"{value} is out of range; it must be {bound}")
        return value
    parse.__name__ = "whole number"
    return parse


def number_in(low: float, high: float, low_open: bool = False) -> Any:
    """An argparse type: a finite number in [low, high] (``low_open``: above ``low``, not equal to it)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text} is not a finite number")
        if value < low or value > high or (low_open and value == low):
            bound = f"above {low:g} and at most {high:g}" if low_open else f"from {low:g} to {high:g}"
            raise argparse.ArgumentTypeError(f"{text} is out of range; it must be a number {bound}")
        return value
    parse.__name__ = "number"
    return parse


def fraction(text: str) -> float:
    """A finite number in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is out of range; it must be a number from 0 to 1")
    return value


class RunFailed(RuntimeError):
    """The run itself failed after its checks passed: the CLI prints the message and exits with status 3."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def preference_json(text: str) -> dict[str, Any]:
    """``--preference``: one JSON object of finite numbers (``tools`` maps tool names to finite numbers)."""
    import json

    if len(text) > 10_000:
        raise argparse.ArgumentTypeError("the preference is over 10,000 characters")
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object such as {\"outcome\": 1, \"cost\": 0.5}")
    for key, weight in value.items():
        weights = weight.items() if key == "tools" and isinstance(weight, dict) else [(key, weight)]
        for name, w in weights:
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or abs(w) > 1e6:
                raise argparse.ArgumentTypeError(f"weight {name!r} must be a finite number (at most 1e6 either "
                                                 f"way), got {json.dumps(w)[:40]}")
    return value


def json_object(text: str) -> dict[str, Any]:
    """A call's arguments, parsed as strictly as an agent's are (one object, no duplicate keys, bounded)."""
    from domains.arguments import parse_arguments

    try:
        return parse_arguments(text)
    except ValueError as exc:
        raise UsageError(f"--args rejected (not valid JSON call arguments): {exc}") from None


def check_domains_dir(folder: str | None) -> None:
    """Make ``--domains-dir`` visible to this process and every worker it starts (via the environment)."""
    from domains.registry import DOMAINS_DIR_ENV, check_extra_dirs, domain_paths

    if folder:
        path = Path(folder).expanduser()
        if not path.is_dir():
            raise UsageError(f"--domains-dir {folder} is not a folder")
        earlier = os.environ.get(DOMAINS_DIR_ENV)
        os.environ[DOMAINS_DIR_ENV] = os.pathsep.join([str(path.resolve()), *([earlier] if earlier else [])])
    try:
        check_extra_dirs()
        domain_paths()
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def check_external_site(folder: str | None) -> None:
    """``--external-site DIR``: put DIR first in $TOOLSCALE_EXTERNAL_SITE (workers inherit it)."""
    from domains.external import SITE_ENV

    if not folder:
        return
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise UsageError(f"--external-site {folder} is not a folder")
    earlier = os.environ.get(SITE_ENV)
    os.environ[SITE_ENV] = os.pathsep.join([str(path.resolve()), *([earlier] if earlier else [])])


def check_domains(names: list[str] | None) -> None:
    from domains.registry import available_domains, unknown_domain

    if not names:
        return
    known = available_domains()
    for name in names:
        if name not in known:
            raise UsageError(unknown_domain(name))
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UsageError(f"--domains names {', '.join(repeated)} more than once")
    check_external_data(names)


def check_external_data(names: list[str]) -> None:
    """An imported domain (tau2's retail, ...) needs its external data installed: say how, in one line."""
    from domains import external
    from domains.registry import get_spec

    for name in names:
        for source in get_spec(name).sources.values():
            try:
                external.resolve(source)
            except external.ExternalDataMissing as exc:
                raise UsageError(f"domain {name!r}: {exc}") from None


def check_task_runner(spec: str) -> None:
    """Known runner, and for ``dask:ADDR`` a scheduler that answers within a few seconds."""
    if spec in ("processes", "threads", "dask"):
        return
    if not spec.startswith("dask:"):
        raise UsageError(f"--task-runner {spec!r} is not one of: {TASK_RUNNERS}")
    address = spec.partition(":")[2]
    host, port = scheduler_host_port(address)
    try:
        with socket.create_connection((host, port), timeout=PROBE_SECONDS):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise UsageError(f"cannot reach the Dask scheduler at {address} ({reason}); "
                         "start it first (dask scheduler) or use --task-runner processes") from None


def scheduler_host_port(address: str) -> tuple[str, int]:
    """``tcp://host:port``, ``host:port`` or ``host`` (port 8786) -> (host, port)."""
    rest = address.split("://", 1)[1] if "://" in address else address
    if not rest or "/" in rest:
        raise UsageError(f"--task-runner dask:{address} has no usable scheduler address; "
                         "write it like dask:tcp://10.0.0.5:8786")
    host, sep, port_text = rest.rpartition(":") if rest.count(":") == 1 or rest.startswith("[") else ("", "", "")
    if not sep:
        return rest.strip("[]"), DASK_DEFAULT_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError(f"--task-runner dask:{address}: {port_text!r} is not a port number")
    return host.strip("[]"), int(port_text)


def check_work_dir(work_dir: str) -> None:
    path = Path(work_dir)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--work-dir {work_dir} exists and is not a folder")
    probe = path if path.exists() else next((p for p in path.absolute().parents if p.exists()), Path("/"))
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"--work-dir {work_dir} cannot be written (no write permission on {probe})")


def check_warehouse_target(warehouse: str) -> None:
    """The place ``regenerate`` will publish to (the writer's own preflight: folder, FIFO, foreign file, ...)."""
    from warehouse.checks import check_target
    from warehouse.errors import WarehouseError

    try:
        check_target(warehouse)
    except WarehouseError as exc:
        raise UsageError(str(exc)) from None


def check_warehouse_source(warehouse: str) -> None:
    """A warehouse to read must be a whole ToolScale warehouse (opening a FIFO would block forever)."""
    from warehouse.checks import check_readable
    from warehouse.errors import WarehouseError

    try:
        check_readable(warehouse)
    except WarehouseError as exc:
        raise UsageError(str(exc)) from None