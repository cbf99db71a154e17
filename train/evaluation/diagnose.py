"""What went wrong, in words, when a training run or an evaluation shows nothing learned.

``diagnose_steps`` reads ``training_steps`` rows (rollouts, how they ended, what each filter dropped);
``diagnose_eval`` reads evaluation episodes. Each returns short sentences (empty when nothing is wrong) that the
plots draw and the run's summary and log repeat, e.g. "all 8 rollouts cut off at the token limit".
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from train.environment.rewards import MIN_GROUP_STD

ENDING_WORDS = {
    "user_stop": "ended by the user's ###STOP###",
    "turn_limit": "cut off at the turn limit",
    "token_limit": "cut off at the token limit",
    "time_limit": "stopped at the time limit",
    "policy_error": "ended by an agent error",
    "user_error": "ended by a user-simulator error",
}


class EpisodeOutcome(Protocol):
    """What ``diagnose_eval`` reads of an episode (``train.environment.env.EpisodeResult`` has it)."""

    solved: bool
    ended_by: str
    format_errors: int

    @property
    def usage(self) -> dict[str, Any]: ...


def _ending(ending: str) -> str:
    return ENDING_WORDS.get(ending, f"ended by {ending}")


def endings_words(endings: Counter[str], noun: str) -> str | None:
    """How the episodes ended, when most did not reach the user's stop (the one ending that is verified)."""
    total = sum(endings.values())
    stopped = endings.get("user_stop", 0)
    if not total or stopped * 2 >= total:
        return None
    if len(endings) == 1:
        return f"all {total} {noun} {_ending(next(iter(endings)))}"
    if stopped == 0:
        parts = ", ".join(f"{n} {_ending(e)}" for e, n in endings.most_common())
        return f"no {noun} reached the user's ###STOP###: {parts}"
    ending, n = next((e, n) for e, n in endings.most_common() if e != "user_stop")
    return f"{n} of {total} {noun} {_ending(ending)}"


def step_endings(step: dict[str, Any]) -> Counter[str]:
    return Counter({str(k): int(v) for k, v in json.loads(step.get("endings_json") or "{}").items()})


def diagnose_steps(steps: Sequence[dict[str, Any]], min_std: float = MIN_GROUP_STD) -> list[str]:
    """Why the recorded steps gave the policy no gradient, or [] when some step had a non-zero advantage."""
    if not steps:
        return ["no optimizer step was recorded"]
    endings: Counter[str] = Counter()
    for s in steps:
        endings.update(step_endings(s))
    known = [s for s in steps if s.get("rollouts") is not None]
    rollouts = sum(int(s["rollouts"]) for s in known)
    fmt = sum(int(s["drop_format_error"] or 0) for s in steps)
    no_final = sum(int(s["drop_no_final_output"] or 0) for s in steps)
    low_std = sum(int(s["drop_low_std_group"] or 0) for s in steps)
    learned = [s for s in steps if s.get("reward_mean") is not None]  # a kept reward: some group had an advantage
    lines: list[str] = []
    if (line := endings_words(endings, "rollouts")) is not None:
        lines.append(line)
    if rollouts and fmt == rollouts:
        lines.append(f"all {rollouts} rollouts had a format error: each was dropped before the reward")
    elif fmt:
        lines.append(f"{fmt}{f' of {rollouts}' if rollouts else ''} rollouts dropped for a format error"
                     + (f", {no_final} for no final answer" if no_final else ""))
    outcomes = [s["outcome_rate"] for s in steps if s.get("outcome_rate") is not None]
    if outcomes and max(outcomes) == 0:
        lines.append("no rollout solved its task: every reward is 0")
    if low_std and not learned:
        lines.append(f"every group's reward std under {min_std:g}: no advantage")
    if not learned:
        lines.append(f"no rollout kept a reward in {len(steps)} step{'s' if len(steps) != 1 else ''}: "
                     "the policy got no gradient from the reward")
    elif len(learned) < len(steps):
        lines.append(f"only {len(learned)} of {len(steps)} steps had a group with a non-zero advantage")
    return lines


def diagnose_eval(episodes: Sequence[EpisodeOutcome]) -> list[str]:
    """Why an evaluation scored nothing (no calls, every episode cut off, no episode solved), or []."""
    if not episodes:
        return ["no episode was run"]
    n = len(episodes)
    lines: list[str] = []
    calls = sum(u.calls for e in episodes for u in e.usage.values())
    if calls == 0:
        lines.append(f"no tool calls in {n} episode{'s' if n != 1 else ''}")
    if (line := endings_words(Counter(e.ended_by for e in episodes), "episodes")) is not None:
        lines.append(line)
    bad = sum(1 for e in episodes if e.format_errors)
    if bad:
        lines.append(f"{bad} of {n} episodes had a format error")
    if not any(e.solved for e in episodes):
        lines.append("no episode solved its task")
    return lines
