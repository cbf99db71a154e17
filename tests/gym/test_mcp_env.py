"""``toolscale serve-env`` with the official MCP client: the tools are listed and called, two sessions do not see
each other's writes, the gold of a task verifies 1.0 and nothing 0.0, and bad input gets the engine's errors."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from domains.registry import get_spec
from tests.gym.servers import free_port, wait_until_up
from tests.snapshots import published_warehouse
from train.environment.tasks import load_training_set

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("mcp-env")
    warehouse = published_warehouse(root, ["weather"], tasks_per_domain=12)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "toolscale.cli", "serve-env", "weather", "--port", str(port),
                             "--warehouse", warehouse, "--max-calls", "50"], cwd=ROOT, env=os.environ.copy(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until_up(proc, f"http://127.0.0.1:{port}/mcp/")
        yield {"url": f"http://127.0.0.1:{port}/mcp/", "tasks": load_training_set(warehouse).tasks}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def text(result: Any) -> str:
    return result.content[0].text


async def isolation(url: str, task: Any) -> list[str]:
    """Session A starts the task and makes its gold calls; session B, on the same task, reads what A wrote."""
    lines = []
    async with streamablehttp_client(url) as (r1, w1, _), streamablehttp_client(url) as (r2, w2, _):
        async with ClientSession(r1, w1) as a, ClientSession(r2, w2) as b:
            await a.initialize()
            await b.initialize()
            names = [t.name for t in (await a.list_tools()).tools]
            lines.append(f"tools listed: {len(names)} (start_task, verify and {len(names) - 2} weather tools)")
            for s in (a, b):
                assert not (await s.call_tool("start_task", {"task_id": task.task_id})).isError
            for call in task.gold_calls:
                out = await a.call_tool(call.name, call.arguments)
                lines.append(f"A {call.name}({json.dumps(call.arguments)}) -> {text(out)[:90]}")
            write = next(c for c in task.gold_calls if c.name in WRITES and any(k in READS for k in c.arguments))
            differs = []  # every row the write names, read by both: A sees its write, B does not
            for key in (k for k in write.arguments if k in READS):
                reader = READS[key]
                seen_a = text(await a.call_tool(reader, {key: write.arguments[key]}))
                seen_b = text(await b.call_tool(reader, {key: write.arguments[key]}))
                lines.append(f"A reads {reader}({write.arguments[key]}): {seen_a[:120]}")
                lines.append(f"B reads {reader}({write.arguments[key]}): {seen_b[:120]}")
                differs.append(seen_a != seen_b)
            assert any(differs), f"session B sees session A's write {write} in every row it names"
            said = "Done. " + " ".join(task.communicate_info)
            va = json.loads(text(await a.call_tool("verify", {"answer": said})))
            vb = json.loads(text(await b.call_tool("verify", {"answer": said})))
            lines.append(f"verify A (gold calls): reward {va['reward']}; verify B (no calls): reward {vb['reward']} "
                         f"failed {vb['failed']}")
            assert va["reward"] == 1.0 and vb["reward"] == 0.0
            unknown = await b.call_tool("drop_tables", {})
            bad = await b.call_tool(write.name, {"nonsense": True})
            lines.append(f"unknown tool: isError={unknown.isError} {text(unknown)[:70]}")
            lines.append(f"bad arguments: isError={bad.isError} {text(bad)[:70]}")
            assert unknown.isError and "Unknown tool" in text(unknown) and bad.isError and "invalid" in text(bad)
            no_task = await b.call_tool("start_task", {"task_id": "weather-none"})
            assert no_task.isError and "unknown task" in text(no_task)
            for _ in range(60):
                last = await b.call_tool(reader, {key: write.arguments[key]})
            assert last.isError and "call limit reached" in text(last)
            lines.append(f"after 60 more calls: {text(last)[:80]}")
    return lines


SPEC = get_spec("weather")
WRITES = {t.name for t in SPEC.side_tools("agent") if t.kind == "write"}
# a key -> the read tool that takes that key alone (get_subscriber for subscriber_id, ...)
READS = {t.parameters["required"][0]: t.name
         for t in sorted(SPEC.side_tools("agent"),
                         key=lambda t: t.entity == SPEC.primary_keys.get(t.parameters.get("required", [""])[0]))
         if t.kind == "read" and len(t.parameters.get("required", [])) == 1
         and t.parameters["required"][0] in SPEC.primary_keys}  # the key's own table's tool wins: it returns the row


def test_two_sessions_do_not_see_each_others_writes(served: dict[str, Any]) -> None:
    task = next(t for t in served["tasks"] if any(c.name in WRITES and any(k in READS for k in c.arguments)
                                                  for c in t.gold_calls)
                and next(c for c in t.gold_calls if c.name in WRITES).name in
                {c.name for c in t.gold_calls if any(k in READS for k in c.arguments)})
    lines = asyncio.run(isolation(served["url"], task))
    print("\n".join(["MCP isolation, task " + task.task_id, *lines]))
