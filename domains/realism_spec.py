"""The realism sections of a domain spec (users, rules, invariants, intents): typed objects and their semantic checks.

Kept apart from ``domains/spec.py`` so the core loader stays small; ``spec.py`` builds these objects and
appends their problems to its own, in the same ``path: message`` form.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from domains.spec import DomainSpec

SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\])?(?::[^}]*)?\}")
# a role's noun follows "a"/"an" in a persona ("an instructor"): lowercase words, spaces or hyphens between
ROLE_NOUN = re.compile(r"^[a-z]+(?:[ -][a-z]+){0,3}$")
# slots every phrasing may use besides the candidate row's columns
BUILTIN_SLOTS = {"user_name", "other_name", "result"}


@dataclass(frozen=True)
class CallTemplate:
    """A gold call with argument templates: ``'{column}'`` alone keeps the value's type."""

    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class AssertTemplate:
    """An assertion on the final state (one of the spec's ``assertions:``) with argument templates, and the value
    it must give (tau2's ``assert_value``)."""

    name: str
    arguments: dict[str, Any]
    value: bool = True


@dataclass(frozen=True)
class Identification:
    tool: str
    arguments: dict[str, Any]
    facts: tuple[str, ...]


@dataclass(frozen=True)
class Role:
    name: str  # customer | staff
    table: str
    identify: tuple[Identification, ...]
    may_call: tuple[str, ...]
    where: str = ""
    rule: str = ""
    noun: str | None = None  # how a person in the role is described in personas ("doctor"); None: the role's name


@dataclass(frozen=True)
class Users:
    roles: tuple[Role, ...]
    persona_name: str
    manners: tuple[str, ...]
    owns: dict[str, tuple[str, ...]]  # table -> foreign-key hops to the user's row
    held: tuple[str, ...] = ()  # tables whose keys people hold (booking references); other keys are internal

    def role(self, name: str) -> Role | None:
        return next((r for r in self.roles if r.name == name), None)

    def name_columns(self) -> list[str]:
        """The columns a person's name is made of: ``persona.name`` is a column, or a template of columns
        ("{first_name} {last_name}") where the table keeps the name in parts."""
        return _slots(self.persona_name) if "{" in self.persona_name else [self.persona_name]

    def person_name(self, person: dict[str, Any]) -> str | None:
        """How a person of the role is called, from their row; None when a part of the name is missing."""
        if "{" not in self.persona_name:
            value = person.get(self.persona_name)
            return None if value is None else str(value)
        parts = {c: person.get(c) for c in self.name_columns()}
        if any(v is None or str(v).strip() == "" for v in parts.values()):
            return None
        return SLOT.sub(lambda m: str(parts[m.group(1)]), self.persona_name)


@dataclass(frozen=True)
class Invariant:
    name: str
    table: str
    sql: str
    rule: str
    resample: tuple[str, ...] = ()


@dataclass(frozen=True)
class Alternative:
    """The allowed change beside a refusal by a numeric limit (a smaller amount, fewer seats): ``what`` it is, in
    the policy's words; ``offer``: whether the agent offers it (the user declines, so the gold still refuses) or
    leaves it for the user to ask; ``say``: the limit as every refusal's gold says it (a say template)."""

    what: str
    offer: bool
    say: str

    def sentence(self) -> str:
        if self.offer:
            return f"Over the limit, say the limit and offer {self.what} instead; make it only if the user accepts."
        return f"Over the limit, refuse and say the limit; do not offer {self.what}: the user may ask for it."

    def declined(self) -> str:
        """The known fact a user gets when the agent offers the alternative: they turn it down. It names no
        amount, so what the agent must say (the limit) stays out of what the user knows."""
        return "if the agent offers you a different change instead, you decline it: you want only what you asked for"


@dataclass(frozen=True)
class Rule:
    """A written rule that decides outcomes: ``checked_by`` says whether a call that breaks it fails ("tool") or
    goes through, so that the agent must apply it ("agent"). ``example``: a call on seed 0 that breaks it, made
    after the ``example_after`` calls (which set up a state the seed lacks and must succeed). A rule no call can
    break (an answer, a price term, a change no tool makes), or which no reachable state breaks, says why in
    ``no_example`` instead; every rule has one or the other."""

    id: str
    text: str
    checked_by: str
    example: CallTemplate | None = None
    example_after: tuple[CallTemplate, ...] = ()
    no_example: str = ""
    alternative: Alternative | None = None  # a limit's allowed alternative, and whether the agent offers it
    before: tuple[str, ...] = ()  # rules this one decides before when one request breaks both (its precedence)
    tell: bool = False  # an "always tell the user ..." rule: a say value it names is required though nobody asked


# rules every domain with users states (domains/policy.py renders them); a spec may not redeclare their ids
ACT_FOR_USER = Rule("act_for_identified_user",
                    "Act only for the identified user: never read out, change or cancel another person's records.",
                    "agent")
ROLE_LIMITS = Rule("role_may_not_ask",
                   "Refuse any request the user's role may not make, even where a tool would carry it out.", "agent")
NO_UNASKED_ALTERNATIVE = Rule(
    "no_unasked_alternative",
    "When a rule stops a request, say which rule and why; do not propose or make a different change the user did "
    "not ask for (a smaller amount, another seat, another date), unless that rule says the agent offers one: the "
    "user may ask for one.", "agent")
BUILTIN_RULES = (ACT_FOR_USER, ROLE_LIMITS, NO_UNASKED_ALTERNATIVE)
# the tell rule behind a refusal's reason; the policy states it only in a spec whose outcomes cite it
TELL_WHY_STOPPED = Rule(
    "tell_why_stopped",
    "When a rule stops a request or changes what is done, tell the user the fact it turns on: the limit, the "
    "record's status, the date or the deadline.", "agent", tell=True)


@dataclass(frozen=True)
class Outcome:
    name: str
    calls: tuple[CallTemplate, ...]
    say: tuple[str, ...]  # the value templates the agent must tell, each asked for or told by a rule
    rule: str
    # dual control (a spec with user tools): the calls that put the world in the state this outcome starts from (run
    # before the episode, tau2's initialization actions: a phone in airplane mode), and the assertions the final
    # state must pass (tau2's ENV_ASSERTION: the phone has service again). Empty for every other domain.
    setup: tuple[CallTemplate, ...] = ()
    asserts: tuple[AssertTemplate, ...] = ()
    told_by: dict[str, str] | None = None  # say value -> the tell rule that requires it; any other value is asked for


@dataclass(frozen=True)
class Intent:
    name: str
    role: str
    candidates: str
    phrasings: tuple[str, ...]
    knows: tuple[str, ...]
    find: tuple[CallTemplate, ...]
    for_someone_else: tuple[str, ...]
    outcomes: tuple[Outcome, ...]
    asks: dict[str, tuple[str, ...]] | None = None  # say value -> words a phrasing asking for it uses

    def outcome(self, name: str) -> Outcome | None:
        return next((o for o in self.outcomes if o.name == name), None)

    def asked_in(self, value: str, phrasing: str) -> bool:
        """Whether ``phrasing`` (a template of this intent's) asks for the say value ``value``."""
        return any(asking_word(w).search(phrasing) for w in (self.asks or {}).get(value, ()))

    def required_say(self, outcome: Outcome, phrasing: str) -> tuple[str, ...]:
        """The outcome's say values a request in ``phrasing`` requires: those a tell rule names, and those the
        phrasing asks for. Another value is not required (the agent may still say it)."""
        told = outcome.told_by or {}
        return tuple(v for v in outcome.say if v in told or self.asked_in(v, phrasing))

    @property
    def hinges_on_policy(self) -> bool:
        """Two or more outcomes: the data, read against the policy, decides which one happens."""
        return len(self.outcomes) > 1


DEFAULT_MANNERS = (
    "polite and a little chatty; gives details only when asked",
    "brief and to the point; answers in short sentences",
    "in a hurry and slightly impatient; wants it sorted quickly",
    "careful and precise; double-checks what the agent says",
    "friendly but unsure of the details; relies on the agent to look things up",
    "formal; writes complete sentences and expects the same",
)


@lru_cache(maxsize=1024)
def asking_word(word: str) -> re.Pattern[str]:
    """A word or phrase of an intent's ``asks``, matched whole and in any case."""
    return re.compile(r"(?<!\w)" + re.escape(word) + r"(?!\w)", re.IGNORECASE)


def _say_value(item: str | dict[str, Any]) -> str:
    return item if isinstance(item, str) else item["value"]


def _told_by(items: list[Any]) -> dict[str, str] | None:
    told = {i["value"]: i["told_by"] for i in items if isinstance(i, dict)}
    return told or None


def _call(raw: dict[str, Any]) -> CallTemplate:
    return CallTemplate(raw["tool"], dict(raw.get("arguments", {})))


def build_users(raw: dict[str, Any] | None) -> Users | None:
    if not raw:
        return None
    roles = tuple(Role(
        name=r["name"], table=r["table"], where=r.get("where", ""), rule=r.get("rule", "").strip(),
        noun=r.get("noun"),
        identify=tuple(Identification(i["tool"], dict(i["arguments"]), tuple(i["facts"])) for i in r["identify"]),
        may_call=tuple(r["may_call"])) for r in raw["roles"])
    persona = raw.get("persona", {})
    return Users(roles=roles, persona_name=persona.get("name", "full_name"),
                 manners=tuple(persona.get("manners", DEFAULT_MANNERS)),
                 owns={t: tuple(p.split(".")) for t, p in raw.get("owns", {}).items()},
                 held=tuple(raw.get("held", ())))


def build_rules(raw: list[dict[str, Any]] | None) -> tuple[Rule, ...]:
    return tuple(Rule(r["id"], " ".join(r["text"].split()), r["checked_by"],
                      _call(r["example"]) if "example" in r else None,
                      tuple(_call(c) for c in (r.get("example") or {}).get("after", ())),
                      " ".join(str(r.get("no_example", "")).split()),
                      Alternative(" ".join(r["alternative"]["what"].split()), bool(r["alternative"]["offer"]),
                                  r["alternative"]["say"]) if "alternative" in r else None,
                      tuple(r.get("before", ())), bool(r.get("tell", False))) for r in raw or ())


def build_invariants(raw: list[dict[str, Any]] | None) -> tuple[Invariant, ...]:
    return tuple(Invariant(i["name"], i["table"], i["sql"], i["rule"].strip(), tuple(i.get("resample", ())))
                 for i in raw or ())


def build_intents(raw: list[dict[str, Any]] | None) -> tuple[Intent, ...]:
    return tuple(Intent(
        name=i["name"], role=i["role"], candidates=i["candidates"], phrasings=tuple(i["phrasings"]),
        knows=tuple(i.get("knows", ())), find=tuple(_call(c) for c in i.get("find", ())),
        for_someone_else=tuple(i.get("for_someone_else", ())),
        outcomes=tuple(Outcome(name, tuple(_call(c) for c in o.get("calls", ())),
                               tuple(_say_value(v) for v in o.get("say", ())),
                               o.get("rule", "").strip(), tuple(_call(c) for c in o.get("setup", ())),
                               tuple(AssertTemplate(a["assert"], dict(a.get("arguments", {})),
                                                    bool(a.get("value", True))) for a in o.get("asserts", ())),
                               _told_by(o.get("say", ())))
                       for name, o in i["outcomes"].items()),
        asks={v: tuple(words) for v, words in i["asks"].items()} if i.get("asks") else None,
    ) for i in raw or ())


def states_why_stopped(intents: tuple[Intent, ...]) -> bool:
    """Whether some outcome's say value is told by the built-in ``tell_why_stopped`` rule (the policy then states
    it)."""
    return any(TELL_WHY_STOPPED.id in (o.told_by or {}).values() for i in intents for o in i.outcomes)


def owner_sql(spec: DomainSpec, table: str) -> str | None:
    """SQL returning the owning user's key of one row of ``table`` (bound to :key), following ``owns``."""
    if spec.users is None or table not in spec.users.owns:
        return None
    hops = spec.users.owns[table]
    current = spec.table(table)
    sql_from = f"{current.name} t0"
    alias = "t0"
    for n, hop in enumerate(hops[:-1]):
        col = current.column(hop)
        assert col is not None and col.references is not None
        nxt = spec.table(col.references[0])
        sql_from += f" JOIN {nxt.name} t{n + 1} ON t{n + 1}.{nxt.primary_key} = {alias}.{hop}"
        alias, current = f"t{n + 1}", nxt
    return f"SELECT {alias}.{hops[-1]} FROM {sql_from} WHERE t0.{spec.table(table).primary_key} = :key"


def realism_problems(spec: DomainSpec, db: sqlite3.Connection) -> list[str]:
    """Semantic checks of users, invariants and intents; ``db`` holds the compiled (empty) tables."""
    out: list[str] = []
    tables = {t.name: t for t in spec.tables}
    tools = {t.name: t for t in spec.tools}
    users = spec.users
    if users is not None:
        out += _users_problems(spec, users, tables, tools, db)
    for k, inv in enumerate(spec.invariants):
        where = f"invariants[{k}]"
        if inv.table not in tables:
            out.append(f"{where}.table: unknown table {inv.table!r}")
            continue
        for col in inv.resample:
            if tables[inv.table].column(col) is None:
                out.append(f"{where}.resample: {inv.table} has no column {col!r}")
            elif col == tables[inv.table].primary_key:
                out.append(f"{where}.resample: the primary key {col!r} cannot be resampled")
        problem = _compile(db, inv.sql, {"now": spec.now})
        if problem:
            out.append(f"{where}.sql: {problem}")
    out += _rules_problems(spec, tools)
    names = [i.name for i in spec.intents]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        out.append(f"intents: duplicate intent name {dup!r}")
    for k, intent in enumerate(spec.intents):
        out += [f"intents[{k}]{m}" for m in _intent_problems(spec, intent, tools, db)]
    return out


def _rules_problems(spec: DomainSpec, tools: dict[str, Any]) -> list[str]:
    """Ids are unique and known, every decision names a rule, and ``checked_by`` agrees with the tools."""
    out: list[str] = []
    builtin = {r.id for r in (*BUILTIN_RULES, TELL_WHY_STOPPED)}
    seen: set[str] = set()
    for k, rule in enumerate(spec.rules):
        if rule.id in builtin:
            out.append(f"rules[{k}].id: {rule.id!r} is a rule every domain states already; choose another id")
        if rule.id in seen:
            out.append(f"rules[{k}].id: rule {rule.id!r} is declared twice")
        seen.add(rule.id)
        if rule.example is not None and rule.no_example:
            out.append(f"rules[{k}]: rule {rule.id!r} has both an example and no_example; keep one")
        calls = [("example", rule.example)] if rule.example is not None else []
        calls += [(f"example.after[{j}]", c) for j, c in enumerate(rule.example_after)]
        for where, call in calls:
            tool = tools.get(call.tool)
            if tool is None:
                out.append(f"rules[{k}].{where}.tool: unknown tool {call.tool!r}")
            else:
                out += [f"rules[{k}].{where}.arguments.{p}: not a parameter of {tool.name}"
                        for p in call.arguments if p not in tool.param_names]
    ids = {r.id for r in spec.all_rules}
    for k, rule in enumerate(spec.rules):
        out += [f"rules[{k}].before: unknown rule {other!r}" for other in rule.before if other not in ids]
        out += [f"rules[{k}].before: rule {rule.id!r} cannot come before itself" for other in rule.before
                if other == rule.id]
    for k, rule in enumerate(spec.rules):
        if rule.alternative is None:
            continue
        refusals = [o for i in spec.intents for o in i.outcomes if o.rule == rule.id
                    and not any(tools.get(c.tool) is not None and tools[c.tool].kind == "write" for c in o.calls)]
        if not refusals:
            out.append(f"rules[{k}].alternative: no outcome refuses by rule {rule.id!r}; an alternative goes beside "
                       f"a refusal")
        out += [f"rules[{k}].alternative.say: an outcome refusing by {rule.id!r} says {list(o.say)}, not the limit "
                f"{rule.alternative.say!r}" for o in refusals if rule.alternative.say not in o.say]
    known = {r.id: r for r in spec.all_rules}
    for i, tool in enumerate(spec.tools):
        for k, pre in enumerate(tool.preconditions):
            where = f"tools[{i}].preconditions[{k}].rule"
            if not pre.rules:
                if pre.enforced_by == "policy":
                    out.append(f"{where}: a policy-only precondition needs the id of the rule it checks "
                               f"(declare the rule under rules: with checked_by: agent)")
                continue
            for rule_id in pre.rules:
                rule = known.get(rule_id)
                if rule is None:
                    out.append(f"{where}: unknown rule {rule_id!r}; declare it under rules:")
                elif pre.enforced_by == "policy" and rule.checked_by != "agent":
                    out.append(f"{where}: the tool lets this precondition through (enforced_by: policy), so rule "
                               f"{rule.id!r} must say checked_by: agent")
                elif pre.enforced_by == "tool" and rule.checked_by != "tool":
                    out.append(f"{where}: the tool checks this precondition, so rule {rule.id!r} must say "
                               f"checked_by: tool")
    checked = {r for t in spec.tools for p in t.preconditions if p.enforced_by == "tool" for r in p.rules}
    for k, rule in enumerate(spec.rules):  # the policy lists among the tools' checks only what a check cites
        if rule.checked_by == "tool" and rule.example is not None and rule.id not in checked:
            out.append(f"rules[{k}]: rule {rule.id!r} says checked_by: tool, yet no precondition a tool enforces "
                       f"cites it: add rule: {rule.id} to the check that refuses its example, or say checked_by: "
                       f"agent")
    for k, intent in enumerate(spec.intents):
        for outcome in intent.outcomes:
            where = f"intents[{k}].outcomes.{outcome.name}.rule"
            if not outcome.rule:
                out.append(f"{where}: every outcome is a decision and needs the id of the written rule behind it")
            elif outcome.rule not in known:
                out.append(f"{where}: unknown rule {outcome.rule!r}; declare it under rules:")
    return out


def _users_problems(spec: DomainSpec, users: Users, tables: dict[str, Any], tools: dict[str, Any],
                    db: sqlite3.Connection) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for r_i, role in enumerate(users.roles):
        where = f"users.roles[{r_i}]"
        if role.name in seen:
            out.append(f"{where}.name: role {role.name!r} is declared twice")
        seen.add(role.name)
        if role.noun is not None and (not ROLE_NOUN.match(role.noun) or role.noun.split()[0] in ("a", "an", "the")):
            out.append(f"{where}.noun: {role.noun!r} is not how a person is described: use lowercase words "
                       f"without an article, as in 'doctor' or 'head coach'")
        if role.table not in tables:
            out.append(f"{where}.table: unknown table {role.table!r}")
            continue
        columns = {c.name for c in tables[role.table].columns}
        if role.where:
            problem = _compile(db, f"SELECT 1 FROM {role.table} WHERE {role.where}", {"now": spec.now})
            if problem:
                out.append(f"{where}.where: {problem}")
        for i_i, ident in enumerate(role.identify):
            iw = f"{where}.identify[{i_i}]"
            tool = tools.get(ident.tool)
            if tool is None:
                out.append(f"{iw}.tool: unknown tool {ident.tool!r}")
                continue
            if tool.kind != "read":
                out.append(f"{iw}.tool: {ident.tool} is a write tool; identification only reads")
            for param, value in ident.arguments.items():
                if param not in tool.param_names:
                    out.append(f"{iw}.arguments.{param}: not a parameter of {ident.tool}")
                out += [f"{iw}.arguments.{param}: {role.table} has no column {s!r}"
                        for s in _slots(value) if s not in columns]
            for f_i, fact in enumerate(ident.facts):
                out += [f"{iw}.facts[{f_i}]: {role.table} has no column {s!r}" for s in _slots(fact) if s not in columns]
        for t_i, name in enumerate(role.may_call):
            if name not in tools:
                out.append(f"{where}.may_call[{t_i}]: unknown tool {name!r}")
        out += [f"users.persona.name: {role.table} has no column {c!r}" for c in users.name_columns()
                if c not in columns]
    for h_i, table in enumerate(users.held):
        if table not in tables:
            out.append(f"users.held[{h_i}]: unknown table {table!r}")
    role_tables = {r.table for r in users.roles}
    for table, hops in users.owns.items():
        where = f"users.owns.{table}"
        if table not in tables:
            out.append(f"{where}: unknown table {table!r}")
            continue
        current = tables[table]
        for h_i, hop in enumerate(hops):
            col = current.column(hop)
            if col is None or col.references is None:
                out.append(f"{where}: {hop!r} is not a foreign-key column of {current.name}")
                break
            if col.references[0] not in tables:
                break  # the dangling reference itself is reported by the table checks
            current = tables[col.references[0]]
        else:
            if current.name not in role_tables:
                out.append(f"{where}: the path ends at {current.name}, which is no role's table")
    return out


def _intent_problems(spec: DomainSpec, intent: Intent, tools: dict[str, Any], db: sqlite3.Connection) -> list[str]:
    out: list[str] = []
    users = spec.users
    role = users.role(intent.role) if users else None
    if role is None:
        return [f".role: no users.roles entry for role {intent.role!r}"]
    try:
        cur = db.execute(intent.candidates, {"user": None, "now": spec.now})
        columns = {d[0] for d in cur.description or ()}
    except sqlite3.Error as exc:
        return [f".candidates: SQL does not compile: {exc}"]
    if "outcome" not in columns:
        out.append(".candidates: the query must return an 'outcome' column naming one of the outcomes")
    user_columns = {c.name for c in spec.table(role.table).columns} if role.table in {t.name for t in spec.tables} else set()
    known = columns | user_columns | BUILTIN_SLOTS  # the user's own row is always in scope
    for field_name, texts in (("phrasings", intent.phrasings), ("knows", intent.knows),
                              ("for_someone_else", intent.for_someone_else)):
        for t_i, text in enumerate(texts):
            out += [f".{field_name}[{t_i}]: slot {{{s}}} is neither a column of the candidates query nor of the user's row"
                    for s in _slots(text) if s not in known]
    for c_i, call in enumerate(intent.find):
        out += [f".find[{c_i}]{m}" for m in _call_problems(call, tools, known, role, False)]
    for outcome in intent.outcomes:
        for c_i, call in enumerate(outcome.calls):
            out += [f".outcomes.{outcome.name}.calls[{c_i}]{m}"
                    for m in _call_problems(call, tools, known, role, True)]
        for s_i, text in enumerate(outcome.say):
            out += [f".outcomes.{outcome.name}.say[{s_i}]: slot {{{s}}} is neither a column of the candidates query nor of the user's row"
                    for s in _slots(text) if s not in known]
        out += [f".outcomes.{outcome.name}{m}" for m in _start_problems(spec, outcome, tools, known)]
    return out + [f" ({intent.name}){m}" for m in _asked_problems(spec, intent)]


def _asked_problems(spec: DomainSpec, intent: Intent) -> list[str]:
    """Every say value is asked for by someone: the intent's ``asks`` names words its phrasings use to ask for it
    (some phrasing must use one), or ``told_by`` names a tell rule of the policy ("always tell the user ...")."""
    out: list[str] = []
    asks = intent.asks or {}
    plain: set[str] = set()
    for k, outcome in enumerate(intent.outcomes):
        told = outcome.told_by or {}
        for s_i, value in enumerate(outcome.say):
            if template_problems(value):
                continue  # refused as a template already: one line to act on
            where = f".outcomes.{outcome.name}.say[{s_i}]"
            rule_id = told.get(value)
            if rule_id is None:
                plain.add(value)
                if value not in asks:
                    out.append(f"{where}: {value!r} is asked for by nobody: list it under the intent's asks: with "
                               f"the words a phrasing asking for it uses, or write {{value: {value!r}, told_by: "
                               f"<rule id>}} naming a rule with tell: true (or drop it)")
                continue
            rule = spec.rule(rule_id)
            if rule is None:
                out.append(f"{where}.told_by: unknown rule {rule_id!r}; declare it under rules: with tell: true")
            elif not rule.tell:
                out.append(f"{where}.told_by: rule {rule_id!r} is no tell rule (tell: true, an 'always tell the "
                           f"user ...' sentence)")
            elif rule.id == TELL_WHY_STOPPED.id and k == 0:
                out.append(f"{where}.told_by: the first outcome is the request granted as asked; "
                           f"{TELL_WHY_STOPPED.id} tells why a request is stopped or changed")
    writes = {t.name for t in spec.tools if t.kind == "write"}
    for outcome in intent.outcomes:
        linked = all(v in (outcome.told_by or {}) or v in asks for v in outcome.say)  # else reported above
        if outcome.say and linked and not any(c.tool in writes for c in outcome.calls):
            out += [f".phrasings[{p_i}]: asks for none of what outcome {outcome.name} says ({list(outcome.say)}), "
                    f"which writes nothing: such a request leaves the agent nothing to do"
                    for p_i, p in enumerate(intent.phrasings) if not intent.required_say(outcome, p)]
    for value, words in asks.items():
        if value not in plain:
            out.append(f".asks: {value!r} is said by no outcome (as a value asked for)")
        elif not words or not any(intent.asked_in(value, p) for p in intent.phrasings):
            out.append(f".asks: no phrasing asks for {value!r}: none uses any of {list(words)}")
    return out


def _start_problems(spec: DomainSpec, outcome: Outcome, tools: dict[str, Any], known: set[str]) -> list[str]:
    """An outcome's setup calls and final-state assertions (dual control): known tools and assertions, their
    parameters, and slots the candidates query or the user's row fill."""
    out = []
    if (outcome.setup or outcome.asserts) and not spec.dual:
        out.append(": setup and asserts describe a user's own state; this spec declares no user tables or tools")
    for c_i, call in enumerate(outcome.setup):
        tool = tools.get(call.tool)
        if tool is None:
            out.append(f".setup[{c_i}].tool: unknown tool {call.tool!r}")
            continue
        out += _argument_problems(f".setup[{c_i}]", call.tool, call.arguments, tool.param_names, known)
        missing = [p for p in tool.required if p not in call.arguments]
        if missing:
            out.append(f".setup[{c_i}].arguments: missing required parameter(s) {', '.join(missing)} of {call.tool}")
    for a_i, check in enumerate(outcome.asserts):
        assertion = spec.assertions.get(check.name)
        if assertion is None:
            out.append(f".asserts[{a_i}].assert: unknown assertion {check.name!r}; declare it under assertions:")
            continue
        out += _argument_problems(f".asserts[{a_i}]", check.name, check.arguments, assertion.parameters, known)
    if outcome.asserts and not outcome.setup:
        out.append(".asserts: an outcome judged on the final state starts from a setup that breaks it; add setup:")
    return out


def _argument_problems(where: str, name: str, arguments: dict[str, Any], params: Any, known: set[str]) -> list[str]:
    """Each argument of a setup call or an assertion: a parameter of ``name``, with slots that something fills."""
    out = []
    for param, value in arguments.items():
        if param not in params:
            out.append(f"{where}.arguments.{param}: not a parameter of {name}")
        out += [f"{where}.arguments.{param}: slot {{{s}}} is neither a column of the candidates query nor of the "
                f"user's row" for s in _slots(value) if s not in known]
    return out


def _call_problems(call: CallTemplate, tools: dict[str, Any], known: set[str], role: Role,
                   outcome: bool) -> list[str]:
    tool = tools.get(call.tool)
    if tool is None:
        return [f".tool: unknown tool {call.tool!r}"]
    out = []
    if call.tool not in role.may_call:
        out.append(f".tool: role {role.name!r} may not call {call.tool} (add it to may_call)")
    for param, value in call.arguments.items():
        if param not in tool.param_names:
            out.append(f".arguments.{param}: not a parameter of {call.tool}")
        out += [f".arguments.{param}: slot {{{s}}} is neither a column of the candidates query nor of the user's row"
                for s in _slots(value) if s not in known]
    missing = [p for p in tool.required if p not in call.arguments]
    if missing:
        out.append(f".arguments: missing required parameter(s) {', '.join(missing)} of {call.tool}")
    return out


# what a realism template may put in braces: a slot, optionally one index (``{result[total]}``), optionally a
# short number format (``{amount:.2f}``); never an attribute, a conversion, a nested field or a wide padding
TEMPLATE_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[A-Za-z0-9_]{1,40}\])?")
TEMPLATE_FORMAT = re.compile(r",?(\.[0-9])?[dfg%]?")
SQL_KEYS = {"candidates", "where", "sql"}  # SQL inside the realism sections: not a template


@lru_cache(maxsize=8192)
def template_problems(text: str) -> tuple[str, ...]:
    """Why a phrasing / say / fact / argument template is refused (it is filled with ``str.format``)."""
    import string

    try:
        fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(text) if name is not None]
    except ValueError:
        return ("unbalanced braces: write {slot}, and a literal brace as {{ or }}",)
    out = []
    for name, spec, conv in fields:
        if conv is not None or not TEMPLATE_FIELD.fullmatch(name) or not TEMPLATE_FORMAT.fullmatch(spec or ""):
            shown = "{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
            shown = shown if len(shown) <= 40 else shown[:37] + "...}"
            out.append(f"placeholder {shown} is refused: write {{slot}}, {{slot[key]}} or a number format such as "
                       "{amount:.2f} (no attributes, conversions or wide formats)")
    return tuple(out[:1])  # the first fault of a template: one line to act on


def raw_template_problems(section: str, value: Any) -> list[str]:
    """``template_problems`` of every string under a raw realism section (``users``, ``intents``), with its path."""
    if isinstance(value, str):
        return [f"{section}: {m}" for m in template_problems(value)]
    if isinstance(value, dict):
        return [p for k, v in value.items() if k not in SQL_KEYS for p in raw_template_problems(f"{section}.{k}", v)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in raw_template_problems(f"{section}[{i}]", v)]
    return []


def _slots(value: Any) -> list[str]:
    return SLOT.findall(value) if isinstance(value, str) else []


def _compile(db: sqlite3.Connection, sql: str, params: dict[str, Any]) -> str | None:
    try:
        names = set(re.findall(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)", sql))
        db.execute("EXPLAIN " + sql, {n: params.get(n) for n in names})
    except sqlite3.Error as exc:
        return f"SQL does not compile: {exc}"
    return None
