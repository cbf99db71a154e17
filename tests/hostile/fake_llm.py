"""A hostile OpenAI-protocol server on loopback: the last user message names the fault it sends back
(``fault:<name>``; any other message gets the server's ``default`` fault).

Each fault is a function from the request to raw bytes written on the socket (status line, headers and body are
the fault's own), so a reply can break HTTP framing, JSON, types or limits. The server stops every handler when
it shuts down, so nothing it starts outlives the test.
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from tests.loopback import LoopbackServer, QuietHandler

DEEP = 100_000


def answer(content: Any = "fine", *, usage: Any = None, finish_reason: Any = "stop", tool_calls: Any = None,
           extra: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {"id": "chatcmpl-hostile", "object": "chat.completion", "created": 0, "model": "m",
                            "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
                            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
                            if usage is None else usage}
    body.update(extra or {})
    return body


def deep_list(depth: int = DEEP) -> str:
    return "[" * depth + "]" * depth


def call(arguments: Any, name: Any = "get_station") -> list[dict[str, Any]]:
    return [{"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}]


def _json(body: Any) -> bytes:
    return json.dumps(body).encode()


def _replace(body: dict[str, Any], marker: str, raw: str) -> bytes:
    """The body with the JSON string ``"<marker>"`` replaced by raw JSON text (for what json.dumps cannot write)."""
    return _json(body).replace(json.dumps(marker).encode(), raw.encode())


class FakeLLM(LoopbackServer):
    """``with FakeLLM() as server``: ``server.base_url`` answers chat completions; ``server.requests`` counts the
    POSTs per fault name."""

    def __init__(self, default: str = "ok") -> None:
        self.requests: Counter[str] = Counter()
        self._stop = threading.Event()
        self.faults: dict[str, Callable[[Any, dict[str, Any]], None]] = {}
        self._register()
        server = self

        class Handler(QuietHandler):
            def end_headers(self) -> None:
                # every connection is closed after its answer (below), so say so: a client that pooled it
                # would otherwise race the close on its next request and see a reply cut off before it began
                self.send_header("Connection", "close")
                super().end_headers()

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                text = str(request["messages"][-1]["content"])
                name = text.removeprefix("fault:") if text.startswith("fault:") else default
                server.requests[name] += 1
                try:
                    server.faults[name](self, request)
                except OSError:
                    pass  # the client gave up and closed the connection: what the fault is for
                self.close_connection = True

        super().__init__(Handler)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # every handler still writing stops first
        super().__exit__(*exc)

    # ---- how a fault writes its reply
    @staticmethod
    def send(handler: Any, payload: bytes, status: int = 200, headers: dict[str, str] | None = None) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(payload)

    def _forever(self, handler: Any, chunks: Iterator[bytes]) -> None:
        for chunk in chunks:
            if self._stop.is_set():
                return
            handler.wfile.write(chunk)
            handler.wfile.flush()

    def _register(self) -> None:
        f = self.faults
        send = self.send
        f["ok"] = lambda h, r: send(h, _json(answer("fine")))
        # nesting: outside choices, inside choices, in tool-call arguments as an object and as text
        f["deep_outside_choices"] = lambda h, r: send(h, _replace(answer(extra={"x": "@"}), "@", deep_list()))
        f["deep_inside_choices"] = lambda h, r: send(h, _replace(answer("@"), "@", deep_list()))
        f["deep_choice_list"] = lambda h, r: send(h, _json(answer()).replace(
            b'"choices": [', b'"choices": [' + b"[" * DEEP + b"]" * DEEP + b","))
        f["deep_tool_arguments_object"] = lambda h, r: send(h, _replace(answer(None, tool_calls=call("@")), "@",
                                                                        '{"a":' * DEEP + "1" + "}" * DEEP))
        f["deep_tool_arguments_text"] = lambda h, r: send(h, _json(answer(None, tool_calls=call(deep_list(10_000)))))
        f["duplicate_tool_keys"] = lambda h, r: send(h, _json(answer(None, tool_calls=call(
            '{"station_id": "WS0001", "station_id": "WS0002"}'))))
        f["tool_name_object"] = lambda h, r: send(h, _json(answer(None, tool_calls=call("{}", name={"n": 1}))))
        f["tool_arguments_number"] = lambda h, r: send(h, _json(answer(None, tool_calls=call(42))))
        # size and time
        f["endless_chunks"] = lambda h, r: self._chunked_forever(h)
        f["huge_content_length"] = lambda h, r: self._huge_declared(h)
        f["trickle_body"] = lambda h, r: self._trickle(h, headers_first=True)
        f["trickle_headers"] = lambda h, r: self._trickle(h, headers_first=False)
        f["silent"] = lambda h, r: self._stop.wait(30)
        f["twenty_mb_completion"] = lambda h, r: send(h, _json(answer("x" * (20 << 20))))
        f["long_completion"] = lambda h, r: send(h, _json(answer("word " * 400)))
        f["overcounted_completion"] = lambda h, r: send(h, _json(answer("ok", usage={
            "prompt_tokens": 5, "completion_tokens": 500, "total_tokens": 505})))
        f["gzip_body"] = lambda h, r: send(h, gzip.compress(_json(answer("fine"))), headers={"Content-Encoding": "gzip"})
        f["error_endless_body"] = lambda h, r: self._chunked_forever(h, status=500)
        # usage and finish_reason types
        for name, usage in {"usage_2_pow_63": {"prompt_tokens": 2**63, "completion_tokens": 1},
                            "usage_negative": {"prompt_tokens": -5, "completion_tokens": 1},
                            "usage_float": {"prompt_tokens": 7.5, "completion_tokens": 1},
                            "usage_text": {"prompt_tokens": "7", "completion_tokens": 1},
                            "usage_bool": {"prompt_tokens": True, "completion_tokens": 1},
                            "usage_list": [7, 3],
                            "usage_total_huge": {"prompt_tokens": 1, "completion_tokens": 1,
                                                 "total_tokens": 10**30}}.items():
            f[name] = (lambda u: lambda h, r: send(h, _json(answer("fine", usage=u))))(usage)
        for name, reason in {"finish_reason_object": {"why": "stop"}, "finish_reason_unknown": "exploded",
                             "finish_reason_number": 3, "finish_reason_list": ["stop"]}.items():
            f[name] = (lambda fr: lambda h, r: send(h, _json(answer("fine", finish_reason=fr))))(reason)
        # text
        f["lone_surrogate"] = lambda h, r: send(h, _json(answer("@")).replace(b'"@"', b'"bad \\ud800 text"'))
        f["invalid_utf8"] = lambda h, r: send(h, _json(answer("@")).replace(b'"@"', b'"bad \xff\xfe text"'))
        f["nan_in_body"] = lambda h, r: send(h, _json(answer("fine")).replace(b'"prompt_tokens": 7',
                                                                             b'"prompt_tokens": NaN'))
        f["array_body"] = lambda h, r: send(h, b"[1, 2, 3]")
        f["content_object"] = lambda h, r: send(h, _json(answer({"text": "hi"})))

    def _chunked_forever(self, handler: Any, status: int = 200) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        chunk = b"x" * (1 << 20)
        self._forever(handler, (f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" for _ in iter(int, 1)))

    def _huge_declared(self, handler: Any) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(100 << 30))
        handler.end_headers()
        handler.wfile.write(b'{"choices": [{"message": {"content": "')
        self._forever(handler, (b"y" * (1 << 20) for _ in iter(int, 1)))

    def _trickle(self, handler: Any, headers_first: bool) -> None:
        payload = _json(answer("fine"))
        head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
                .encode())
        sock: socket.socket = handler.connection
        if headers_first:
            sock.sendall(head)
            data = payload
        else:
            data = head + payload
        for i in range(len(data)):
            if self._stop.wait(1.0):
                return
            sock.sendall(data[i:i + 1])


def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()
