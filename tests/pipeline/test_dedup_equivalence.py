"""Dedup embeds only tasks that share their gold calls with an unrelated task; what it rejects must be exactly
what the full computation rejects: every accepted task embedded, every earlier kept task of its domain compared."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.regenerate import RegenerateConfig, initial_plan, load_records, run_local
from synthesis.dedup import _lineage, _wording, dedup, embed_minilm, exact_key

THRESHOLD = 0.9


def full_dedup(records: list[dict[str, Any]], threshold: float) -> dict[str, str]:
    """The definition, with nothing skipped: task id -> reason for every rejected accepted record."""
    accepted = [r for r in records if r["accepted"]]
    vectors = embed_minilm([_wording(r) for r in accepted])  # all of them
    parents = {r["task_id"]: r["evolved_from"] for r in records}
    rejected: dict[str, str] = {}
    seen: set[str] = set()
    kept: list[tuple[dict[str, Any], np.ndarray]] = []
    for rec, vec in zip(accepted, vectors):
        key = exact_key(rec)
        if key in seen:
            rejected[rec["task_id"]] = "exact_duplicate"
            continue
        seen.add(key)
        family = _lineage(rec["task_id"], parents)
        if any(other["domain"] == rec["domain"] and other["canonical_gold"] == rec["canonical_gold"]
               and float(vec @ other_vec) >= threshold and not family & _lineage(other["task_id"], parents)
               for other, other_vec in kept):
            rejected[rec["task_id"]] = "near_duplicate"
            continue
        kept.append((rec, vec))
    return rejected


def test_dedup_rejects_exactly_what_the_full_pairwise_computation_rejects(tmp_path: Path) -> None:
    # restaurant and education have the largest groups of tasks with the same gold calls
    cfg = RegenerateConfig(domains=["restaurant", "education"], tasks_per_domain=150, workers=1,
                           warehouse=str(tmp_path / "wh.duckdb"), work_dir=str(tmp_path / "work"))
    shards = initial_plan(cfg)
    list(run_local(cfg, shards))
    records = load_records(cfg, shards)
    accepted_before = sum(r["accepted"] for r in records)
    assert accepted_before >= 250  # a few hundred tasks

    expected = full_dedup(copy.deepcopy(records), THRESHOLD)
    counts = dedup(records, THRESHOLD)
    got = {r["task_id"]: r["reason"] for r in records
           if r["reason"] in ("exact_duplicate", "near_duplicate") and r["reason_detail"].startswith(r["reason"])}
    assert counts["near_duplicate"] > 0  # the comparison is not vacuous
    assert got == expected
    assert counts["compared"] < accepted_before  # and it embedded fewer tasks than the full computation
