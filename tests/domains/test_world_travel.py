"""Travel's world keeps its money and its clock: payments stay within what a trip costs and vouchers within
their limit, a cancellation keeps a fee only where the fare rules let it, and flights leave in the daytime.

Seed 0 before: 7 of 70 payments took their trip past its cost (6 of 51 paid trips; TP0089 cost 0 and was paid
300); the fact kept is that no trip is paid more than was billed for it, since a cancellation after payment leaves
a refund due, 2 vouchers were over 200, 18 of 200 bookings broke the fee rule (17 fees kept on flights the airline
cancelled, 3 charged to gold members) and 42 of 130 flights left between 22:00 and 06:00.
"""

from __future__ import annotations

import sqlite3

import pytest

from domains.registry import get_engine, get_spec
from domains.spec import DomainSpec

from tests.domains.seeded import broken_by_hand, seeded, violated

NEW = ("payments_within_what_was_billed", "voucher_within_limit", "cancellation_fee_follows_fare_rules",
       "flight_leaves_in_daytime", "flight_departs_after_it_was_booked", "stay_begins_the_day_the_trip_lands")

# what was billed for a trip: every booking and stay at its price, cancelled ones included (a cancellation after
# payment leaves a refund due, so what a trip costs now may be less)
COST = """ROUND((SELECT COALESCE(SUM(b.total_price), 0) FROM flight_bookings b WHERE b.trip_id = t.trip_id)
  + (SELECT COALESCE(SUM(h.total_price), 0) FROM hotel_reservations h WHERE h.trip_id = t.trip_id), 2)"""

BROKEN_BY_HAND = [
    ("payments_within_what_was_billed", "SELECT payment_id FROM payments ORDER BY payment_id LIMIT 1",
     "UPDATE payments SET amount = amount + 100000 WHERE payment_id = :key"),
    ("voucher_within_limit", "SELECT payment_id FROM payments WHERE method != 'voucher' ORDER BY payment_id LIMIT 1",
     "UPDATE payments SET method = 'voucher', amount = 250.0 WHERE payment_id = :key"),
    ("cancellation_fee_follows_fare_rules",
     "SELECT b.booking_id FROM flight_bookings b JOIN flights f USING (flight_id) "
     "WHERE b.status = 'cancelled' AND f.status = 'cancelled' AND b.cabin != 'business' ORDER BY b.booking_id LIMIT 1",
     "UPDATE flight_bookings SET cancellation_fee = ROUND(total_price * 0.2, 2) WHERE booking_id = :key"),
    ("flight_leaves_in_daytime", "SELECT flight_id FROM flights ORDER BY flight_id LIMIT 1",
     "UPDATE flights SET departure_at = substr(departure_at, 1, 10) || 'T03:30:00' WHERE flight_id = :key"),
    ("flight_departs_after_it_was_booked",
     "SELECT flight_id FROM flight_bookings ORDER BY booking_id LIMIT 1",
     "UPDATE flights SET departure_at = '2024-06-01T10:00:00' WHERE flight_id = :key"),
    ("stay_begins_the_day_the_trip_lands",
     "SELECT h.reservation_id FROM hotel_reservations h WHERE EXISTS (SELECT 1 FROM flight_bookings b "
     "WHERE b.trip_id = h.trip_id) ORDER BY h.reservation_id LIMIT 1",
     "UPDATE hotel_reservations SET check_in = date(check_in, '+1 day') WHERE reservation_id = :key"),
]


def _seeded(seed: int = 0) -> tuple[sqlite3.Connection, DomainSpec]:
    return seeded("travel", seed)


@pytest.mark.parametrize(("invariant", "key_sql", "breaking"), BROKEN_BY_HAND, ids=[b[0] for b in BROKEN_BY_HAND])
def test_invariant_holds_on_seed_0_and_reports_a_row_broken_by_hand(invariant: str, key_sql: str, breaking: str) -> None:
    key, found = broken_by_hand("travel", invariant, key_sql, breaking)
    assert key in found


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_new_facts_hold_on_seeds_0_to_3(seed: int) -> None:
    assert set(NEW) <= {i.name for i in get_spec("travel").invariants}
    assert violated("travel", seed) == {}


def test_no_trip_is_paid_more_than_was_billed_and_no_voucher_tops_200() -> None:
    conn, _ = _seeded()
    paid = conn.execute(f"SELECT t.trip_id, {COST}, ROUND((SELECT SUM(p.amount) FROM payments p WHERE p.trip_id = t.trip_id), 2) "
                        "FROM trips t WHERE EXISTS (SELECT 1 FROM payments p WHERE p.trip_id = t.trip_id)").fetchall()
    assert len(paid) > 30
    assert [(trip, cost, total) for trip, cost, total in paid if total > cost] == []
    vouchers = [a for (a,) in conn.execute("SELECT amount FROM payments WHERE method = 'voucher'")]
    assert vouchers and max(vouchers) <= 200


def test_a_cancellation_keeps_a_fee_only_where_the_fare_rules_let_it() -> None:
    """cancel_flight_free: no fee for business cabin, gold members or a flight the airline cancelled; every other
    cancelled booking kept 20% of its price (as cancel_flight_booking computes it)."""
    conn, _ = _seeded()
    rows = conn.execute(
        "SELECT b.booking_id, b.cabin, tr.loyalty_tier, f.status, b.total_price, b.cancellation_fee FROM flight_bookings b "
        "JOIN flights f USING (flight_id) JOIN trips t USING (trip_id) JOIN travellers tr USING (traveller_id) "
        "WHERE b.status = 'cancelled'").fetchall()
    waived = [r for r in rows if r[1] == "business" or r[2] == "gold" or r[3] == "cancelled"]
    kept = [r for r in rows if r not in waived]
    assert len(waived) > 10 and len(kept) > 10
    assert [r for r in waived if r[5] != 0] == []
    assert [r for r in kept if r[5] != round(r[4] * 0.2, 2)] == []
    assert conn.execute("SELECT COUNT(*) FROM flight_bookings WHERE status != 'cancelled' AND cancellation_fee != 0").fetchone() == (0,)


@pytest.mark.parametrize("seed", [0, 1])
def test_flights_leave_in_the_daytime_and_land_after_their_block_time(seed: int) -> None:
    """A flight redrawn out of the night takes its arrival with it: the block time is still the distance at
    800 km/h plus 25 to 45 minutes, as the arrival_at recipe draws it."""
    conn, _ = _seeded(seed)
    flights = conn.execute(
        "SELECT flight_id, time(departure_at), ROUND((julianday(arrival_at) - julianday(departure_at)) * 1440), "
        "CAST(great_circle_km(origin, destination) / 13.3 AS INTEGER) FROM flights").fetchall()
    assert len(flights) == 130
    assert [f for f in flights if not "06:00:00" <= f[1] <= "22:00:00"] == []
    assert [f for f in flights if not 25 <= f[2] - f[3] <= 45] == []
    assert len({f[1][:2] for f in flights}) >= 14  # spread over the day, not bunched at its edges


def test_the_pay_trip_examples_still_show_their_rules() -> None:
    db = get_engine("travel", 0).fresh()
    example = next(r.example for r in get_spec("travel").rules if r.id == "pay_towards_trip_pay")
    assert example is not None and example.tool == "pay_trip"
    too_much = db.call("pay_trip", dict(example.arguments))
    assert not too_much.ok and "exceed the outstanding balance" in too_much.error
    voucher = db.call("pay_trip", {"trip_id": "TP0013", "amount": 250.0, "method": "voucher"})
    assert voucher.ok  # the voucher limit is the agent's to apply: the balance alone lets it through
