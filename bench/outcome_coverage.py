"""Outcome coverage per domain: the intent outcomes declared, those the seeded data offers rows for, and those
that give a goal (a derivable gold) from some of their rows; then every outcome that gives none.

    PYTHONPATH=$PWD .venv/bin/python bench/outcome_coverage.py [--domains sport weather] [--tries 6]
"""

from __future__ import annotations

import argparse

from domains.registry import available_domains, data_available, get_engine, get_spec, unknown_domain
from synthesis.outcome_coverage import outcome_coverage
from synthesis.toolgraph import ToolGraph


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", nargs="*", help="default: every domain that declares intents")
    parser.add_argument("--tries", type=int, default=6, help="rows tried per outcome")
    args = parser.parse_args()
    if args.tries < 1:
        parser.error("--tries must be at least 1")
    unknown = [d for d in args.domains or () if d not in available_domains()]
    if unknown:
        parser.error(unknown_domain(unknown[0]))
    domains = args.domains or [d for d in available_domains() if data_available(d) and get_spec(d).intents]
    dead = []
    print(f"{'domain':14s} {'outcomes':>8s} {'with rows':>9s} {'give a goal':>11s}")
    for domain in domains:
        rows = outcome_coverage(ToolGraph(get_engine(domain)), args.tries)
        offered = [c for c in rows if c.rows]
        live = [c for c in offered if c.goals]
        print(f"{domain:14s} {len(rows):8d} {len(offered):9d} {len(live):11d}")
        dead += [(domain, c) for c in rows if not c.goals]
    print("\noutcomes that give no goal (rows on the seeded data; none: the seed never offers the case)")
    for domain, c in dead:
        print(f"  {domain}: {c.intent} / {c.outcome} ({c.kind}): {c.rows} rows, 0 goals of {c.tried} tried")


if __name__ == "__main__":
    main()
