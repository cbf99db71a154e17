"""How often each opening and each filler phrase appears in a snapshot's requests, per domain.

    python bench/language_shares.py --warehouse /tmp/wh.duckdb [--snapshot ID] [--top 3]

Reads the snapshot's task instructions (the latest snapshot by default) and prints, per domain, the share of
requests that open with each greeting of ``synthesis.task.OPENINGS``, that say each filler (a lead-in or a filler
after a goal) and each closing, the most common first, and the largest share of each kind. Issue 39 asks for no opening
or filler above 3% of a domain's requests.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict

import duckdb

from synthesis.task import CLOSINGS, CLOSINGS_AFTER_STATEMENT, LEAD_INS, MID_CLOSINGS, OPENINGS, _timed

TIMES = ("2025-01-01T08:00:00", "2025-01-01T13:00:00", "2025-01-01T19:00:00", "2025-01-01T02:00:00")


def openings() -> list[str]:
    """Every greeting a request can open with, the clock's variants spelled out, longest first."""
    said = {_timed(o, now) for o in OPENINGS for now in TIMES} - {""}
    return sorted(said, key=len, reverse=True)


def fillers() -> list[str]:
    """Lead-ins and the fillers after a goal ("No rush on that one."): what issue 39 calls filler clauses."""
    return sorted({p for p in (*LEAD_INS, *MID_CLOSINGS) if p}, key=len, reverse=True)


def closings() -> list[str]:
    """The thanks and sign-offs after the last goal."""
    return sorted({p for p in (*CLOSINGS, *CLOSINGS_AFTER_STATEMENT) if p}, key=len, reverse=True)


def shares(instructions: list[tuple[str, str]]) -> dict[str, dict[str, Counter[str]]]:
    """domain -> {"opening": Counter, "filler": Counter, "n": Counter({"requests": n})}: requests per phrase."""
    out: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: {"opening": Counter(), "filler": Counter(),
                                                                   "closing": Counter(), "n": Counter()})
    heads, kinds = openings(), {"filler": fillers(), "closing": closings()}
    for domain, text in instructions:
        seen = out[domain]
        seen["n"]["requests"] += 1
        head = next((h for h in heads if text.startswith(h)), None)
        if head is not None:
            seen["opening"][head] += 1
        for kind, phrases in kinds.items():  # a phrase is a sentence of its own, bounded by spaces or the ends
            for phrase in phrases:
                if re.search(r"(?:^|\s)" + re.escape(phrase) + r"(?:\s|$)", text):
                    seen[kind][phrase] += 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--snapshot", default=None)
    parser.add_argument("--top", type=int, default=3)
    args = parser.parse_args()
    con = duckdb.connect(args.warehouse, read_only=True)
    snapshot = args.snapshot or con.execute("SELECT snapshot_id FROM snapshots ORDER BY created_at DESC LIMIT 1"
                                            ).fetchone()[0]
    rows = con.execute("SELECT domain, instruction FROM tasks WHERE snapshot_id = ?", [snapshot]).fetchall()
    figures = shares([(d, t) for d, t in rows])
    print(f"snapshot {snapshot}: {len(rows)} requests")
    worst = {"opening": 0.0, "filler": 0.0, "closing": 0.0}
    for domain in sorted(figures):
        seen, n = figures[domain], figures[domain]["n"]["requests"]
        print(f"{domain} ({n} requests)")
        for kind in worst:
            top = seen[kind].most_common(args.top)
            worst[kind] = max(worst[kind], top[0][1] / n if top else 0.0)
            print(f"  {kind:<8} " + ", ".join(f"{p!r} {c / n:.1%}" for p, c in top))
    print(", ".join(f"largest {kind} share {share:.1%}" for kind, share in worst.items()))


if __name__ == "__main__":
    main()
