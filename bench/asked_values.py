"""Who asks for each value a task requires: the say values of every domain spec, kept as asked (the intent's
``asks``), kept by a tell rule (``told_by``: a domain's "always tell the user ..." rule, or ``tell_why_stopped``
for why a request is stopped), or dropped since a revision; and the share of generated tasks with something to tell.

    PYTHONPATH=$PWD nice -n 15 .venv/bin/python bench/asked_values.py --before 43f5e27 --shards 1

``asking``: of the asked values, the share of (value, phrasing) pairs whose phrasing asks for it (a task in another
phrasing does not require it). ``--before REV``: the git revision whose specs count as "before" (its say values, all then required). The task
share runs the code on the path, so run the script once with an older checkout first on PYTHONPATH to measure
that code's share. Per domain, ``--shards`` shards of seed 0 are generated (a default-size snapshot is about 7).
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

import yaml

from domains.registry import DOMAIN_NAMES, get_spec
from domains.spec import DomainSpec
from synthesis.generate import ShardConfig, generate_shard

ROOT = Path(__file__).resolve().parent.parent
WHY = "tell_why_stopped"


def say_counts(spec: DomainSpec) -> dict[str, int]:
    """Say values of a built spec: asked (a plain value), told by a domain tell rule, told as why a request stopped;
    and, of the asked values, the (value, phrasing) pairs (``pairs``) and those whose phrasing asks (``asking``)."""
    out = {"total": 0, "asked": 0, "told": 0, "why": 0, "pairs": 0, "asking": 0}
    for intent in spec.intents:
        for outcome in intent.outcomes:
            for value in outcome.say:
                out["total"] += 1
                rule = (outcome.told_by or {}).get(value)
                out["asked" if rule is None else "why" if rule == WHY else "told"] += 1
                if rule is None:  # the test generation applies (Intent.asked_in)
                    out["pairs"] += len(intent.phrasings)
                    out["asking"] += sum(intent.asked_in(value, p) for p in intent.phrasings)
    return out


def say_total_at(domain: str, rev: str) -> int:
    """How many say values the spec held at git revision ``rev`` (read raw: older specs predate today's loader)."""
    path = f"domains/{domain}/{domain}.yaml"
    text = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True)
    raw = yaml.safe_load(text.stdout)
    return sum(len(o.get("say", ())) for i in raw.get("intents") or () for o in i["outcomes"].values())


def task_share(domain: str, shards: int) -> tuple[int, int, int]:
    """Accepted tasks of ``shards`` seed-0 shards: (tasks, tasks with a value to tell, values to tell)."""
    tasks = telling = values = 0
    for shard in range(shards):
        for rec in generate_shard(ShardConfig(domain, 0, shard))["records"]:
            if rec["accepted"]:
                tasks += 1
                telling += bool(rec["communicate_info"])
                values += len(rec["communicate_info"])
    return tasks, telling, values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="git revision of the 'before' specs (default: no before column)")
    parser.add_argument("--shards", type=int, default=1, help="shards of seed 0 per domain (0: no task share)")
    parser.add_argument("--domains", nargs="+", default=list(DOMAIN_NAMES))
    args = parser.parse_args()
    head = f"{'domain':<14}{'before':>7}{'now':>6}{'asked':>7}{'asking':>8}{'told':>6}{'why':>6}{'dropped':>9}"
    if args.shards:
        head += f"{'tasks':>7}{'telling':>9}{'share':>8}{'values/task':>13}"
    print(head)
    sums: dict[str, float] = {}
    for domain in args.domains:
        now = say_counts(get_spec(domain))
        before = say_total_at(domain, args.before) if args.before else None
        row = {"before": before or 0, **now, "dropped": (before - now["total"]) if before is not None else 0}
        line = (f"{domain:<14}{before if before is not None else '-':>7}{now['total']:>6}{now['asked']:>7}"
                f"{now['asking'] / max(now['pairs'], 1):>8.0%}{now['told']:>6}{now['why']:>6}{row['dropped'] if before is not None else '-':>9}")
        if args.shards:
            tasks, telling, values = task_share(domain, args.shards)
            row |= {"tasks": tasks, "telling": telling, "values": values}
            line += f"{tasks:>7}{telling:>9}{telling / max(tasks, 1):>8.1%}{values / max(tasks, 1):>13.2f}"
        for key, value in row.items():
            sums[key] = sums.get(key, 0) + value
        print(line, flush=True)
    line = (f"{'all':<14}{int(sums['before']) if args.before else '-':>7}{int(sums['total']):>6}{int(sums['asked']):>7}"
            f"{sums['asking'] / max(sums['pairs'], 1):>8.0%}{int(sums['told']):>6}{int(sums['why']):>6}{int(sums['dropped']) if args.before else '-':>9}")
    if args.shards:
        line += (f"{int(sums['tasks']):>7}{int(sums['telling']):>9}{sums['telling'] / max(sums['tasks'], 1):>8.1%}"
                 f"{sums['values'] / max(sums['tasks'], 1):>13.2f}")
    print(line)


if __name__ == "__main__":
    main()
