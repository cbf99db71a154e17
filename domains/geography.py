"""The shared geography table (domains/geography.yaml): cities with their country, currency and climate.

Seeding draws places from it (the ``place`` recipe), so an address, a weather region or a club's venues never
pair a city with another country's name; invariants check stored places against it through the SQL function
``geography(city, field)``, which ``install_geography_function`` adds to a connection.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from domains.safeyaml import load_yaml

GEOGRAPHY_PATH = Path(__file__).resolve().parent / "geography.yaml"
FIELDS = ("city", "country", "currency", "climate")
SQL_FUNCTION = "geography"


@dataclass(frozen=True)
class Place:
    city: str
    country: str
    currency: str
    climate: str

    def get(self, field: str) -> str:
        return str(getattr(self, field))


@cache
def places() -> tuple[Place, ...]:
    """Every place of the table, in file order (seeding draws by position, so the order is part of the data)."""
    raw = load_yaml(GEOGRAPHY_PATH.read_text(encoding="utf-8"))
    found = []
    for i, row in enumerate(raw["places"]):
        missing = [f for f in FIELDS if not isinstance(row.get(f), str) or not row[f]]
        if missing:
            raise ValueError(f"{GEOGRAPHY_PATH.name}: places[{i}]: missing {', '.join(missing)}")
        found.append(Place(**{f: row[f] for f in FIELDS}))
    cities = [p.city for p in found]
    repeated = sorted({c for c in cities if cities.count(c) > 1})
    if repeated:
        raise ValueError(f"{GEOGRAPHY_PATH.name}: city named twice: {', '.join(repeated)}")
    return tuple(found)


@cache
def by_city() -> dict[str, Place]:
    return {p.city: p for p in places()}


def field_of(city: str | None, field: str) -> str | None:
    """``field`` of the place named ``city``; None for a city the table does not hold."""
    place = by_city().get(city) if isinstance(city, str) else None
    return None if place is None or field not in FIELDS else place.get(field)


def matching(where: dict[str, str]) -> list[Place]:
    """The places whose fields equal every value in ``where`` (all places for an empty filter)."""
    return [p for p in places() if all(p.get(k) == v for k, v in where.items())]


def install_geography_function(conn: sqlite3.Connection) -> None:
    """Add ``geography(city, field)`` to ``conn``: the field of that city, or NULL for an unknown city."""
    conn.create_function(SQL_FUNCTION, 2, field_of, deterministic=True)
