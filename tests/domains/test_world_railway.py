"""Railway keeps the facts of a real operator: a train is rostered to one line (a route and its reverse) and never
hops between networks from one day to the next, its model runs where that fleet exists (Azuma in Great Britain),
a unit timetabled for an upcoming service is in service, day services arrive before midnight, and passengers have
phone numbers of the countries the network serves. Seed 0 before: 21 of 146 changeovers (a train's next
non-cancelled service) switched between a British route and a continental one, 139 ran another station pair,
12 services arrived between 02:00 and 07:00, and all 150 passengers had +1 (North American) numbers."""

from __future__ import annotations

import sqlite3

import pytest

from domains.registry import get_engine, get_spec
from domains.spec import DomainSpec

from tests.domains.seeded import broken_by_hand, seeded, violated

NEW = ["service_arrives_the_day_it_departs", "passenger_phone_in_the_network", "train_keeps_to_its_route",
       "train_with_upcoming_services_in_service", "train_model_fits_its_network"]

_LINE = """SELECT ro.origin_station_id AS o, ro.destination_station_id AS d FROM services x JOIN routes ro USING (route_id)
  WHERE x.service_id = 'SV0001'"""
_NETWORK = """CASE WHEN geography(o.name, 'country') = 'United Kingdom' AND geography(d.name, 'country') = 'United Kingdom'
  THEN 'britain' WHEN geography(o.name, 'country') = 'United Kingdom' OR geography(d.name, 'country') = 'United Kingdom'
  THEN 'tunnel' ELSE 'continent' END"""
_SERVICE_NETWORK = f"""SELECT s.*, {_NETWORK} AS network, r.origin_station_id AS a, r.destination_station_id AS b
  FROM services s JOIN routes r USING (route_id) JOIN stations o ON o.station_id = r.origin_station_id
  JOIN stations d ON d.station_id = r.destination_station_id"""

# (invariant, query giving the key of the row to break, statement breaking it with :key bound)
BROKEN_BY_HAND: list[tuple[str, str, str]] = [
    ("service_arrives_the_day_it_departs", "SELECT service_id FROM services ORDER BY service_id LIMIT 1",
     "UPDATE services SET arrival_at = date(departure_at, '+1 day') || 'T03:22:00' WHERE service_id = :key"),
    ("passenger_phone_in_the_network", "SELECT passenger_id FROM passengers ORDER BY passenger_id LIMIT 1",
     "UPDATE passengers SET phone = '+1-593-616-3492' WHERE passenger_id = :key"),
    # the last service on another station pair than SV0001 (the lowest id) is given SV0001's train
    ("train_keeps_to_its_route",
     f"""SELECT s.service_id FROM services s JOIN routes r USING (route_id), ({_LINE}) f
     WHERE NOT ((r.origin_station_id = f.o AND r.destination_station_id = f.d)
       OR (r.origin_station_id = f.d AND r.destination_station_id = f.o)) ORDER BY s.service_id DESC LIMIT 1""",
     "UPDATE services SET train_id = (SELECT train_id FROM services WHERE service_id = 'SV0001') WHERE service_id = :key"),
    ("train_with_upcoming_services_in_service",
     "SELECT train_id FROM services WHERE status = 'scheduled' ORDER BY service_id LIMIT 1",
     "UPDATE trains SET status = 'maintenance' WHERE train_id = :key"),
    ("train_model_fits_its_network",
     f"SELECT train_id FROM ({_SERVICE_NETWORK}) WHERE network = 'continent' ORDER BY service_id LIMIT 1",
     "UPDATE trains SET model = 'Azuma' WHERE train_id = :key"),
    ("train_model_fits_its_network",
     f"SELECT train_id FROM ({_SERVICE_NETWORK}) WHERE network = 'britain' ORDER BY service_id LIMIT 1",
     "UPDATE trains SET model = 'Talgo' WHERE train_id = :key"),
]


def _seeded(seed: int = 0) -> tuple[sqlite3.Connection, DomainSpec]:
    return seeded("railway", seed)


@pytest.mark.parametrize(("invariant", "key_sql", "breaking"), BROKEN_BY_HAND,
                         ids=[f"{i}-{n}" for n, (i, _, _) in enumerate(BROKEN_BY_HAND)])
def test_invariant_holds_on_seed_0_and_reports_a_row_broken_by_hand(invariant: str, key_sql: str, breaking: str) -> None:
    key, found = broken_by_hand("railway", invariant, key_sql, breaking)
    assert key in found


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_seeded_world_keeps_every_invariant(seed: int) -> None:
    assert set(NEW) <= {i.name for i in get_spec("railway").invariants}
    assert violated("railway", seed) == {}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_train_never_switches_line_or_network_between_services(seed: int) -> None:
    conn, _ = _seeded(seed)
    changeovers = conn.execute(f"""WITH s AS ({_SERVICE_NETWORK} WHERE s.status != 'cancelled')
      SELECT a.service_id, a.network, a.a, a.b, b.service_id, b.network, b.a, b.b FROM s a JOIN s b
      ON b.service_id = (SELECT n.service_id FROM s n WHERE n.train_id = a.train_id AND n.departure_at > a.departure_at
        ORDER BY n.departure_at LIMIT 1)""").fetchall()
    assert len(changeovers) > 50
    assert [c for c in changeovers if c[1] != c[5]] == []
    assert [c for c in changeovers if {c[2], c[3]} != {c[6], c[7]}] == []


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_azuma_units_run_only_in_britain(seed: int) -> None:
    conn, _ = _seeded(seed)
    networks = conn.execute(f"SELECT DISTINCT s.network FROM ({_SERVICE_NETWORK}) s JOIN trains t USING (train_id) "
                            "WHERE t.model = 'Azuma'").fetchall()
    assert set(networks) <= {("britain",)}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_day_services_arrive_before_midnight_not_in_the_small_hours(seed: int) -> None:
    conn, _ = _seeded(seed)
    late = conn.execute("SELECT service_id, departure_at, arrival_at FROM services "
                        "WHERE date(arrival_at) != date(departure_at) OR time(arrival_at) < '07:00:00'").fetchall()
    assert late == []
    assert conn.execute("SELECT MAX(time(departure_at)) FROM services").fetchone()[0] >= "20:00:00"


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_passengers_have_phone_numbers_of_the_network_countries(seed: int) -> None:
    conn, _ = _seeded(seed)
    phones = [r[0] for r in conn.execute("SELECT phone FROM passengers")]
    assert [p for p in phones if p.startswith("+1")] == []
    prefixes = {p.split(" ")[0] for p in phones}
    assert {"+44", "+33", "+49"} & prefixes and len(prefixes) >= 8


def test_assign_train_keeps_a_train_on_its_line() -> None:
    with get_engine("railway").fresh() as db:
        refused = db.dry_run("assign_train", {"service_id": "SV0008", "train_id": "TR006"})
        assert not refused.ok and "not rostered to the line" in (refused.error or "")
        assert db.dry_run("assign_train", {"service_id": "SV0107", "train_id": "TR021"}).ok
