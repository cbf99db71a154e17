"""The code version stamped on every snapshot: package version + a hash of the source that shapes data."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_VERSION = "0.1.0"
SOURCE_DIRS = ("domains", "synthesis", "verifiers", "warehouse", "toolscale")


@cache
def code_version() -> str:
    """``0.1.0+<12 hex>``: changes whenever a .py or domain spec under the data-shaping packages changes."""
    h = hashlib.sha256()
    for folder in SOURCE_DIRS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".yaml", ".json") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(ROOT)).encode())
                h.update(path.read_bytes())
    return f"{PACKAGE_VERSION}+{h.hexdigest()[:12]}"
