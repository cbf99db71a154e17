"""The socket under the LLM client, with a total deadline and a byte cap per HTTP request.

httpx's timeouts are per read: a server that trickles one byte a second, or streams without end, keeps a request
alive for ever. Here every socket read and write of a request draws on one ``Allowance`` (a deadline and a number
of bytes) that the client opens around the request in its own thread; once either is spent the next read fails,
and the allowance says which one tripped. Reads outside an allowance are not limited.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpcore2
import httpx2
from httpcore2._backends.sync import SyncBackend

_local = threading.local()


@dataclass
class Allowance:
    """What one HTTP request may still use; ``tripped`` is "deadline" or "too_large" once a limit stopped it."""

    deadline: float  # time.monotonic() by which the request must be over
    max_bytes: int
    received: int = 0
    tripped: str | None = None

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()


@contextmanager
def allowance(timeout_s: float, max_bytes: int) -> Iterator[Allowance]:
    """Limit every socket operation of the current thread inside the block to ``timeout_s`` in all and
    ``max_bytes`` received in all."""
    current = Allowance(time.monotonic() + timeout_s, max_bytes)
    previous = getattr(_local, "allowance", None)
    _local.allowance = current
    try:
        yield current
    finally:
        _local.allowance = previous


def _current() -> Allowance | None:
    return getattr(_local, "allowance", None)


def _timeout(asked: float | None) -> float | None:
    """The per-operation timeout: what httpx asked for, never past the allowance's deadline."""
    current = _current()
    if current is None:
        return asked
    left = current.remaining_s()
    if left <= 0:
        current.tripped = "deadline"
        raise httpcore2.ReadTimeout("the request's total deadline has passed")
    return left if asked is None else min(asked, left)


class _GuardedStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        current = _current()
        try:
            data = self._inner.read(max_bytes, _timeout(timeout))
        except httpcore2.ReadTimeout:
            if current is not None and current.remaining_s() <= 0:
                current.tripped = "deadline"
            raise
        if current is not None:
            current.received += len(data)
            if current.received > current.max_bytes:
                current.tripped = "too_large"
                raise httpcore2.ReadError(f"the answer is over {current.max_bytes:,} bytes")
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _timeout(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore2.NetworkStream:
        return _GuardedStream(self._inner.start_tls(ssl_context, server_hostname, _timeout(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _GuardedBackend(httpcore2.NetworkBackend):
    def __init__(self) -> None:
        self._inner = SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        return _GuardedStream(self._inner.connect_tcp(host, port, _timeout(timeout), local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        return _GuardedStream(self._inner.connect_unix_socket(path, _timeout(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def guarded_http_client(**kwargs: Any) -> httpx2.Client:
    """An ``httpx2.Client`` whose every connection (direct or through a proxy from the environment) reads and
    writes through the allowance of the calling thread."""
    client = httpx2.Client(**kwargs)
    backend = _GuardedBackend()
    for transport in [client._transport, *client._mounts.values()]:
        pool = getattr(transport, "_pool", None)
        if pool is None or not hasattr(pool, "_network_backend"):
            # a transport we cannot guard would reopen the hang this module closes
            raise RuntimeError(f"cannot guard the HTTP transport {type(transport).__name__}")
        pool._network_backend = backend
    return client


__all__ = ["Allowance", "allowance", "guarded_http_client"]
