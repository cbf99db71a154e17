"""A small OpenAI-protocol HTTP server on loopback that misbehaves on request, for the client's fault tests.

The last user message chooses the behaviour: ``fault:<mode>`` always misbehaves that way, ``fault:<mode>:<n>``
misbehaves on the first n requests carrying that message and then answers well, anything else answers well.
Modes: 500, 503, 429, 400, malformed (not JSON), shape (JSON without choices), cut (a JSON body cut short),
truncated (the connection closes before the announced Content-Length), chunked (a chunked body that never ends),
timeout (answers after ``slow_s``), ok.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

from tests.loopback import LoopbackServer, QuietHandler


def good_answer(text: str) -> bytes:
    return json.dumps({
        "id": "chatcmpl-fault", "object": "chat.completion", "created": 0, "model": "fault-model",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": f"echo {text}"}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()


class FaultServer(LoopbackServer):
    def __init__(self, slow_s: float = 2.0) -> None:
        self.slow_s = slow_s
        self.requests: Counter[str] = Counter()  # per message text, every request that arrived
        self.gets = 0  # GET requests (health checks: /models)
        self._lock = threading.Lock()
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                server.gets += 1
                self._send(200, json.dumps({"object": "list", "data": [{"id": "fault-model"}]}).encode())

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                text = body["messages"][-1]["content"]
                with server._lock:
                    server.requests[text] += 1
                    seen = server.requests[text]
                mode = server.mode_for(text, seen)
                if mode == "ok":
                    self._send(200, good_answer(text))
                elif mode in ("500", "503", "429", "400"):
                    self._send(int(mode), b'{"error": {"message": "fault"}}', {"Retry-After": "0"})
                elif mode == "malformed":
                    self._send(200, b"<html>upstream error</html>")
                elif mode == "shape":
                    self._send(200, b'{"object": "chat.completion", "choices": []}')
                elif mode == "cut":
                    self._send(200, good_answer(text)[:40])
                elif mode == "truncated":
                    payload = good_answer(text)
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                elif mode == "chunked":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    part = good_answer(text)[:30]
                    self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                    self.wfile.flush()
                    self.close_connection = True
                elif mode == "timeout":
                    time.sleep(server.slow_s)
                    try:
                        self._send(200, good_answer(text))
                    except OSError:
                        pass  # the client gave up and closed the connection
                else:
                    raise AssertionError(f"unknown fault mode {mode!r}")

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
                self.reply(status, payload, headers=headers)

        super().__init__(Handler)

    @staticmethod
    def mode_for(text: str, seen: int) -> str:
        if not text.startswith("fault:"):
            return "ok"
        parts = text.split(":")
        if len(parts) >= 3 and parts[2].isdigit():
            return parts[1] if seen <= int(parts[2]) else "ok"
        return parts[1]

    @property
    def total_requests(self) -> int:
        with self._lock:
            return sum(self.requests.values())
