"""How often each opening and each filler phrase appears in a snapshot's requests, per domain.

    python bench/language_shares.py --warehouse /tmp/wh.duckdb [--snapshot ID] [--top 3]

Reads the snapshot's task instructions (the latest snapshot by default) and prints, per domain, the share of
requests that open with each greeting of ``synthesis.task.OPENINGS`` and the share that say each lead-in, closing
or mid-request filler, the most common first, with the largest share of each kind. Issue 39 asks for no opening
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
    return sorted({p for p in (*LEAD_INS, *MID_CLOSINGS, *CLOSINGS, *CLOSINGS_AFTER_STATEMENT) if p},
                  key=len, reverse=True)


def shares(instructions: list[tuple[str, str]]) -> dict[str, dict[str, Counter[str]]]:
    """domain -> {"opening": Counter, "filler": Counter, "n": Counter({"requests": n})}: requests per phrase."""
    out: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: {"opening": Counter(), "filler": Counter(),
                                                                   "n": Counter()})
    heads, phrases = openings(), fillers()
    for domain, text in instructions:
        seen = out[domain]
        seen["n"]["requests"] += 1
        head = next((h for h in heads if text.startswith(h)), None)
        if head is not None:
            seen["opening"][head] += 1
        for phrase in phrases:  # a phrase is a sentence of its own: bounded by the start or a space, and a space or end
            if re.search(r"(?:^|\s)" + re.escape(phrase) + r"(?:\s|$)", text):
                seen["filler"][phrase] += 1
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
    print(f"{'domain':<14}{'n':>6}  {'top openings':<58}{'top fillers'}")
    worst = {"opening": 0.0, "filler": 0.0}
    for domain in sorted(figures):
        seen, n = figures[domain], figures[domain]["n"]["requests"]
        cells = []
        for kind in ("opening", "filler"):
            top = seen[kind].most_common(args.top)
            worst[kind] = max(worst[kind], top[0][1] / n if top else 0.0)
            cells.append(", ".join(f"{p!r} {c / n:.1%}" for p, c in top))
        print(f"{domain:<14}{n:>6}  {cells[0]:<58}{cells[1]}")
    print(f"largest opening share {worst['opening']:.1%}, largest filler share {worst['filler']:.1%}")


if __name__ == "__main__":
    main()
