"""Eq. 6 (train/evaluation/preference_score.py) against numbers worked out by hand."""

from __future__ import annotations

import pytest

from train.evaluation.preference_score import EpisodeFeatures, preference_score, scales
from train.environment.rewards import Preference

RUN = [EpisodeFeatures({"a": 2}, True, 0.002, 1.0), EpisodeFeatures({"b": 1}, False, 0.001, 3.0)]
# baseline means: a 1, b 4, outcome 0.5, cost 0.004, latency 2.0
BASELINE = [EpisodeFeatures({"a": 2, "b": 8}, True, 0.006, 3.0), EpisodeFeatures({}, False, 0.002, 1.0)]


def test_scales_are_the_baseline_means_with_floors() -> None:
    # [a, b, outcome, -cost, -latency]; the outcome's mean 0.5 is floored at 1
    assert scales(BASELINE, ["a", "b"]) == pytest.approx([1.0, 4.0, 1.0, 0.004, 2.0])


def test_the_score_by_hand() -> None:
    p = Preference(tools={"a": 0.5}, outcome=1.0, cost=1.0, latency=0.5)
    # episode 1: Mhat = [2/1, 0/4, 1/1, -0.002/0.004, -1/2] = [2, 0, 1, -0.5, -0.5]
    #            Mhat . P = 0.5*2 + 0 + 1 - 0.5 - 0.25 = 1.25; episode 2 is unsolved: 0
    assert preference_score(RUN, BASELINE, p) == pytest.approx(1.25 / 2)


def test_accuracy_first_is_the_accuracy_and_a_cheaper_run_scores_higher() -> None:
    assert preference_score(RUN, BASELINE, Preference.accuracy_first()) == pytest.approx(0.5)
    thrifty = Preference(outcome=1.0, cost=1.0)
    cheap = [EpisodeFeatures({"a": 1}, True, 0.001, 1.0)]
    dear = [EpisodeFeatures({"a": 1}, True, 0.008, 1.0)]
    # 1 - 0.001/0.004 = 0.75 against 1 - 0.008/0.004 = -1
    assert preference_score(cheap, BASELINE, thrifty) == pytest.approx(0.75)
    assert preference_score(dear, BASELINE, thrifty) == pytest.approx(-1.0)


def test_an_empty_baseline_is_refused() -> None:
    with pytest.raises(ValueError, match="baseline has no episodes"):
        preference_score(RUN, [], Preference.accuracy_first())
