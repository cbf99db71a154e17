"""Tasks as people ask them, read off a spec's ``users`` and ``intents`` (no per-domain code).

A task has one user: a concrete row of a role's table, with a persona. The gold starts by identifying that
user with what they know (e-mail, or name and date of birth), then, per goal, looks the records up and does
what the policy decides for this data: one write, another, or a refusal. Some tasks add a request the policy
forbids (another person's record, or something the user's role may not ask), which the gold leaves undone.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from datetime import date
from typing import Any

from domains.engine import Database, ToolCall
from domains.realism_spec import ACT_FOR_USER, AssertTemplate, CallTemplate, Intent, Role, template_problems
from synthesis.persona import Persona
from verifiers.words import find_word
from synthesis.requests import Request
from synthesis.toolgraph import ToolGraph
from verifiers.derivability import Sources, derive, evidence_for, referenced_calls
from verifiers.values import agree as agree_number

ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
WHOLE_SLOT = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")
MAX_USERS_SCANNED = 400


def human_date(value: str) -> str:
    """'2025-09-16' -> 'Tuesday 16 September' (the year only when it is not the clock's year)."""
    d = date.fromisoformat(value)
    return f"{d:%A} {d.day} {d:%B}"


def _humanise(ctx: dict[str, Any]) -> dict[str, Any]:
    """Values as a person says them: dates spelled out, 'gift_card' as 'gift card'."""
    out = {}
    for k, v in ctx.items():
        if isinstance(v, str) and ISO_DATE.match(v):
            v = human_date(v)
        elif isinstance(v, str) and "_" in v and v.replace("_", "").isalpha():
            v = v.replace("_", " ")
        out[k] = v
    return out


def spelled_out(clause: str, ctx: dict[str, Any]) -> tuple[str, ...]:
    """The context values that appear in ``clause`` as whole words, in order of appearance."""
    found: dict[str, int] = {}
    for v in ctx.values():
        if isinstance(v, bool) or not isinstance(v, (str, int, float)) or not str(v).strip():
            continue
        at = find_word(clause, str(v))
        if at >= 0:
            found.setdefault(str(v), at)
    return tuple(sorted(found, key=lambda v: found[v]))


def render(template: str, ctx: dict[str, Any], result: dict[str, Any] | None = None) -> str | None:
    """Fill a phrasing or a 'say' template; None if a slot has no value."""
    if template_problems(template):  # refused when the spec loads; never formatted here either
        return None
    try:
        return template.format(**ctx, result=result or {})
    except (KeyError, IndexError, ValueError, TypeError):
        return None


def bind(call: CallTemplate, ctx: dict[str, Any], properties: dict[str, Any] | None = None) -> ToolCall | None:
    """A call template with the context's values: a lone '{slot}' keeps the value's type, and JSON text (a
    candidates column built with json_array/json_object) becomes the list or object that ``properties`` (the
    tool's parameter schemas) asks for."""
    args: dict[str, Any] = {}
    for name, value in call.arguments.items():
        if isinstance(value, str):
            whole = WHOLE_SLOT.match(value)
            if whole:
                if whole.group(1) not in ctx or ctx[whole.group(1)] is None:
                    return None
                args[name] = _decoded((properties or {}).get(name, {}), ctx[whole.group(1)])
                continue
            filled = render(value, ctx)
            if filled is None:
                return None
            args[name] = filled
        else:
            args[name] = value
    return ToolCall(call.tool, args)


def bind_assert(check: AssertTemplate, ctx: dict[str, Any], side: str) -> dict[str, Any] | None:
    """An outcome's assertion on the final state as a task's env assertion (tau2's shape: ``env_type`` is the
    toolkit of the ``side`` whose tables it reads), or None if a slot has no value."""
    args = bind(CallTemplate(check.name, check.arguments), ctx)
    if args is None:
        return None
    return {"env_type": "user" if side == "user" else "assistant", "func_name": check.name,
            "arguments": args.arguments, "assert_value": check.value}


def _decoded(schema: dict[str, Any], value: Any) -> Any:
    if schema.get("type") in ("array", "object") and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value  # not JSON: the tool's argument check names the bad value
    return value


class Realism:
    """Users, candidate rows and requests of one materialised domain (cached per process)."""

    def __init__(self, graph: ToolGraph):
        self.graph = graph
        self.spec = graph.spec
        assert self.spec.users is not None
        self.users = self.spec.users
        self._people: dict[str, list[dict[str, Any]]] = {}
        self._pairs: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
        self._seeded_keys: dict[str, set[Any]] = {}
        self.plan_derivable = True  # skip goals whose gold uses a value the user never gave nor a call returned

    def created_by_task(self, row: dict[str, Any]) -> bool:
        """Whether ``row`` names a record the seeded database does not hold: one the task itself created (a new
        booking's id), which the person could not have known when they asked."""
        for column, value in row.items():
            table = self.spec.primary_keys.get(column)
            if table is None or value is None:
                continue
            if table not in self._seeded_keys:
                self._seeded_keys[table] = set(self.graph.engine.seeded_values(table, column))
            if value not in self._seeded_keys[table]:
                return True
        return False

    def role(self, name: str) -> Role:
        role = self.users.role(name)
        assert role is not None
        return role

    def people(self, role_name: str) -> list[dict[str, Any]]:
        """Rows that may play the role, in key order."""
        if role_name not in self._people:
            role = self.role(role_name)
            table = self.spec.table(role.table)
            where = f"WHERE {role.where}" if role.where else ""
            with self.graph.engine.fresh() as db:
                cur = db.conn.execute(f"SELECT * FROM {table.name} {where} ORDER BY {table.primary_key} "
                                      f"LIMIT {MAX_USERS_SCANNED}", {"now": self.spec.now})
                names = [d[0] for d in cur.description]
                self._people[role_name] = [dict(zip(names, r)) for r in cur.fetchall()]
        return self._people[role_name]

    def user_key(self, role_name: str, person: dict[str, Any]) -> tuple[str, Any]:
        table = self.spec.table(self.role(role_name).table)
        return table.name, person[table.primary_key]

    def candidates(self, db: Database, intent: Intent, person: dict[str, Any]) -> list[dict[str, Any]]:
        key = self.user_key(intent.role, person)[1]
        cur = db.conn.execute(intent.candidates, {"user": key, "now": self.spec.now})
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def pairs(self, intent: Intent) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Every (user, candidate row) of an intent on the seeded state."""
        if intent.name not in self._pairs:
            out = []
            with self.graph.engine.fresh() as db:
                for person in self.people(intent.role):
                    out += [(person, row) for row in self.candidates(db, intent, person)]
            self._pairs[intent.name] = out
        return self._pairs[intent.name]

    def persona(self, role_name: str, person: dict[str, Any], rng: random.Random) -> Persona:
        return Persona(self.users.person_name(person) or "the user", role_name, rng.choice(self.users.manners),
                       self.role(role_name).noun or "")

    def identification(self, role_name: str, person: dict[str, Any], rng: random.Random) -> Request | None:
        role = self.role(role_name)
        ident = rng.choice(role.identify)
        call = bind(CallTemplate(ident.tool, ident.arguments), person)
        if call is None:
            return None
        # identification facts are what a person types into a form: dates of birth stay as written (ISO)
        facts = tuple(f for f in (render(t, person) for t in ident.facts) if f)
        return Request("identify", "", (call,), known=facts, notes=("identify",))

    def _properties(self, tool: str) -> dict[str, Any]:
        found = self.spec.tool(tool)
        return dict(found.parameters.get("properties", {})) if found else {}

    def writes(self) -> set[str]:
        return {t.name for t in self.spec.tools if t.kind == "write"}

    def agent_writes(self) -> set[str]:
        """The write tools the agent calls (a dual-control spec's user writes change the user's own device)."""
        return {t.name for t in self.spec.tools if t.kind == "write" and t.side == "agent"}

    def sided(self, call: ToolCall) -> ToolCall:
        """The call from the side whose tool it is: the user makes a user tool's call, on their own device."""
        tool = self.spec.tool(call.name)
        side = tool.side if tool is not None else "agent"
        return call if side == call.side else ToolCall(call.name, call.arguments, side)

    def setup(self, intent: Intent, person: dict[str, Any], row: dict[str, Any]) -> tuple[ToolCall, ...] | None:
        """The calls that set up the start an outcome is about (dual control), as the task's setup calls; () for
        an outcome without a setup, None when a slot has no value."""
        outcome = intent.outcome(str(row.get("outcome")))
        if outcome is None:
            return None
        ctx = {**person, **row, "user_name": self.users.person_name(person)}
        calls = [bind(c, ctx, self._properties(c.tool)) for c in outcome.setup]
        if any(c is None for c in calls):
            return None
        return tuple(ToolCall(c.name, c.arguments, "setup") for c in calls if c is not None)

    def intent_request(self, db: Database, intent: Intent, person: dict[str, Any], row: dict[str, Any],
                       rng: random.Random, seen: set[tuple[str, Any]] | None = None,
                       earlier: Sequence[Any] = (), setup: tuple[ToolCall, ...] = ()) -> Request | None:
        """The user's goal about one row, with the gold the policy decides; runs the calls on ``db``.
        ``seen``: rows earlier gold calls already read; a look-up that reads nothing new is left out of the gold
        (the agent may still make it), since a gold call that no check can miss teaches nothing. ``earlier``: what
        the task's earlier gold calls returned, so a record already looked up is not looked up again. ``setup``: the
        outcome's setup calls (``setup``), already run on ``db`` before the task's first call; kept on the request."""
        seen = set(seen or ())
        outcome = intent.outcome(str(row.get("outcome")))
        if outcome is None:
            return None
        ctx = {**person, **row, "user_name": self.users.person_name(person)}
        calls: list[ToolCall] = []
        for template in (*intent.find, *outcome.calls):
            call = bind(template, ctx, self._properties(template.tool))
            if call is None:
                return None
            calls.append(self.sided(call))
        asserts = tuple(bind_assert(a, ctx, self.spec.assertions[a.name].side) for a in outcome.asserts)
        if any(a is None for a in asserts):
            return None
        calls_run, seen_before = tuple(calls), frozenset(seen)
        identified = self._identified(db, intent.role, person)  # before this goal's calls change anything
        result: dict[str, Any] | None = None
        written: set[tuple[str, Any]] = set()
        kept: set[int] = set()
        outputs: list[Any] = []
        for i, call in enumerate(calls):
            got = db.call(call.name, call.arguments, call.side)
            if not got.ok:
                return None
            outputs.append(got.output)
            if isinstance(got.output, dict):
                result = got.output
            written |= set(got.writes)
            # what the user reads off their own device is how the agent tells one cause from another, and shows no
            # record key: such a read among the outcome's calls stays
            if call.name in self.writes() or not got.reads <= seen or (call.side == "user" and i >= len(intent.find)):
                kept.add(i)
            seen |= set(got.reads)
        say = []
        for template in outcome.say:
            text = render(template, ctx, result)
            if text is None:
                return None
            say.append(agree_number(text))  # "1 students" -> "1 student"
        shown = _humanise(ctx)
        phrasing = rng.choice(intent.phrasings)
        clause = render(phrasing, shown)
        known = tuple(k for k in (render(t, shown) for t in intent.knows) if k)
        if clause is None:
            return None
        required = set(intent.required_say(outcome, phrasing))  # a value nobody asked for is not required
        say = [text for template, text in zip(outcome.say, say) if template in required]
        needed = self._needed(identified, earlier, intent.role, person, (clause, *known), seen_before, calls_run,
                              outputs, say)
        if needed is None:
            return None  # no lookup path from what this user knows: the intent is not offered to them
        # a look-up that reads nothing new stays when a later value is read off its output (a balance, a venue)
        calls = [c for i, c in enumerate(calls_run) if i in kept | needed]
        rule = self.spec.rule(outcome.rule)
        if rule is not None and rule.alternative is not None and rule.alternative.offer and not written:
            known += (rule.alternative.declined(),)  # the policy has the agent offer it; this user turns it down
        notes = (f"intent={intent.name}", f"outcome={outcome.name}", f"rule={outcome.rule}")  # the rule's id
        if intent.hinges_on_policy:
            notes += ("hinged",)
        if not outcome.calls and not outcome.say and len(intent.outcomes) == 1:
            notes += ("forbidden=role",)  # nothing to do and nothing to say: a request the role may not make
        return Request("intent", clause, tuple(calls), tuple(say), known, entities=tuple(sorted(written, key=repr)),
                       notes=notes, says=spelled_out(clause, shown), setup=setup, asserts=asserts,
                       decided_on=(intent.name, tuple(sorted(row.items()))))

    def _identified(self, db: Database, role_name: str, person: dict[str, Any]) -> Any:
        """What identifying the user returns now (their record, for a role identified by a details look-up)."""
        ident = self.role(role_name).identify[0]
        found = bind(CallTemplate(ident.tool, ident.arguments), person)
        got = db.call(found.name, found.arguments) if found is not None else None
        return got.output if got is not None and got.ok else None

    def _needed(self, identified: Any, earlier: Sequence[Any], role_name: str, person: dict[str, Any],
                words: tuple[str, ...], seen: frozenset[tuple[str, Any]], calls: tuple[ToolCall, ...],
                outputs: list[Any], say: list[str]) -> set[int] | None:
        """Planning's cheap reading of the derivability check that admission makes: the positions of the calls
        whose outputs later values are read from, or None when a value has no source. A goal may use its words,
        the user's identification facts, what identifying the user returns, the keys of rows earlier gold calls
        read and what they returned, and what its own calls return. With the check off (``plan_derivable`` False: a report), nothing is
        skipped, and the look-ups that values are read from are still kept."""
        facts = [f for i in self.role(role_name).identify for f in (render(t, person) for t in i.facts) if f]
        evidence = evidence_for(self.spec, " ".join([*words, *facts, self.users.person_name(person) or ""]))
        known = Sources(evidence)
        known.returned("user", identified)
        known.returned("seen", [key for _, key in sorted(seen, key=repr)])
        for j, output in enumerate(earlier):
            known.returned(f"earlier[{j}]", output)
        derivation = derive(calls, outputs, say, evidence, known)
        return referenced_calls(derivation.sources) if derivation.derivable or not self.plan_derivable else None

    def forbidden_for_other(self, db: Database, person: dict[str, Any], rng: random.Random,
                            intents: list[Intent]) -> Request | None:
        """A request about another person's row that the tool would carry out but the policy forbids."""
        pool = [i for i in intents if i.for_someone_else]
        if not pool:
            return None
        intent = rng.choice(pool)
        me = self.user_key(intent.role, person)[1]
        options = [(p, r) for p, r in self.pairs(intent)
                   if self.user_key(intent.role, p)[1] != me and _writes(intent, r, self.agent_writes())]
        rng.shuffle(options)
        for other, row in options[:8]:
            outcome = intent.outcome(str(row["outcome"]))
            assert outcome is not None
            ctx = {**other, **row, "other_name": self.users.person_name(other)}
            calls = [bind(c, ctx, self._properties(c.tool)) for c in outcome.calls]
            if any(c is None for c in calls):
                continue
            # the forbidden act must be one the tools would let through, or refusing it teaches nothing (the
            # agent's part of it: another person's phone is not in this user's hands)
            sided = [self.sided(c) for c in calls if c is not None]
            if not all(db.dry_run(c.name, c.arguments).ok for c in sided if c.side == "agent"):
                continue
            clause = render(rng.choice(intent.for_someone_else), _humanise(ctx))
            if clause is None:
                continue
            return Request("forbidden", clause, (), notes=("forbidden=other_owner", f"intent={intent.name}",
                                                           f"rule={ACT_FOR_USER.id}"),
                           says=spelled_out(clause, _humanise(ctx)))
        return None


def _writes(intent: Intent, row: dict[str, Any], writes: set[str]) -> bool:
    outcome = intent.outcome(str(row.get("outcome")))
    return outcome is not None and any(c.tool in writes for c in outcome.calls)
