"""Sampling and evolving realistic tasks (domains whose spec declares users and intents).

Base: one user, identified first, with one goal whose outcome the policy decides. The goal's kind (a write,
a refused change, an answered question) is drawn towards ``BASE_MIX``; within a kind the outcome is drawn evenly,
so the less common writes and every refusal rule stay present. Some bases, and the ``add_forbidden`` operator,
add a request the policy forbids. ``add_goal`` gives the same user a second goal about another row (never one the
task itself created, so nothing is made and then undone). ``OutcomeBalance`` steers a shard's draws so that its
published tasks meet the outcome targets (docs/verification.md, "Balanced outcomes") whatever the acceptance rate.
"""

from __future__ import annotations

import random
import re
import weakref
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from domains.engine import Database
from domains.realism_spec import Intent
from domains.spec import DomainSpec
from synthesis.realism_audit import WORD, outcome_figures, question_intents
from synthesis.realistic import Realism
from synthesis.requests import Request
from synthesis.task import Task, is_forbidden, style_for
from synthesis.toolgraph import ToolGraph
from verifiers.types import CHECKS

WRITE, REFUSAL, ANSWER = "write", "refusal", "answer"  # what the gold does about one goal
GOAL_KINDS = (WRITE, REFUSAL, ANSWER)
# the goal kinds of a shard's bases; a refused base is the only way to a task that refuses everything (6% of bases
# gives 3-5% of published tasks; at 12% it was 5-8%). Not more writes: evolution lifts the written share to ~80%,
# and a write gold has more calls and mutants to verify
BASE_MIX = {WRITE: 0.66, REFUSAL: 0.06, ANSWER: 0.28}
# the kind of the goal that ``add_goal`` adds to a parent that already writes: mixed tasks, where the agent does
# one thing and refuses another, are where refusals are taught
ADDED_GOAL_MIX = {WRITE: 0.3, REFUSAL: 0.4, ANSWER: 0.3}
FORBIDDEN_IN_BASE = 0.15  # share of bases that also carry a forbidden request; evolution adds the rest
# share of each evolved generation with a forbidden request. Per generation, since a child keeps its parent's: a
# shard-wide target would be met by the first generation alone and overshot by the next (gate: 15% to 30% overall)
FORBIDDEN_TARGET = 0.22
FORBIDDEN_CAP = 0.28  # above this share, a parent whose new goal cannot be found is not given a forbidden request
STYLE_DRAWS = 4  # speaking styles a child may draw before it keeps one that opens like its parent
GOAL_TRIES = 4  # intents ``add_goal`` tries per goal kind before it moves on


@dataclass
class OutcomeBalance:
    """A shard's accepted tasks so far, and the draws that bring them towards the targets.

    Deficit rule: the next draw is the kind furthest below its share of what has been accepted (ties in the order
    the mix lists them), so the shares hold for any acceptance rate and the same seed gives the same draws."""

    spec: DomainSpec
    offered: frozenset[str] = frozenset(GOAL_KINDS)  # the goal kinds the domain's data offers at all
    tasks: Counter[int] = field(default_factory=Counter)  # accepted, by evolution depth
    forbidden: Counter[int] = field(default_factory=Counter)
    base_kinds: Counter[str] = field(default_factory=Counter)
    intent_draws: Counter[str] = field(default_factory=Counter)  # bases' intents drawn: each comes in turn
    added_kinds: Counter[str] = field(default_factory=Counter)

    def next_base_kinds(self) -> list[str]:
        """Goal kinds for the next base, most wanted first. A kind the domain does not offer (railway asks no
        questions) has its share spread over the others in proportion, so it does not inflate the refusals."""
        mix = {k: w for k, w in BASE_MIX.items() if k in self.offered} or BASE_MIX
        return _by_deficit({k: w / sum(mix.values()) for k, w in mix.items()}, self.base_kinds)

    def base_wants_forbidden(self) -> bool:
        """Whether the next base should carry a forbidden request (``FORBIDDEN_IN_BASE`` of the bases)."""
        return self.wants_forbidden(0, FORBIDDEN_IN_BASE)

    def wants_forbidden(self, depth: int, share: float = FORBIDDEN_TARGET) -> bool:
        """Whether one more forbidden request at evolution ``depth`` keeps that generation within ``share``."""
        return self.forbidden[depth] < share * (self.tasks[depth] + 1)

    def goal_kinds_for(self, parent: Task) -> list[str]:
        """Kinds for the goal ``add_goal`` adds: a write first where the parent writes nothing (so it neither refuses
        everything nor lowers the write share), else by ``ADDED_GOAL_MIX``."""
        parent_flags = flags(self.spec, parent)
        if parent_flags["refuses_all"]:
            return [WRITE, ANSWER]  # a second refusal would keep the task refusing everything
        if not parent_flags["writes"]:
            return [WRITE, ANSWER, REFUSAL]
        return _by_deficit(ADDED_GOAL_MIX, self.added_kinds)

    def operators_for(self, parent: Task) -> list[str]:
        """Operators to try on ``parent``, in order: a forbidden request while the child's generation is below its
        target, a new goal otherwise (and only that where the parent already has a forbidden request or refuses
        everything)."""
        if any(n.startswith("forbidden=") for n in parent.notes):
            return ["add_goal"]
        depth = parent.depth + 1
        if flags(self.spec, parent)["refuses_all"]:
            return ["add_goal"]  # a forbidden request would keep it refusing everything; a write is what it lacks
        if self.wants_forbidden(depth):
            return ["add_forbidden", "add_goal"]
        return ["add_goal"] + (["add_forbidden"] if self.wants_forbidden(depth, FORBIDDEN_CAP) else [])

    def accept(self, task: Task) -> None:
        """Count one published task."""
        self.tasks[task.depth] += 1
        self.forbidden[task.depth] += any(n.startswith("forbidden=") for n in task.notes)
        goal = next((r for r in reversed(task.requests) if r.kind == "intent"), None)
        if task.evolved_from is None:
            # a base's goal is its first request the user may make: a forbidden add-on (a role's refused request is an
            # intent too) is not what was drawn, and counting it as a refusal starved the refusal goals
            own = next((r for r in task.requests if r.kind == "intent" and not is_forbidden(r)), None)
            if own is not None:
                self.base_kinds[goal_kind(self.spec, own)] += 1
        elif task.operator == "add_goal" and goal is task.requests[-1] and _writes_before(self.spec, task):
            self.added_kinds[goal_kind(self.spec, goal)] += 1


def _writes_before(spec: DomainSpec, task: Task) -> bool:
    """Whether the task wrote something before its last request (its parent's gold, for an evolved task)."""
    writes = {t.name for t in spec.tools if t.kind == "write"}
    return any(c.name in writes for r in task.requests[:-1] for c in r.calls)


def offered_kinds(graph: ToolGraph) -> frozenset[str]:
    """The goal kinds some role of the domain can be given on its seeded data."""
    realism = realism_for(graph)
    return frozenset(kind for role in realism.users.roles for intent in _goal_intents(realism, role.name)
                     for kind in _pairs_by_kind(realism, intent))


def _by_deficit(mix: dict[str, float], counts: Counter[str]) -> list[str]:
    total = sum(counts.values()) + 1
    order = list(mix)
    return sorted(order, key=lambda k: (counts[k] - mix[k] * total, order.index(k)))


def flags(spec: DomainSpec, task: Task) -> dict[str, bool]:
    """The audit's outcome figures (``writes``, ``refuses_all``) of a task, as ``toolscale audit`` computes them."""
    return outcome_figures(spec, task.gold_calls, task.notes)


def goal_kind(spec: DomainSpec, goal: Request) -> str:
    """What the gold does about one goal: a write, a refusal of a change, or an answer to a question."""
    if any(n.startswith("intent=") and n[len("intent="):] in question_intents(spec) for n in goal.notes):
        return ANSWER
    writes = {t.name for t in spec.tools if t.kind == "write"}
    return WRITE if any(c.name in writes for c in goal.calls) else REFUSAL


def outcome_kind(spec: DomainSpec, intent: Intent, outcome_name: str) -> str:
    """The kind of goal an intent's outcome makes (the same classes as ``goal_kind``)."""
    if intent.name in question_intents(spec):
        return ANSWER
    writes = {t.name for t in spec.tools if t.kind == "write"}
    outcome = intent.outcome(outcome_name)
    return WRITE if outcome is not None and any(c.tool in writes for c in outcome.calls) else REFUSAL


_REALISM: dict[int, tuple[Any, Realism]] = {}


def realism_for(graph: ToolGraph) -> Realism:
    """One ``Realism`` per materialised engine (its user and candidate caches are worth keeping)."""
    held = _REALISM.get(id(graph.engine))
    if held is None or held[0] is not graph.engine:
        held = (graph.engine, Realism(graph))
        _REALISM[id(graph.engine)] = held
    return held[1]


def is_converted(graph: ToolGraph) -> bool:
    """A domain whose spec declares users and intents gets realistic tasks; others keep the old sampler."""
    return graph.spec.users is not None and bool(graph.spec.intents)


def _goal_intents(realism: Realism, role: str = "customer") -> list[Intent]:
    return [i for i in realism.spec.intents if i.role == role and any(o.calls or o.say for o in i.outcomes)]


def _role_forbidden(realism: Realism, role: str = "customer") -> list[Intent]:
    return [i for i in realism.spec.intents if i.role == role and not any(o.calls or o.say for o in i.outcomes)]


def _replayed(graph: ToolGraph, task: Task, seen: set[tuple[str, Any]] | None = None,
              outputs: list[Any] | None = None, requests: list[Request] | None = None) -> Database | None:
    """A database where the task's gold (or only ``requests``' calls, in that order) has run after its setup;
    ``seen`` collects the rows its calls read, ``outputs`` what they returned. None if a call fails."""
    db = graph.engine.fresh()
    for c in task.setup_calls:  # a dual-control task's start (its phone broken), as the verifier replays it
        if not db.call(c.name, c.arguments, c.side).ok:
            db.close()
            return None
    for c in (task.gold_calls if requests is None else tuple(c for r in requests for c in r.calls)):
        got = db.call(c.name, c.arguments, c.side)
        if not got.ok:
            db.close()
            return None
        if seen is not None:
            seen |= set(got.reads)
        if outputs is not None:
            outputs.append(got.output)
    return db


def base_candidate(graph: ToolGraph, rng: random.Random, seed: int, kinds: list[str] | None = None,
                   with_forbidden: bool | None = None, intent_draws: Counter[str] | None = None) -> Task | None:
    """One identified user with one goal. ``kinds``: goal kinds in order of preference (the first the role can
    have is drawn; default: one drawn by ``BASE_MIX``'s weights, then the rest); ``with_forbidden``: add a
    forbidden request (default: with probability ``FORBIDDEN_IN_BASE``); ``intent_draws``: how often each
    intent was drawn so far (the least drawn is preferred, and the count updated; default: evenly at random)."""
    realism = realism_for(graph)
    roles = [r.name for r in realism.users.roles if _goal_intents(realism, r.name)]
    if not roles:
        return None
    role = rng.choice(roles)
    if kinds is None:
        first = rng.choices(list(BASE_MIX), weights=list(BASE_MIX.values()))[0]
        kinds = [first, *(k for k in BASE_MIX if k != first)]
    drawn = _draw_goal(realism, role, kinds, rng, intent_draws)
    if drawn is None:
        return None
    intent, person, row = drawn
    if with_forbidden is None:
        with_forbidden = rng.random() < FORBIDDEN_IN_BASE
    setup = realism.setup(intent, person, row)
    if setup is None:
        return None
    with graph.engine.fresh() as db:
        if not all(db.call(c.name, c.arguments, c.side).ok for c in setup):  # the start comes before any turn
            return None
        ident = realism.identification(role, person, rng)
        got = db.call(ident.calls[0].name, ident.calls[0].arguments) if ident else None
        if ident is None or got is None or not got.ok:
            return None
        goal = realism.intent_request(db, intent, person, row, rng, set(got.reads), setup=setup)
        if goal is None:
            return None
        requests = [ident, goal]
        if with_forbidden:
            extra = _forbidden(realism, db, person, role, rng)
            if extra is not None:
                requests.append(extra)  # after the goal: forbidden phrasings read as an add-on
    r = realism.role(role)
    return Task(graph.spec.name, seed, requests, style_for(rng), persona=realism.persona(role, person, rng),
                user=realism.user_key(role, person), identify_tools=tuple(i.tool for i in r.identify),
                now=graph.spec.now, **dual_control(goal))


def dual_control(goal: Request) -> dict[str, Any]:
    """A task's start and final-state checks from the goal that sets them up (dual control: its setup calls, its
    assertions, and the assertions among the checks that decide "solved"); nothing for any other goal."""
    if not (goal.setup or goal.asserts):
        return {}
    return {"setup_calls": goal.setup, "env_assertions": goal.asserts,
            "criteria": CHECKS + (("assertions",) if goal.asserts else ())}


def _starts(intent: Intent) -> bool:
    """Whether an intent's goals set up a start of their own (dual control): only a task's first goal can, since
    the setup runs before the episode."""
    return any(o.setup for o in intent.outcomes)


Pairs = list[tuple[dict[str, Any], dict[str, Any]]]
_BY_KIND: weakref.WeakKeyDictionary[Realism, dict[str, dict[str, dict[str, Pairs]]]] = weakref.WeakKeyDictionary()


def _pairs_by_kind(realism: Realism, intent: Intent) -> dict[str, dict[str, Pairs]]:
    """An intent's (user, row) pairs on the seeded data, by goal kind and outcome; kept per ``Realism``."""
    held = _BY_KIND.setdefault(realism, {})
    if intent.name not in held:
        grouped: dict[str, dict[str, Pairs]] = defaultdict(lambda: defaultdict(list))
        kinds = {o.name: outcome_kind(realism.spec, intent, o.name) for o in intent.outcomes}
        for person, row in realism.pairs(intent):
            name = str(row["outcome"])
            if name in kinds:
                grouped[kinds[name]][name].append((person, row))
        held[intent.name] = {k: dict(v) for k, v in grouped.items()}
    return held[intent.name]


def _draw_goal(realism: Realism, role: str, kinds: list[str], rng: random.Random,
               intent_draws: Counter[str] | None = None) -> tuple[Intent, dict[str, Any], dict[str, Any]] | None:
    """(intent, user, candidate row) for the first of ``kinds`` the role has on the seeded data: an intent drawn
    among those with such an outcome (evenly, or among the least drawn so far), then the outcome evenly, then
    the row."""
    for kind in kinds:
        offered = [(i, _pairs_by_kind(realism, i)[kind]) for i in _goal_intents(realism, role)
                   if _pairs_by_kind(realism, i).get(kind)]
        if offered and intent_draws is not None:
            fewest = min(intent_draws[i.name] for i, _ in offered)
            offered = [(i, pairs) for i, pairs in offered if intent_draws[i.name] == fewest]
        if offered:
            intent, by_outcome = rng.choice(offered)
            if intent_draws is not None:
                intent_draws[intent.name] += 1
            person, row = rng.choice(by_outcome[rng.choice(sorted(by_outcome))])
            return intent, person, row
    return None


def _forbidden(realism: Realism, db: Database, person: dict[str, Any], role: str, rng: random.Random) -> Request | None:
    choices = ["other", "role"]
    rng.shuffle(choices)
    for kind in choices:
        if kind == "other":
            req = realism.forbidden_for_other(db, person, rng, _goal_intents(realism, role))
        else:
            pool = _role_forbidden(realism, role)
            req = None
            if pool:
                intent = rng.choice(pool)
                # drawn from the state after the task's own calls: never a record the task itself created
                rows = [r for r in realism.candidates(db, intent, person) if not realism.created_by_task(r)]
                req = realism.intent_request(db, intent, person, rng.choice(rows), rng) if rows else None
        if req is not None:
            return req
    return None


_SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)")


def _used_columns(intent: Intent, outcome_name: str) -> frozenset[str]:
    """The candidate columns a goal of ``intent`` with that outcome reads off its row: those its words, its calls
    and its answer name (another outcome's answer, a count told only at a limit, is not this goal's)."""
    texts = [*intent.phrasings, *intent.knows, *intent.for_someone_else]
    calls = list(intent.find)
    outcome = intent.outcome(outcome_name)
    if outcome is not None:
        texts += outcome.say
        calls += outcome.calls
    texts += [str(v) for call in calls for v in call.arguments.values()]
    return frozenset(m for t in texts for m in _SLOT.findall(t))


def _decided_alike(realism: Realism, db: Database | None, person: dict[str, Any], request: Request) -> bool:
    """Whether ``request``'s intent would decide its row the same way on ``db``: a candidate row for ``person`` that
    agrees with it on every column the intent names (and every key column) has the same outcome. ``db`` is closed
    here; None (the calls before it failed) is not alike, and a request no intent decided is alike wherever it
    runs."""
    if db is None:
        return False
    try:
        if request.decided_on is None:
            return True
        name, row = request.decided_on
        intent = next(i for i in realism.spec.intents if i.name == name)
        wanted = dict(row)
        used = _used_columns(intent, str(wanted.get("outcome")))
        same = [c for c in wanted if c in used or c in realism.spec.primary_keys or c == "outcome"]
        return any(all(r.get(c) == wanted[c] for c in same) for r in realism.candidates(db, intent, person))
    finally:
        db.close()


def order_free(graph: ToolGraph, realism: Realism, parent: Task, person: dict[str, Any], goal: Request) -> bool:
    """Whether ``goal`` and ``parent``'s goals keep their outcomes whichever is done first. A person who asks for two
    things rarely means an order, so a careful agent may do them either way round; where the order changes an
    outcome (a subscription asked for at the plan's limit, then another given up) the task has two right answers
    and its gold only one. Checked both ways: ``goal`` decided alike before the parent's goals ran, and each parent
    goal decided alike with ``goal`` done just before it."""
    before = [r for r in parent.requests if r.decided_on is None]  # identification: what every goal runs after
    if not _decided_alike(realism, _replayed(graph, parent, requests=before), person, goal):
        return False
    for i, request in enumerate(parent.requests):
        if request.decided_on is not None and not _decided_alike(
                realism, _replayed(graph, parent, requests=[*parent.requests[:i], goal]), person, request):
            return False
    return True


def _person(realism: Realism, task: Task) -> tuple[str, dict[str, Any]] | None:
    assert task.persona is not None and task.user is not None
    role = task.persona.role
    people = realism.people(role)
    key = realism.spec.table(realism.role(role).table).primary_key
    found = next((p for p in people if p[key] == task.user[1]), None)
    return (role, found) if found else None


def _child(parent: Task, requests: list[Request], operator: str, rng: random.Random) -> Task:
    # a fresh speaking style, redrawn while the child would open with its parent's three words: a lineage that
    # opens alike crowds the common openings (the parent and both its descendants are published)
    opening = _opening(parent)
    for _ in range(STYLE_DRAWS):
        child = Task(parent.domain, parent.seed, requests, style_for(rng), evolved_from=parent.task_id,
                     operator=operator, depth=parent.depth + 1, persona=parent.persona, user=parent.user,
                     identify_tools=parent.identify_tools, now=parent.now, criteria=parent.criteria,
                     setup_calls=parent.setup_calls, env_assertions=parent.env_assertions)
        if _opening(child) != opening:
            break
    return child


def _opening(task: Task) -> list[str]:
    return WORD.findall(task.reason_for_call().lower())[:3]


def add_goal(graph: ToolGraph, parent: Task, rng: random.Random, kinds: list[str] | None = None) -> Task | None:
    """The same user wants one more thing, about a row the task has not created or changed. ``kinds``: goal kinds in
    order of preference (default: any); within a kind, up to ``GOAL_TRIES`` intents are tried."""
    realism = realism_for(graph)
    found = _person(realism, parent)
    if found is None:
        return None
    role, person = found
    done = {n for n in parent.notes if n.startswith("intent=")}
    touched = {key for r in parent.requests for _, key in r.entities}
    seen: set[tuple[str, Any]] = set()
    earlier: list[Any] = []
    db = _replayed(graph, parent, seen, earlier)
    if db is None:
        return None
    try:
        intents = [i for i in _goal_intents(realism, role) if f"intent={i.name}" not in done and not _starts(i)]
        rng.shuffle(intents)
        open_rows: dict[str, list[dict[str, Any]]] = {}  # per intent, read once from the parent's end state
        for wanted in ([None] if kinds is None else kinds):
            tried = 0
            for intent in intents:
                if tried == GOAL_TRIES:
                    break
                if intent.name not in open_rows:
                    open_rows[intent.name] = [r for r in realism.candidates(db, intent, person)
                                              if not touched & set(r.values()) and not realism.created_by_task(r)]
                rows = [r for r in open_rows[intent.name]
                        if wanted is None or outcome_kind(realism.spec, intent, str(r.get("outcome"))) == wanted]
                if not rows:
                    continue
                tried += 1
                outcomes = sorted({str(r.get("outcome")) for r in rows})  # evenly: the rarer rules stay present
                picked = rng.choice(outcomes)
                row = rng.choice([r for r in rows if str(r.get("outcome")) == picked])
                goal = realism.intent_request(db, intent, person, row, rng, seen, earlier)
                if goal is not None and order_free(graph, realism, parent, person, goal):
                    return _child(parent, [*parent.requests, goal], "add_goal", rng)
                if goal is not None:  # its calls ran on db: start again from the parent's end
                    db.close()
                    seen, earlier = set(), []
                    db = _replayed(graph, parent, seen, earlier)
                    if db is None:
                        return None
        return None
    finally:
        if db is not None:
            db.close()


def add_forbidden(graph: ToolGraph, parent: Task, rng: random.Random) -> Task | None:
    """Pair the allowed requests with one the policy forbids, so doing everything fails as doing nothing does."""
    if any(n.startswith("forbidden=") for n in parent.notes):
        return None
    realism = realism_for(graph)
    found = _person(realism, parent)
    if found is None:
        return None
    role, person = found
    db = _replayed(graph, parent)
    if db is None:
        return None
    try:
        extra = _forbidden(realism, db, person, role, rng)
        return None if extra is None else _child(parent, [*parent.requests, extra], "add_forbidden", rng)
    finally:
        db.close()


def evolve_realistic(graph: ToolGraph, parent: Task, rng: random.Random,
                     balance: OutcomeBalance | None = None) -> Task | None:
    """One child of ``parent``: operators and goal kinds chosen by ``balance`` (a shard's), else in random order."""
    if parent.persona is None:
        return None
    if balance is None:
        operators = [add_goal, add_forbidden]
        rng.shuffle(operators)
        for op in operators:
            child = op(graph, parent, rng)
            if child is not None:
                return child
        return None
    for name in balance.operators_for(parent):
        child = (add_goal(graph, parent, rng, balance.goal_kinds_for(parent)) if name == "add_goal"
                 else add_forbidden(graph, parent, rng))
        if child is not None:
            return child
    return None
