"""tau2's own evaluator as a second judge of an episode on one of tau2's imported tasks: the agent's domain calls
and what it said, replayed and scored inside tau2 (interop/tau2_worker.py, ``EvaluationType.ALL``).

Only the agent's calls travel: a dual-control task (telecom) needs the user's own device calls replayed as the
user's, which the worker does not do, so those episodes are not judged (None), and say so.
"""

from __future__ import annotations

from interop.tau2_bridge import Tau2Worker, calls_json
from train.environment.env import EpisodeResult

MARK = "-tau2-"  # an imported task's id: <domain>-tau2-<tau2 id> (interop/tau2_tasks.py)
JUDGED_DOMAINS = ("airline", "retail")


def tau2_task_id(task_id: str) -> str | None:
    """tau2's own id of an imported task, or None for a task this project synthesised."""
    return task_id.split(MARK, 1)[1] if MARK in task_id else None


class Tau2Judge:
    """One tau2 worker process for a whole evaluation run."""

    def __init__(self) -> None:
        self.worker = Tau2Worker()  # RuntimeError, with how to install tau2, when there is none

    def solved(self, result: EpisodeResult) -> bool | None:
        """tau2's verdict (reward 1.0), or None where tau2 cannot judge the episode."""
        tau2_id = tau2_task_id(result.task_id)
        if tau2_id is None or result.domain not in JUDGED_DOMAINS:
            return None
        calls = [c for c in result.calls if c.side == "agent"]
        answer = self.worker.request(op="evaluate", domain=result.domain, task_id=tau2_id, calls=calls_json(calls),
                                     text=result.said)
        return answer["reward"] == 1.0

    def close(self) -> None:
        self.worker.close()
