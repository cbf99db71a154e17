"""Materialisation is deterministic and tool calls are safe: hostile input is an error and changes nothing."""

from __future__ import annotations

import pytest

from domains.engine import DomainEngine
from domains.registry import DOMAIN_NAMES, get_engine, get_spec

WEATHER_SEED0 = "9f18863043a55cda592546e57a00014fcbd61a70b87a91ae39700441e0948c3c"


def test_same_seed_same_fingerprint_for_every_domain() -> None:
    for name in DOMAIN_NAMES:
        spec = get_spec(name)
        a, b = DomainEngine(spec, 7), DomainEngine(spec, 7)
        assert a.fingerprint == b.fingerprint
        assert a.fingerprint != DomainEngine(spec, 8).fingerprint


def test_weather_fingerprint_is_stable_across_machines() -> None:
    # Pinned: a change here means seeded data changed for every user of seed 0 (last: alerts at most 48 hours ahead
    # and one reading a station and hour; before, mostly dry, light-wind readings taken by stations in service).
    assert DomainEngine(get_spec("weather"), 0).fingerprint == WEATHER_SEED0
    db = get_engine("weather").fresh()
    assert db.query("SELECT station_id, status FROM stations ORDER BY station_id LIMIT 1") == [("WS0001", "active")]


def test_different_seeds_give_different_rows() -> None:
    spec = get_spec("weather")
    rows0 = DomainEngine(spec, 0).fresh().table_rows("subscribers")
    rows1 = DomainEngine(spec, 1).fresh().table_rows("subscribers")
    assert [r["subscriber_id"] for r in rows0] == [r["subscriber_id"] for r in rows1]
    assert [r["email"] for r in rows0] != [r["email"] for r in rows1]


def test_fresh_copies_are_independent() -> None:
    engine = get_engine("weather")
    with engine.fresh() as a, engine.fresh() as b:
        assert a.call("cancel_alert", {"alert_id": "AL0004"}).ok
        assert a.fingerprint() != engine.fingerprint
        assert b.fingerprint() == engine.fingerprint


def test_a_write_reports_the_rows_it_wrote_and_generates_keys() -> None:
    with get_engine("weather").fresh() as db:
        r = db.call("open_maintenance_ticket", {"station_id": "WS0001", "issue": "vandalism", "priority": "urgent"})
        assert r.ok, r.error
        assert r.output["ticket_id"] == "MT0041"
        assert r.writes == {("maintenance_tickets", "MT0041"), ("stations", "WS0001")}
        read = db.call("get_station", {"station_id": "WS0001"})
        assert read.output["status"] == "maintenance"
        assert ("stations", "WS0001") in read.reads and ("regions", read.output["region_id"]) in read.reads


HOSTILE = [
    ("cancel_alert", {"alert_id": "x'; DROP TABLE alerts; --"}),
    ("cancel_alert", {"alert_id": "A" * 10_000_000}),
    ("cancel_alert", {"alert_id": "警报🌩️\u0000AL0004"}),
    ("cancel_alert", {"alert_id": {"$ne": None}}),
    ("cancel_alert", {"alert_id": ["AL0004"]}),
    ("escalate_alert", {"alert_id": "AL0004", "severity": "catastrophic"}),
    ("record_observation", {"station_id": "WS0001", "observed_at": "2025-06-15T09:00:00",
                            "temperature_c": "hot", "precipitation_mm": 0, "wind_kph": 1}),
    ("subscribe_to_alerts", {"subscriber_id": "SU0001", "region_id": "RG001", "hazard": "storm"}),
    ("cancel_alert", {"alert_id": "AL0004", "reason": "extra"}),
    ("cancel_alert", {}),
    ("cancel_alert", "AL0004"),
    ("cancel_alert", None),
    ("launch_missiles", {"alert_id": "AL0004"}),
    ("", {}),
    ("get_station", {"station_id": 1}),
    ("record_observation", {"station_id": "WS0001", "observed_at": "2025-06-15T09:00:00",
                            "temperature_c": 20, "precipitation_mm": 0, "wind_kph": True}),
]


@pytest.mark.parametrize("tool,arguments", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_calls_are_errors_that_change_nothing(tool: str, arguments: object) -> None:
    engine = get_engine("weather")
    with engine.fresh() as db:
        result = db.call(tool, arguments)
        assert not result.ok and result.error
        assert db.fingerprint() == engine.fingerprint
        assert db.query("SELECT COUNT(*) FROM alerts") == [(50,)]


def test_a_float_is_not_an_integer() -> None:
    engine = get_engine("ecommerce")
    good = {"customer_id": "CU0008", "address_id": "AD0001", "product_id": "PR0002", "quantity": 2}
    with engine.fresh() as db:
        # plain JSON Schema accepts 2.0 as an integer; a quantity of 2.0 (or 2.5, or True) is refused here
        for quantity in (2.0, 2.5, True, "2"):
            result = db.call("place_order", {**good, "quantity": quantity})
            assert not result.ok and "quantity" in result.error, quantity
            assert db.fingerprint() == engine.fingerprint
        assert db.call("place_order", good).ok


def test_unicode_free_text_is_stored_verbatim_and_sql_stays_data() -> None:
    spec = get_spec("weather")
    engine = DomainEngine(spec, 0)
    with engine.fresh() as db:
        name = "Zoë'); DROP TABLE stations; --"
        assert not db.call("find_station_by_name", {"name": name}).ok
        assert db.query("SELECT COUNT(*) FROM stations") == [(60,)]


def test_error_messages_name_the_problem() -> None:
    with get_engine("weather").fresh() as db:
        assert "Unknown tool 'nope'" in db.call("nope", {}).error
        assert "'alert_id' is a required property" in db.call("cancel_alert", {}).error
        assert "Additional properties" in db.call("cancel_alert", {"alert_id": "AL0004", "x": 1}).error
        assert db.call("cancel_alert", {"alert_id": "AL0001"}).error == "Alert AL0001 is not active."
