"""What a training entry point checks before any model loads, and how it ends: one line, exit 2 for bad input, 3 for
a run that failed (as the ``toolscale`` CLI does).

``train.stages.grpo``, ``train.stages.run``, ``train.stages.launch`` and ``bench/learning.py`` call ``check_run_inputs``
first: every value is text without a newline or a NUL (each may be written into a job script or a command line),
the pricing seed fits the warehouse's INTEGER column, the folders are folders, the warehouse opens and the
snapshot is published. Converting a model takes up to 135 s; a missing warehouse is found before that.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from train.stages.records import TrainRunConfig
from warehouse.errors import WarehouseError

MAX_SEED = 2**31 - 1  # training_runs.pricing_seed is a 32-bit INTEGER
MAX_VALUE_CHARS = 4_096


class BadInput(ValueError):
    """An entry point's input is unusable: exit 2, with this one line."""


def check_text(option: str, value: str | None) -> None:
    """A value that may be written into a job script or a command line: text, no newline, no NUL, bounded."""
    if value is None:
        return
    if not isinstance(value, str):
        raise BadInput(f"{option} must be text, got {type(value).__name__}")
    if any(c in value for c in "\n\r\0"):
        raise BadInput(f"{option} {value[:60]!r} holds a newline or a NUL; no value may (it would end a line of the "
                       "job script)")
    if len(value) > MAX_VALUE_CHARS:
        raise BadInput(f"{option} is {len(value):,} characters; at most {MAX_VALUE_CHARS:,}")


def check_whole(option: str, value: Any, low: int, high: int) -> int:
    """A whole number in ``low..high`` (the range of the column or option it will meet)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadInput(f"{option} must be a whole number from {low:,} to {high:,}, got {value!r}")
    return value


def check_folder(option: str, path: str) -> None:
    """A folder, or a path where one can be made: nothing on the way is a file."""
    for part in (Path(path), *Path(path).absolute().parents):
        if part.exists():
            if not part.is_dir():
                raise BadInput(f"{option} {path}: {part} is a file, not a folder")
            return


def check_job_values(cfg: TrainRunConfig, log_dir: str | Path | None = None, site: Any = None) -> None:
    """Every value of ``cfg`` (and the log folder and site) that a job script or command line will hold."""
    for option, value in (("--profile", cfg.profile), ("--warehouse", cfg.warehouse), ("--snapshot", cfg.snapshot),
                          ("--output-root", cfg.output_root), ("--work-dir", cfg.work_dir),
                          ("--preference-run", cfg.preference_run)):
        check_text(option, value)
    check_whole("--pricing-seed", cfg.pricing_seed, 0, MAX_SEED)
    if log_dir is not None:
        check_text("the log folder", str(log_dir))
    for name in ("python", "root", "cwd"):
        if site is not None:
            check_text(f"the site's {name}", getattr(site, name))


def published_snapshot(warehouse: str, snapshot: str) -> str:
    """The id of the published snapshot ``snapshot`` (an id or latest) of ``warehouse``; a WarehouseError saying
    what is missing."""
    from warehouse.reader import connect_readonly, published_meta

    if not Path(warehouse).is_file():
        raise WarehouseError(f"no warehouse at {warehouse}" + (" (it is a folder)" if Path(warehouse).is_dir() else ""))
    with closing(connect_readonly(warehouse)) as con:
        return str(published_meta(con, snapshot)["snapshot_id"])


def check_run_inputs(cfg: TrainRunConfig, snapshot: str | None = None) -> str:
    """Everything ``cfg`` names, checked before any model loads; the snapshot id it trains on. ``snapshot``: the
    one to check when it is not ``cfg.snapshot`` (a profile's own)."""
    check_job_values(cfg)
    check_folder("--output-root", cfg.output_root)
    check_folder("--work-dir", cfg.work_dir)
    return published_snapshot(cfg.warehouse, snapshot or cfg.snapshot)


def exit_status(run: Callable[[], int], check: Callable[[], Any] | None = None) -> int:
    """``check()`` then ``run()``, as an entry point ends: bad input (a failed check, or a refusal such as a held run
    lock) is one line and 2; a run that failed is one line and 3; an interrupt is 130."""
    from train.stages.profiles import ProfileError

    try:
        if check is not None:
            check()
    except (ValueError, OSError, WarehouseError, ProfileError) as exc:
        return _fail(exc, 2)
    try:
        return run()
    except BadInput as exc:
        return _fail(exc, 2)
    except KeyboardInterrupt:
        print("error: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - a failed run is one line, never a traceback
        return _fail(exc, 3)


def _fail(exc: BaseException, status: int) -> int:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    shown = first if isinstance(exc, (ValueError, OSError, WarehouseError)) else f"{type(exc).__name__}: {first}"
    print(f"error: {shown[:500]}", file=sys.stderr)
    return status
