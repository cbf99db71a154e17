"""Find the processes of one CLI run by a marker in their environment (children inherit it, even orphaned)."""

from __future__ import annotations

import os
from pathlib import Path

MARK = "TOOLSCALE_TEST_RUN"


def processes_marked(value: str) -> list[str]:
    """``pid cmdline`` of every live process whose environment holds ``MARK=value``."""
    needle = f"{MARK}={value}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":  # a zombie is already dead, only not yet reaped by its parent
                    cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    found.append(f"{proc.name} {cmdline[:120]}")
        except (OSError, IndexError):
            continue
    return found
