"""Checks on a warehouse path before anything reads or writes it: each problem is one clear ``WarehouseError``.

``check_target`` runs before a regeneration does any work and again when it publishes; ``check_readable`` runs
whenever a reader opens the file. Both stat before they open (a FIFO must not block them), create nothing, and
resolve symlinks once, so the real file is what gets read and replaced.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import duckdb

from warehouse.errors import WarehouseError

DUCKDB_MAGIC = b"DUCK"
MAGIC_OFFSET = 8  # after the 8-byte checksum of DuckDB's main header
HEADER_BYTES = 3 * 4096  # the main header and two database headers precede the first data block
NAME_MAX = 255  # bytes in one path component on Linux file systems
SIDECAR_SUFFIX_BYTES = len(".tmp-4194304.wal")  # the longest name the writer adds to the file's own
KINDS = {stat.S_IFIFO: "FIFO (named pipe)", stat.S_IFSOCK: "socket", stat.S_IFCHR: "character device",
         stat.S_IFBLK: "block device", stat.S_IFDIR: "directory"}


def first_line(exc: BaseException) -> str:
    """An exception's message reduced to its first non-empty line (DuckDB adds hints over several lines)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def resolve(path: str | os.PathLike[str], what: str = "warehouse") -> Path:
    """The real path behind ``path`` (symlinks resolved once), or a ``WarehouseError`` for an unusable name."""
    raw = os.fspath(path)
    if not raw:
        raise WarehouseError(f"the {what} path is empty")
    if "\0" in raw:
        raise WarehouseError(f"the {what} path {raw!r} contains a NUL byte")
    return Path(os.path.realpath(raw))


def stat_or_none(path: Path, shown: str, what: str = "warehouse") -> os.stat_result | None:
    """``os.stat`` (following links), ``None`` when nothing is there; any other failure is a ``WarehouseError``."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError as exc:
        blocker = next((p for p in reversed(path.parents) if p.exists() and not p.is_dir()), path.parent)
        raise WarehouseError(f"{what} {shown}: {blocker} is not a folder") from exc
    except OSError as exc:
        raise WarehouseError(f"{what} {shown} cannot be used: {exc.strerror or exc}") from exc


def check_place(folder: Path, shown: str, needed_bytes: int = 0, what: str = "warehouse") -> None:
    """``folder`` exists and is writable, or can be created; and holds ``needed_bytes`` more. Creates nothing."""
    existing = folder
    while True:
        st = stat_or_none(existing, shown, what)
        if st is not None:
            break
        if existing.parent == existing:
            raise WarehouseError(f"{what} {shown}: no existing folder above {folder}")
        existing = existing.parent
    if not stat.S_ISDIR(st.st_mode):
        raise WarehouseError(f"{what} {shown}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        reason = "is on a read-only file system" if _read_only_fs(existing) else "is not writable"
        if existing == folder:
            raise WarehouseError(f"{what} {shown}: folder {folder} {reason}")
        raise WarehouseError(f"{what} {shown}: folder {folder} does not exist and cannot be created ({existing} "
                             f"{reason})")
    free = shutil.disk_usage(existing).free
    if free < needed_bytes:
        raise WarehouseError(f"{what} {shown}: only {free / 2**20:.1f} MiB free in {existing}, and writing needs "
                             f"at least {needed_bytes / 2**20:.1f} MiB (a full copy of the file)")


def _read_only_fs(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _check_regular(st: os.stat_result, shown: str) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise WarehouseError(f"warehouse {shown} is a directory; pass the DuckDB file inside it, "
                             f"e.g. {os.path.join(shown, 'toolscale.duckdb')}")
    if not stat.S_ISREG(st.st_mode):
        kind = KINDS.get(stat.S_IFMT(st.st_mode), "special file")
        raise WarehouseError(f"warehouse {shown} is a {kind}, not a regular DuckDB file")
    if st.st_size == 0:
        raise WarehouseError(f"warehouse {shown} is an empty file (0 bytes), not a DuckDB warehouse; "
                             "remove it or pass another path")


def _read_head(path: Path, shown: str) -> bytes:
    # O_NONBLOCK: should the file have been swapped for a FIFO since the stat, opening it still cannot hang
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise WarehouseError(f"warehouse {shown} cannot be read: {exc.strerror or exc}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WarehouseError(f"warehouse {shown} is not a regular file")
        return os.read(fd, MAGIC_OFFSET + len(DUCKDB_MAGIC))
    finally:
        os.close(fd)


def inspect_existing(path: Path, shown: str, st: os.stat_result, need_warehouse: bool) -> None:
    """An existing file at ``path`` is a whole DuckDB file, and a ToolScale warehouse (``need_warehouse``) or a
    DuckDB file without tables (the writer may start one there)."""
    _check_regular(st, shown)
    head = _read_head(path, shown)
    if head[MAGIC_OFFSET:MAGIC_OFFSET + len(DUCKDB_MAGIC)] != DUCKDB_MAGIC:
        raise WarehouseError(f"warehouse {shown} is not a DuckDB file (no DuckDB header); refusing to use it")
    if st.st_size < HEADER_BYTES:
        raise WarehouseError(f"warehouse {shown} is truncated: {st.st_size} bytes, shorter than DuckDB's "
                             f"{HEADER_BYTES}-byte header")
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise WarehouseError(f"warehouse {shown} cannot be opened by DuckDB: {first_line(exc)}") from exc
    try:
        stored = con.execute("SELECT schema_name, table_name FROM duckdb_tables() "
                             "WHERE database_name = current_database()").fetchall()
        tables = {name for schema, name in stored if schema == "main"}
        needed = _bytes_in_use(con, [f"{_quoted(schema)}.{_quoted(name)}" for schema, name in stored])
        if st.st_size < needed:
            raise WarehouseError(f"warehouse {shown} is truncated: {st.st_size} bytes, but its data reaches byte "
                                 f"{needed}")
        if "snapshots" not in tables and (stored or need_warehouse):
            names = sorted(name for _, name in stored)
            found = f"its tables are {', '.join(names[:5])}" if names else "it has no tables"
            raise WarehouseError(f"warehouse {shown} is a DuckDB file but not a ToolScale warehouse (no snapshots "
                                 f"table; {found})")
        if "snapshots" in tables:
            con.execute("SELECT * FROM snapshots").fetchall()  # reads every block of the table the CLI lists
    except duckdb.Error as exc:
        raise WarehouseError(f"warehouse {shown} is damaged: {first_line(exc)}") from exc
    finally:
        con.close()


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _bytes_in_use(con: duckdb.DuckDBPyConnection, tables: list[str]) -> int:
    """Where the last block that DuckDB uses ends. Not the header's block count: free blocks at the end of a
    file are legitimately cut off, so only blocks that hold metadata or table data must be present."""
    block_size = int(con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0])
    last = con.execute("SELECT COALESCE(MAX(block_id), -1) FROM pragma_metadata_info()").fetchone()[0]
    for table in tables:
        row = con.execute("SELECT MAX(GREATEST(block_id, COALESCE(list_max(additional_block_ids), -1))) "
                          "FROM pragma_storage_info(?) WHERE persistent", [table]).fetchone()
        last = max(last, row[0] if row and row[0] is not None else -1)
    return HEADER_BYTES + (last + 1) * block_size


def check_readable(path: str | os.PathLike[str]) -> Path:
    """The resolved path of an existing, whole ToolScale warehouse; otherwise a ``WarehouseError``."""
    shown = os.fspath(path)
    target = resolve(path)
    st = stat_or_none(target, shown)
    if st is None:
        raise WarehouseError(f"no warehouse at {shown}; run `toolscale regenerate` first or pass --warehouse")
    inspect_existing(target, shown, st, need_warehouse=True)
    return target


def check_target(path: str | os.PathLike[str]) -> Path:
    """Preflight for the writer: the resolved path it may publish to, or one ``WarehouseError`` line saying why
    not (a directory, FIFO or other special file, a non-DuckDB, empty, truncated or foreign DuckDB file, an
    unwritable or uncreatable folder, no room for the working copy, an unusable lock file). Creates nothing."""
    shown = os.fspath(path)
    target = resolve(path)
    if target.name == "":
        raise WarehouseError(f"warehouse {shown} is the root folder, not a file")
    if len(os.fsencode(target.name)) + SIDECAR_SUFFIX_BYTES > NAME_MAX:
        raise WarehouseError(f"warehouse {shown}: the file name is too long to keep its working copy "
                             f"(<name>.tmp-<pid>.wal) beside it; use a name under "
                             f"{NAME_MAX - SIDECAR_SUFFIX_BYTES} bytes")
    st = stat_or_none(target, shown)
    if st is not None:
        inspect_existing(target, shown, st, need_warehouse=False)
    check_place(target.parent, shown, needed_bytes=st.st_size if st is not None else 0)
    lock = lock_path(target)
    try:
        lock_st = os.lstat(lock)
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise WarehouseError(f"warehouse {shown}: lock file {lock} cannot be used: {exc.strerror}") from exc
    if not stat.S_ISREG(lock_st.st_mode):
        kind = "symlink" if stat.S_ISLNK(lock_st.st_mode) else KINDS.get(stat.S_IFMT(lock_st.st_mode), "special file")
        raise WarehouseError(f"warehouse {shown}: its lock file {lock} is a {kind}, not a regular file; remove it")
    return target


def lock_path(target: Path) -> Path:
    """Beside the resolved file, so every path that leads to the same file shares one lock."""
    return target.with_name(target.name + ".lock")
