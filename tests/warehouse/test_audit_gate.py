"""The realism audit in the warehouse: stored per snapshot, read by ``toolscale audit``, gating converted
domains only; a database seeded against its own invariant on purpose is rejected."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import duckdb
import yaml

from domains.engine import DomainEngine, ToolCall
from domains.registry import get_engine, get_spec, spec_path
from domains.spec import parse_spec
from synthesis.generate import ShardConfig, generate_shard
from synthesis.realism_audit import TaskFacts, aggregate, task_figures
from toolscale.cli import main
from toolscale.cli_audit import TABLES
from warehouse.audit_models import audit_rows, read_audit, write_audit
from warehouse.quality import realism_gate
from warehouse.schema import ensure_schema
from warehouse.writer import SnapshotBundle, _write_rows


def _warehouse(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    path = tmp_path / "wh.duckdb"
    ensure_schema(path)
    return duckdb.connect(str(path))


def _identify_only_row(engine: DomainEngine) -> dict[str, Any]:
    """The audit row of one railway task (identify, then claim compensation) on ``engine``'s seeded data."""
    with engine.fresh() as db:
        email, = db.query("SELECT email FROM passengers ORDER BY passenger_id LIMIT 1")[0]
        found = db.call("find_passenger_by_email", {"email": email}).output
    said = next(str(v) for k, v in found.items() if k.endswith("_id"))  # a value the identifying call returns
    facts = TaskFacts("railway", (ToolCall("find_passenger_by_email", {"email": email}),), (said,),
                      "Hi. What is my passenger number?", f"Hi. What is my passenger number? your e-mail is {email}",
                      ("hinged", "forbidden=role"), "Ana", "customer", None, ())
    figures = task_figures(engine, facts)
    row = aggregate("railway", [figures] * 3, [facts.request] * 3)
    # the shares of a healthy domain of 100 tasks: this row is about invariants, not about the share gates
    return {**row, "tasks": 100, "forbidden_share": 0.22, "write_share": 0.85, "refuse_all_share": 0.04,
            "top_opening_share": 0.02}


def test_a_violating_seeded_row_is_rejected_by_the_gate(tmp_path: Path) -> None:
    raw = yaml.safe_load(spec_path("railway").read_text())
    broken = copy.deepcopy(raw)
    for inv in broken["invariants"]:
        if inv["name"] == "youth_railcard_age":
            inv.pop("resample")  # seeding no longer repairs it: youth cards for adults stay in the data
    bad = _identify_only_row(DomainEngine(parse_spec(broken, label="railway.yaml"), 0))
    good = _identify_only_row(get_engine("railway"))
    assert bad["invariant_violations"] > 0 and good["invariant_violations"] == 0
    con = _warehouse(tmp_path)
    write_audit(con, "ts-bad", [bad])
    write_audit(con, "ts-good", [good])
    rejected, passed = realism_gate(con, "ts-bad"), realism_gate(con, "ts-good")
    assert not rejected["success"] and any("invariant_violations" in f for f in rejected["failures"])
    assert passed["success"], passed["failures"]


def test_unconverted_domains_are_reported_not_gated(tmp_path: Path) -> None:
    row = {**_identify_only_row(get_engine("railway")), "domain": "weather", "converted": False,
           "invariant_violations": 5, "parrot_passes": 3, "identified_share": 0.0}
    con = _warehouse(tmp_path)
    write_audit(con, "ts-old", [row])
    assert realism_gate(con, "ts-old")["success"]
    assert read_audit(con, "ts-old")[0]["parrot_passes"] == 3


def test_cli_audit_reads_stored_figures_and_recomputes_for_old_snapshots(tmp_path: Path, capsys: Any) -> None:
    records = generate_shard(ShardConfig("railway", 0, 0, base_candidates=6, evolution_rounds=0))["records"]
    for i, r in enumerate(records):
        r["candidate_id"] = f"c{i}"
    accepted = [r for r in records if r["accepted"]]
    assert accepted
    con = _warehouse(tmp_path)
    bundle = SnapshotBundle("ts-test", "v", "cfg", {}, {"railway": len(accepted)}, records, [], [])
    _write_rows(con, bundle, None)
    con.execute("UPDATE snapshots SET status = 'published' WHERE snapshot_id = 'ts-test'")
    con.close()
    path = str(tmp_path / "wh.duckdb")
    assert main(["audit", "latest", "--json", "--warehouse", path]) == 0
    recomputed = json.loads(capsys.readouterr().out)
    assert recomputed["stored"] is False and recomputed["domains"][0]["tasks"] == len(accepted)
    assert recomputed["domains"][0]["identified_share"] == 1.0
    con = duckdb.connect(path)
    write_audit(con, "ts-test", audit_rows(records))
    con.close()
    assert main(["audit", "ts-test", "--json", "--warehouse", path]) == 0
    stored = json.loads(capsys.readouterr().out)
    assert stored["stored"] is True
    row = stored["domains"][0]
    assert row["policy_hinged_share"] == aggregate("railway", [r["realism"] for r in accepted],
                                                  [r["request"] for r in accepted])["policy_hinged_share"]
    assert main(["audit", "latest", "--warehouse", path]) == 0
    table = capsys.readouterr().out
    assert "railway *" in table
    assert max(len(line) for line in table.splitlines()) <= 120  # fits a 120-column terminal
    for _, columns in TABLES:  # every header is a plain word or two, explained on a legend line
        for header, key, _, what in columns:
            assert "_" not in header and f"  {header:<11} {what}" in table.splitlines(), header
    assert f"{row['tasks']:>11}" in table and "100%" in table  # the figures themselves, as in --json


def test_a_decision_citing_an_unwritten_rule_is_counted_and_gated(tmp_path: Path) -> None:
    """A request decided by a sentence the policy never states (the old notes) counts; one citing a rule id of the
    written policy does not, and the gate rejects a snapshot with any such decision."""
    engine = get_engine("railway")
    with engine.fresh() as db:
        email, = db.query("SELECT email FROM passengers ORDER BY passenger_id LIMIT 1")[0]
    calls = (ToolCall("find_passenger_by_email", {"email": email}),)

    def row(notes: tuple[str, ...]) -> dict[str, Any]:
        facts = TaskFacts("railway", calls, ("12.50 EUR",), "Hi. How much did I pay?", "Hi. How much did I pay?",
                          notes, "Ana", "customer", None, ())
        return aggregate("railway", [task_figures(engine, facts)] * 3, [facts.request] * 3)

    written = row(("intent=refund_trip", "outcome=too_late", "rule=refund_trip_too_late", "hinged",
                   "forbidden=other_owner", "intent=refund_trip", "rule=act_for_identified_user"))
    unwritten = row(("intent=refund_trip", "outcome=too_late", "rule=Refunds are at the manager's discretion.",
                     "hinged", "forbidden=role"))
    assert written["unwritten_rule_decisions"] == 0 and unwritten["unwritten_rule_decisions"] == 3
    con = _warehouse(tmp_path)
    write_audit(con, "ts-bad", [unwritten])
    write_audit(con, "ts-good", [written])
    rejected = realism_gate(con, "ts-bad")
    assert not rejected["success"] and any("unwritten_rule_decisions" in f for f in rejected["failures"])
    # three copies of one task fail the share gates on their own; the written rule adds no failure
    assert not any("unwritten_rule_decisions" in f for f in realism_gate(con, "ts-good")["failures"])


def test_rule_ids_of_a_snapshot_are_stored_with_who_checks_them(tmp_path: Path) -> None:
    records = generate_shard(ShardConfig("railway", 0, 0, base_candidates=6, evolution_rounds=0))["records"]
    for i, r in enumerate(records):
        r["candidate_id"] = f"c{i}"
    accepted = [r for r in records if r["accepted"]]
    con = _warehouse(tmp_path)
    _write_rows(con, SnapshotBundle("ts-rules", "v", "cfg", {}, {"railway": len(accepted)}, records, [], []), None)
    stored = con.execute("SELECT task_id, rule_id, checked_by FROM task_rules WHERE snapshot_id = 'ts-rules' "
                         "ORDER BY task_id, position").fetchall()
    cited = sum(n.startswith("rule=") for r in accepted for n in r["notes"])
    assert stored and len(stored) == cited
    spec = get_spec("railway")
    assert all(spec.rule(rule_id).checked_by == checked_by for _, rule_id, checked_by in stored)
    policies = {r["task_id"]: r["tau2"]["description"]["relevant_policies"] for r in accepted}
    for task_id, rule_id, _ in stored:  # the exported tau2 task quotes each rule with its sentence
        assert f"[{rule_id}] {spec.rule(rule_id).text}" in policies[task_id]
