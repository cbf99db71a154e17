"""Which declared outcomes the seeded data can turn into a goal: for each intent outcome, how many candidate rows
the seed offers and whether a goal (gold calls, values to tell, every value derivable) can be built from them.
An outcome with rows but no goal is never taught, however the sampler steers (bench/outcome_coverage.py)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from domains.realism_spec import Intent
from synthesis.realistic import Realism
from synthesis.realistic_tasks import outcome_kind, realism_for
from synthesis.toolgraph import ToolGraph


@dataclass(frozen=True)
class Coverage:
    intent: str
    outcome: str
    kind: str  # write, refusal or answer
    rows: int  # candidate rows on the seeded data
    tried: int
    goals: int  # of the rows tried, how many gave a goal


def outcome_coverage(graph: ToolGraph, tries: int = 6, intents: Iterable[Intent] | None = None) -> list[Coverage]:
    """Every outcome of the domain's intents (or of ``intents``), with up to ``tries`` of its rows (drawn with a
    fixed seed) tried."""
    realism = realism_for(graph)
    was, realism.plan_derivable = realism.plan_derivable, True  # as admission: every value needs a source
    out = []
    try:
        for intent in graph.spec.intents if intents is None else intents:
            by_outcome: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
            for person, row in realism.pairs(intent):
                by_outcome[str(row["outcome"])].append((person, row))
            for outcome in intent.outcomes:
                rows = by_outcome.get(outcome.name, [])
                drawn = random.Random(f"{intent.name}:{outcome.name}").sample(rows, min(tries, len(rows)))
                goals = sum(_goal(graph, realism, intent, person, row) for person, row in drawn)
                out.append(Coverage(intent.name, outcome.name, outcome_kind(graph.spec, intent, outcome.name),
                                    len(rows), len(drawn), goals))
    finally:
        realism.plan_derivable = was
    return out


def _goal(graph: ToolGraph, realism: Realism, intent: Intent, person: dict[str, Any], row: dict[str, Any]) -> bool:
    setup = realism.setup(intent, person, row)
    if setup is None:
        return False
    with graph.engine.fresh() as db:
        if not all(db.call(c.name, c.arguments, c.side).ok for c in setup):
            return False
        return realism.intent_request(db, intent, person, row, random.Random(1), setup=setup) is not None
