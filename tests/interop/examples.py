"""Checks shared by the imported tau2 domains: every spec example does what it declares, and every write example
ends in tau2's own state."""

from __future__ import annotations

from domains.engine import ToolCall
from domains.registry import get_engine, get_spec
from interop.tau2_bridge import Tau2Worker, calls_json, state_differences
from verifiers.replay import replay


def assert_examples_have_their_declared_outcomes(domain: str) -> None:
    spec, engine = get_spec(domain), get_engine(domain)
    for tool in spec.tools:
        assert {e["expect"] for e in tool.examples} == {"ok", "error"}, tool.name
        for example in tool.examples:
            with engine.fresh() as db:
                result = db.call(tool.name, example["arguments"])
            assert result.ok == (example["expect"] == "ok"), (tool.name, example, result.error)


def assert_write_examples_end_in_tau2s_state(domain: str) -> None:
    spec, engine = get_spec(domain), get_engine(domain)
    with Tau2Worker() as worker:
        initial = worker.request(op="initial", domain=domain)["db"]
        for tool in (t for t in spec.tools if t.kind == "write"):
            for example in tool.examples:
                calls = (ToolCall(tool.name, example["arguments"]),)
                answer = worker.request(op="replay", domain=domain, calls=calls_json(calls))
                run = replay(engine, calls)
                try:
                    assert run.results[0].ok == (answer["errors"][0] is None), (tool.name, example, answer["errors"])
                    assert state_differences(run.db, run.writes, initial, answer["changed"]) == [], (tool.name, example)
                finally:
                    run.close()
