"""Sport and entertainment in the realism format: their policy-only rules pass the tools, their seeded data keeps
the rules that needed a new shape (ratings of watched watchlist entries) or a redrawn foreign key."""

from __future__ import annotations

import copy
import sqlite3
from typing import Any

import pytest
import yaml

from domains.engine import DomainEngine
from domains.invariants import violation_counts
from domains.registry import get_engine, spec_path
from domains.spec import parse_spec


def _first(domain: str, sql: str) -> Any:
    engine = get_engine(domain)
    with engine.fresh() as db:
        rows = db.query(sql, {"now": engine.spec.now})
    assert rows, f"seed 0 of {domain} should hold a row for: {sql}"
    return rows[0][0]


def test_sport_policy_only_rules_are_let_through_by_the_tools() -> None:
    engine = get_engine("sport")
    cup_ticket = _first("sport", "SELECT tk.ticket_id FROM tickets tk JOIN matches ma USING (match_id) WHERE tk.status = 'valid' "
                                 "AND ma.competition = 'cup' AND ma.status = 'scheduled' "
                                 "AND ma.kickoff_at > strftime('%Y-%m-%dT%H:%M:%S', :now, '+48 hours')")
    owing = _first("sport", "SELECT member_id FROM members WHERE balance_due > 0 AND membership_status = 'active' "
                            "AND membership_expires >= date(:now) AND membership_tier != 'junior'")
    match = _first("sport", "SELECT match_id FROM matches WHERE status = 'scheduled' AND kickoff_at > :now "
                            "AND tickets_sold < capacity ORDER BY match_id")
    old = _first("sport", "SELECT member_id FROM members WHERE membership_status = 'lapsed' AND balance_due = 0 "
                          "AND membership_expires < date(:now, '-90 days') AND membership_tier != 'junior'")
    with engine.fresh() as db:
        assert db.call("refund_ticket", {"ticket_id": cup_ticket}).ok
        assert db.call("buy_ticket", {"match_id": match, "member_id": owing, "seat_section": "main_stand"}).ok
        tier = db.query("SELECT membership_tier FROM members WHERE member_id = :m", {"m": old})[0][0]
        assert db.call("renew_membership", {"member_id": old, "membership_tier": tier}).ok
    policy = engine.spec.policy
    for rule in ("Cup tickets cannot be refunded", "outstanding balance cannot buy", "lapsed more than 90 days ago",
                 "Junior members may only be sold tickets in the family zone"):
        assert rule in policy


def test_away_fixtures_are_played_at_the_opponents_ground_and_sell_no_tickets_here() -> None:
    engine = get_engine("sport")
    with engine.fresh() as db:
        home, away = (db.query(f"SELECT COUNT(*) FROM matches WHERE home_away = '{side}'")[0][0] for side in ("home", "away"))
        venues = {r[0] for r in db.query("SELECT name FROM venues")}
        upcoming = db.query("SELECT match_id FROM matches WHERE home_away = 'away' AND status = 'scheduled' "
                            "AND kickoff_at > :now ORDER BY match_id", {"now": engine.spec.now})
        member = db.query("SELECT member_id FROM members WHERE membership_status = 'active' AND balance_due = 0 "
                          "AND membership_tier != 'junior' ORDER BY member_id")[0][0]
        assert upcoming, "seed 0 should hold an upcoming away fixture"
        shown = db.call("get_match", {"match_id": upcoming[0][0]})
        refused = db.call("buy_ticket", {"match_id": upcoming[0][0], "member_id": member, "seat_section": "main_stand"})
    assert away > 0 and 0.3 <= away / (home + away) <= 0.7  # a season is about half away
    assert shown.ok and shown.output["venue_name"] and shown.output["venue_name"] not in venues
    assert shown.output["ticket_price"] is None and shown.output["tickets_sold"] == 0
    assert not refused.ok and "away fixture" in refused.error
    conn = sqlite3.connect(":memory:")
    conn.deserialize(engine.image)
    counts = violation_counts(conn, engine.spec)
    assert counts["away_fixture_not_at_home"] == counts["home_fixture_at_a_club_venue"] == 0


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_every_squad_is_filled_from_members_its_team_fits_and_few_players_are_released(seed: int) -> None:
    """A club fills its squads by size: no side is left with 4 players while another releases 28 (seed 2 before).
    A player's age fits their team's band: an age group at most four years under its limit, except where the
    club's members of that age ran out."""
    conn = sqlite3.connect(":memory:")
    conn.deserialize(DomainEngine(get_engine("sport").spec, seed).image)
    squads = conn.execute("SELECT t.name, t.max_squad_size, SUM(p.status != 'released'), SUM(p.status = 'released') "
                          "FROM teams t JOIN players p USING (team_id) GROUP BY t.team_id").fetchall()
    assert len(squads) == conn.execute("SELECT COUNT(*) FROM teams").fetchone()[0], "a team without players"
    for name, size, squad, released in squads:
        assert size / 2 <= squad <= size, f"seed {seed}: {name} holds {squad} of {size}"
        assert released <= max(3, squad // 2), f"seed {seed}: {name} released {released} beside a squad of {squad}"
    in_band = conn.execute(
        "SELECT AVG(t.age_limit IS NULL OR m.date_of_birth <= date(:now, '-' || (t.age_limit - 4) || ' years')) "
        "FROM players p JOIN teams t USING (team_id) JOIN members m USING (member_id)",
        {"now": get_engine("sport").spec.now}).fetchone()[0]
    assert in_band >= 0.8
    assert violation_counts(conn, get_engine("sport").spec)["squad_within_limit"] == 0


def test_entertainment_policy_only_rules_are_let_through_by_the_tools() -> None:
    engine = get_engine("entertainment")
    vip = _first("entertainment", "SELECT k.ticket_id FROM tickets k JOIN events e USING (event_id) WHERE k.status = 'active' "
                                  "AND k.seat_section = 'vip' AND e.status = 'scheduled' "
                                  "AND e.starts_at > strftime('%Y-%m-%dT%H:%M:%S', :now, '+48 hours')")
    soon = _first("entertainment", "SELECT subscription_id FROM subscriptions WHERE status = 'active' "
                                   "AND renews_on <= date(:now, '+3 days') AND plan != 'premium'")
    with engine.fresh() as db:
        assert db.call("refund_ticket", {"ticket_id": vip}).ok
        assert db.call("change_subscription_plan", {"subscription_id": soon, "plan": "premium"}).ok
    assert "VIP tickets cannot be refunded unless the event is cancelled." in engine.spec.policy
    assert "Members must verify their e-mail address before buying event tickets." in engine.spec.policy


def test_every_rating_belongs_to_a_watched_entry_and_rating_again_is_refused() -> None:
    engine = get_engine("entertainment")
    with engine.fresh() as db:
        assert db.query("SELECT COUNT(*) FROM ratings r JOIN watchlist_items w USING (watchlist_id) "
                        "WHERE w.watched = 1 AND w.user_id = r.user_id AND w.title_id = r.title_id "
                        "AND r.rated_at >= w.added_at")[0][0] == db.query("SELECT COUNT(*) FROM ratings")[0][0]
        user, title = db.query("SELECT w.user_id, w.title_id FROM watchlist_items w WHERE w.watched = 1 AND NOT EXISTS "
                               "(SELECT 1 FROM ratings r WHERE r.watchlist_id = w.watchlist_id) ORDER BY w.watchlist_id")[0]
        got = db.call("rate_title", {"user_id": user, "title_id": title, "stars": 4})
        assert got.ok and got.output["watchlist_id"]
        assert not db.call("rate_title", {"user_id": user, "title_id": title, "stars": 2}).ok


def test_repair_redraws_a_named_foreign_key() -> None:
    """Duplicate watchlist entries are only fixed by drawing another title: without ``resample`` they stay."""
    raw = yaml.safe_load(spec_path("entertainment").read_text())
    bare = copy.deepcopy(raw)
    for inv in bare["invariants"]:
        if inv["name"] in ("title_listed_once", "no_r_rated_title_for_minors"):
            inv.pop("resample")
    spec = parse_spec(bare, label="entertainment.yaml")
    with DomainEngine(spec, 0).fresh() as db:
        broken = violation_counts(db.conn, spec)
    assert broken["title_listed_once"] + broken["no_r_rated_title_for_minors"] > 0
    engine = get_engine("entertainment")
    with engine.fresh() as db:
        fixed = violation_counts(db.conn, engine.spec)
    assert fixed["title_listed_once"] == 0 and fixed["no_r_rated_title_for_minors"] == 0
