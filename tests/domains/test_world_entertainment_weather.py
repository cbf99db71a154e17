"""Entertainment and weather worlds that keep their own rules (seed 0 before these invariants: 10 tickets held by
members with an unverified e-mail, a VIP ticket refunded for a completed event, 17 of 50 alerts on file for windows
more than 48 hours ahead, 3 stations with two different readings at one time, 63 of 66 active subscriptions renewing
on another day of the month than they started)."""

from __future__ import annotations

import sqlite3

import pytest

from domains.engine import DomainEngine
from domains.invariants import violations
from domains.registry import get_engine
from domains.spec import DomainSpec

from tests.domains.seeded import broken_by_hand, seeded

BROKEN_BY_HAND = [
    ("entertainment", "tickets_bought_by_verified_members",
     "SELECT MIN(ticket_id) FROM tickets GROUP BY user_id HAVING COUNT(*) = 1 ORDER BY 1 LIMIT 1",
     "UPDATE users SET email_verified = 0 WHERE user_id = (SELECT user_id FROM tickets WHERE ticket_id = :key)"),
    ("entertainment", "refunds_follow_the_refund_rules",
     "SELECT ticket_id FROM tickets WHERE seat_section = 'vip' AND status = 'used' ORDER BY ticket_id LIMIT 1",
     "UPDATE tickets SET status = 'refunded' WHERE ticket_id = :key"),
    ("entertainment", "refunds_follow_the_refund_rules",  # a non-VIP refund needs a purchase 48 h before the start
     "SELECT k.ticket_id FROM tickets k JOIN events e USING (event_id) WHERE k.seat_section != 'vip' AND k.status = 'used' "
     "ORDER BY k.ticket_id LIMIT 1",
     "UPDATE tickets SET status = 'refunded', purchased_at = (SELECT strftime('%Y-%m-%dT%H:%M:%S', e.starts_at, '-24 hours') "
     "FROM events e WHERE e.event_id = tickets.event_id) WHERE ticket_id = :key"),
    ("entertainment", "renews_on_the_monthly_anniversary",
     "SELECT subscription_id FROM subscriptions WHERE status = 'active' ORDER BY subscription_id LIMIT 1",
     "UPDATE subscriptions SET renews_on = date(renews_on, '+1 day') WHERE subscription_id = :key"),
    ("weather", "alert_issued_at_most_48h_ahead", "SELECT alert_id FROM alerts ORDER BY alert_id LIMIT 1",
     "UPDATE alerts SET starts_at = '2025-06-17T15:00:00', ends_at = '2025-06-18T15:00:00' WHERE alert_id = :key"),
    ("weather", "one_reading_per_station_and_time", "SELECT MAX(obs_id) FROM observations",
     "UPDATE observations SET observed_at = (SELECT o.observed_at FROM observations o WHERE o.station_id = observations.station_id "
     "AND o.obs_id < observations.obs_id ORDER BY o.obs_id LIMIT 1), temperature_c = temperature_c + 4 WHERE obs_id = :key"),
]


def _seeded(domain: str) -> tuple[sqlite3.Connection, DomainSpec]:
    return seeded(domain)


@pytest.mark.parametrize(("domain", "invariant", "key_sql", "breaking"), BROKEN_BY_HAND,
                         ids=[f"{d}-{i}-{k}" for k, (d, i, _, _) in enumerate(BROKEN_BY_HAND)])
def test_invariant_holds_on_seed_0_and_reports_a_row_broken_by_hand(domain: str, invariant: str, key_sql: str,
                                                                    breaking: str) -> None:
    key, found = broken_by_hand(domain, invariant, key_sql, breaking)
    assert found == [key]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_new_invariants_hold_on_other_seeds(seed: int) -> None:
    for domain, names in (("entertainment", ("tickets_bought_by_verified_members", "refunds_follow_the_refund_rules",
                                             "renews_on_the_monthly_anniversary")),
                          ("weather", ("alert_issued_at_most_48h_ahead", "one_reading_per_station_and_time"))):
        spec = get_engine(domain).spec
        conn = sqlite3.connect(":memory:")
        conn.deserialize(DomainEngine(spec, seed).image)
        found = violations(conn, spec)
        assert {n: found[n] for n in names} == {n: [] for n in names}


def test_the_rule_example_member_holds_no_ticket_and_an_unverified_member_holds_none() -> None:
    conn, _ = _seeded("entertainment")
    assert conn.execute("SELECT COUNT(*) FROM tickets WHERE user_id = 'US0033'").fetchone()[0] == 0
    assert conn.execute("SELECT email_verified FROM users WHERE user_id = 'US0033'").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM tickets WHERE status = 'refunded'").fetchone()[0] > 5


def test_an_active_subscription_renews_on_the_day_it_started_and_a_new_one_in_a_month() -> None:
    engine = get_engine("entertainment")
    conn, spec = _seeded("entertainment")
    rows = conn.execute("SELECT started_on, renews_on FROM subscriptions WHERE status = 'active'").fetchall()
    same_day = sum(s[8:] == r[8:] for s, r in rows)
    assert same_day >= len(rows) - 3  # only a start on the 29th to 31st moves to the next month's first days
    assert all(spec.now[:10] < r <= "2025-07-08" for _, r in rows)
    soon = conn.execute("SELECT subscription_id FROM subscriptions WHERE status = 'active' "
                        "AND renews_on <= date(:now, '+3 days')", {"now": spec.now}).fetchall()
    assert ("SB0081",) in soon and len(soon) >= 3
    with engine.fresh() as db:
        made = db.call("start_subscription", {"user_id": "US0001", "plan": "basic"})
        assert made.ok
        assert violations(db.conn, spec)["renews_on_the_monthly_anniversary"] == []


def test_a_station_reading_redrawn_to_a_new_time_keeps_its_temperature_formula() -> None:
    """The three readings redrawn on seed 0 get the temperature the recipe gives their new time and draws."""
    conn, spec = _seeded("weather")
    sql = next(c for c in spec.table("observations").columns if c.name == "temperature_c").seed["sql"]
    conn.row_factory = sqlite3.Row
    off = [r["obs_id"] for r in conn.execute("SELECT * FROM observations")
           if abs(conn.execute(sql, dict(r)).fetchone()[0] - r["temperature_c"]) > 0.05]
    assert off == []
    assert conn.execute("SELECT COUNT(*) FROM alerts WHERE starts_at > :now", {"now": spec.now}).fetchone()[0] >= 5
