"""A loopback HTTP proxy that forwards to a real server and counts what passes, so a test can prove that a
cache hit sent nothing to the server (the server itself is not faked)."""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class CountingProxy:
    def __init__(self, upstream_port: int) -> None:
        self.chat_requests = 0
        self.usages: list[dict[str, Any]] = []  # the usage block of every chat answer the server sent
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                self._forward(self.rfile.read(int(self.headers.get("Content-Length", 0))))

            def _forward(self, body: bytes | None) -> None:
                upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=300)
                try:
                    headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    payload = response.read()
                finally:
                    upstream.close()
                if self.path.endswith("/chat/completions"):
                    with proxy._lock:
                        proxy.chat_requests += 1
                        try:
                            proxy.usages.append(json.loads(payload).get("usage") or {})
                        except ValueError:
                            proxy.usages.append({})
                self.send_response(response.status)
                self.send_header("Content-Type", response.getheader("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
