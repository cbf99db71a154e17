"""A failure as the CLI's one error line: what went wrong in the user's terms, never only an exception's name.

The library's own errors (``UsageError``, ``WarehouseError``, ``SpecError``, ...) already say what was wrong;
this module words the rest: a full disk, a read-only or unwritable place, a busy warehouse, input nested past
Python's recursion limit, memory running out, and a bug (which says so, and how to report it).
"""

from __future__ import annotations

import errno

DISK_FULL = "No space left on device"


def _first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def _os_error(exc: OSError) -> str | None:
    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno == errno.ENOSPC:
        return f"the disk is full{where}: free some space and rerun the same command"
    if exc.errno == errno.EDQUOT:
        return f"the disk quota is used up{where}: free some space and rerun the same command"
    if exc.errno == errno.EROFS:
        return f"cannot write{where}: the file system is read-only"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied{where}"
    if exc.errno == errno.EFBIG:
        return f"a file grew past the size this process may write{where} (ulimit -f)"
    return None


def _duckdb_error(exc: Exception) -> str | None:
    try:
        import duckdb
    except ImportError:  # pragma: no cover - duckdb is a dependency
        return None
    if not isinstance(exc, duckdb.Error):
        return None
    text = _first_line(str(exc)).removeprefix("TransactionContext Error: ")
    if "lock" in text.lower() or "conflict" in text.lower():
        return f"the warehouse is in use by another process and could not be written ({text})"
    return f"the warehouse could not be read or written: {text}"


def in_user_terms(exc: BaseException) -> str:
    """One line saying what was wrong, in words a user can act on."""
    text = _first_line(str(exc))
    if isinstance(exc, OSError):
        worded = _os_error(exc)
        if worded:
            return worded
    if DISK_FULL in text and not text.startswith("the disk is full"):
        return f"the disk is full: {text}"
    if isinstance(exc, RecursionError):
        return ("the input is nested too deeply to read (past Python's recursion limit); "
                "flatten it or check where it came from")
    if isinstance(exc, MemoryError):
        return "ran out of memory: the input or the run is too large for this machine; try a smaller one"
    worded = _duckdb_error(exc) if isinstance(exc, Exception) else None
    if worded:
        return worded
    if isinstance(exc, (ValueError, RuntimeError, OSError)) and not isinstance(exc, NotImplementedError) and text:
        return text  # the library's own errors already say what was wrong
    detail = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return (f"an internal error stopped the run ({detail}); this is a bug: rerun with TOOLSCALE_DEBUG=1 "
            f"and report the traceback")
