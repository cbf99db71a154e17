"""Where an export may be written, and the staged write that puts it there atomically.

Rules: the output folder is absent or empty, or ``overwrite`` is set and it holds an earlier ToolScale
export (never an arbitrary folder, never one that holds the warehouse). The export is built in a temporary
sibling folder, fsynced, and swapped in as one unit, so a failure (a full disk, a bad task) leaves the old
folder exactly as it was and no partial files, and a dataset never mixes rows of two snapshots.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolscale.pids import pid_alive
from warehouse.atomic import fsync_tree, replace_folder
from warehouse.checks import KINDS, NAME_MAX, check_place, first_line, resolve, stat_or_none
from warehouse.errors import WarehouseError

MARKER = ".toolscale-export.json"
HF_ENTRIES = {"dataset", "parquet", "README.md"}
TAU2_FILES = {"tasks.json", "db.json", "policy.md"}
STAGING_EXTRA_BYTES = len("..tmp-4194304-") + 8  # what the staging folder adds to the name (mkdtemp: 8 chars)
STAGING = re.compile(r"\.(?P<name>.+)\.tmp-(?P<pid>[0-9]+)-[A-Za-z0-9_]+")


@dataclass(frozen=True)
class ExportTarget:
    """A checked output folder: ``path`` is the resolved folder, ``shown`` the name the user gave."""

    path: Path
    shown: str
    replaces: bool  # an earlier export is there and will be replaced


def check_export_target(out: str | os.PathLike[str], *, overwrite: bool,
                        warehouse: str | os.PathLike[str] | None = None) -> ExportTarget:
    """The output folder an export may write, or one ``WarehouseError`` line saying why not. Creates nothing."""
    shown = os.fspath(out)
    target = resolve(out, "export folder")
    if target.parent == target:
        raise WarehouseError(f"export folder {shown} is the root folder; choose a folder of its own")
    if len(os.fsencode(target.name)) + STAGING_EXTRA_BYTES > NAME_MAX:
        raise WarehouseError(f"export folder {shown}: the name is too long to stage the export beside it; use a "
                             f"name under {NAME_MAX - STAGING_EXTRA_BYTES} bytes")
    st = stat_or_none(target, shown, "export folder")
    replaces = False
    if st is not None:
        if not stat.S_ISDIR(st.st_mode):
            kind = "file" if stat.S_ISREG(st.st_mode) else KINDS.get(stat.S_IFMT(st.st_mode), "special file")
            raise WarehouseError(f"export folder {shown} is a {kind}, not a folder")
        entries = _entries(target, shown)
        if entries:
            if not overwrite:
                raise WarehouseError(f"export folder {shown} is not empty ({len(entries)} entries, e.g. "
                                     f"{entries[0]!r}); pass --overwrite to replace an earlier export, or choose "
                                     "an empty folder")
            foreign = _foreign_entry(target, entries)
            if foreign is not None:
                raise WarehouseError(f"refusing to replace {shown}: it is not an earlier ToolScale export (it holds "
                                     f"{foreign!r}); choose an empty folder")
            replaces = True
    if warehouse is not None:
        db = resolve(warehouse)
        if db == target or target in db.parents:
            raise WarehouseError(f"export folder {shown} holds the warehouse {os.fspath(warehouse)}; choose "
                                 "another folder")
    check_place(target.parent, shown, what="export folder")
    if replaces and not os.access(target, os.W_OK | os.X_OK):
        raise WarehouseError(f"export folder {shown} is not writable, so it cannot be replaced")
    return ExportTarget(target, shown, replaces)


def _entries(folder: Path, shown: str) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError as exc:
        raise WarehouseError(f"export folder {shown} cannot be listed: {exc.strerror or exc}") from exc


def _foreign_entry(folder: Path, entries: list[str]) -> str | None:
    """The first entry that an export does not write, or None when ``folder`` is an earlier export."""
    if MARKER in entries:
        return None
    if set(entries) <= HF_ENTRIES:  # an HF export written before exports carried the marker
        return None
    for name in entries:  # ... or a tau2 export: one folder per domain holding only the tau2 files
        sub = folder / name
        if sub.is_symlink() or not sub.is_dir():
            return name
        extra = sorted(set(os.listdir(sub)) - TAU2_FILES)
        if extra:
            return f"{name}/{extra[0]}"
    return None


def remove_dead_staging(target: Path) -> None:
    """Staging folders for ``target`` left by an export that was killed (its process is gone)."""
    for entry in os.scandir(target.parent):
        found = STAGING.fullmatch(entry.name)
        if not found or found["name"] != target.name or not entry.is_dir(follow_symlinks=False):
            continue
        if not pid_alive(int(found["pid"])):
            shutil.rmtree(entry.path, ignore_errors=True)


@contextmanager
def staged_export(target: ExportTarget, marker: dict[str, Any]) -> Iterator[Path]:
    """Yield an empty staging folder; on a clean exit it becomes ``target.path`` (with ``marker`` written as
    ``.toolscale-export.json``). On any failure the staging folder and any folder created for it are removed,
    the target is untouched, and an ``OSError`` is re-raised as a one-line ``WarehouseError``."""
    created: list[Path] = []
    stage: Path | None = None
    try:
        _make_parents(target.path.parent, created)
        remove_dead_staging(target.path)
        stage = Path(tempfile.mkdtemp(prefix=f".{target.path.name}.tmp-{os.getpid()}-", dir=target.path.parent))
        yield stage
        (stage / MARKER).write_text(json.dumps(marker, sort_keys=True, default=str) + "\n", encoding="utf-8")
        fsync_tree(stage)
        replace_folder(stage, target.path)
        stage = None
    except BaseException as exc:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        for folder in reversed(created):
            _rmdir_quietly(folder)
        if isinstance(exc, OSError):
            why = "the disk is full" if exc.errno == errno.ENOSPC else first_line(exc)
            raise WarehouseError(f"export to {target.shown} failed: {why}; nothing was written") from exc
        raise


def _make_parents(folder: Path, created: list[Path]) -> None:
    """Create ``folder`` and its missing parents, outermost first, appending each to ``created``."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir()
        created.append(path)


def _rmdir_quietly(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
