"""Eq. 2 and its filters against numbers computed by hand."""

from __future__ import annotations

import doctest

import pytest

import train.environment.rewards as rewards_module
from train.environment.rewards import (DROP_FORMAT, DROP_LOW_STD, DROP_NO_FINAL, Preference, RolloutStats, normalise,
                           reward_with_min_std, score_rollouts, toolscale_reward)

TOOLS = ("get_a", "get_b")
P = Preference(tools={"get_a": 0.1, "get_b": 0.5}, outcome=1.0, cost=0.6, latency=0.3)


def _r(a: int, b: int, solved: bool, cost: float, latency: float, group: str = "g", **over: object) -> RolloutStats:
    return RolloutStats(group, TOOLS, {"get_a": a, "get_b": b}, solved, cost, latency, preference=P, **over)


def test_a_group_of_four_gets_the_hand_computed_rewards() -> None:
    # M = [a, b, outcome, -cost, -latency]; b is 1 everywhere (constant, so zeroed although P weighs it 0.5)
    group = [_r(2, 1, True, 0.3, 2.0), _r(1, 1, True, 0.1, 1.0), _r(0, 1, False, 0.2, 4.0), _r(1, 1, True, 0.4, 3.0)]
    # a -> 1, .5, 0, .5; outcome -> 1, 1, 0, 1; -cost -> 1/3, 1, 2/3, 0; -latency -> 2/3, 1, 0, 1/3
    # R1 = .1*1 + 1 + .6/3 + .3*2/3 = 1.5; R2 = .05 + 1 + .6 + .3 = 1.95; R3 unsolved = 0; R4 = .05 + 1 + 0 + .1 = 1.15
    scored = score_rollouts(group)
    assert scored.rewards == pytest.approx([1.5, 1.95, 0.0, 1.15])
    assert sum(scored.drops.values()) == 0


def test_a_constant_feature_is_zeroed() -> None:
    assert normalise([[3.0, 1.0], [3.0, 2.0], [3.0, 0.0]]) == [[0.0, 0.5], [0.0, 1.0], [0.0, 0.0]]
    # only the constant tool is weighted: every solved rollout scores 0 from it, so only the outcome separates them
    only_b = Preference(tools={"get_b": 5.0}, outcome=1.0)
    group = [RolloutStats("g", TOOLS, {"get_b": 2}, ok, 0.0, 0.0, preference=only_b) for ok in (True, False)]
    assert score_rollouts(group).rewards == [1.0, 0.0]


def test_an_unsolved_rollout_gets_zero_even_when_it_is_cheapest_and_fastest() -> None:
    group = [_r(0, 0, False, 0.0, 0.0), _r(3, 3, True, 1.0, 9.0)]
    rewards = score_rollouts(group).rewards
    assert rewards[0] == 0.0
    assert rewards[1] == pytest.approx(0.1 + 0.5 + 1.0)  # tool counts and outcome at 1, cost and latency at 0


def test_default_preference_is_accuracy_first() -> None:
    group = [RolloutStats("g", TOOLS, {}, ok, 0.0, 0.0) for ok in (True, False, True)]
    assert score_rollouts(group).rewards == [1.0, 0.0, 1.0]
    assert Preference.from_dict(None) == Preference.accuracy_first()
    with pytest.raises(ValueError, match="unknown key"):
        Preference.from_dict({"accuracy": 1})


def test_each_filter_drops_what_it_should_and_counts_it() -> None:
    batch = [
        _r(1, 0, True, 0.1, 1.0, group="ok"), _r(0, 0, False, 0.1, 1.0, group="ok"),
        _r(1, 0, True, 0.1, 1.0, group="ok", format_errors=2),       # format error
        _r(1, 0, True, 0.1, 1.0, group="ok", has_final=False),        # no final output
        _r(1, 0, False, 0.1, 1.0, group="flat"), _r(2, 1, False, 0.3, 2.0, group="flat"),  # all 0: std 0
        _r(1, 0, True, 0.1, 1.0, group="alone"),                      # one survivor: no spread
    ]
    scored = score_rollouts(batch)
    assert scored.rewards[:2] == pytest.approx([1.0 + 0.6 * 0 + 0.1, 0.0])
    assert scored.rewards[2:] == [None] * 5
    assert scored.drops == {DROP_FORMAT: 1, DROP_NO_FINAL: 1, DROP_LOW_STD: 3}
    assert scored.groups_dropped == 2


def test_std_threshold_is_strictly_below_point_one() -> None:
    tiny = Preference(outcome=0.15)
    group = [RolloutStats("g", (), {}, ok, 0.0, 0.0, preference=tiny) for ok in (True, False)]
    assert score_rollouts(group).rewards == [None, None]  # pstdev 0.075
    assert score_rollouts(group, min_std=0.05).rewards == pytest.approx([0.15, 0.0])


def test_trl_reward_function_takes_the_rollout_column_and_logs_filters() -> None:
    logged: dict[str, float] = {}
    column = [_r(1, 0, True, 0.1, 1.0).to_dict(), _r(0, 0, False, 0.1, 1.0).to_dict(),
              _r(0, 0, True, 0.1, 1.0, format_errors=1).to_dict()]
    out = toolscale_reward(["x", "y", "z"], rollout=column, log_metric=lambda k, v: logged.__setitem__(k, v))
    assert out[2] is None and out[1] == 0.0 and out[0] == pytest.approx(1.1)
    assert logged["filter/format_error"] == 1.0 and logged["filter/low_std_group"] == 0.0
    with pytest.raises(ValueError, match="rollout"):
        toolscale_reward(["x"])


def test_the_reward_logs_how_rollouts_ended_and_takes_the_profiles_min_std() -> None:
    logged: dict[str, float] = {}
    # two valid rollouts: only get_a differs (P weighs it 0.1), rewards 0.1 and 0, a std of 0.05: kept at a minimum
    # of 0.01, dropped at the default 0.1
    column = [_r(1, 0, True, 0.1, 1.0, ended_by="user_stop").to_dict(),
              _r(0, 0, True, 0.1, 1.0, ended_by="user_stop").to_dict(),
              _r(0, 0, False, 0.1, 1.0, has_final=False, ended_by="token_limit").to_dict()]
    assert toolscale_reward(["x"] * 3, rollout=column)[:2] == [None, None]
    lenient = reward_with_min_std(0.01)
    assert lenient.__name__ == "toolscale_reward"  # TRL logs the reward under this name
    out = lenient(["x"] * 3, rollout=column, log_metric=lambda k, v: logged.__setitem__(k, v))
    assert out[0] == pytest.approx(0.1) and out[1] == 0.0 and out[2] is None
    assert logged["episode/rollouts"] == 3.0
    assert logged["episode/ended/user_stop"] == 2.0 and logged["episode/ended/token_limit"] == 1.0


def test_doctest() -> None:
    assert doctest.testmod(rewards_module).failed == 0
