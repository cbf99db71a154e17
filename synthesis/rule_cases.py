"""Generated cases for the written rules: calls, built from a domain's own intents on the seeded data, that break a
rule, made to see what the tools do with them (issue 39: a policy that tells the truth).

- Every rule the policy lists among the tools' checks gets violating calls generated from the data: an intent's
  write, bound to candidate rows, whose first failing checked precondition cites the rule, and every row the intent
  decides is refused by that rule. The tool must refuse each. Where the intents give none, the values of the tool's
  own and the rules' examples are recombined until one breaks the rule.
- Two rules that the same call breaks decide that request, each its own way; unless both are the tools' own checks
  (the first failing check answers), one of the two must name its precedence (``before:`` in the spec), and the
  intent deciding such a row must follow it.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from domains.engine import Database, DomainEngine, ToolCall
from domains.realism_spec import CallTemplate, Intent
from domains.spec import DomainSpec
from synthesis.realistic import bind

PEOPLE_SCANNED = 80  # users per role whose candidate rows are read: enough to meet every outcome on seed 0
CASES_PER_RULE = 5  # violating calls made per rule (each a different row)
SEARCH_TRIES = 400  # recombined example values tried per rule the intents leave without a case


@dataclass(frozen=True)
class RuleCase:
    """One violating call for one rule, and what the tool did with it."""

    rule: str
    call: ToolCall
    source: str  # "intent <name> (<outcome>)" or "examples recombined"
    refused: bool
    error: str


@dataclass(frozen=True)
class DecidedCall:
    """An intent's write bound to one candidate row, with the outcome the intent decides for the row."""

    intent: Intent
    outcome: str
    call: ToolCall


def decided_calls(spec: DomainSpec, db: Database) -> Iterator[DecidedCall]:
    """Every intent's writes bound to its candidate rows (for the first ``PEOPLE_SCANNED`` users of its role)."""
    if spec.users is None:
        return
    writes = {t.name for t in spec.tools if t.kind == "write" and t.side == "agent"}
    for intent in spec.intents:
        role = spec.users.role(intent.role)
        templates = list(dict.fromkeys((c.tool, tuple(sorted(c.arguments.items(), key=str)))
                                       for o in intent.outcomes for c in o.calls if c.tool in writes))
        if role is None or not templates:
            continue
        table = spec.table(role.table)
        where = f"WHERE {role.where}" if role.where else ""
        people = db.records(f"SELECT * FROM {table.name} {where} ORDER BY {table.primary_key} LIMIT {PEOPLE_SCANNED}",
                            {"now": spec.now})
        for person in people:
            for row in db.records(intent.candidates, {"user": person[table.primary_key], "now": spec.now}):
                ctx = {**person, **row, "user_name": spec.users.person_name(person)}
                for tool, arguments in templates:
                    properties = spec.tool(tool).parameters.get("properties", {})
                    call = bind(CallTemplate(tool, dict(arguments)), ctx, properties)
                    if call is not None:
                        yield DecidedCall(intent, str(row.get("outcome")), call)


def rule_cases(spec: DomainSpec, engine: DomainEngine, seed: int = 0) -> dict[str, list[RuleCase]]:
    """Rule id -> generated violating calls, for every rule the policy lists among the tools' checks."""
    listed = spec.checked_rules
    out: dict[str, list[RuleCase]] = {r: [] for r in sorted(listed)}
    bound: dict[str, list[dict[str, Any]]] = {}  # each tool's intent-bound arguments, recombined by the search
    with engine.fresh() as db:
        for decided in decided_calls(spec, db):
            bound.setdefault(decided.call.name, []).append(decided.call.arguments)
            failed = db.failed_checks(decided.call.name, decided.call.arguments)
            if isinstance(failed, str):
                continue
            checked = [p for p in failed if p.enforced_by == "tool"]
            source = f"intent {decided.intent.name} ({decided.outcome})"
            rules = set(checked[0].rules) & listed if checked else set()
            outcome = decided.intent.outcome(decided.outcome)
            if outcome is not None and outcome.rule in listed and not any(c.tool == decided.call.name
                                                                           for c in outcome.calls):
                rules.add(outcome.rule)  # the intent refuses this row by a rule the tools check: so must the tool
            for rule in rules:
                if len(out[rule]) < CASES_PER_RULE:
                    out[rule].append(_made(db, rule, decided.call, source))
        rng = random.Random(seed)
        for rule in [r for r, cases in out.items() if not cases]:
            case = _searched(spec, db, rule, rng, bound)
            if case is not None:
                out[rule].append(case)
    return out


def _made(db: Database, rule: str, call: ToolCall, source: str) -> RuleCase:
    done = db.dry_run(call.name, call.arguments)
    return RuleCase(rule, call, source, not done.ok, str(done.error or ""))


def _searched(spec: DomainSpec, db: Database, rule: str, rng: random.Random,
              bound: dict[str, list[dict[str, Any]]]) -> RuleCase | None:
    """A call breaking ``rule`` first among its tool's checks, recombined from the values of the tool's examples,
    the rules' example calls and the intents' bound calls (each parameter drawn from the values seen for it), on
    the state the rules' example set-up calls make (a third subscription before downgrading to free)."""
    setups = [r.example_after for r in spec.rules if r.example_after]
    for tool in spec.tools:
        if not any(rule in p.rules for p in tool.preconditions if p.enforced_by == "tool"):
            continue
        seen: dict[str, list[Any]] = {}
        calls = [e.get("arguments", {}) for e in tool.examples] + bound.get(tool.name, [])[:200]
        calls += [r.example.arguments for r in spec.rules if r.example is not None and r.example.tool == tool.name]
        for arguments in calls:
            for name, value in arguments.items():
                if value not in seen.setdefault(name, []):
                    seen[name].append(value)
        names = sorted(seen)
        for setup in ((), *setups):
            db.conn.execute("SAVEPOINT search")
            try:
                if not all(db.call(c.tool, c.arguments).ok for c in setup):
                    continue
                draws = [dict(c) for c in calls]
                draws += [{n: rng.choice(seen[n]) for n in names} for _ in range(SEARCH_TRIES)]
                for arguments in draws:  # the calls as they are first, then their values recombined
                    failed = db.failed_checks(tool.name, arguments)
                    checked = [] if isinstance(failed, str) else [p for p in failed if p.enforced_by == "tool"]
                    if checked and rule in checked[0].rules and "not found" not in checked[0].error.lower():
                        return _made(db, rule, ToolCall(tool.name, arguments),
                                     "examples recombined" + (" after set-up calls" if setup else ""))
            finally:
                db.conn.execute("ROLLBACK TO search")
                db.conn.execute("RELEASE search")
    return None


@dataclass(frozen=True)
class Conflict:
    """Two rules one call breaks, with no precedence named (or an intent deciding against the one named)."""

    first: str
    second: str
    call: ToolCall
    problem: str


def rule_conflicts(spec: DomainSpec, engine: DomainEngine) -> list[Conflict]:
    """Pairs of rules that decide the same request differently: both broken by one intent-generated call, from
    different checks, at least one of them the agent's to apply (two checks of the tools are ordered by the tool
    itself), and no ``before:`` naming which decides; or a precedence named that the deciding intent does not follow.
    One conflict per pair."""
    out: dict[tuple[str, str], Conflict] = {}
    bound: dict[str, list[dict[str, Any]]] = {}  # each tool's intent-bound arguments, recombined by the search
    with engine.fresh() as db:
        for decided in decided_calls(spec, db):
            bound.setdefault(decided.call.name, []).append(decided.call.arguments)
            failed = db.failed_checks(decided.call.name, decided.call.arguments)
            if isinstance(failed, str) or len(failed) < 2:
                continue
            for a, b in itertools.combinations(failed, 2):
                if a.enforced_by == b.enforced_by == "tool":
                    continue
                for x, y in itertools.product(a.rules, b.rules):
                    pair = tuple(sorted((x, y)))
                    if x == y or pair in out:
                        continue
                    winner = precedence(spec, x, y)
                    outcome = decided.intent.outcome(decided.outcome)
                    if winner is None:
                        out[pair] = Conflict(pair[0], pair[1], decided.call, "no rule names its precedence")
                    elif outcome is not None and outcome.rule in pair and outcome.rule != winner:
                        out[pair] = Conflict(pair[0], pair[1], decided.call,
                                             f"intent {decided.intent.name} decides by {outcome.rule}, yet {winner} "
                                             f"comes first")
    return list(out.values())


def precedence(spec: DomainSpec, x: str, y: str) -> str | None:
    """Which of two rules decides when both apply, as a rule's ``before:`` names it; None if neither does."""
    first, second = spec.rule(x), spec.rule(y)
    if first is not None and y in first.before:
        return x
    if second is not None and x in second.before:
        return y
    return None
