"""Dedup embeds only tasks that share their gold calls with a task of another lineage and compares lineages by
their roots; what it rejects must be exactly what the definition rejects with nothing skipped (every accepted
task embedded, every earlier kept task of its domain compared). ``bench/dedup_exactness.py`` checks the same on
a 20,000-task sample."""

from __future__ import annotations

import copy
from pathlib import Path

from pipeline.regenerate import RegenerateConfig, initial_plan, load_records, run_local
from synthesis.dedup import Dedup, dedup, pairwise_dedup

THRESHOLD = 0.9


def test_dedup_rejects_exactly_what_the_full_pairwise_computation_rejects(tmp_path: Path) -> None:
    # restaurant and education have the largest groups of tasks with the same gold calls
    cfg = RegenerateConfig(domains=["restaurant", "education"], tasks_per_domain=150, workers=1,
                           warehouse=str(tmp_path / "wh.duckdb"), work_dir=str(tmp_path / "work"))
    shards = initial_plan(cfg)
    list(run_local(cfg, shards))
    records = load_records(cfg, shards)
    accepted_before = sum(r["accepted"] for r in records)
    assert accepted_before >= 250  # a few hundred tasks

    expected = pairwise_dedup(copy.deepcopy(records), THRESHOLD)
    in_rounds = copy.deepcopy(records)
    counts = dedup(records, THRESHOLD)
    got = {r["candidate_id"]: r["reason"] for r in records
           if r["reason"] in ("exact_duplicate", "near_duplicate") and r["reason_detail"].startswith(r["reason"])}
    assert counts["near_duplicate"] > 0  # the comparison is not vacuous
    assert got == expected
    assert counts["compared"] < accepted_before  # and it embedded fewer tasks than the full computation

    # in rounds, as a regeneration with top-ups runs it (each round: later shards of each domain), the same
    rounds = Dedup(THRESHOLD)
    for first, last in ((0, 1), (1, 3), (3, 99)):
        part = [r for r in in_rounds if first <= int(r["candidate_id"].split("-")[2]) < last]
        assert part
        so_far = rounds.add(part)
    assert so_far == counts
    assert [(r["accepted"], r["reason"], r["reason_detail"]) for r in in_rounds] == \
        [(r["accepted"], r["reason"], r["reason_detail"]) for r in records]


def test_lineage_by_root_matches_lineage_by_sets() -> None:
    """Two tasks share an ancestor exactly when they share a root, through chains of evolution."""
    from synthesis.dedup import _lineage, _roots

    parents = {"a": None, "a1": "a", "a11": "a1", "a2": "a", "b": None, "b1": "b", "orphan": "gone"}
    records = [{"task_id": t, "evolved_from": p} for t, p in parents.items()]
    roots = _roots(records)
    for x in parents:
        for y in parents:
            assert (roots[x] == roots[y]) == bool(_lineage(x, parents) & _lineage(y, parents)), (x, y)
