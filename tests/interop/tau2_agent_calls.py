"""Runs inside tau2's venv (.venv-tau2), never the project's: tau2's own ``LLMAgent`` on its ``mock`` domain,
pointed at an OpenAI-protocol server, for a few turns. Prints one JSON object: the tool calls the agent made
(name and arguments, with the tool's answer) and its last message.

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv-tau2/bin/python tests/interop/tau2_agent_calls.py BASE_URL MODEL [TURNS]
"""

from __future__ import annotations

import json
import sys

from loguru import logger

logger.remove()  # tau2 logs every tool response at DEBUG

from tau2.agent.llm_agent import LLMAgent  # noqa: E402
from tau2.data_model.message import MultiToolMessage, UserMessage  # noqa: E402
from tau2.registry import registry  # noqa: E402


def main(base_url: str, model: str, turns: int = 3) -> None:
    env = registry.get_env_constructor("mock")()
    agent = LLMAgent(tools=env.get_tools(), domain_policy=env.get_policy(), llm=f"openai/{model}",
                     llm_args={"api_base": base_url, "api_key": "no-key-needed", "temperature": 0.0,
                               "max_tokens": 96})
    state = agent.get_init_state()
    message = UserMessage(role="user", content="Hi, I am user_1. Please create a task titled 'Buy milk' for me.")
    calls, last = [], None
    for _ in range(turns):
        last, state = agent.generate_next_message(message, state)
        if not last.tool_calls:
            break
        answers = [env.get_response(call) for call in last.tool_calls]
        calls += [{"name": c.name, "arguments": c.arguments, "error": a.error, "answer": a.content[:200]}
                  for c, a in zip(last.tool_calls, answers)]
        message = answers[0] if len(answers) == 1 else MultiToolMessage(role="tool", tool_messages=answers)
    print(json.dumps({"tool_calls": calls, "last_message": last.content if last else None}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)
