"""Read a small configuration file (training profile, endpoint registry, price file) as safely as a domain spec.

A stat comes before any open, so a FIFO or a device is refused instead of blocking forever; the open itself is
non-blocking and re-checked, in case the path was swapped after the stat. The text is read up to a size limit and
parsed by the spec loader's YAML reader, with its alias, nesting and expanded-size limits (an alias bomb fails
in milliseconds).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from domains.safeyaml import YamlLimitError, load_yaml

MAX_CONFIG_BYTES = 1_000_000  # the shipped profiles, registry and price template are each under 3 kB

KINDS = {stat.S_IFDIR: "folder", stat.S_IFIFO: "FIFO (named pipe)", stat.S_IFCHR: "character device",
         stat.S_IFBLK: "block device", stat.S_IFSOCK: "socket"}


class ConfigFileError(ValueError):
    """The file cannot be read as a configuration file; the message names it and says why."""


def read_config_text(path: str | os.PathLike[str], what: str, max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes``; ``what`` names it in errors ("price file")."""
    shown = os.fspath(path)
    if "\0" in shown:
        raise ConfigFileError(f"{what} path {shown!r} contains a NUL byte")
    try:
        st = os.stat(shown)
    except FileNotFoundError:
        raise ConfigFileError(f"{what} {shown}: cannot read: no such file") from None
    except OSError as exc:
        raise ConfigFileError(f"{what} {shown} cannot be read: {exc.strerror or exc}") from None
    _check_regular(st, shown, what, max_bytes)
    try:
        fd = os.open(shown, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise ConfigFileError(f"{what} {shown} cannot be read: {exc.strerror or exc}") from None
    try:
        _check_regular(os.fstat(fd), shown, what, max_bytes)  # the path may have been swapped after the stat
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise ConfigFileError(f"{what} {shown} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ConfigFileError(f"{what} {shown} is over {max_bytes:,} bytes, the limit for such a file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"{what} {shown} is not UTF-8 text (byte {exc.start})") from None


def _check_regular(st: os.stat_result, shown: str, what: str, max_bytes: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = KINDS.get(stat.S_IFMT(st.st_mode), "special file")
        raise ConfigFileError(f"{what} {shown} is a {kind}, not a regular file")
    if st.st_size > max_bytes:
        raise ConfigFileError(f"{what} {shown} is {st.st_size:,} bytes; such a file may be at most {max_bytes:,}")


def load_config_yaml(path: str | os.PathLike[str] | Path, what: str, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """Parse a YAML (or JSON) configuration file under the spec loader's limits; ``ConfigFileError`` if not."""
    text = read_config_text(path, what, max_bytes)
    try:
        return load_yaml(text)
    except YamlLimitError as exc:
        raise ConfigFileError(f"{what} {os.fspath(path)}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the YAML library raises several unrelated types on bad input
        first = " ".join(str(exc).split())[:200]
        raise ConfigFileError(f"{what} {os.fspath(path)} is not valid YAML/JSON: {first}") from None
