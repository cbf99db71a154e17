"""Dual control (tau2's telecom): user tables and user tools, ``crosses:``, the side of a call, per-side state."""

from __future__ import annotations

from pathlib import Path

import pytest

from domains import external
from domains.engine import DomainEngine, ToolCall
from domains.safeyaml import load_yaml
from domains.spec import SpecError, load_spec, parse_spec
from verifiers.types import Trajectory, VerifiableTask
from verifiers.verify import verify

SPEC_PATH = Path(__file__).parent / "dual" / "phoneshop" / "phoneshop.yaml"


@pytest.fixture(scope="module")
def engine() -> DomainEngine:
    return DomainEngine(load_spec(SPEC_PATH))


def test_each_side_calls_only_its_own_tools_and_a_wrong_side_is_an_error_result(engine: DomainEngine) -> None:
    with engine.fresh() as db:
        before = db.fingerprint()
        refused = db.call("toggle_airplane_mode", {})  # the agent cannot touch the user's phone
        assert not refused.ok and "the agent cannot call it" in refused.error and db.fingerprint() == before
        assert not db.call("resume_account", {"account_id": "A001"}, side="user").ok
        assert not db.call("resume_account", {"account_id": "A001"}, side="nobody").ok
        toggled = db.call("toggle_airplane_mode", {}, side="user")
        assert toggled.ok and toggled.writes == {("handset", 1)}
        assert toggled.output == {"airplane_mode": 0, "has_service": 0}  # the account is still suspended


def test_a_crossing_write_is_audited_on_both_sides_and_fingerprints_split_by_side(engine: DomainEngine) -> None:
    with engine.fresh() as db:
        device = db.fingerprint("user")
        db.call("toggle_airplane_mode", {}, side="user")
        operator = db.fingerprint("agent")
        resumed = db.call("resume_account", {"account_id": "A001"})
        assert resumed.writes == {("accounts", "A001"), ("handset", 1)}
        assert db.table_rows("handset")[0]["has_service"] == 1
        assert db.fingerprint("agent") != operator and db.fingerprint("user") != device
        bad = db.call("resume_account", {"account_id": "A001' OR '1'='1"})  # bound, never formatted in
        assert not bad.ok and "is not suspended" in bad.error


def test_solved_compares_the_device_too(engine: DomainEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    from domains import registry

    monkeypatch.setattr(registry, "get_engine", lambda domain, seed=0: engine)
    gold = (ToolCall("resume_account", {"account_id": "A001"}), ToolCall("toggle_airplane_mode", {}, "user"))
    task = VerifiableTask("phoneshop", 0, gold)
    solved = verify(task, Trajectory(gold), engine)
    assert solved.execution.passed and "(operator 1, device 1)" in solved.execution.reason
    agent_only = verify(task, Trajectory(gold[:1]), engine)  # the user never turned airplane mode off
    assert not agent_only.execution.passed and "handset:1" in agent_only.execution.reason
    assert "(operator 0, device 1)" in agent_only.execution.reason


def test_a_tool_touching_the_other_side_without_crosses_is_refused_when_the_spec_loads() -> None:
    raw = load_yaml(SPEC_PATH.read_text())
    raw["tools"][1].pop("crosses")
    with pytest.raises(SpecError, match=r"tools\[1\]\.effects\[1\]: a user tool touches a table of the other side"):
        parse_spec(raw, label="phoneshop.yaml")
    raw["tools"][1]["crosses"] = ["handset"]
    with pytest.raises(SpecError, match=r"tools\[1\]\.crosses\[0\]: handset is a user table already"):
        parse_spec(raw, label="phoneshop.yaml")


def test_a_toml_document_can_be_one_record(tmp_path: Path) -> None:
    path = tmp_path / "user_db.toml"
    path.write_text('[device]\nairplane_mode = true\n[device.apn]\nname = "internet"\n')
    data = external._load_json(path, path.stat().st_mtime)
    rows = external.records(data, external.TableSource("phone", "."))
    assert [(r.field("device.apn.name"), r.field("device.airplane_mode"), r.field("@ordinal")) for r in rows] == [
        ("internet", True, 1)]


def test_the_tool_listing_says_whose_tool_it_is(engine: DomainEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    from domains import registry
    from toolscale.tools_cmd import describe, render

    monkeypatch.setattr(registry, "get_engine", lambda domain, seed=0: engine)
    listing = render(describe("phoneshop"))
    assert "resume_account [write]  account_id: string" in listing
    assert "toggle_airplane_mode [write, user]  (no parameters)" in listing
