"""The forbidden-request share after dedup (pipeline/balance.py): a domain whose share the quality gate would refuse
loses just enough of its forbidden-request tasks, deepest and latest first; every other domain is left as it was."""

from __future__ import annotations

import copy
from typing import Any

from pipeline.balance import trim_forbidden
from warehouse.quality import wilson_bounds


def _records(domain: str, plain: int, forbidden: int, depth_of: Any = lambda i: i % 3) -> list[dict[str, Any]]:
    out = []
    for i in range(plain + forbidden):
        out.append({"domain": domain, "accepted": True, "reason": "ok", "depth": depth_of(i), "task_id": f"{domain}-{i}",
                    "realism": {"forbidden": i >= plain}})
    return out


def _share(records: list[dict[str, Any]], domain: str) -> tuple[int, int]:
    kept = [r for r in records if r["domain"] == domain and r["accepted"]]
    return sum(r["realism"]["forbidden"] for r in kept), len(kept)


def test_a_share_the_gate_refuses_is_brought_to_its_ceiling() -> None:
    records = _records("telecom", 170, 120)  # 41%, as telecom published before the trim
    assert trim_forbidden(records) == {"telecom": 48}
    f, n = _share(records, "telecom")
    assert (f, n) == (72, 242) and f / n <= 0.30 and wilson_bounds(f / n, n)[0] <= 0.30
    assert f / n > 0.29  # no more left out than the ceiling needs
    dropped = [r for r in records if not r["accepted"]]
    assert all(r["reason"] == "forbidden_share" and r["realism"]["forbidden"] for r in dropped)
    assert "120 of 290" in dropped[0]["reason_detail"]
    # deepest first, then latest: a kept task's parent (shallower, earlier) is never the one left out
    kept_forbidden = [r for r in records if r["accepted"] and r["realism"]["forbidden"]]
    assert min(r["depth"] for r in dropped) >= max(r["depth"] for r in kept_forbidden)


def test_a_share_the_gate_accepts_and_a_small_sample_are_left_as_they_were() -> None:
    passing = _records("finance", 700, 300)  # 30%: the gate's lower bound is under its ceiling
    small = _records("weather", 50, 40)  # 44% of 90 tasks: below the sample the gate judges shares on
    records = passing + small + [{"domain": "retail", "accepted": True, "reason": "ok", "depth": 0}]  # no figures
    before = copy.deepcopy(records)
    assert trim_forbidden(records) == {}
    assert records == before


def test_the_same_records_give_the_same_trim() -> None:
    first, second = _records("telecom", 150, 100), _records("telecom", 150, 100)
    trim_forbidden(first)
    trim_forbidden(second)
    assert [r["accepted"] for r in first] == [r["accepted"] for r in second]


def test_a_run_tops_up_a_domain_the_trim_would_bring_below_its_requested_count() -> None:
    # 100,000 tasks failed the gate's domain counts in 6 domains: dedup left each domain its requested number, then
    # the trim took some away; the shortfall a regeneration tops up from counts the trim before it happens
    from pipeline.regenerate import RegenerateConfig, shortfall

    records = _records("finance", 170, 120) + _records("weather", 290, 10)
    before = copy.deepcopy(records)
    cfg = RegenerateConfig(domains=["finance", "weather"], tasks_per_domain=280)
    assert shortfall(cfg, records) == {"finance": 280 - (290 - 48)}
    assert records == before  # counting the trim does not trim
    assert trim_forbidden(records, apply=False) == trim_forbidden(copy.deepcopy(records)) == {"finance": 48}


def test_a_top_up_is_sized_by_the_yield_of_the_domains_latest_shards() -> None:
    # later shards lose more to near duplicates of earlier ones: sized by the average yield (8 a shard here), a
    # top-up falls short again and again; by the latest quarter's (2 a shard) it plans what is missing
    from pipeline.regenerate import RegenerateConfig, top_up_plan

    cfg = RegenerateConfig(domains=["weather"], tasks_per_domain=84)
    shards = [cfg.shard("weather", i) for i in range(8)]
    records = []
    for shard in shards:
        yield_ = 10 if shard.shard < 6 else 2
        records += [{"domain": "weather", "accepted": i < yield_, "shard_id": shard.shard_id, "realism": None}
                    for i in range(12)]
    plan = top_up_plan(cfg, shards, {"weather": 20}, records)
    assert [s.shard for s in plan] == list(range(8, 8 + 11))  # ceil(20 * 1.1 / 2): a margin of 10%
