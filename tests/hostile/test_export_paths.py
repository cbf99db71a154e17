"""Hostile export targets: a refusal is one clear line and leaves the output folder exactly as it was; a failed
export (a full disk, a bad snapshot) leaves no partial files and no staging folder; ``overwrite`` replaces an
earlier export as one unit, so the data set's default config never loads rows from two snapshots."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from datasets import Dataset, load_from_disk

import warehouse.atomic as atomic
import warehouse.exports as exports
from tests.hostile.test_warehouse_paths import (  # noqa: F401 - tmpfs is a fixture used by name
    Shared, cli_error, copy_of, deadline, listing, one_line, remount_read_only, run_cli, shared_warehouse, tmpfs)
from warehouse.export_folder import MARKER, check_export_target
from warehouse.exports import export_hf, export_tau2
from warehouse.reader import WarehouseError

EXPORTERS = {"hf": export_hf, "tau2": export_tau2}


@pytest.fixture(scope="session")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Shared:
    return shared_warehouse(tmp_path_factory)


@pytest.fixture(scope="module")
def earlier(shared: Shared, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real exports of the first (weather) snapshot, copied into each test that needs an earlier export."""
    root = tmp_path_factory.mktemp("earlier-exports")
    weather = shared.snapshots[0]
    for fmt, exporter in EXPORTERS.items():
        exporter(shared.path, weather, root / fmt)
    return {fmt: root / fmt for fmt in EXPORTERS}


def place_earlier(earlier: dict[str, Path], fmt: str, out: Path) -> Path:
    shutil.copytree(earlier[fmt], out, symlinks=True)
    return out


def no_staging_left(parent: Path) -> None:
    leftovers = [p.name for p in parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name]
    assert leftovers == [], leftovers


def parquet_task_ids(out: Path) -> set[str]:
    """What the card's default config (``parquet/<split>/*.parquet``) loads."""
    return {t for p in (out / "parquet").glob("*/*.parquet") for t in pq.read_table(p).column("task_id").to_pylist()}


# --- refusals: one line, the folder untouched ----------------------------------------------------------------

@pytest.mark.parametrize("fmt", sorted(EXPORTERS))
def test_a_non_empty_folder_is_refused_without_overwrite(fmt: str, shared: Shared, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    before = listing(tmp_path)
    with pytest.raises(WarehouseError, match=r"is not empty \(1 entries, e.g. 'notes.txt'\); pass --overwrite"):
        EXPORTERS[fmt](shared.path, "latest", out)
    assert listing(tmp_path) == before


@pytest.mark.parametrize("fmt", sorted(EXPORTERS))
def test_an_earlier_export_is_kept_without_overwrite(fmt: str, shared: Shared, earlier: dict[str, Path],
                                                      tmp_path: Path) -> None:
    out = place_earlier(earlier, fmt, tmp_path / "out")
    before = listing(tmp_path)
    with pytest.raises(WarehouseError, match="is not empty") as caught:
        EXPORTERS[fmt](shared.path, shared.snapshots[1], out)
    one_line(caught.value)
    assert listing(tmp_path) == before


def _foreign_plain(out: Path) -> None:
    (out / "thesis.tex").write_text("years of work")


def _foreign_in_hf_layout(out: Path) -> None:
    (out / "parquet").mkdir()
    (out / "README.md").write_text("# my project")
    (out / "main.py").write_text("print('hi')")


def _foreign_in_tau2_layout(out: Path) -> None:
    (out / "weather").mkdir()
    (out / "weather" / "tasks.json").write_text("[]")
    (out / "weather" / "secrets.env").write_text("TOKEN=1")


@pytest.mark.parametrize("plant", [_foreign_plain, _foreign_in_hf_layout, _foreign_in_tau2_layout],
                         ids=["plain", "hf-like", "tau2-like"])
def test_overwrite_refuses_a_folder_that_is_not_an_earlier_export(plant: Any, shared: Shared, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    plant(out)
    before = listing(tmp_path)
    for exporter in EXPORTERS.values():
        with pytest.raises(WarehouseError, match="refusing to replace .* not an earlier ToolScale export") as caught:
            exporter(shared.path, "latest", out, overwrite=True)
        one_line(caught.value)
    assert listing(tmp_path) == before


def _a_file(tmp: Path) -> tuple[Path, str]:
    (tmp / "out").write_text("a file")
    return tmp / "out", "is a file, not a folder"


def _a_fifo(tmp: Path) -> tuple[Path, str]:
    os.mkfifo(tmp / "out")
    return tmp / "out", r"is a FIFO \(named pipe\), not a folder"


def _parent_is_a_file(tmp: Path) -> tuple[Path, str]:
    (tmp / "plain").write_text("x")
    return tmp / "plain" / "out", "plain is not a folder"


def _a_symlink_loop(tmp: Path) -> tuple[Path, str]:
    (tmp / "out").symlink_to(tmp / "out")
    return tmp / "out", "Too many levels of symbolic links"


def _name_too_long(tmp: Path) -> tuple[Path, str]:
    return tmp / ("o" * 240), "the name is too long to stage the export"


BAD_OUTS = {"name too long": _name_too_long, "file": _a_file, "fifo": _a_fifo, "parent is a file": _parent_is_a_file, "symlink loop": _a_symlink_loop}


@pytest.mark.parametrize("case", sorted(BAD_OUTS))
def test_an_output_path_that_is_no_folder_is_refused(case: str, shared: Shared, tmp_path: Path) -> None:
    out, expected = BAD_OUTS[case](tmp_path)
    before = listing(tmp_path)
    for exporter in EXPORTERS.values():
        with deadline(20), pytest.raises(WarehouseError, match=expected) as caught:
            exporter(shared.path, "latest", out, overwrite=True)
        one_line(caught.value)
    assert listing(tmp_path) == before


def test_special_output_paths_are_refused(shared: Shared) -> None:
    for out, expected in (("", "path is empty"), ("out\0x", "NUL byte"), ("/", "root folder"),
                          ("/dev/null", "is a character device")):
        with pytest.raises(WarehouseError, match=expected) as caught:
            export_hf(shared.path, "latest", out, overwrite=True)
        one_line(caught.value)


def test_a_folder_holding_the_warehouse_is_never_replaced(shared: Shared, earlier: dict[str, Path],
                                                          tmp_path: Path) -> None:
    out = place_earlier(earlier, "hf", tmp_path / "out")
    inner = copy_of(shared, out, "wh.duckdb")  # someone keeps the warehouse inside an old export
    before = listing(tmp_path)
    with pytest.raises(WarehouseError, match="holds the warehouse") as caught:
        check_export_target(out, overwrite=True, warehouse=inner)
    one_line(caught.value)
    (out / MARKER).unlink()  # without the marker it is not recognisable as an export either
    with pytest.raises(WarehouseError, match="not an earlier ToolScale export"):
        export_hf(inner, "latest", out, overwrite=True)
    (out / MARKER).write_bytes((earlier["hf"] / MARKER).read_bytes())
    assert listing(tmp_path) == before


def test_a_read_only_place_is_refused(shared: Shared, earlier: dict[str, Path], tmpfs: Any) -> None:
    place = tmpfs("ro", 8 * 2**20)
    place_earlier(earlier, "tau2", place / "old")
    remount_read_only(place)
    before = listing(place)
    for out, expected in ((place / "new", "is on a read-only file system"),
                          (place / "a" / "b", "does not exist and cannot be created"),
                          (place / "old", "is on a read-only file system")):
        with pytest.raises(WarehouseError, match=expected) as caught:
            export_tau2(shared.path, "latest", out, overwrite=True)
        one_line(caught.value)
    assert listing(place) == before


@pytest.mark.parametrize("snapshot,expected", [("ts-missing", "no snapshot 'ts-missing'"),
                                               ("'; DROP TABLE tasks; --", "no snapshot")])
def test_a_bad_snapshot_leaves_an_earlier_export_alone(snapshot: str, expected: str, shared: Shared,
                                                       earlier: dict[str, Path], tmp_path: Path) -> None:
    out = place_earlier(earlier, "hf", tmp_path / "out")
    before = listing(tmp_path)
    with pytest.raises(WarehouseError, match=expected) as caught:
        export_hf(shared.path, snapshot, out, overwrite=True)
    one_line(caught.value)
    assert listing(tmp_path) == before


def test_a_damaged_warehouse_exports_nothing(shared: Shared, tmp_path: Path) -> None:
    data = shared.path.read_bytes()
    broken = tmp_path / "broken.duckdb"
    broken.write_bytes(data[: len(data) // 2])
    before = listing(tmp_path)
    for exporter in EXPORTERS.values():
        with pytest.raises(WarehouseError, match="is truncated") as caught:
            exporter(broken, "latest", tmp_path / "out")
        one_line(caught.value)
    assert listing(tmp_path) == before


# --- failures while writing: nothing partial, no staging folder, the earlier export intact ----------------------

@pytest.mark.parametrize("fmt", sorted(EXPORTERS))
def test_a_full_disk_leaves_no_partial_files(fmt: str, shared: Shared, earlier: dict[str, Path],
                                             tmpfs: Any) -> None:
    size = sum(p.stat().st_size for p in earlier[fmt].rglob("*") if p.is_file())
    place = tmpfs("small", size + size // 2)  # room for the earlier export, not for a second one beside it
    old = place_earlier(earlier, fmt, place / "out")
    before = listing(place)
    with pytest.raises(WarehouseError, match="failed: the disk is full; nothing was written") as caught:
        EXPORTERS[fmt](shared.path, shared.snapshots[0], old, overwrite=True)
    one_line(caught.value)
    assert listing(place) == before
    no_staging_left(place)
    with pytest.raises(WarehouseError, match="the disk is full"):
        EXPORTERS[fmt](shared.path, shared.snapshots[0], place / "fresh" / "deeper")
    assert listing(place) == before  # not even the folders it created for the export


def test_an_injected_enospc_in_each_writer_leaves_nothing(shared: Shared, earlier: dict[str, Path],
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no tmpfs can be mounted, the same failure injected into the file writers (half a file, then ENOSPC)."""
    def half_then_full(path: Path, value: Any) -> None:
        path.write_text(json.dumps(value)[:100], encoding="utf-8")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    def save_half(self: Dataset, path: str, *args: Any, **kwargs: Any) -> None:
        Path(path).mkdir(parents=True)
        (Path(path) / "data-00000-of-00001.arrow").write_bytes(b"\0" * 10)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    monkeypatch.setattr(exports, "_write_json", half_then_full)
    monkeypatch.setattr(Dataset, "save_to_disk", save_half)
    old_hf = place_earlier(earlier, "hf", tmp_path / "hf")
    old_tau2 = place_earlier(earlier, "tau2", tmp_path / "tau2")
    before = listing(tmp_path)
    for exporter, out in ((export_hf, old_hf), (export_tau2, old_tau2), (export_hf, tmp_path / "new-hf"),
                          (export_tau2, tmp_path / "new-tau2")):
        with pytest.raises(WarehouseError, match="the disk is full; nothing was written") as caught:
            exporter(shared.path, shared.snapshots[1], out, overwrite=True)
        one_line(caught.value)
    assert listing(tmp_path) == before
    no_staging_left(tmp_path)


def test_a_staging_folder_of_a_killed_export_is_cleared_and_a_live_one_kept(shared: Shared, tmp_path: Path) -> None:
    dead = tmp_path / f".out.tmp-{2**22 + 12345}-abc"  # above pid_max's default: no such process
    live = tmp_path / f".out.tmp-{os.getpid()}-xyz"
    other = tmp_path / ".other.tmp-1-abc"
    for folder in (dead, live, other):
        folder.mkdir()
        (folder / "part.parquet").write_bytes(b"half")
    export_hf(shared.path, "latest", tmp_path / "out")
    assert not dead.exists() and live.exists() and other.exists()


# --- overwrite: one unit, never a mix of two snapshots ------------------------------------------------------------

def test_overwrite_replaces_an_earlier_hf_export_with_no_rows_from_it(shared: Shared, earlier: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    out = place_earlier(earlier, "hf", tmp_path / "out")
    old_ids = parquet_task_ids(out)
    assert old_ids and all(t.startswith("weather-") for t in old_ids)
    summary = export_hf(shared.path, shared.snapshots[1], out, overwrite=True)
    new_ids = parquet_task_ids(out)
    assert new_ids and all(t.startswith("sport-") for t in new_ids) and len(new_ids) == summary["rows"]
    assert sorted(str(p.relative_to(out / "parquet")) for p in (out / "parquet").glob("*/*")) == [
        "test/sport.parquet", "train/sport.parquet"]
    assert sum(len(split) for split in load_from_disk(str(out / "dataset")).values()) == summary["rows"]
    assert json.loads((out / MARKER).read_text()) == {"format": "hf", "snapshot_id": shared.snapshots[1]}
    no_staging_left(tmp_path)


def test_overwrite_of_a_tau2_export_through_a_symlink_keeps_the_link(shared: Shared, earlier: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    real = place_earlier(earlier, "tau2", tmp_path / "real")
    link = tmp_path / "link"
    link.symlink_to(real)
    export_tau2(shared.path, shared.snapshots[1], link, overwrite=True)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert sorted(p.name for p in real.iterdir()) == [MARKER, "sport"]
    no_staging_left(tmp_path)


def test_overwrite_without_rename_exchange_still_replaces_as_one_unit(shared: Shared, earlier: dict[str, Path],
                                                                      tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)  # a file system without RENAME_EXCHANGE
    out = place_earlier(earlier, "hf", tmp_path / "out")
    export_hf(shared.path, shared.snapshots[1], out, overwrite=True)
    assert all(t.startswith("sport-") for t in parquet_task_ids(out))
    no_staging_left(tmp_path)


def test_an_empty_folder_is_a_fine_target(shared: Shared, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    export_tau2(shared.path, "latest", tmp_path / "out")
    assert (tmp_path / "out" / "sport" / "tasks.json").is_file()


# --- through the CLI: exit 2 and one line for a refusal, 0 for --overwrite ----------------------------------------

def test_cli_export_refusals_and_overwrite(shared: Shared, earlier: dict[str, Path], tmp_path: Path) -> None:
    out = place_earlier(earlier, "hf", tmp_path / "out")
    (tmp_path / "file").write_text("x")
    before = listing(tmp_path)
    line = cli_error(run_cli("export", "latest", "--format", "hf", "--out", str(out), "--warehouse", str(shared.path)))
    assert "is not empty" in line and "--overwrite" in line
    line = cli_error(run_cli("export", "latest", "--format", "tau2", "--out", str(tmp_path / "file"),
                             "--warehouse", str(shared.path)))
    assert "is a file, not a folder" in line
    assert listing(tmp_path) == before
    done = run_cli("export", shared.snapshots[1], "--format", "hf", "--out", str(out), "--overwrite",
                   "--warehouse", str(shared.path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert all(t.startswith("sport-") for t in parquet_task_ids(out))
