"""One client for every OpenAI-compatible endpoint: registry, managed servers, cache, retries, budget, records.

The small API the rest of the project uses::

    from inference import LLMClient, load_endpoints
    endpoint = load_endpoints()["local-smollm2"]
    with LLMClient(endpoint, cache_dir="work/llm-cache", stage="paraphrase") as llm:
        reply = llm.chat([{"role": "user", "content": "Say hi"}])
        if reply.ok:
            print(reply.text)
    llm.flush_records("warehouse/toolscale.duckdb")
"""

from inference.client import BudgetExceeded, ChatReply, LLMClient
from inference.endpoints import Endpoint, EndpointError, load_endpoints
from inference.cost import Price

__all__ = ["BudgetExceeded", "ChatReply", "Endpoint", "EndpointError", "LLMClient", "Price", "load_endpoints"]
