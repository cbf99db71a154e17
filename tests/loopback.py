"""Loopback HTTP helpers the tests share: a server on 127.0.0.1 that runs in a thread for a ``with`` block, and a
proxy that forwards every request to a real upstream server, letting a test reshape what goes up and see what
comes back (the upstream server itself is never faked)."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoopbackServer:
    """``handler`` served on a free loopback port from a daemon thread between ``__enter__`` and ``__exit__``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class QuietHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def reply(self, status: int, payload: bytes, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)


class LoopbackProxy(LoopbackServer):
    """Forwards to ``127.0.0.1:upstream_port``. ``reshape(path, body)`` may change a POST body on its way up;
    ``seen(path, payload)`` hears every answer on its way back."""

    def __init__(self, upstream_port: int, timeout_s: float = 300,
                 reshape: Callable[[str, bytes], bytes] = lambda path, body: body,
                 seen: Callable[[str, bytes], None] = lambda path, payload: None) -> None:
        class Handler(QuietHandler):
            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                self._forward(reshape(self.path, self.rfile.read(int(self.headers.get("Content-Length", 0)))))

            def _forward(self, body: bytes | None) -> None:
                upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=timeout_s)
                try:
                    upstream.request(self.command, self.path, body=body,
                                     headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                    response = upstream.getresponse()
                    payload = response.read()
                finally:
                    upstream.close()
                seen(self.path, payload)
                self.reply(response.status, payload, response.getheader("Content-Type", "application/json"))

        super().__init__(Handler)
