"""A loopback HTTP proxy that forwards to a real server and counts what passes, so a test can prove that a
cache hit sent nothing to the server (the server itself is not faked)."""

from __future__ import annotations

import json
import threading
from typing import Any

from tests.loopback import LoopbackProxy


class CountingProxy(LoopbackProxy):
    def __init__(self, upstream_port: int) -> None:
        self.chat_requests = 0
        self.usages: list[dict[str, Any]] = []  # the usage block of every chat answer the server sent
        self._lock = threading.Lock()
        super().__init__(upstream_port, seen=self._count)

    def _count(self, path: str, payload: bytes) -> None:
        if not path.endswith("/chat/completions"):
            return
        with self._lock:
            self.chat_requests += 1
            try:
                self.usages.append(json.loads(payload).get("usage") or {})
            except ValueError:
                self.usages.append({})
