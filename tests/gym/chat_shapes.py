"""A loopback proxy between Gym's model adapter and the llama.cpp server that only reshapes chat messages the way
llama-cpp-python's request schema accepts them: Gym sends an assistant turn that made a tool call with
``"content": null`` (or a list of text parts), which the OpenAI API allows and llama-cpp-python's schema refuses
(HTTP 500, "Input should be 'system'"). Text parts are joined, a null content is left out; nothing else changes,
and every answer is the server's own."""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def reshape(body: bytes) -> bytes:
    try:
        request = json.loads(body)
    except ValueError:
        return body
    for message in request.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            message["content"] = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        elif content is None and "content" in message:
            if message.get("role") == "assistant":
                del message["content"]
            else:
                message["content"] = ""
        for extra in ("reasoning_content", "reasoning"):
            message.pop(extra, None)
    return json.dumps(request).encode()


class ChatShapesProxy:
    def __init__(self, upstream_port: int) -> None:
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._forward(reshape(body) if self.path.endswith("/chat/completions") else body)

            def _forward(self, body: bytes | None) -> None:
                upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=600)
                try:
                    upstream.request(self.command, self.path, body=body,
                                     headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                    response = upstream.getresponse()
                    payload = response.read()
                finally:
                    upstream.close()
                outer.requests += 1
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

    def __enter__(self) -> ChatShapesProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
