"""The shared geography table (domains/geography.yaml): cities with their country, climate, coordinates and
elevation, and countries with their ISO code, telephone prefix, IBAN length, currency and airline.

Seeding draws places from it (the ``place`` and ``distance`` recipes, and the formula functions
``geography``, ``great_circle_km``, ``phone_for`` and ``iban_for``), so an address, a weather station, a railway
route or a phone number never contradicts the map; invariants check stored values against it through the SQL
functions ``geography(city, field)``, ``country(name_or_code, field)`` and ``great_circle_km(a, b)``, which
``install_geography_function`` adds to a connection. A "city" may be a name that begins with the city's name
("Madrid Atocha", "Vienna Hbf"): stations, airports and venues name their city first.
"""

from __future__ import annotations

import math
import random
import sqlite3
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from domains.safeyaml import load_yaml

GEOGRAPHY_PATH = Path(__file__).resolve().parent / "geography.yaml"
TEXT_FIELDS = ("city", "country", "currency", "climate")
NUMBER_FIELDS = ("lat", "lon", "elevation_m")
COUNTRY_TEXT = ("country", "code", "phone_prefix", "airline", "currency")
COUNTRY_FIELDS = (*COUNTRY_TEXT, "iban_length")
# fields of a place: its own, and those of its country (a city's phone prefix is its country's)
FIELDS = (*TEXT_FIELDS, *NUMBER_FIELDS, "code", "phone_prefix", "iban_length", "airline")
# fields a seed recipe may generate from a place: a phone number or an IBAN of the place's country
GENERATED = ("phone_number", "iban")
SQL_FUNCTION = "geography"
EARTH_RADIUS_KM = 6371.0


@dataclass(frozen=True)
class Country:
    country: str
    code: str
    phone_prefix: str
    iban_length: int
    airline: str
    currency: str


@dataclass(frozen=True)
class Place:
    city: str
    country: str
    currency: str
    climate: str
    lat: float
    lon: float
    elevation_m: int

    def get(self, field: str) -> Any:
        if field in COUNTRY_FIELDS and field not in TEXT_FIELDS:
            return getattr(countries()[self.country], field)
        return getattr(self, field)


def _load() -> dict[str, Any]:
    raw = load_yaml(GEOGRAPHY_PATH.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ValueError(f"{GEOGRAPHY_PATH.name}: expected a mapping with countries and places")
    return raw


@cache
def countries() -> dict[str, Country]:
    """Country name -> its row (codes are looked up through ``country_field``)."""
    found: dict[str, Country] = {}
    for i, row in enumerate(_load()["countries"]):
        missing = [f for f in COUNTRY_TEXT if not isinstance(row.get(f), str) or (not row[f] and f != "airline")]
        if missing or not isinstance(row.get("iban_length"), int):
            raise ValueError(f"{GEOGRAPHY_PATH.name}: countries[{i}]: missing {', '.join(missing or ['iban_length'])}")
        found[row["country"]] = Country(**{f: row[f] for f in COUNTRY_FIELDS})
    return found


@cache
def places() -> tuple[Place, ...]:
    """Every place of the table, in file order (seeding draws by position, so the order is part of the data)."""
    found = []
    known = countries()
    for i, row in enumerate(_load()["places"]):
        missing = [f for f in TEXT_FIELDS if not isinstance(row.get(f), str) or not row[f]]
        missing += [f for f in NUMBER_FIELDS if not isinstance(row.get(f), (int, float)) or isinstance(row[f], bool)]
        if missing:
            raise ValueError(f"{GEOGRAPHY_PATH.name}: places[{i}]: missing {', '.join(missing)}")
        if row["country"] not in known:
            raise ValueError(f"{GEOGRAPHY_PATH.name}: places[{i}]: country {row['country']!r} is not under countries")
        if row["currency"] != known[row["country"]].currency:
            raise ValueError(f"{GEOGRAPHY_PATH.name}: places[{i}]: {row['city']} pays in {row['currency']}, "
                             f"its country in {known[row['country']].currency}")
        found.append(Place(**{f: row[f] for f in (*TEXT_FIELDS, *NUMBER_FIELDS)}))
    cities = [p.city for p in found]
    repeated = sorted({c for c in cities if cities.count(c) > 1})
    if repeated:
        raise ValueError(f"{GEOGRAPHY_PATH.name}: city named twice: {', '.join(repeated)}")
    return tuple(found)


@cache
def by_city() -> dict[str, Place]:
    return {p.city: p for p in places()}


@lru_cache(maxsize=4096)  # bounded: a proposed spec's names are untrusted text
def place_of(name: str) -> Place | None:
    """The place a name stands for: the city itself, or the longest city the name begins with followed by a
    space ("Florence Santa Maria Novella" -> Florence)."""
    table = by_city()
    if name in table:
        return table[name]
    starts = [c for c in table if name.startswith(c + " ")]
    return table[max(starts, key=len)] if starts else None


def field_of(city: str | None, field: str) -> Any:
    """``field`` of the place named ``city`` (or a name beginning with it); None for a place the table does not
    hold or a field it does not have."""
    place = place_of(city) if isinstance(city, str) else None
    return None if place is None or field not in FIELDS else place.get(field)


def country_field(key: str | None, field: str) -> Any:
    """``field`` of a country given by name or ISO code; None for an unknown country or field."""
    if not isinstance(key, str) or field not in COUNTRY_FIELDS:
        return None
    found = countries().get(key) or next((c for c in countries().values() if c.code == key), None)
    return None if found is None else getattr(found, field)


def great_circle_km(a: str | None, b: str | None) -> float | None:
    """Great-circle distance in km between two places (haversine; symmetric; None if either is unknown)."""
    pa = place_of(a) if isinstance(a, str) else None
    pb = place_of(b) if isinstance(b, str) else None
    if pa is None or pb is None:
        return None
    la1, lo1, la2, lo2 = map(math.radians, (pa.lat, pa.lon, pb.lat, pb.lon))
    h = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    return round(2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h))), 1)


def phone_for(key: str, rng: random.Random) -> str:
    """A phone number of the country of a place or a country (name or code): '+49 30 5551234'."""
    country = field_of(key, "country") or key
    prefix = country_field(country, "phone_prefix")
    if prefix is None:
        raise ValueError(f"no place or country {key!r} in the geography table")
    return f"{prefix} {rng.randint(20, 99)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}"


def iban_for(key: str, rng: random.Random) -> str:
    """An IBAN of the country of a place or a country (name or code), of that country's length: two letters,
    two check digits, then digits."""
    country = field_of(key, "country") or key
    code, length = country_field(country, "code"), country_field(country, "iban_length")
    if code is None or length is None:
        raise ValueError(f"no place or country {key!r} in the geography table")
    return f"{code}{rng.randint(10, 99)}" + "".join(str(rng.randint(0, 9)) for _ in range(length - 4))


def generated(field: str, place: Place, rng: random.Random) -> str:
    """A value generated from a place (``GENERATED``): a phone number or an IBAN of its country."""
    return phone_for(place.country, rng) if field == "phone_number" else iban_for(place.country, rng)


def matching(where: dict[str, Any]) -> list[Place]:
    """The places whose fields equal every value in ``where`` (all places for an empty filter)."""
    return [p for p in places() if all(p.get(k) == v for k, v in where.items())]


def install_geography_function(conn: sqlite3.Connection) -> None:
    """Add ``geography(city, field)`` (the field of that place, NULL for an unknown one), ``country(key, field)``
    and ``great_circle_km(a, b)`` to ``conn``."""
    conn.create_function(SQL_FUNCTION, 2, field_of, deterministic=True)
    conn.create_function("country", 2, country_field, deterministic=True)
    conn.create_function("great_circle_km", 2, great_circle_km, deterministic=True)
