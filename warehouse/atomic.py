"""Durable, atomic replacement of folders (exports), and the fsync helpers the warehouse writer also uses.

Content is written beside its target, fsynced, then renamed over it: a reader, or a crash, sees the old
content or the new, never a mix or a partial file.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import tempfile
from pathlib import Path

RENAME_EXCHANGE = 2  # linux/fs.h
AT_FDCWD = -100


def fsync_dir(folder: Path) -> None:
    """Make a rename inside ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """fsync every file and folder under ``root`` (bottom-up), and ``root`` itself."""
    for folder, _, files in os.walk(root, topdown=False):
        for name in files:
            fsync_file(Path(folder, name))
        fsync_dir(Path(folder))


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where the system lacks it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def replace_folder(staged: Path, target: Path) -> None:
    """Put the complete folder ``staged`` at ``target``, replacing whatever folder is there as one unit.

    An absent or empty ``target`` is replaced by a plain rename. A non-empty one is swapped with ``staged`` in a
    single exchange and then deleted; where exchange is unsupported, it is first renamed aside, so ``target``
    is missing for an instant but never holds old and new files together.
    """
    try:
        os.rename(staged, target)
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    else:
        fsync_dir(target.parent)
        return
    if _exchange(staged, target):
        fsync_dir(target.parent)
        shutil.rmtree(staged)  # now the old export
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.rename(target, aside / "old")
    try:
        os.rename(staged, target)
    except BaseException:
        os.rename(aside / "old", target)
        raise
    finally:
        fsync_dir(target.parent)
    shutil.rmtree(aside)
