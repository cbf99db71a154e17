"""The plausibility layer in figures: per domain, the invariants declared and the rows of the seeded database
(seed 0) that break them; and railway's routes beside the great-circle distance of their cities, both ways.

    PYTHONPATH=$PWD .venv/bin/python bench/invariants.py [--pairs 5]
"""

from __future__ import annotations

import argparse
import sqlite3

from domains.geography import install_geography_function
from domains.invariants import violation_counts
from domains.registry import TABLE5, get_engine


def invariant_table() -> list[tuple[str, int, int]]:
    """(domain, invariants declared, rows breaking one) for the Table 5 domains, seed 0."""
    out = []
    for domain in sorted(TABLE5):
        engine = get_engine(domain)
        conn = sqlite3.connect(":memory:")
        conn.deserialize(engine.image)
        counts = violation_counts(conn, engine.spec)
        out.append((domain, len(counts), sum(counts.values())))
    return out


def railway_pairs(pairs: int) -> list[tuple[str, str, int, int, str, float, float]]:
    """Seeded routes, first those also seeded the other way: (from, to, km there, km back, where the km back
    comes from, great-circle km there, great-circle km back). A route seeded one way only gets its km back from
    the spec's own distance recipe, run the other way."""
    engine = get_engine("railway")
    recipe = engine.spec.table("routes").column("distance_km")
    factor = recipe.seed.get("factor", 1.0) if recipe is not None else 1.0
    conn = sqlite3.connect(":memory:")
    conn.deserialize(engine.image)
    install_geography_function(conn)
    rows = conn.execute(
        "SELECT o.name, d.name, r.distance_km, (SELECT b.distance_km FROM routes b WHERE b.origin_station_id = "
        "r.destination_station_id AND b.destination_station_id = r.origin_station_id ORDER BY b.route_id LIMIT 1), "
        "great_circle_km(o.name, d.name), great_circle_km(d.name, o.name) "
        "FROM routes r JOIN stations o ON o.station_id = r.origin_station_id "
        "JOIN stations d ON d.station_id = r.destination_station_id ORDER BY r.route_id").fetchall()
    rows.sort(key=lambda r: r[3] is None)  # both ways seeded first
    return [(o, d, km, back if back is not None else int(round(crow_back * factor)),
             "seeded" if back is not None else "recipe", crow, crow_back)
            for o, d, km, back, crow, crow_back in rows[:pairs]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5, help="railway routes to print (default 5)")
    args = parser.parse_args()
    print(f"{'domain':<15}{'invariants':>11}{'violations':>11}")
    for domain, declared, broken in invariant_table():
        print(f"{domain:<15}{declared:>11}{broken:>11}")
    print(f"\n{'from':<30}{'to':<30}{'km':>6}{'back':>6}{' (from)':<9}{'crow':>8}{'back':>8}")
    for origin, destination, km, back, source, crow, crow_back in railway_pairs(args.pairs):
        print(f"{origin:<30}{destination:<30}{km:>6}{back:>6} ({source}){crow:>8.1f}{crow_back:>8.1f}")


if __name__ == "__main__":
    main()
