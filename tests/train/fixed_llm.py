"""A tiny OpenAI-protocol server on loopback that always gives the same answer, after an optional delay: a writer
that makes claims the trials contradict, or an agent so slow that every call times out."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FixedLLM:
    def __init__(self, answer: str, delay_s: float = 0.0) -> None:
        self.answer, self.delay_s, self.posts = answer, delay_s, 0
        fixed = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send({"object": "list", "data": [{"id": "fixed", "object": "model"}]})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                fixed.posts += 1
                time.sleep(fixed.delay_s)
                self._send({"id": "fixed", "object": "chat.completion", "created": 0, "model": "fixed",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": fixed.answer}}],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}})

            def _send(self, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timed out) first

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FixedLLM:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
