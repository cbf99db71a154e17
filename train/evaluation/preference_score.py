"""Eq. 6: the preference score of an evaluation run, with each feature normalised against a baseline model's mean.

For episode i of the run, the feature vector is the one the training reward uses (train/environment/rewards.py, Eq. 2):

    M_i = [calls of tool 1, ..., calls of tool n, o_i, -cost_i, -latency_i]      (o_i = 1 when solved, else 0)

Min-max normalisation over a GRPO group is not available at test time (one rollout per task), so each feature is
instead divided by the magnitude of the baseline model's mean of that feature over the same split:

    Mhat_i[k] = M_i[k] / s_k,   s_k = max(|mean_j B_j[k]|, eps_k)

with eps_k = 1 for tool counts and the outcome (so the outcome stays in [0, 1] and a tool the baseline never called
is counted in calls), 1e-6 USD for cost and 1e-3 s for latency. The score is the mean, over the run's N episodes,
of the preference-weighted normalised features of the solved episodes:

    S = (1 / N) * sum_i 1[o_i = 1] * (Mhat_i . P)

P is the preference vector (train.environment.rewards.Preference: a weight per tool, then outcome, cost, latency). With the
accuracy-first P = [0, ..., 0, 1, 0, 0], S is the accuracy. The baseline is a parameter: another stored evaluation
run on the same split (its episodes' features), or the run itself when none is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from train.environment.rewards import Preference

EPS_COUNT = 1.0
EPS_COST_USD = 1e-6
EPS_LATENCY_S = 1e-3


@dataclass(frozen=True)
class EpisodeFeatures:
    """One episode's features keyed by tool name (so runs with different catalogs line up)."""

    tool_calls: dict[str, int]
    solved: bool
    cost_usd: float
    latency_s: float

    def vector(self, tools: Sequence[str]) -> list[float]:
        return ([float(self.tool_calls.get(t, 0)) for t in tools]
                + [1.0 if self.solved else 0.0, -self.cost_usd, -self.latency_s])


def scales(baseline: Sequence[EpisodeFeatures], tools: Sequence[str]) -> list[float]:
    """s_k for every feature, from the baseline's mean feature vector."""
    if not baseline:
        raise ValueError("the baseline has no episodes; evaluate the baseline model on the split first")
    vectors = [b.vector(tools) for b in baseline]
    means = [sum(column) / len(vectors) for column in zip(*vectors)]
    eps = [EPS_COUNT] * (len(tools) + 1) + [EPS_COST_USD, EPS_LATENCY_S]
    return [max(abs(m), e) for m, e in zip(means, eps)]


def preference_score(episodes: Sequence[EpisodeFeatures], baseline: Sequence[EpisodeFeatures],
                     preference: Preference) -> float:
    """S of Eq. 6 (module docstring) for the run's ``episodes`` against ``baseline``."""
    if not episodes:
        raise ValueError("no episodes to score")
    tools = sorted({t for e in [*episodes, *baseline] for t in e.tool_calls} | set(preference.tools))
    s = scales(baseline, tools)
    p = preference.vector(tools)
    total = 0.0
    for episode in episodes:
        if episode.solved:
            total += sum(m / sk * pk for m, sk, pk in zip(episode.vector(tools), s, p))
    return total / len(episodes)
