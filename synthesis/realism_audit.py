"""Realism figures: per task (computed where the task is verified) and per domain (what ``toolscale audit``
prints, the warehouse stores and the quality gate reads).

Per task: identification, policy-hinged decision, forbidden request, staff-only tools posed by a customer,
internal ids named in the request, invariant violations in the gold end state, no-op gold writes, lazy
agents that pass (empty and parrot, under this project's verifier and tau2's rule), and what must be said
that is unspecific or already in the request; and the outcome balance (``outcome_figures``): whether the
gold writes, and whether it refuses everything that was asked.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from domains.engine import DomainEngine, ToolCall
from domains.spec import DomainSpec
from synthesis.wording import doubled_connectives, doubled_words, greeting_contradicts, lowercased_names, plural_slips
from verifiers.checks import normalise
from verifiers.derivability import Derivation, derive, evidence_for
from verifiers.memo import remembered, task_key
from verifiers.realism import end_state_violations, lazy_from, noop_writes
from verifiers.replay import replay
from verifiers.types import Trajectory, VerifiableTask, Verdict
from verifiers.verify import verify

WORD = re.compile(r"[a-z0-9']+")
BARE_SHORT = re.compile(r"^\W*[\w.]{1,2}\W*$")


@dataclass(frozen=True)
class TaskFacts:
    """What the audit needs of one task, whatever produced it (a fresh record or a warehouse row)."""

    domain: str
    gold_calls: tuple[ToolCall, ...]
    communicate_info: tuple[str, ...]
    request: str
    instruction: str
    notes: tuple[str, ...] = ()
    persona: str | None = None
    role: str | None = None
    user: tuple[str, Any] | None = None
    identify_tools: tuple[str, ...] = ()
    seed: int = 0
    clause_skeletons: tuple[str, ...] = ()  # each request clause as said, record values replaced by '{}'
    said_values: tuple[str, ...] = ()  # the record values the request spells out (names, places, ids)
    # what decides "solved" beyond the gold (VerifiableTask's contract): a dual-control task starts from its setup
    # calls and is judged on its assertions too; None: every check, no setup (any other task)
    contract: dict[str, Any] | None = None


_ID_PATTERNS: dict[tuple[str, str], re.Pattern[str] | None] = {}


def _internal_id_pattern(spec: DomainSpec) -> re.Pattern[str] | None:
    """Keys of tables people do not hold (sequence ids such as 'SV0156'); memoised per spec."""
    key = (spec.name, spec.spec_hash)
    if key not in _ID_PATTERNS:
        _ID_PATTERNS[key] = _build_id_pattern(spec)
    return _ID_PATTERNS[key]


def _build_id_pattern(spec: DomainSpec) -> re.Pattern[str] | None:
    held = set(spec.users.held) if spec.users else set()
    alts = []
    for t in spec.tables:
        col = t.column(t.primary_key)
        if t.name in held or col is None or col.type != "text" or col.seed.get("kind") != "sequence":
            continue
        alts.append(re.escape(col.seed.get("prefix", "")) + r"\d{%d}" % col.seed.get("width", 4))
    return re.compile(r"\b(?:" + "|".join(alts) + r")\b") if alts else None


def staff_only_tools(spec: DomainSpec) -> set[str]:
    """Tools a customer may not ask for (empty when the spec declares no roles)."""
    if spec.users is None or spec.users.role("customer") is None:
        return set()
    allowed = set(spec.users.role("customer").may_call)  # type: ignore[union-attr]
    return {t.name for t in spec.tools} - allowed


def identify_tools(spec: DomainSpec) -> set[str]:
    return {i.tool for r in spec.users.roles for i in r.identify} if spec.users else set()


def task_figures(engine: DomainEngine, facts: TaskFacts, derivation: Derivation | None = None) -> dict[str, Any]:
    """One task's figures; ``derivation``: its value sources where admission already derived them (else derived
    here from this replay, with the instruction as the user's words)."""
    spec = engine.spec
    calls = facts.gold_calls
    verifiable = VerifiableTask(facts.domain, facts.seed, calls, facts.communicate_info, facts.user,
                                facts.identify_tools).with_contract(facts.contract)
    empty, violations, noops, outputs = remembered(engine, "gold_figures", task_key(verifiable),
                                                   lambda: _gold_figures(engine, verifiable))
    lazy = lazy_from(empty, verifiable, facts.request)
    if derivation is None:
        derivation = derive(calls, list(outputs), facts.communicate_info, evidence_for(spec, facts.instruction))
    said = normalise(facts.instruction)
    ids = _internal_id_pattern(spec)
    customer = facts.role in (None, "customer")
    return {
        "identified": bool(calls) and calls[0].name in identify_tools(spec),
        "policy_hinged": "hinged" in facts.notes,
        "forbidden": any(n.startswith("forbidden=") for n in facts.notes),
        "staff_only_calls": sum(c.name in staff_only_tools(spec) for c in calls) if customer else 0,
        "internal_ids": len(ids.findall(facts.request)) if ids else 0,
        "invariant_violations": violations,
        "invariants": len(spec.invariants),  # the plausibility facts the domain declares (``toolscale audit``)
        "noop_writes": noops,
        "empty_passes": int(lazy.empty_ours) + int(lazy.empty_tau2),
        "parrot_passes": int(lazy.parrot_ours) + int(lazy.parrot_tau2),
        "short_communicate": sum(bool(BARE_SHORT.match(i)) for i in facts.communicate_info),
        "communicate_in_request": sum(normalise(i).strip() in said for i in facts.communicate_info if i.strip()),
        "underivable_arguments": len(derivation.missing),
        "persona": facts.persona,
        "opening": " ".join(WORD.findall(facts.request.lower())[:3]),
        **language_figures(facts, spec.now),
        "converted": bool(spec.intents),
        **outcome_figures(spec, calls, facts.notes),
        "unwritten_rule_decisions": unwritten_rule_decisions(spec, facts.notes),
    }


def _gold_figures(engine: DomainEngine, task: VerifiableTask) -> tuple[Verdict, int, int, tuple[Any, ...]]:
    """What a task's figures take from its gold alone, from one replay: the empty trajectory's verdict, invariant
    violations, no-op writes and each call's output (remembered per gold: candidates repeat golds)."""
    gold = replay(engine, task.gold_calls, task.setup_calls)
    try:
        empty = verify(task, Trajectory(), engine, gold)
        violations = end_state_violations(engine, task.gold_calls, gold)
    finally:
        gold.close()
    return empty, violations, noop_writes(engine, task.gold_calls, task.setup_calls), tuple(r.output for r in gold.results)


_QUESTIONS: dict[tuple[str, str], frozenset[str]] = {}


def question_intents(spec: DomainSpec) -> frozenset[str]:
    """Intents that ask for information: none of their outcomes writes, and at least one says or reads something
    (a request the role may not make has neither, and is a refusal). Memoised per spec."""
    key = (spec.name, spec.spec_hash)
    if key not in _QUESTIONS:
        writes = {t.name for t in spec.tools if t.kind == "write"}
        _QUESTIONS[key] = frozenset(i.name for i in spec.intents
                                    if not any(c.tool in writes for o in i.outcomes for c in o.calls)
                                    and any(o.calls or o.say for o in i.outcomes))
    return _QUESTIONS[key]


def outcome_figures(spec: DomainSpec, calls: tuple[ToolCall, ...] | list[ToolCall], notes: tuple[str, ...] | list[str]
                    ) -> dict[str, bool]:
    """``writes``: the gold makes at least one write call. ``refuses_all``: the gold writes nothing and every request
    the user made was turned down: each is a forbidden request or a change the policy refused, none a question
    that was answered. A task whose notes name no intent (an unconverted domain's) refuses nothing."""
    writes = {t.name for t in spec.tools if t.kind == "write"}
    wrote = any(c.name in writes for c in calls)
    asked = [n[len("intent="):] for n in notes if n.startswith("intent=")]
    answered = question_intents(spec) & set(asked)
    return {"writes": wrote, "refuses_all": not wrote and bool(asked) and not answered}


def unwritten_rule_decisions(spec: DomainSpec, notes: tuple[str, ...]) -> int:
    """Decisions (one ``intent=`` note per decided or refused request) that cite no rule the policy writes."""
    decisions = sum(n.startswith("intent=") for n in notes)
    written = sum(n.startswith("rule=") and spec.rule(n[5:]) is not None for n in notes)
    return max(decisions - written, 0)


def publishable(figures: dict[str, Any]) -> tuple[bool, str]:
    """For converted domains, a task must pass every realism check to be published."""
    for name in ("staff_only_calls", "invariant_violations", "noop_writes", "empty_passes", "parrot_passes",
                 "short_communicate", "communicate_in_request", "internal_ids", *LANGUAGE_SLIPS):
        if figures.get(name):  # a wording slip is rejected here, so the gate's 0 holds for what is published
            return False, f"realism_{name}: {figures[name]}"
    if not figures["identified"]:
        return False, "realism_identified: the gold does not start by identifying the user"
    return True, "ok"


OUTCOME_COLUMNS = ("write_share", "refuse_all_share")  # outcome balance (issue 15), see ``outcome_figures``
def language_figures(facts: TaskFacts, now: str | None) -> dict[str, Any]:
    """Slips in the request's wording (each must be 0) and its clause skeletons."""
    return {
        "greeting_clock_contradictions": int(greeting_contradicts(facts.request, now)),
        "doubled_words": len(doubled_words(facts.request, facts.said_values)),
        "doubled_joiners": doubled_connectives(facts.request),
        "plural_slips": plural_slips(facts.request),
        "lowercased_names": lowercased_names(facts.request, facts.said_values),
        "clause_skeletons": list(facts.clause_skeletons),
    }


LANGUAGE_SLIPS = ("greeting_clock_contradictions", "doubled_words", "doubled_joiners", "plural_slips",
                  "lowercased_names")
AUDIT_COLUMNS = ("domain", "converted", "tasks", "identified_share", "policy_hinged_share", "forbidden_share",
                 "staff_only_calls", "requests_naming_internal_ids", "invariants", "invariant_violations",
                 "noop_writes", "empty_passes", "parrot_passes", "short_communicate", "communicate_in_request",
                 "underivable_arguments", "top_opening_share", "top_opening", "distinct_bigrams", "distinct_personas",
                 *LANGUAGE_SLIPS,
                 "clause_skeletons", "request_clauses", "top_skeleton_share", "top_skeleton", *OUTCOME_COLUMNS,
                 "unwritten_rule_decisions")


def aggregate(domain: str, figures: list[dict[str, Any]], requests: list[str]) -> dict[str, Any]:
    """One domain's audit row from its tasks' figures and request texts."""
    n = len(figures)
    openings = Counter(f["opening"] for f in figures)
    top, top_n = openings.most_common(1)[0] if openings else ("", 0)
    bigrams = {pair for text in requests for pair in _bigrams(text)}
    share = (lambda key: round(sum(bool(f[key]) for f in figures) / n, 4) if n else 0.0)
    skeletons = Counter(s for f in figures for s in f.get("clause_skeletons", ()))
    clauses = sum(skeletons.values())
    top_skeleton, top_skeleton_n = skeletons.most_common(1)[0] if skeletons else ("", 0)
    return {
        "domain": domain, "converted": any(f["converted"] for f in figures), "tasks": n,
        "identified_share": share("identified"), "policy_hinged_share": share("policy_hinged"),
        "forbidden_share": share("forbidden"),
        "staff_only_calls": sum(f["staff_only_calls"] for f in figures),
        "requests_naming_internal_ids": sum(bool(f["internal_ids"]) for f in figures),
        "invariants": max((f.get("invariants", 0) for f in figures), default=0),
        "invariant_violations": sum(f["invariant_violations"] for f in figures),
        "noop_writes": sum(f["noop_writes"] for f in figures),
        "empty_passes": sum(f["empty_passes"] for f in figures),
        "parrot_passes": sum(f["parrot_passes"] for f in figures),
        "short_communicate": sum(f["short_communicate"] for f in figures),
        "communicate_in_request": sum(f["communicate_in_request"] for f in figures),
        # tasks with a gold value that has no source (figures of older records lack it: counted as 0)
        "underivable_arguments": sum(bool(f.get("underivable_arguments")) for f in figures),
        "top_opening_share": round(top_n / n, 4) if n else 0.0, "top_opening": top,
        "distinct_bigrams": len(bigrams),
        "distinct_personas": len({f["persona"] for f in figures if f["persona"]}),
        **{k: sum(f.get(k, 0) for f in figures) for k in LANGUAGE_SLIPS},
        "clause_skeletons": len(skeletons), "request_clauses": clauses,
        "top_skeleton_share": round(top_skeleton_n / clauses, 4) if clauses else 0.0, "top_skeleton": top_skeleton,
        **outcome_shares(figures),
        "unwritten_rule_decisions": sum(f.get("unwritten_rule_decisions", 0) for f in figures),
    }


def outcome_shares(figures: list[dict[str, Any]]) -> dict[str, float]:
    """Share of tasks whose gold writes something, and of tasks that refuse everything that was asked."""
    n = len(figures)
    return {"write_share": round(sum(bool(f.get("writes")) for f in figures) / n, 4) if n else 0.0,
            "refuse_all_share": round(sum(bool(f.get("refuses_all")) for f in figures) / n, 4) if n else 0.0}


def _bigrams(text: str) -> list[tuple[str, str]]:
    words = WORD.findall(text.lower())
    return list(zip(words, words[1:]))
