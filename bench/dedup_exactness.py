"""Near-duplicate detection against its definition on a large sample: what ``synthesis.dedup.dedup`` rejects
(embedding only tasks that can collide, lineages by root, one matrix product per group) against
``pairwise_dedup`` (every accepted task embedded and compared with every earlier kept task of its database).

    python bench/dedup_exactness.py [--tasks-per-domain 2000] [--work-dir /tmp/toolscale-bench/work]

Runs (or resumes, from the shard files under the work dir) the shards of a regeneration of that size, then
prints both results' counts, the records on which they differ (0 when exact; compared by candidate id, since
two candidates may carry one task id), the tasks each embedded and the
seconds each took (dedup's seconds include encoding only with ``--time-both``; by default it reuses the
embeddings the pairwise pass made, which MiniLM on two busy cores makes at 30-75 texts a second). With ``bench/regenerate.py --keep DIR`` the 20,000 size's shards are reused
(``--work-dir DIR/20000/work``). Not a test: ``tests/pipeline/test_dedup_equivalence.py`` is, on a smaller sample.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.regenerate import RegenerateConfig, initial_plan, load_records, run_local  # noqa: E402
from synthesis.dedup import Dedup, embed_minilm, pairwise_dedup  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks-per-domain", type=int, default=2000)
    parser.add_argument("--work-dir", default="/tmp/toolscale-bench/work")
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--time-both", action="store_true",
                        help="encode again for dedup (its own seconds); by default it reuses the embeddings")
    args = parser.parse_args()
    cfg = RegenerateConfig(tasks_per_domain=args.tasks_per_domain, work_dir=args.work_dir,
                           near_dup_threshold=args.threshold)
    shards = initial_plan(cfg)
    list(run_local(cfg, shards))  # resumes finished shards from their files
    records = load_records(cfg, shards)
    accepted = sum(r["accepted"] for r in records)

    started = time.perf_counter()
    full = pairwise_dedup(copy.deepcopy(records), args.threshold)
    full_s = time.perf_counter() - started
    if args.time_both:
        embed_minilm.__globals__["_embedded"].clear()  # the fast path pays for its own embeddings
    started = time.perf_counter()
    deduper = Dedup(args.threshold)  # as a regeneration runs it: the bf16 screen, then fp32 where it cannot rule out
    counts = deduper.add(records)
    fast_s = time.perf_counter() - started
    fast = {r["candidate_id"]: r["reason"] for r in records
            if r["reason"] in ("exact_duplicate", "near_duplicate") and r["reason_detail"].startswith(r["reason"])}
    differ = sorted(set(full.items()) ^ set(fast.items()))
    report = {"bench": "dedup_exactness", "accepted_before": accepted, "threshold": args.threshold,
              "pairwise": {"exact_duplicate": sum(v == "exact_duplicate" for v in full.values()),
                           "near_duplicate": sum(v == "near_duplicate" for v in full.values()),
                           "embedded": accepted, "seconds": round(full_s, 1)},
              "dedup": {**counts, "screened": counts["compared"], "embedded": deduper.screening["embedded_exact"],
                        "screen_fallbacks": deduper.screening["screen_fallbacks"], "seconds": round(fast_s, 1)},
              "differing_records": len(differ), "examples": differ[:5]}
    print(f"{accepted} accepted tasks: pairwise rejects {report['pairwise']['exact_duplicate']} exact + "
          f"{report['pairwise']['near_duplicate']} near ({accepted} embedded, {full_s:.1f}s); dedup rejects "
          f"{counts['exact_duplicate']} + {counts['near_duplicate']} ({counts['compared']} screened in bf16, "
          f"{deduper.screening['embedded_exact']} embedded in fp32, {fast_s:.1f}s); "
          f"{len(differ)} records differ")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
