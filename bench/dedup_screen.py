"""The near-duplicate screen, measured: one run's records deduped with fp32 MiniLM alone and with the bf16 screen.

    python bench/dedup_screen.py --work-dir W [--domains ...] [--tasks-per-domain N]

Generates (or resumes) the shards of that regeneration config under ``W``, then dedups the same records twice, each
pass in a fresh process state (no embeddings memoised): fp32 for every colliding task (the definition), and the
default two-pass way (bf16 screen, fp32 only for the pairs the screen leaves inside its band). Prints both wall and
CPU times, how many tasks each embedded in fp32, whether every decision and reason kind is the same (it must be),
how many reasons name the screen's cosine, and whether each of those names a partner that is a duplicate by fp32's
cosine (it must be).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.regenerate import RegenerateConfig, _canonical, initial_plan, load_records, run_local  # noqa: E402
from synthesis import dedup as d  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--domains", nargs="+")
    parser.add_argument("--tasks-per-domain", type=int)
    parser.add_argument("--threshold", type=float, default=RegenerateConfig.near_dup_threshold)
    args = parser.parse_args(argv)
    cfg = RegenerateConfig(work_dir=args.work_dir, warehouse=str(Path(args.work_dir) / "unused.duckdb"),
                           **({"domains": args.domains} if args.domains else {}),
                           **({"tasks_per_domain": args.tasks_per_domain} if args.tasks_per_domain else {}))
    shards = initial_plan(cfg)
    list(run_local(cfg, shards))  # resumes from the shard files when they exist
    records = [r for s in _canonical(shards) for r in load_records(cfg, [s])]
    d.minilm()  # loaded once, outside both timings
    d.screen_minilm(["warm-up"]), d.embed_minilm(["warm-up"])
    outcomes, fp32 = {}, {}
    for name, make in (("fp32 only", lambda: d.Dedup(args.threshold, d.embed_minilm)),
                       ("bf16 screen", lambda: d.Dedup(args.threshold))):
        d._embedded.clear(), d._screened.clear()
        recs = copy.deepcopy(records)
        deduper = make()
        wall, cpu = time.perf_counter(), time.process_time()
        counts = deduper.add(recs)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        exact = deduper.screening["embedded_exact"] if deduper.screen else counts["compared"]
        outcomes[name] = recs
        fp32 = fp32 or dict(d._embedded)  # every colliding task's fp32 vector, from the first pass
        print(f"{name:<12} {wall:6.2f} s wall {cpu:6.2f} CPU-s  compared {counts['compared']}, embedded in fp32 "
              f"{exact}, near duplicates {counts['near_duplicate']}, fallbacks "
              f"{deduper.screening['screen_fallbacks']}")
    want, got = outcomes["fp32 only"], outcomes["bf16 screen"]
    same = [(r["accepted"], r["reason"]) for r in want] == [(r["accepted"], r["reason"]) for r in got]
    kept = {r["task_id"]: d._wording(r) for r in got if r["accepted"]}
    by_screen = [r for r in got if "(bf16 screen)" in r["reason_detail"]]
    true_partners = sum(float(fp32[d._wording(r)] @ fp32[kept[r["reason_detail"].split(" to ")[1].split()[0]]])
                        >= args.threshold for r in by_screen)
    print(f"{len(records)} records: decisions and reasons {'identical' if same else 'DIFFERENT'}; "
          f"{len(by_screen)} reasons name the screen's cosine, {true_partners} of them a partner within the "
          f"threshold in fp32")
    return 0 if same and true_partners == len(by_screen) else 1


if __name__ == "__main__":
    raise SystemExit(main())
