"""Every write and every answer a domain declares can be taught: where the seeded data offers rows for it, some
of them give a goal whose values all have a source (a ground named only by a record the gold never read made
sport's "next game" and "is my match on" answers impossible to draw)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from domains.registry import available_domains, data_available, get_engine, get_spec
from synthesis.outcome_coverage import outcome_coverage
from synthesis.realistic_tasks import ANSWER, REFUSAL, WRITE
from synthesis.toolgraph import ToolGraph

DOMAINS = [d for d in available_domains() if data_available(d) and get_spec(d).intents]
# refusals the seeded data offers but no goal can teach yet (none since 7 December 2026: each reason now shows in a
# read the gold makes). A ratchet: a new dead refusal fails the test below, and one that comes alive must leave this
# set.
KNOWN_DEAD_REFUSALS: set[tuple[str, str, str]] = set()


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_offered_write_and_answer_gives_a_goal(domain: str) -> None:
    coverage = outcome_coverage(ToolGraph(get_engine(domain)), tries=4)
    dead = [f"{c.intent}/{c.outcome}: 0 goals of {c.tried} rows tried ({c.rows} offered)"
            for c in coverage if c.kind in (WRITE, ANSWER) and c.rows and not c.goals]
    assert dead == []
    refusals = {(domain, c.intent, c.outcome): bool(c.goals) for c in coverage if c.kind == REFUSAL and c.rows}
    assert [k for k, live in refusals.items() if not live and k not in KNOWN_DEAD_REFUSALS] == []
    assert [k for k, live in refusals.items() if live and k in KNOWN_DEAD_REFUSALS] == []


def test_a_value_no_call_returns_makes_an_outcome_dead() -> None:
    # the check can fail: sport's next-game answer without the call that names the ground gives no goal
    graph = ToolGraph(get_engine("sport"))
    intent = next(i for i in graph.spec.intents if i.name == "next_game_venue")
    live = outcome_coverage(graph, tries=2, intents=[intent])
    assert live and all(c.goals for c in live)
    cut = replace(intent, find=tuple(f for f in intent.find if f.tool != "get_match"))
    dead = outcome_coverage(graph, tries=2, intents=[cut])
    assert dead and not any(c.goals for c in dead)
