"""The evaluation plots explain themselves: with no tool call the usage plot says so, the cost axis never runs
negative, and both carry ``diagnose_eval``'s words about what went wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from train.evaluation.diagnose import diagnose_eval
from train.environment.env import EpisodeResult, ToolUsage
from train.evaluation.evaluate import EvalReport, draw_plots, report_table, tradeoff_figure, usage_figure


def _episode(ended_by: str, calls: int = 0, solved: bool = False, format_errors: int = 0) -> EpisodeResult:
    usage = {"get_station": ToolUsage(calls=calls, cost_usd=0.0005 * calls)}
    return EpisodeResult("t", "weather", 0, "eval", "heldout", ("get_station",), solved, ended_by, 1, 10,
                         format_errors, usage=usage)


def _report(episodes: list[EpisodeResult], cost: float) -> EvalReport:
    calls = sum(u.calls for e in episodes for u in e.usage.values())
    return EvalReport("eval-x", "local-smollm2", "endpoint", "ts-x", "derived", len(episodes),
                      sum(e.solved for e in episodes) / len(episodes), cost, 0.1, cost * len(episodes),
                      sum(e.format_errors for e in episodes), {"get_station": calls}, 0.0, None, ["heldout"],
                      {"weather": {"episodes": len(episodes), "accuracy": 0.0, "mean_cost_usd": cost}}, {}, "wh",
                      diagnose_eval(episodes), {"split": "test", "rule": "derived", "train": 26, "test": 3})


def _texts(fig: Any) -> str:
    return "\n".join(t.get_text() for t in fig.texts + [t for ax in fig.axes for t in ax.texts])


def test_an_evaluation_without_tool_calls_says_so_in_words(tmp_path: Path) -> None:
    episodes = [_episode("turn_limit", format_errors=1) for _ in range(3)]
    report = _report(episodes, 0.0)
    assert report.diagnosis == ["no tool calls in 3 episodes", "all 3 episodes cut off at the turn limit",
                                "3 of 3 episodes had a format error", "no episode solved its task"]
    usage, tradeoff = usage_figure(report), tradeoff_figure(report, None)
    try:
        assert "no tool calls in 3 episodes" in "\n".join(t.get_text() for t in usage.axes[0].texts)
        assert "all 3 episodes cut off at the turn limit" in _texts(usage) and report.diagnosis[1] in _texts(tradeoff)
        left, right = tradeoff.axes[0].get_xlim()
        assert left == 0 and right > 0  # one point at cost 0: no negative cost on the axis
    finally:
        plt.close(usage)
        plt.close(tradeoff)
    plots = draw_plots(report, tmp_path, None)
    assert all(Path(p).read_bytes()[:4] == b"\x89PNG" for p in plots.values())
    table = report_table(report)
    assert "diagnosis: no tool calls in 3 episodes" in table and "3 test tasks; the 26 train tasks left out" in table


def test_an_evaluation_that_called_and_solved_needs_no_excuse() -> None:
    episodes = [_episode("user_stop", calls=2, solved=True), _episode("user_stop", calls=1)]
    report = _report(episodes, 0.0015)
    assert report.diagnosis == []
    fig = usage_figure(report)
    try:
        assert [p.get_height() for p in fig.axes[0].patches] == [1.0]  # the one tool took every call
        assert not fig.texts
    finally:
        plt.close(fig)
    fig = tradeoff_figure(report, ("baseline", 0.003, 0.5))
    try:
        assert fig.axes[0].get_xlim()[0] == 0 and fig.axes[0].get_xlim()[1] > 0.003
    finally:
        plt.close(fig)
