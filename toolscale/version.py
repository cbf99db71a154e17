"""The code version stamped on every snapshot: package version + a hash of the source that shapes data."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_VERSION = "0.1.0"
SOURCE_PATHS = ("domains", "synthesis", "verifiers", "warehouse/quality.py", "pipeline")


@cache
def code_version() -> str:
    """``0.1.0+<12 hex>``: changes whenever code or a domain spec that shapes the data (sampling, verification,
    the quality gate, the job itself) changes; the CLI, flows and exports do not count."""
    h = hashlib.sha256()
    for name in SOURCE_PATHS:
        target = ROOT / name
        for path in sorted(target.rglob("*") if target.is_dir() else [target]):
            if path.suffix in (".py", ".yaml", ".json") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(ROOT)).encode())
                h.update(path.read_bytes())
    return f"{PACKAGE_VERSION}+{h.hexdigest()[:12]}"
