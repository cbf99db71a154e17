"""Coincidental sources in a snapshot: every count value a task must tell ("3 injured", "2 seats") whose recorded
source is a field or text that does not mean it (a shirt number, a store credit, a bare figure of the user's words),
as ``verifiers.derivability.coincidental`` reads it. Prints the counts per domain and the commonest (unit, source)
pairs, so a before / after of a derivability change is one command on each warehouse.

    PYTHONPATH=. python bench/coincidental_sources.py --warehouse /tmp/w.duckdb
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter

from verifiers.derivability import coincidental
from warehouse.reader import connect_readonly, resolve_snapshot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warehouse", required=True, help="a warehouse file written by `toolscale regenerate`")
    parser.add_argument("--snapshot", default="latest", help="a snapshot id (default: the latest published one)")
    parser.add_argument("--top", type=int, default=15, help="how many (unit, source) pairs to list")
    args = parser.parse_args(argv)
    con = connect_readonly(args.warehouse)
    snapshot = resolve_snapshot(con, args.snapshot)
    rows = con.execute("SELECT domain, communicate_values_json FROM tasks WHERE snapshot_id = ?",
                       [snapshot]).fetchall()
    counts: Counter[str] = Counter()
    bad: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    for domain, stored in rows:
        for value in json.loads(stored or "[]"):
            if value.get("kind") != "count":
                continue
            counts[domain] += 1
            if coincidental(value["canonical"], value.get("source")):
                bad[domain] += 1
                unit = value["canonical"].split(" ", 1)[-1]
                pairs[(unit, re.sub(r"\[\d+\]", "[i]", str(value.get("source"))))] += 1
    print(f"snapshot {snapshot}: {sum(bad.values())} of {sum(counts.values())} count values have a coincidental "
          f"source ({len(rows)} tasks)")
    for domain in sorted(counts):
        print(f"  {domain:<14} {bad[domain]:>4} of {counts[domain]:>4}")
    for (unit, source), n in pairs.most_common(args.top):
        print(f"  {n:>4}  {unit!r} from {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
