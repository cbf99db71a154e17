"""How many tasks use a value the agent cannot know, per domain, and what the derivability check costs.

    PYTHONPATH=$PWD .venv/bin/python bench/derivability.py --shards 2 [--mode report|reject] [--domains travel ...]

``--mode report`` (the default) samples and admits as if the check did not exist (planning does not skip, admission
does not reject) and counts the accepted tasks that have a value without a source: the figure before any spec fix.
``--mode reject`` is the shipped behaviour. Time is measured around derivation and around the rest of admission
(gold replay, no-action and mutation checks, realism figures), in the same run.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from domains.registry import DOMAIN_NAMES
from synthesis import generate

SPENT: Counter[str] = Counter()


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[name] += time.perf_counter() - started
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=2, help="shards per domain (24 base candidates each)")
    parser.add_argument("--mode", choices=("report", "reject"), default="report")
    parser.add_argument("--domains", nargs="*", default=list(DOMAIN_NAMES))
    args = parser.parse_args()
    generate.derivation_of = _timed("derivability", generate.derivation_of)  # type: ignore[assignment]
    generate.check_task = _timed("verification", generate.check_task)  # type: ignore[assignment]
    generate.task_figures = _timed("realism", generate.task_figures)  # type: ignore[assignment]
    total_tasks = 0
    print(f"{'domain':<14}{'candidates':>11}{'accepted':>10}{'underivable':>13}{'in_args':>9}  most common unsourced value")
    for domain in args.domains:
        records: list[dict[str, Any]] = []
        for shard in range(args.shards):
            cfg = generate.ShardConfig(domain, 0, shard, base_candidates=24, derivability=args.mode)
            records += generate.generate_shard(cfg)["records"]
        accepted = [r for r in records if r["accepted"]]
        underivable = [r for r in accepted if r["underivable"]]
        in_args = sum(any(m.startswith("call ") for m in r["underivable"]) for r in underivable)
        where = Counter(m.split(" = ")[0] for r in underivable for m in r["underivable"])
        top = where.most_common(1)[0][0] if where else ""
        rejected = sum(r["reason"] == "underivable_argument" for r in records)
        total_tasks += len(records)
        print(f"{domain:<14}{len(records):>11}{len(accepted):>10}{len(underivable):>13}{in_args:>9}  {top}"
              + (f"  (rejected: {rejected})" if rejected else ""))
    rest = SPENT["verification"] + SPENT["realism"]
    print(f"\nderivability {SPENT['derivability']:.2f} s over {total_tasks} candidates "
          f"({1000 * SPENT['derivability'] / max(total_tasks, 1):.2f} ms each); rest of admission {rest:.2f} s; "
          f"ratio {SPENT['derivability'] / rest:.3f}" if rest else "")


if __name__ == "__main__":
    main()
