"""The bf16 screen in near-duplicate detection settles only pairs more than ``SCREEN_MARGIN`` from the threshold:
every decision is the fp32 embedding's, and a reason names an fp32 cosine or says it is the screen's. Cosines are set
by hand here (``embed`` and ``screen`` map each text to a unit vector), so the screen's error can be placed just where
it would change a decision; the real MiniLM pair of embedders is checked against the full pairwise definition in
tests/pipeline/test_dedup_equivalence.py."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from synthesis.dedup import SCREEN_MARGIN, Dedup

THRESHOLD = 0.9


def _rec(task_id: str, gold: str, request: str) -> dict[str, Any]:
    return {"task_id": task_id, "domain": "weather", "canonical_gold": gold, "instruction": f"{request} ({task_id})",
            "request": request, "accepted": True, "reason": "ok", "reason_detail": "ok", "evolved_from": None}


def _vectors(cosines: dict[str, float]) -> dict[str, np.ndarray]:
    """``base`` is e0; every other text is at its given cosine to e0, on an axis of its own (so two non-base texts
    have cosine c1*c2 to each other)."""
    dim = len(cosines) + 1
    out = {"base": np.eye(dim, dtype="float32")[0]}
    for k, (text, c) in enumerate(cosines.items(), start=1):
        v = np.zeros(dim, dtype="float32")
        v[0], v[k] = c, math.sqrt(1 - c * c)
        out[text] = v
    return out


def _embedder(table: dict[str, np.ndarray], calls: list[int]) -> Any:
    def embed(texts: Sequence[str]) -> np.ndarray:
        calls.append(len(texts))
        return np.stack([table[t] for t in texts])
    return embed


RECORDS = [_rec("t0", "G1", "base"), _rec("t1", "G1", "just over"), _rec("t2", "G1", "far"),
           _rec("t3", "G1", "near miss"), _rec("t4", "G2", "base"), _rec("t5", "G2", "far too")]
EXACT = {"just over": 0.902, "far": 0.30, "near miss": 0.899, "far too": 0.20}


def _run(screen_cosines: dict[str, float] | None) -> tuple[list[tuple[Any, ...]], Dedup, list[int]]:
    calls: list[int] = []
    records = copy.deepcopy(RECORDS)
    screen = None if screen_cosines is None else _embedder(_vectors(screen_cosines), [])
    deduper = Dedup(THRESHOLD, _embedder(_vectors(EXACT), calls), screen)
    deduper.add(records)
    return [(r["accepted"], r["reason"], r["reason_detail"]) for r in records], deduper, calls


def test_the_screen_rules_out_far_pairs_and_fp32_decides_the_rest() -> None:
    exact, _, exact_calls = _run(None)
    assert exact[1][1] == "near_duplicate" and "cosine 0.902 to t0" in exact[1][2]
    assert exact[3][0] and exact[2][0] and exact[5][0]  # 0.899 is not a duplicate
    # the screen is off by 0.005 (under half the margin): it puts "just over" below the threshold and "near miss"
    # above it, yet the decisions and the named cosine are fp32's
    screened, deduper, calls = _run({"just over": 0.897, "far": 0.305, "near miss": 0.904, "far too": 0.195})
    assert screened == exact
    # only the texts in a pair the screen could not rule out were embedded in fp32: base, just over, near miss
    assert sum(calls) == deduper.screening["embedded_exact"] == 3 < sum(exact_calls) == 6
    assert deduper.screening["screen_fallbacks"] == 0


def test_a_pair_above_the_band_is_decided_by_the_screen_and_its_reason_says_so() -> None:
    exact_only, _, _ = _run(None)
    records = copy.deepcopy(RECORDS) + [_rec("t6", "G1", "very close")]
    table = {**EXACT, "very close": 0.948}
    outcomes = []
    for screen in (None, {"just over": 0.897, "far": 0.305, "near miss": 0.904, "far too": 0.195,
                          "very close": 0.951}):
        calls: list[int] = []
        recs = copy.deepcopy(records)
        deduper = Dedup(THRESHOLD, _embedder(_vectors(table), calls),
                        None if screen is None else _embedder(_vectors(screen), []))
        deduper.add(recs)
        outcomes.append((recs, sum(calls)))
    (fp32, fp32_calls), (screened, screened_calls) = outcomes
    assert [r["accepted"] for r in screened] == [r["accepted"] for r in fp32]
    assert [(r["reason"], r["reason_detail"]) for r in screened[:6]] == [(r[1], r[2]) for r in exact_only]
    assert fp32[6]["reason_detail"] == "near_duplicate: cosine 0.948 to t0 with the same gold calls"
    assert screened[6]["reason_detail"] == "near_duplicate: cosine 0.951 (bf16 screen) to t0 with the same gold calls"
    # "very close" is above the band with base and far from the rest: it was never embedded in fp32
    assert screened_calls == 3 < fp32_calls == 7


def test_a_band_pair_that_could_beat_the_best_pair_above_the_band_is_decided_in_fp32() -> None:
    """The task "base" has two kept partners: one just inside the band (screen 0.919, fp32 0.925) and one just above
    it (screen 0.921, fp32 0.918). The most similar is named, so fp32 must look at the band pair: it wins."""
    records = [_rec("t0", "G1", "band one"), _rec("t1", "G1", "above one"), _rec("t2", "G1", "base")]
    named = []
    for screen in (None, {"band one": 0.919, "above one": 0.921}):
        recs = copy.deepcopy(records)
        calls: list[int] = []
        Dedup(THRESHOLD, _embedder(_vectors({"band one": 0.925, "above one": 0.918}), calls),
              None if screen is None else _embedder(_vectors(screen), [])).add(recs)
        named.append([r["reason_detail"] for r in recs])
    assert named[0] == named[1] == ["ok", "ok", "near_duplicate: cosine 0.925 to t0 with the same gold calls"]


def test_a_screen_that_errs_by_more_than_half_the_margin_leaves_the_group_to_fp32() -> None:
    exact, _, _ = _run(None)
    off = SCREEN_MARGIN  # "near miss" at 0.899 + 0.02 in the screen: caught when its fp32 cosine is computed
    screened, deduper, _ = _run({"just over": 0.902, "far": 0.30, "near miss": 0.899 + off, "far too": 0.20})
    assert screened == exact
    assert deduper.screening["screen_fallbacks"] == 1


def test_random_groups_in_random_rounds_decide_as_fp32_alone() -> None:
    """300 random cases: up to 24 tasks around 3 wordings, two golds, random parents, fed in 1-3 rounds (a run with
    top-ups); the screen errs by about 0.002, as bf16 MiniLM does. Screened or not, every flag and reason kind is
    equal; a reason is the same or names the screen's cosine, above the band, and a partner that is a duplicate by
    fp32's cosine; and screened in rounds or in one, every reason is the same."""
    rng = np.random.default_rng(0)
    by_screen = 0
    for _ in range(300):
        n, dim = int(rng.integers(2, 25)), 6
        centres = rng.normal(size=(3, dim))
        exact, screen = {}, {}
        for i in range(n):
            v = centres[rng.integers(3)] + rng.normal(scale=rng.choice([0.05, 0.2, 0.4]), size=dim)
            exact[f"w{i}"] = (v / np.linalg.norm(v)).astype("float32")
            s = exact[f"w{i}"] + rng.normal(scale=0.002, size=dim)
            screen[f"w{i}"] = (s / np.linalg.norm(s)).astype("float32")
        records = [{**_rec(f"t{i}", f"G{rng.integers(2)}", f"w{i}"),
                    "evolved_from": f"t{rng.integers(i)}" if i and rng.random() < 0.3 else None} for i in range(n)]
        cuts = sorted({0, n, *(int(c) for c in rng.integers(1, n, size=rng.integers(0, 3)))})
        outcomes = []
        for screened, rounds in ((None, cuts), (screen, cuts), (screen, [0, n])):
            recs = copy.deepcopy(records)
            deduper = Dedup(0.95, _embedder(exact, []), None if screened is None else _embedder(screened, []))
            for first, last in zip(rounds, rounds[1:]):
                deduper.add(recs[first:last])
            outcomes.append(recs)
        fp32, screened, at_once = outcomes
        # screened in rounds or at once: the same reasons, to the letter (which cosine a pair is decided on
        # depends on the pair alone)
        assert [(r["accepted"], r["reason_detail"]) for r in screened] == \
            [(r["accepted"], r["reason_detail"]) for r in at_once]
        assert [(r["accepted"], r["reason"]) for r in fp32] == [(r["accepted"], r["reason"]) for r in screened]
        for want, got in zip(fp32, screened):
            if got["reason_detail"] == want["reason_detail"]:
                continue
            by_screen += 1
            cosine, partner = re.fullmatch(r"near_duplicate: cosine (\S+) \(bf16 screen\) to (\S+) with the same "
                                           r"gold calls", got["reason_detail"]).groups()
            assert float(cosine) >= 0.95 + SCREEN_MARGIN - 0.0005  # printed to 3 places
            assert float(exact[want["request"]] @ exact[f"w{partner[1:]}"]) >= 0.95
    assert by_screen > 0  # the screen decided some pairs on its own
