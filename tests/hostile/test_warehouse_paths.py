"""Hostile warehouse paths: each gives one clear error line, before any work, and leaves the warehouse as it was.

Covers the preflight (directories, FIFOs, sockets, devices, non-DuckDB, empty, truncated and foreign files,
read-only and uncreatable places, a full disk, bad lock files), glob characters in the path, symlinked
warehouses (the real file is updated, one lock serialises every path to it), and readers of a damaged file.
"""

from __future__ import annotations

import hashlib
import json
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
from typing import Any

import duckdb
import pytest

import pipeline.regenerate as job
from pipeline.regenerate import RegenerateConfig, regenerate
from warehouse.checks import check_readable
from warehouse.reader import WarehouseError, connect_readonly
from warehouse.writer import check_target, remove_stale_copies

SMALL: dict[str, Any] = {"tasks_per_domain": 5, "workers": 1, "base_per_shard": 8, "evolution_rounds": 1}
CLI = [sys.executable, "-m", "toolscale.cli"]


@dataclass(frozen=True)
class Shared:
    """One published warehouse for the whole session (weather seed 0, then sport seed 1), and its shard files."""

    path: Path
    work: Path
    snapshots: tuple[str, str]


_SHARED: dict[str, Shared] = {}


def shared_warehouse(factory: pytest.TempPathFactory) -> Shared:
    """Built once per session, whichever module asks first (regenerations of 5 tasks per domain, ~10 s)."""
    if "warehouse" not in _SHARED:
        root = factory.mktemp("hostile-warehouse")
        path, work = root / "wh.duckdb", root / "work"
        ids = []
        for domain, seed in (("weather", 0), ("sport", 1)):
            result, _ = regenerate(RegenerateConfig(domains=[domain], seed=seed, **SMALL, warehouse=str(path),
                                                    work_dir=str(work)), progress=lambda _: None)
            assert result.status == "published", result.quality
            ids.append(result.snapshot_id)
        _SHARED["warehouse"] = Shared(path, work, (ids[0], ids[1]))
    return _SHARED["warehouse"]


@pytest.fixture(scope="session")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Shared:
    return shared_warehouse(tmp_path_factory)


def cfg_for(shared: Shared, warehouse: Path | str, seed: int = 2, domain: str = "weather") -> RegenerateConfig:
    """A small config whose shards live in the shared work folder (computed once, then resumed)."""
    return RegenerateConfig(domains=[domain], seed=seed, **SMALL, warehouse=str(warehouse), work_dir=str(shared.work))


def copy_of(shared: Shared, folder: Path, name: str = "wh.duckdb") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(shared.path.read_bytes())
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` with its content hash (regular files) or kind: to prove nothing changed."""
    out = {}
    for entry in sorted(folder.rglob("*")):
        rel = str(entry.relative_to(folder))
        if entry.is_symlink():
            out[rel] = "link:" + os.readlink(entry)
        elif entry.is_file():
            out[rel] = digest(entry)
        else:
            out[rel] = "dir" if entry.is_dir() else "special"
    return out


def snapshot_ids(path: Path) -> list[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return [r[0] for r in con.execute("SELECT snapshot_id FROM snapshots ORDER BY snapshot_id").fetchall()]
    finally:
        con.close()


def one_line(exc: BaseException | str) -> str:
    text = str(exc)
    assert text and "\n" not in text and "Traceback" not in text and len(text) < 800, text
    return text


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail, instead of hanging the suite, if the body blocks (a FIFO opened for reading would)."""
    def expired(*_: Any) -> None:
        raise TimeoutError(f"blocked for more than {seconds}s")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def mount_tmpfs(folder: Path, size_bytes: int) -> bool:
    """A small tmpfs at ``folder`` (a real full disk or read-only place); False where mounting is not allowed."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(folder)],
                          capture_output=True)
    return done.returncode == 0


def remount_read_only(folder: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True, capture_output=True)


def unmount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Any]:
    """``tmpfs(name, size_bytes) -> Path``: mounts, and unmounts after the test; skips where not allowed."""
    mounted: list[Path] = []

    def make(name: str, size_bytes: int) -> Path:
        folder = tmp_path / name
        if not mount_tmpfs(folder, size_bytes):
            pytest.skip("cannot mount a tmpfs here (needs root)")
        mounted.append(folder)
        return folder

    yield make
    for folder in mounted:
        unmount(folder)


def run_cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def cli_error(done: subprocess.CompletedProcess[str]) -> str:
    """The CLI failed as a user should see it: exit 2 and one ``error:`` line on stderr."""
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    return lines[0]


# --- the preflight: bad targets, each refused with one line, nothing created -------------------------------

def _directory(tmp: Path) -> Path:
    (tmp / "wh.duckdb").mkdir()
    (tmp / "wh.duckdb" / "keep.txt").write_text("mine")
    return tmp / "wh.duckdb"


def _text_file(tmp: Path) -> Path:
    (tmp / "wh.duckdb").write_text("snapshot_id,status\nts-1,published\n")
    return tmp / "wh.duckdb"


def _empty_file(tmp: Path) -> Path:
    (tmp / "wh.duckdb").touch()
    return tmp / "wh.duckdb"


def _sqlite_file(tmp: Path) -> Path:
    import sqlite3
    con = sqlite3.connect(tmp / "wh.duckdb")
    con.execute("CREATE TABLE snapshots (snapshot_id TEXT)")
    con.commit()
    con.close()
    return tmp / "wh.duckdb"


def _foreign_duckdb(tmp: Path) -> Path:
    con = duckdb.connect(str(tmp / "wh.duckdb"))
    con.execute("CREATE TABLE invoices AS SELECT range AS id FROM range(10)")
    con.close()
    return tmp / "wh.duckdb"


def _fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "wh.duckdb")
    return tmp / "wh.duckdb"


def _socket(tmp: Path) -> Path:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp / "wh.duckdb"))
    sock.close()
    return tmp / "wh.duckdb"


def _parent_is_a_file(tmp: Path) -> Path:
    (tmp / "plain.txt").write_text("not a folder")
    return tmp / "plain.txt" / "deeper" / "wh.duckdb"


def _symlink_loop(tmp: Path) -> Path:
    (tmp / "a.duckdb").symlink_to(tmp / "b.duckdb")
    (tmp / "b.duckdb").symlink_to(tmp / "a.duckdb")
    return tmp / "a.duckdb"


def _lock_is_a_directory(tmp: Path) -> Path:
    (tmp / "wh.duckdb.lock").mkdir()
    return tmp / "wh.duckdb"


def _lock_is_a_fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "wh.duckdb.lock")
    return tmp / "wh.duckdb"


def _lock_is_a_symlink(tmp: Path) -> Path:
    (tmp / "elsewhere").write_text("do not touch")
    (tmp / "wh.duckdb.lock").symlink_to(tmp / "elsewhere")
    return tmp / "wh.duckdb"


def _name_too_long(tmp: Path) -> Path:
    return tmp / ("w" * 300 + ".duckdb")


def _no_room_for_the_copy_name(tmp: Path) -> Path:
    return tmp / ("w" * 240 + ".duckdb")  # a legal name, but "<name>.tmp-<pid>" would not be


BAD_TARGETS = {
    "directory": (_directory, "is a directory"),
    "text file": (_text_file, "is not a DuckDB file"),
    "empty file": (_empty_file, r"is an empty file \(0 bytes\)"),
    "sqlite file": (_sqlite_file, "is not a DuckDB file"),
    "foreign duckdb": (_foreign_duckdb, "not a ToolScale warehouse .*invoices"),
    "fifo": (_fifo, r"is a FIFO \(named pipe\)"),
    "socket": (_socket, "is a socket"),
    "parent is a file": (_parent_is_a_file, "plain.txt is not a folder"),
    "symlink loop": (_symlink_loop, "Too many levels of symbolic links"),
    "lock is a directory": (_lock_is_a_directory, "lock file .* is a directory"),
    "lock is a fifo": (_lock_is_a_fifo, "lock file .* is a FIFO"),
    "lock is a symlink": (_lock_is_a_symlink, "lock file .* is a symlink"),
    "name too long": (_name_too_long, "file name is too long"),
    "copy name too long": (_no_room_for_the_copy_name, "file name is too long to keep its working copy"),
}


@pytest.mark.parametrize("case", sorted(BAD_TARGETS))
def test_preflight_refuses_a_bad_target_with_one_line_and_creates_nothing(case: str, tmp_path: Path) -> None:
    make, expected = BAD_TARGETS[case]
    target = make(tmp_path)
    before = listing(tmp_path)
    with deadline(20), pytest.raises(WarehouseError, match=expected) as caught:
        check_target(target)
    one_line(caught.value)
    assert listing(tmp_path) == before


@pytest.mark.parametrize("cut", ["header", "half", "three quarters"])
def test_a_truncated_warehouse_is_refused_by_writer_and_reader(cut: str, shared: Shared, tmp_path: Path) -> None:
    data = shared.path.read_bytes()
    keep = {"header": 100, "half": len(data) // 2, "three quarters": len(data) * 3 // 4}[cut]
    path = tmp_path / "wh.duckdb"
    path.write_bytes(data[:keep])
    before = listing(tmp_path)
    for check in (check_target, check_readable, connect_readonly):
        with pytest.raises(WarehouseError, match="is truncated") as caught:
            check(path)
        one_line(caught.value)
    assert listing(tmp_path) == before


def test_special_values_for_the_path(tmp_path: Path) -> None:
    for value, expected in (("", "path is empty"), ("wh\0.duckdb", "NUL byte"), ("/", "root folder")):
        with pytest.raises(WarehouseError, match=expected) as caught:
            check_target(value)
        one_line(caught.value)
    with pytest.raises(WarehouseError, match="is a character device"):
        check_target("/dev/null")


def test_read_only_place_is_refused_for_a_new_and_an_existing_warehouse(shared: Shared, tmpfs: Any) -> None:
    place = tmpfs("ro", 16 * 2**20)
    existing = copy_of(shared, place)
    remount_read_only(place)
    before = listing(place)
    for target, expected in ((existing, "is on a read-only file system"),
                             (place / "new.duckdb", "is on a read-only file system"),
                             (place / "sub" / "new.duckdb", "does not exist and cannot be created")):
        with pytest.raises(WarehouseError, match=expected) as caught:
            check_target(target)
        one_line(caught.value)
    assert listing(place) == before


def test_a_full_disk_is_refused_before_any_work(shared: Shared, tmpfs: Any) -> None:
    place = tmpfs("full", shared.path.stat().st_size + 512 * 1024)
    path = copy_of(shared, place)
    before = listing(place)
    cfg = cfg_for(shared, path, seed=7)
    with pytest.raises(WarehouseError, match="MiB free .*a full copy of the file") as caught:
        regenerate(cfg, progress=lambda _: None)
    one_line(caught.value)
    assert listing(place) == before and not cfg.shard_dir().exists()


def test_a_disk_that_fills_while_publishing_leaves_no_copy_and_the_warehouse_unchanged(shared: Shared,
                                                                                       tmpfs: Any) -> None:
    size = shared.path.stat().st_size
    place = tmpfs("fills", 2 * size + 4096)  # room for the working copy, not for the new snapshot's blocks
    path = copy_of(shared, place)
    before = listing(place)
    with pytest.raises(WarehouseError, match="could not publish snapshot .*the warehouse is unchanged") as caught:
        regenerate(cfg_for(shared, path), progress=lambda _: None)
    one_line(caught.value)
    assert "space" in str(caught.value).lower()
    after = listing(place)
    after.pop("wh.duckdb.lock", None)  # the lock file is created once and stays, by design
    assert after == before


@pytest.mark.parametrize("case", ["directory", "fifo", "empty file", "foreign duckdb"])
def test_regenerate_fails_before_any_shard_work(case: str, shared: Shared, tmp_path: Path) -> None:
    make, expected = BAD_TARGETS[case]
    target = make(tmp_path)
    cfg = cfg_for(shared, target, seed=11)
    cfg.work_dir = str(tmp_path / "work")
    before = listing(tmp_path)
    started = time.perf_counter()
    with deadline(30), pytest.raises(WarehouseError, match=expected) as caught:
        regenerate(cfg, progress=lambda _: None)
    one_line(caught.value)
    assert time.perf_counter() - started < 10
    assert listing(tmp_path) == before  # no shard files, no temporary copy, no lock file


def test_a_failed_publish_removes_its_working_copy(shared: Shared, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = copy_of(shared, tmp_path)
    before = digest(path)

    def broken_suite(*_: Any, **__: Any) -> dict[str, Any]:
        raise RuntimeError("the quality suite crashed")

    monkeypatch.setattr(job, "run_quality_suite", broken_suite)
    with pytest.raises(RuntimeError, match="crashed"):
        regenerate(cfg_for(shared, path), progress=lambda _: None)
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wh.duckdb", "wh.duckdb.lock"]


# --- glob characters in the path: the stale-copy cleanup uses exact names -----------------------------------

def test_stale_cleanup_removes_only_exact_copies_of_a_glob_named_warehouse(tmp_path: Path) -> None:
    target = tmp_path / "[ab].duckdb"
    bystanders = ["a.duckdb.tmp-5", "b.duckdb.tmp-6", "notes.tmp-7", "[ab].duckdb.tmp-x", "[ab].duckdb.tmp-12.txt",
                  "[ab].duckdb.lock", "[ab].duckdb.tmp-", "other.duckdb"]
    for name in bystanders:
        (tmp_path / name).write_text(name)
    (tmp_path / "[ab].duckdb.tmp-99").mkdir()  # a folder is never deleted either
    stale = ["[ab].duckdb.tmp-77", "[ab].duckdb.tmp-77.wal"]
    for name in stale:
        (tmp_path / name).write_text("stale")
    removed = remove_stale_copies(target)
    assert sorted(p.name for p in removed) == sorted(stale)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*bystanders, "[ab].duckdb.tmp-99"])
    assert all((tmp_path / n).read_text() == n for n in bystanders)


@pytest.mark.parametrize("name", ["*", "[ab].duckdb", "wh?.duckdb"])
def test_publishing_to_a_glob_named_warehouse_leaves_other_files_alone(name: str, shared: Shared,
                                                                       tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    folder.mkdir()
    others = {"a.duckdb.tmp-1": "a", "b.duckdb": "b", "notes.tmp-2": "n", "wh1.duckdb.tmp-3": "w", "x.tmp-4": "x"}
    for other, text in others.items():
        (folder / other).write_text(text)
    (folder / f"{name}.tmp-424242").write_text("left by a killed writer")
    result, _ = regenerate(cfg_for(shared, folder / name), progress=lambda _: None)
    assert result.status == "published"
    assert {p.name: p.read_text() for p in folder.iterdir() if p.name in others} == others
    assert sorted(p.name for p in folder.iterdir()) == sorted([*others, name, f"{name}.lock"])
    assert snapshot_ids(folder / name) == [result.snapshot_id]


# --- symlinks: the real file is updated, the link stays, one lock for every path ----------------------------

def test_publishing_through_a_symlink_updates_the_real_file_and_keeps_the_link(shared: Shared,
                                                                               tmp_path: Path) -> None:
    real = copy_of(shared, tmp_path / "real")
    link = tmp_path / "links" / "wh.duckdb"
    link.parent.mkdir()
    link.symlink_to(real)
    assert check_target(link) == real
    result, _ = regenerate(cfg_for(shared, link), progress=lambda _: None)
    assert result.status == "published"
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert result.snapshot_id in snapshot_ids(real) and snapshot_ids(real) == snapshot_ids(link)
    assert (tmp_path / "real" / "wh.duckdb.lock").is_file() and not (tmp_path / "links" / "wh.duckdb.lock").exists()
    assert sorted(p.name for p in link.parent.iterdir()) == ["wh.duckdb"]


WRITER = """
import json, sys, time
from pathlib import Path
import pipeline.regenerate as job
from pipeline.regenerate import RegenerateConfig, regenerate
params, me, other, meeting = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
real_suite = job.run_quality_suite
def progress(message):
    if message.startswith("publishing "):
        (meeting / f"ready-{me}").touch()
def watched_suite(*args, **kwargs):
    # runs while this writer holds the lock: wait until the other writer is about to publish too
    (meeting / f"inside-{me}").touch()
    start = time.time()
    while not (meeting / f"ready-{other}").exists() and time.time() - start < 120:
        time.sleep(0.05)
    time.sleep(1.5)
    overlap = (meeting / f"inside-{other}").exists() and not (meeting / f"done-{other}").exists()
    out = real_suite(*args, **kwargs)
    (meeting / f"done-{me}").touch()
    print("OVERLAP" if overlap else "ALONE", flush=True)
    return out
job.run_quality_suite = watched_suite
result, _ = regenerate(RegenerateConfig(**params), progress=progress)
print("RESULT", result.status, result.snapshot_id, flush=True)
"""


def test_two_writers_by_path_and_by_symlink_are_serialised(shared: Shared, tmp_path: Path) -> None:
    real = copy_of(shared, tmp_path / "real")
    link = tmp_path / "link.duckdb"
    link.symlink_to(real)
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    procs = []
    for me, other, path, seed in (("direct", "linked", real, 3), ("linked", "direct", link, 4)):
        params = {"domains": ["weather"], "seed": seed, **SMALL, "warehouse": str(path), "work_dir": str(shared.work)}
        procs.append(subprocess.Popen([sys.executable, "-c", WRITER, json.dumps(params), me, other, str(meeting)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=400) for p in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-2000:]
    lines = [line for out, _ in outputs for line in out.splitlines()]
    published = [line.split()[2] for line in lines if line.startswith("RESULT published")]
    assert len(published) == 2 and "OVERLAP" not in lines
    assert set(published) <= set(snapshot_ids(real))  # neither publish was lost over the other
    assert len(snapshot_ids(real)) == 4 and link.is_symlink()


# --- readers of a damaged warehouse: `toolscale snapshots` ---------------------------------------------------

def test_snapshots_cli_refuses_damaged_warehouses_with_exit_2(shared: Shared, tmp_path: Path) -> None:
    data = shared.path.read_bytes()
    (tmp_path / "truncated.duckdb").write_bytes(data[: len(data) // 2])
    (tmp_path / "text.duckdb").write_text("hello")
    os.mkfifo(tmp_path / "pipe.duckdb")
    before = listing(tmp_path)
    for name, expected in (("truncated.duckdb", "is truncated"), ("text.duckdb", "is not a DuckDB file"),
                           ("pipe.duckdb", "is a FIFO")):
        line = cli_error(run_cli("snapshots", "--warehouse", str(tmp_path / name), timeout=60))
        assert expected in line, line
    assert listing(tmp_path) == before


@pytest.mark.parametrize("case", ["directory", "empty file", "sqlite file", "foreign duckdb", "socket"])
def test_readers_refuse_what_is_not_a_warehouse(case: str, tmp_path: Path) -> None:
    make, expected = BAD_TARGETS[case]
    target = make(tmp_path)
    before = listing(tmp_path)
    with pytest.raises(WarehouseError, match=expected) as caught:
        connect_readonly(target)
    one_line(caught.value)
    assert listing(tmp_path) == before


def test_a_duckdb_file_without_tables_is_no_warehouse_to_read_but_a_place_to_start_one(tmp_path: Path) -> None:
    duckdb.connect(str(tmp_path / "new.duckdb")).close()
    with pytest.raises(WarehouseError, match="not a ToolScale warehouse .*it has no tables"):
        connect_readonly(tmp_path / "new.duckdb")
    assert check_target(tmp_path / "new.duckdb") == tmp_path / "new.duckdb"


def test_snapshots_cli_lists_a_healthy_warehouse(shared: Shared) -> None:
    done = run_cli("snapshots", "--json", "--warehouse", str(shared.path))
    assert done.returncode == 0, done.stderr
    assert sorted(s["snapshot_id"] for s in json.loads(done.stdout)) == sorted(shared.snapshots)
