"""The llama.cpp server the project starts: llama-cpp-python's OpenAI server with one chat format of ours added,
``chatml-tools``, so that a ChatML model such as SmolLM2 honours ``tools`` in requests.

    python -m inference.llama_server --model M.gguf --chat_format chatml-tools --host 127.0.0.1 --port 8089

``chatml-tools`` is llama-cpp-python's ``chatml-function-calling`` (tools listed in the system prompt, the first
tokens constrained by a grammar to a message or a ``functions.NAME:`` call) with what an OpenAI-protocol agent
sends made to fit it: tools without a ``tool_choice`` mean ``"auto"`` (the OpenAI default; the stock format
ignores them), ``"required"`` is treated as ``"auto"``, tool results are shown to the model as a user turn in
``<tool_response>`` tags (the stock template drops ``tool`` messages), and an assistant turn that carried tool
calls may have ``content`` null or missing. A tool parameter's ``pattern`` is left out of the grammar: the stock
converter cannot read ``\\d`` ("unknown escape"), and the server then dies of the null grammar (a segfault in
libllama, seen on a date-of-birth pattern); the tools still check every argument against their full schema.
"""

from __future__ import annotations

import json
from typing import Any

from llama_cpp import llama_chat_format as formats

CHAT_FORMAT = "chatml-tools"


def visible_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the function-calling template can render it (see the module docstring)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        m = dict(message)
        if m.get("role") == "tool":
            content = m.get("content")
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
            out.append({"role": "user", "content": f"<tool_response>\n{text}\n</tool_response>"})
            continue
        if m.get("content") is None:
            m["content"] = ""
        if not m.get("tool_calls"):
            m.pop("tool_calls", None)
        out.append(m)
    return out


def grammar_safe(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """``tools`` without the ``pattern`` keywords of their parameter schemas (copies; a property named "pattern"
    stays)."""
    if not tools:
        return tools
    safe = json.loads(json.dumps(tools))
    stack: list[Any] = [t.get("function", {}).get("parameters") for t in safe if isinstance(t, dict)]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str) and ("type" in node or "format" in node):
                del node["pattern"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return safe


@formats.register_chat_completion_handler(CHAT_FORMAT)
def chatml_tools(llama: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 tool_choice: Any = None, **kwargs: Any) -> Any:
    if tools and tool_choice in (None, "required"):
        tool_choice = "auto"
    return formats.chatml_function_calling(llama, visible_messages(messages), tools=grammar_safe(tools) or None,
                                           tool_choice=tool_choice, **kwargs)


if __name__ == "__main__":
    from llama_cpp.server.__main__ import main

    main()
