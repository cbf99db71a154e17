"""Whether a process id names a live process (for the lock and registry files that record their writer's pid)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (also when it belongs to another user, which signal 0 may not probe)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
