"""The disk cache of LLM answers, keyed by a hash of the request, so a rerun repeats no call and can resume.

One JSON file per answer, ``<root>/<key[:2]>/<key>.json``, written to a temporary file in the same folder and
moved into place with ``os.replace``: a reader sees a whole entry or none, even if the writer is killed.
Only successful answers are stored; a failed call is retried on the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

# bump when the stored entry's shape changes, so old entries are not misread
CACHE_FORMAT = 1


def request_key(model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """sha256 over the model, the messages and every parameter that changes the answer (canonical JSON)."""
    payload = {"format": CACHE_FORMAT, "model": model, "messages": messages,
               "params": {k: v for k, v in params.items() if v is not None}}
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class DiskCache:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored entry, or None; an unreadable entry (e.g. edited by hand) counts as a miss."""
        try:
            entry = json.loads(self.path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return entry if isinstance(entry, dict) and entry.get("key") == key else None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{key[:8]}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({**entry, "key": key}, handle, ensure_ascii=False, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("*/*.json")) if self.root.exists() else 0
