"""Preference pairs: a full seeded run of 1,000 pairs is consistent, deterministic, split by family and template,
priced by the right schedules, and stored whole in a real DuckDB warehouse; the checks catch broken pairs."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import duckdb
import jsonschema
import pytest

from inference.pricing import HELDOUT_NAME
from synthesis.preferences.build import (PAIR_SCHEMA, PreferenceConfig, PreferenceRun, build_and_store,
                                         build_preference_pairs)
from synthesis.preferences.catalog import load_catalog, mentioned_tools
from synthesis.preferences.check import check_pair
from synthesis.preferences.families import COMPONENTS, EVAL_FAMILIES, TRAIN_FAMILIES
from synthesis.preferences.pair import PreferencePair
from warehouse.pricing_store import atomic_edit, read_pairs


@pytest.fixture(scope="module")
def run() -> PreferenceRun:
    return build_preference_pairs(PreferenceConfig(count=1000, seed=0))


def _schedule(run: PreferenceRun, pair: PreferencePair):  # noqa: ANN202 - a PricingSchedule
    return next(s for s in run.schedules.all if s.schedule_id == pair.schedule_id)


def test_a_full_run_has_1000_pairs_and_none_inconsistent(run: PreferenceRun) -> None:
    assert len(run.pairs) == 1000 and len({p.pair_id for p in run.pairs}) == 1000
    assert run.summary()["inconsistent"] == 0 and set(run.dropped) <= {"duplicate"}
    problems = {p.pair_id: check_pair(p, _schedule(run, p)) for p in run.pairs}
    assert not any(problems.values()), [v for v in problems.values() if v][:3]
    validator = jsonschema.Draft202012Validator(json.loads(PAIR_SCHEMA.read_text()))
    assert all(validator.is_valid(p.record()) for p in run.pairs)
    families = Counter(p.family for p in run.pairs)
    assert set(families) == set(TRAIN_FAMILIES) | set(EVAL_FAMILIES)
    assert {c for p in run.pairs for c in p.components} == set(COMPONENTS)
    assert min(families.values()) >= 50
    assert all(len(p.vector) == len(p.tools) + 3 and all(0 <= v <= 1 for v in p.vector) for p in run.pairs)


def test_pairs_follow_their_family(run: PreferenceRun) -> None:
    local = {t.name for t in load_catalog() if t.runs_locally}
    for p in run.pairs:
        prefs = dict(zip(p.tools, p.tool_prefs))
        if "avoid_tools" in p.components:
            assert p.avoid and all(prefs[t] == 0.0 for t in p.avoid)
        if "prefer_tools" in p.components:
            assert p.prefer and all(prefs[t] == 1.0 for t in p.prefer)
        if "local_only" in p.components:
            assert all(v == 0.0 for t, v in prefs.items() if t not in local)
            assert any(v > 0 for t, v in prefs.items() if t in local)
        if "tight_budget" in p.components:
            assert p.p_cost >= 0.8
        if "fast_answers" in p.components:
            assert p.p_latency >= 0.8
        if "accuracy_first" in p.components:
            assert p.p_accuracy == 1.0 and p.p_cost <= 0.2 and p.p_latency <= 0.2


def test_train_and_eval_are_disjoint_by_family_template_and_schedule(run: PreferenceRun) -> None:
    by_split = {s: [p for p in run.pairs if p.split == s] for s in ("train", "eval")}
    assert len(by_split["train"]) == 800 and len(by_split["eval"]) == 200
    families = {s: {p.family for p in ps} for s, ps in by_split.items()}
    templates = {s: {t for p in ps for t in p.template_ids} for s, ps in by_split.items()}
    assert families["train"].isdisjoint(families["eval"])
    assert templates["train"].isdisjoint(templates["eval"])
    heldout = {s.schedule_id for s in run.schedules.heldout}
    assert {p.schedule_id for p in by_split["eval"]} == heldout
    assert not {p.schedule_id for p in by_split["train"]} & heldout
    assert len({p.schedule_id for p in by_split["train"]}) == 10
    assert all(p.schedule_synthetic and p.schedule_id.startswith("synthetic-") for p in run.pairs)
    assert next(iter(heldout)).startswith(HELDOUT_NAME)


def test_a_run_is_deterministic_for_a_seed(run: PreferenceRun) -> None:
    again = build_preference_pairs(PreferenceConfig(count=1000, seed=0))
    assert again.run_id == run.run_id and [p.pair_id for p in again.pairs] == [p.pair_id for p in run.pairs]
    other = build_preference_pairs(PreferenceConfig(count=1000, seed=1))
    assert other.run_id != run.run_id and len({p.pair_id for p in other.pairs} & {p.pair_id for p in run.pairs}) < 50


def _first(run: PreferenceRun, component: str) -> PreferencePair:
    return next(p for p in run.pairs if p.components == (component,))


def _with_pref(pair: PreferencePair, tool: str, value: float) -> PreferencePair:
    return replace(pair, tool_prefs=tuple(value if t == tool else v for t, v in zip(pair.tools, pair.tool_prefs)))


def test_the_rule_checks_catch_broken_pairs(run: PreferenceRun) -> None:
    local = {t.name for t in load_catalog() if t.runs_locally}
    avoid, local_only = _first(run, "avoid_tools"), _first(run, "local_only")
    budget, accuracy, prefer = _first(run, "tight_budget"), _first(run, "accuracy_first"), _first(run, "prefer_tools")
    off_site = next(t for t in local_only.tools if t not in local)
    neutral = next(t for t in avoid.tools if t not in avoid.avoid)
    broken = {  # what is wrong -> (pair, words the problem must use)
        "avoided tool allowed": (_with_pref(avoid, avoid.avoid[0], 0.5), "asked to avoid"),
        "off-site tool under local only": (_with_pref(local_only, off_site, 0.5), "does not run locally"),
        "unmentioned tool forbidden": (_with_pref(avoid, neutral, 0.0), "nothing was said about"),
        "preferred tool only neutral": (_with_pref(prefer, prefer.prefer[0], 0.5), "asked to prefer"),
        "budget without cost weight": (replace(budget, p_cost=0.3), "tight budget needs"),
        "accuracy first but cost matters": (replace(accuracy, p_cost=0.9), "accuracy first needs"),
        "speed weight nobody asked for": (replace(budget, p_latency=0.9), "speed was not mentioned"),
        "named tool missing from the text": (replace(avoid, instruction="Please don't use anything odd."),
                                             "the instruction names"),
        "text names another tool": (replace(local_only, instruction=local_only.instruction + " Not GPT-5 mini."),
                                    "the instruction names ['gpt-5-mini']"),
        "vector too short": (replace(avoid, tool_prefs=avoid.tool_prefs[:-1]), "entries for"),
        "out of range": (_with_pref(avoid, neutral, 1.5), "outside [0, 1]"),
        "unknown tool": (replace(avoid, tools=(*avoid.tools[:-1], "made-up-model")), "not in the catalog"),
    }
    for what, (pair, words) in broken.items():
        problems = check_pair(pair, _schedule(run, pair))
        assert any(words in problem for problem in problems), (what, problems)
    wrong_schedule = run.schedules.heldout[0]
    assert any("schedule" in p for p in check_pair(budget, wrong_schedule))


def test_tool_mentions_prefer_the_longest_label() -> None:
    assert mentioned_tools("Use GPT-5 mini, not GPT-5.") == {"gpt-5-mini", "gpt-5"}
    assert mentioned_tools("Only GPT-5 mini please") == {"gpt-5-mini"}
    assert mentioned_tools("NVIDIA-hosted Llama 3.3 70B") == {"nvdev/meta/llama-3.3-70b-instruct"}
    assert mentioned_tools("keep it in-house, use local models") == set()


def _reword(messages: list[dict[str, str]]) -> str:
    """A stand-in endpoint: rewords by a fixed rule and keeps tool names, so acceptance is predictable."""
    return "Here is what I need: " + messages[-1]["content"]


def test_paraphrase_is_kept_only_when_every_tool_name_survives() -> None:
    cfg = PreferenceConfig(count=60, seed=5)
    kept = build_preference_pairs(cfg, paraphrase=_reword)
    assert kept.paraphrase["accepted"] >= 60 and all(p.paraphrased for p in kept.pairs)
    assert all(p.instruction == "Here is what I need: " + p.template_instruction for p in kept.pairs)

    def drops_names(messages: list[dict[str, str]]) -> str:
        return "Please answer my question the way I like it."

    def fails(messages: list[dict[str, str]]) -> str:
        raise TimeoutError("endpoint timed out")

    dropped = build_preference_pairs(cfg, paraphrase=drops_names)
    named = sum(bool(p.avoid or p.prefer) for p in dropped.pairs)
    assert dropped.paraphrase["tool_names_changed"] >= named > 0
    assert all(not p.paraphrased for p in dropped.pairs if p.avoid or p.prefer)
    sorry = build_preference_pairs(cfg, paraphrase=lambda m: "I'm sorry for any confusion, but we only use in-house data.")
    assert sorry.paraphrase["refusal"] >= 1 and not any(p.paraphrased for p in sorry.pairs)
    failed = build_preference_pairs(cfg, paraphrase=fails)
    assert failed.paraphrase["call_failed:TimeoutError"] >= 60 and len(failed.pairs) == 60
    assert [p.pair_id for p in failed.pairs] == [p.pair_id for p in build_preference_pairs(cfg).pairs]


def test_the_judge_drops_what_it_calls_inconsistent() -> None:
    def strict(messages: list[dict[str, str]]) -> str:
        return "NO" if "speed 1" in messages[-1]["content"] else "Yes."

    run = build_preference_pairs(PreferenceConfig(count=100, seed=2), judge=strict)
    assert len(run.pairs) == 100 and run.dropped["judge"] > 0
    assert all(p.judge_verdict == "consistent" and p.p_latency != 1.0 for p in run.pairs)
    unsure = build_preference_pairs(PreferenceConfig(count=20, seed=2), judge=lambda m: "maybe")
    assert {p.judge_verdict for p in unsure.pairs} == {"unclear"}


def test_bad_config_is_refused() -> None:
    with pytest.raises(ValueError, match="count must be at least 2"):
        build_preference_pairs(PreferenceConfig(count=1))
    with pytest.raises(ValueError, match="eval_fraction"):
        build_preference_pairs(PreferenceConfig(eval_fraction=1.5))


def test_a_run_round_trips_through_a_real_warehouse(run: PreferenceRun, tmp_path: Path) -> None:
    wh = tmp_path / "wh.duckdb"
    summary = build_and_store(PreferenceConfig(count=1000, seed=0), wh)
    assert summary["run_id"] == run.run_id and summary["pairs"] == 1000
    build_and_store(PreferenceConfig(count=1000, seed=0), wh)  # a rerun replaces, never duplicates
    con = duckdb.connect(str(wh), read_only=True)
    try:
        assert con.execute("SELECT count(*), count(DISTINCT pair_id) FROM preference_pairs").fetchone() == (1000, 1000)
        assert con.execute("SELECT pairs, train_pairs, eval_pairs, inconsistent FROM preference_runs").fetchall() == [
            (1000, 800, 200, 0)]
        orphans = con.execute("SELECT count(*) FROM preference_pairs p LEFT JOIN pricing_schedules s"
                              " USING (schedule_id) WHERE s.schedule_id IS NULL").fetchone()
        split_sched = con.execute("SELECT DISTINCT p.split, s.split, s.synthetic FROM preference_pairs p"
                                  " JOIN pricing_schedules s USING (schedule_id) ORDER BY 1").fetchall()
        first = con.execute("SELECT tools_json, vector_json, instruction FROM preference_pairs WHERE position = 0"
                            ).fetchone()
    finally:
        con.close()
    assert orphans == (0,)
    assert split_sched == [("eval", "heldout", True), ("train", "train", True)]
    assert (json.loads(first[0]), json.loads(first[1]), first[2]) == (
        list(run.pairs[0].tools), run.pairs[0].vector, run.pairs[0].instruction)
    sample = read_pairs(wh, split="eval", limit=5, seed=1)
    assert len(sample) == 5 and all(p["split"] == "eval" for p in sample)
    assert sample == read_pairs(wh, split="eval", limit=5, seed=1)

    before = wh.read_bytes()
    with pytest.raises(RuntimeError, match="half-way"):
        with atomic_edit(wh) as con:
            con.execute("DELETE FROM preference_pairs")
            raise RuntimeError("killed half-way")
    assert wh.read_bytes() == before and not list(tmp_path.glob("wh.duckdb.tmp-*"))
