"""The domain adapter and the catalog: ok and error calls, the allow-list, errors as data."""

from __future__ import annotations

import json
from typing import Any

import pytest

from domains.registry import get_engine
from train.environment.tools import Tool, ToolCatalog, ToolResult, domain_tools


@pytest.fixture
def db():
    with get_engine("railway", 0).fresh() as database:
        yield database


def test_read_call_ok_and_error(db):
    catalog = ToolCatalog(domain_tools(db))
    station_id = db.query("SELECT station_id FROM stations ORDER BY station_id LIMIT 1")[0][0]
    ok = catalog.call("get_station", {"station_id": station_id})
    assert ok.ok and ok.cost_usd == 0.0 and ok.latency_s > 0
    assert json.loads(ok.observation)["station_id"] == station_id
    missing = catalog.call("get_station", {"station_id": "ST999"})
    assert not missing.ok and json.loads(missing.observation) == {"error": missing.error}
    bad = catalog.call("get_station", {"station": station_id})
    assert not bad.ok and "get_station" in bad.error


def test_write_calls_follow_the_spec_examples():
    """The spec's own examples (against seed 0) say which refunds succeed; only those change the state."""
    engine = get_engine("railway", 0)
    examples = engine.tools["refund_ticket"].examples
    assert {e["expect"] for e in examples} == {"ok", "error"}
    for example in examples:
        with engine.fresh() as db:
            before = db.fingerprint()
            result = ToolCatalog(domain_tools(db)).call("refund_ticket", example["arguments"])
            after = db.fingerprint()
        assert result.ok == (example["expect"] == "ok"), (example, result.error)
        assert (after != before) == result.ok
        if result.ok:
            assert json.loads(result.observation)["ticket_id"] == example["arguments"]["ticket_id"]


def test_allow_list_limits_the_tools(db):
    catalog = ToolCatalog(domain_tools(db, allowed=["get_ticket", "refund_ticket"]))
    assert catalog.names == ["get_ticket", "refund_ticket"]
    refused = catalog.call("cancel_service", {"service_id": "SV0001"})
    assert not refused.ok and refused.error.startswith("unknown tool 'cancel_service'")
    with pytest.raises(ValueError, match="lacks: no_such_tool"):
        domain_tools(db, allowed=["get_ticket", "no_such_tool"])


def test_catalog_renders_the_prompt_json(db):
    catalog = ToolCatalog(domain_tools(db, allowed=["get_station"]))
    rendered = json.loads(catalog.render())
    assert rendered == [{"name": "get_station", "description": db.engine.tools["get_station"].description,
                         "parameters": db.engine.tools["get_station"].parameters}]
    with pytest.raises(ValueError, match="duplicate tool name"):
        catalog.add(catalog["get_station"])


class Exploding(Tool):
    name = "exploding"
    description = "Always fails inside."
    parameters: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    def invoke(self, arguments: dict[str, Any]) -> ToolResult:
        raise RuntimeError(f"boom {arguments['n']}")


def test_calls_never_raise():
    catalog = ToolCatalog([Exploding()])
    assert catalog.call("exploding", {"n": 1}).error == "exploding: RuntimeError: boom 1"
    assert "invalid argument 'n'" in catalog.call("exploding", {"n": "one"}).error
    assert "must be a JSON object" in catalog.call("exploding", "n=1").error
    assert catalog.call(None, {}).error.startswith("unknown tool None")
