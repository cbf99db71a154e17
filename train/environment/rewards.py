"""The paper's multi-objective reward (ToolOrchestra Eq. 2) with its three batch filters, and the TRL reward function.

Per rollout the feature vector is M = [calls of each tool ..., r_outcome, -cost, -latency]. Each feature is min-max
normalised over the rollouts of the same task (one GRPO group); a feature whose max equals its min becomes 0.
R = M_norm . P when the rollout solved the task, else 0. Filters, applied in this order and each counted:
rollouts with a format error, rollouts with no valid final output (both excluded before normalising, since their
features mean nothing), then whole groups whose rewards have a standard deviation below ``min_std``.
An excluded rollout gets ``None``: TRL then gives it no advantage and keeps it out of its group's baseline.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

MIN_GROUP_STD = 0.1
DROP_FORMAT = "format_error"
DROP_NO_FINAL = "no_final_output"
DROP_LOW_STD = "low_std_group"


@dataclass(frozen=True)
class Preference:
    """The preference vector P: a weight per tool's call count, and for the outcome, cost and latency."""

    tools: dict[str, float] = field(default_factory=dict)
    outcome: float = 1.0
    cost: float = 0.0
    latency: float = 0.0

    @classmethod
    def accuracy_first(cls) -> Preference:
        """The default: all weight on solving the task."""
        return cls()

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Preference:
        if not data:
            return cls.accuracy_first()
        unknown = set(data) - {"tools", "outcome", "cost", "latency"}
        if unknown:
            raise ValueError(f"preference vector has unknown key(s) {sorted(unknown)}; "
                             "expected tools, outcome, cost, latency")
        return cls({str(k): float(v) for k, v in (data.get("tools") or {}).items()},
                   float(data.get("outcome", 1.0)), float(data.get("cost", 0.0)), float(data.get("latency", 0.0)))

    def vector(self, tool_names: Sequence[str]) -> list[float]:
        return [self.tools.get(n, 0.0) for n in tool_names] + [self.outcome, self.cost, self.latency]


@dataclass(frozen=True)
class RolloutStats:
    """What the reward needs to know about one finished episode."""

    group_id: str
    tool_names: tuple[str, ...]  # the instance's tool catalog, in feature order
    tool_calls: dict[str, int]
    solved: bool
    cost: float
    latency: float
    format_errors: int = 0
    has_final: bool = True
    preference: Preference = field(default_factory=Preference.accuracy_first)
    ended_by: str | None = None  # how the episode ended (train/environment/env.py ENDINGS); None: not known

    def features(self) -> list[float]:
        return ([float(self.tool_calls.get(n, 0)) for n in self.tool_names]
                + [1.0 if self.solved else 0.0, -self.cost, -self.latency])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RolloutStats:
        pref = data.get("preference")
        return cls(str(data["group_id"]), tuple(data["tool_names"]), {str(k): int(v) for k, v in data["tool_calls"].items()},
                   bool(data["solved"]), float(data["cost"]), float(data["latency"]), int(data.get("format_errors", 0)),
                   bool(data.get("has_final", True)),
                   pref if isinstance(pref, Preference) else Preference.from_dict(pref),
                   None if data.get("ended_by") is None else str(data["ended_by"]))


@dataclass
class ScoredBatch:
    """One reward per rollout (None = excluded) and how many rollouts each filter dropped."""

    rewards: list[float | None]
    drops: Counter[str] = field(default_factory=Counter)
    groups_dropped: int = 0


def normalise(rows: Sequence[Sequence[float]]) -> list[list[float]]:
    """Min-max normalise each column over the rows; a constant column becomes 0."""
    if not rows:
        return []
    columns = list(zip(*rows))
    lows, highs = [min(c) for c in columns], [max(c) for c in columns]
    return [[(v - lo) / (hi - lo) if hi > lo else 0.0 for v, lo, hi in zip(row, lows, highs)] for row in rows]


def group_rewards(group: Sequence[RolloutStats]) -> list[float]:
    """Eq. 2 over one group of valid rollouts of the same task."""
    names = group[0].tool_names
    normed = normalise([r.features() for r in group])
    return [sum(m * p for m, p in zip(row, r.preference.vector(names))) if r.solved else 0.0
            for row, r in zip(normed, group)]


def score_rollouts(rollouts: Sequence[RolloutStats], min_std: float = MIN_GROUP_STD) -> ScoredBatch:
    """Rewards for a batch of rollouts, grouped by ``group_id``, with the three filters applied and counted."""
    out = ScoredBatch([None] * len(rollouts))
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rollouts):
        if r.format_errors > 0:
            out.drops[DROP_FORMAT] += 1
        elif not r.has_final:
            out.drops[DROP_NO_FINAL] += 1
        else:
            groups.setdefault(r.group_id, []).append(i)
    for members in groups.values():
        rewards = group_rewards([rollouts[i] for i in members])
        if len(rewards) < 2 or statistics.pstdev(rewards) < min_std:
            out.drops[DROP_LOW_STD] += len(members)
            out.groups_dropped += 1
            continue
        for i, reward in zip(members, rewards):
            out.rewards[i] = reward
    return out


def _gather_across_processes(local: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Every process's rollouts in rank order, and where this process's slice starts (groups may span GPUs)."""
    try:
        from accelerate.state import PartialState
        from accelerate.utils import gather_object
    except ImportError:
        return local, 0
    state = PartialState()
    if state.num_processes <= 1:
        return local, 0
    sizes = gather_object([len(local)])
    return gather_object(local), sum(sizes[: state.process_index])


def toolscale_reward(completions: list[Any], rollout: list[dict[str, Any]] | None = None,
                     log_metric: Callable[[str, float], None] | None = None, min_std: float = MIN_GROUP_STD,
                     **kwargs: Any) -> list[float | None]:
    """TRL reward function: Eq. 2 over each group, ``None`` for filtered rollouts (``min_std``: the low-std filter).

    ``rollout`` is the per-completion column that ``train.stages.grpo``'s rollout function fills with
    ``RolloutStats.to_dict()``. Logged per step: the three filters' drops, and over every process's rollouts their
    number (``episode/rollouts``) and how each ended (``episode/ended/<ending>``).

    >>> r = lambda g, ok, cost: {"group_id": g, "tool_names": ["t"], "tool_calls": {"t": 1}, "solved": ok,
    ...                          "cost": cost, "latency": 0.0, "preference": {"outcome": 1.0, "cost": 1.0}}
    >>> toolscale_reward(["", "", ""], rollout=[r("a", True, 0.1), r("a", True, 0.3), r("a", False, 0.2)])
    [2.0, 1.0, 0.0]
    """
    if rollout is None:
        raise ValueError("toolscale_reward needs the 'rollout' column that train.stages.grpo's rollout function provides")
    everything, start = _gather_across_processes(list(rollout))
    every = [RolloutStats.from_dict(r) for r in everything]
    scored = score_rollouts(every, min_std)
    if log_metric is not None:
        log_metric("episode/rollouts", float(len(every)))
        for ending, n in sorted(Counter(r.ended_by or "unknown" for r in every).items()):
            log_metric(f"episode/ended/{ending}", float(n))
        stats = [RolloutStats.from_dict(r) for r in rollout]
        log_metric("episode/solved_rate", sum(r.solved for r in stats) / max(1, len(stats)))
        log_metric("episode/cost", sum(r.cost for r in stats) / max(1, len(stats)))
        log_metric("episode/format_errors", float(sum(r.format_errors for r in stats)))
        for reason in (DROP_FORMAT, DROP_NO_FINAL, DROP_LOW_STD):
            log_metric(f"filter/{reason}", float(scored.drops[reason]))
        log_metric("filter/groups_dropped", float(scored.groups_dropped))
    return scored.rewards[start:start + len(completions)]


def reward_with_min_std(min_std: float) -> Callable[..., list[float | None]]:
    """``toolscale_reward`` with the profile's ``grpo.min_group_std`` (TRL names the reward after ``__name__``)."""

    def reward(completions: list[Any], **kwargs: Any) -> list[float | None]:
        return toolscale_reward(completions, **{**kwargs, "min_std": min_std})

    reward.__name__ = toolscale_reward.__name__
    return reward
