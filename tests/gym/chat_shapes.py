"""A loopback proxy between Gym's model adapter and the llama.cpp server that only reshapes chat messages the way
llama-cpp-python's request schema accepts them: Gym sends an assistant turn that made a tool call with
``"content": null`` (or a list of text parts), which the OpenAI API allows and llama-cpp-python's schema refuses
(HTTP 500, "Input should be 'system'"). Text parts are joined, a null content is left out; nothing else changes,
and every answer is the server's own."""

from __future__ import annotations

import json

from tests.loopback import LoopbackProxy


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


class ChatShapesProxy(LoopbackProxy):
    def __init__(self, upstream_port: int) -> None:
        self.requests = 0
        super().__init__(upstream_port, timeout_s=600, reshape=self._reshape, seen=self._seen)

    @staticmethod
    def _reshape(path: str, body: bytes) -> bytes:
        return reshape(body) if path.endswith("/chat/completions") else body

    def _seen(self, path: str, payload: bytes) -> None:
        self.requests += 1
