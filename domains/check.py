"""Check a domain spec against the project's bar: ``python -m domains.check PATH_OR_NAME ...``
(a spec file, a domain folder, or a domain's name; ``--domains-dir DIR`` for your own folder).

Loads the spec, materialises seed 0, runs every tool example and prints what falls short: fewer than 4
FK-linked tables, fewer than 6 write tools, a write tool without a precondition, a tool without both a
passing and a failing example, an example that does not behave as declared, a failing call that changed
the database, a forbidden request kind (``for_someone_else``, an intent the role may not ask) with fewer than
5 phrasings, a rule with neither an example call nor a ``no_example`` reason, a rule example that does not
behave as its ``checked_by`` says (a call breaking a tool-checked rule must fail, one breaking an agent-applied
rule succeed), or a write the tools let through that leaves a declared invariant broken (unless a policy-only rule
forbids it), a rule listed among the tools' checks that a call generated from the intents gets through, or two
rules one request breaks with no precedence named (``before:``), or a choice a request leaves to the agent ("the
best card I'm allowed") that no rule its outcomes cite puts in order.
Exit status 1 when anything falls short, 2 for a usage error (no argument, nothing found).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from pathlib import Path

from domains.engine import DomainEngine, ToolResult
from domains.registry import DOMAINS_DIR_ENV, TABLE5, spec_path
from domains.realism_spec import CallTemplate, Rule
from domains.spec import DomainSpec, SpecError, load_spec


def seeded_rows(spec: DomainSpec, engine: DomainEngine) -> int:
    """Rows in the seeded database (a table seeded from an external source declares no row count)."""
    with engine.fresh() as db:
        return sum(len(db.table_rows(t.name)) for t in spec.tables)


MIN_FORBIDDEN_PHRASINGS = 5  # per forbidden clause kind: fewer and one wording crowds the data set


def phrasing_shortfalls(spec: DomainSpec) -> list[str]:
    """Forbidden requests worded too few ways: every ``for_someone_else`` list, and the phrasings of every intent
    the role may not ask for (no outcome calls a tool or says anything), need at least 5 phrasings."""
    out = []
    for intent in spec.intents:
        if intent.for_someone_else and len(intent.for_someone_else) < MIN_FORBIDDEN_PHRASINGS:
            out.append(f"{spec.name}: intent {intent.name} has {len(intent.for_someone_else)} for_someone_else "
                       f"phrasings; needs >= {MIN_FORBIDDEN_PHRASINGS}")
        role_forbidden = not any(o.calls or o.say for o in intent.outcomes)
        if role_forbidden and len(intent.phrasings) < MIN_FORBIDDEN_PHRASINGS:
            out.append(f"{spec.name}: intent {intent.name} (a request the role may not make) has "
                       f"{len(intent.phrasings)} phrasings; needs >= {MIN_FORBIDDEN_PHRASINGS}")
    return out


DOUBLED_WORD = re.compile(r"\b([A-Za-z]+)\s+\1\b", re.IGNORECASE)  # as synthesis/wording.py counts them
# "either" with no "or" after it, and "as well", lean on a request said before them, which a forbidden request or a
# goal drawn on its own does not have ("X can't travel now either")
DANGLING = re.compile(r"\b(as well)\b(?! as)|\b(either)\b(?!.*\bor\b)", re.IGNORECASE)
# a slot that starts a sentence inside a template ("... game on {match_date}? {section} if possible") is said as its
# value is stored, so "main stand" would open a sentence in lower case; a name ("{other_name}, my mother, ...") or
# an id keeps its own case, and "Dr. {doctor_name}" ends no sentence
SENTENCE_SLOT = re.compile(r"(?<!\bDr)[.?!]\s+\{([A-Za-z_]\w*)\}")
CASED_SLOT = re.compile(r"(name|_id)$")


def slot_values(spec: DomainSpec) -> dict[str, set[str]]:
    """The values a slot named like a column can take, where the spec lists them (an enum or a choice recipe)."""
    out: dict[str, set[str]] = {}
    for table in spec.tables:
        for column in table.columns:
            values = list(column.enum or ()) + list((column.seed or {}).get("values", ()) or ())
            out.setdefault(column.name, set()).update(str(v) for v in values if isinstance(v, (str, int)))
    return out


def wording_slips(template: str, values: dict[str, set[str]]) -> list[str]:
    """What a request template would say wrong: a word doubled in its own text, a word doubled across a slot
    ("a {loyalty_tier} member" with the tier "member"), a dangling "either" / "as well", or a slot other than a
    name or an id opening a sentence inside it ("? {section} if possible" said "? main stand if possible").

    >>> wording_slips("you are a {tier} member", {"tier": {"member", "gold"}})
    ["'{tier} member' reads 'member member' when tier is 'member'"]
    """
    out = [f"doubled word {m.group(0)!r}" for m in DOUBLED_WORD.finditer(template)]
    for m in re.finditer(r"\{([A-Za-z_]\w*)\}", template):
        after = re.match(r"\s+([A-Za-z]+)", template[m.end():])
        before = re.search(r"([A-Za-z]+)\s+$", template[:m.start()])
        for value in sorted(values.get(m.group(1), ())):
            said = value.replace("_", " ").split()
            if said and after and said[-1].lower() == after.group(1).lower():
                out.append(f"'{{{m.group(1)}}} {after.group(1)}' reads '{said[-1]} {after.group(1)}' when "
                           f"{m.group(1)} is {value!r}")
            if said and before and said[0].lower() == before.group(1).lower():
                out.append(f"'{before.group(1)} {{{m.group(1)}}}' reads '{before.group(1)} {said[0]}' when "
                           f"{m.group(1)} is {value!r}")
    out += [f"dangling {(m.group(1) or m.group(2))!r}" for m in DANGLING.finditer(template)]
    out += [f"'{{{m.group(1)}}}' starts a sentence but keeps its value's case (a lower-case value opens it in lower "
            f"case)" for m in SENTENCE_SLOT.finditer(template) if not CASED_SLOT.search(m.group(1))]
    return out


def wording_shortfalls(spec: DomainSpec) -> list[str]:
    """Every template a request or a user's known facts are written from, read for ``wording_slips``."""
    values = slot_values(spec)
    out = []
    for intent in spec.intents:
        texts = [("phrasings", intent.phrasings), ("for_someone_else", intent.for_someone_else),
                 ("knows", intent.knows)]
        for field_name, templates in texts:
            for k, template in enumerate(templates):
                out += [f"{spec.name}: intent {intent.name}.{field_name}[{k}]: {slip}"
                        for slip in wording_slips(template, values)]
    return out


# a request that leaves the pick to the agent ("whichever one gives me the best discount I'm allowed")
DELEGATES = re.compile(r"\b(best|cheapest|whichever|pick the one|the right one|fits me|suits me best|"
                       r"any one|up to you|you choose|soonest|earliest available)\b", re.IGNORECASE)
ORDER_WORDS = re.compile(r"\b(best|cheapest|earliest|lowest|highest|first|then)\b", re.IGNORECASE)


def delegated_choices(spec: DomainSpec) -> list[str]:
    """The intents a user may ask by delegating the choice: a phrasing says "the best/cheapest/whichever" and some
    outcome acts on it (a request the role may not make delegates nothing)."""
    return [i.name for i in spec.intents
            if any(o.calls for o in i.outcomes) and any(DELEGATES.search(p) for p in i.phrasings)]


def choice_shortfalls(spec: DomainSpec) -> list[str]:
    """Every delegable choice has written eligibility and order: some rule an outcome of the intent cites says
    which option comes first ("the best card it sells is senior, then youth, then family")."""
    out = []
    for name in delegated_choices(spec):
        intent = next(i for i in spec.intents if i.name == name)
        texts = [r.text for o in intent.outcomes if (r := spec.rule(o.rule)) is not None]
        if not any(ORDER_WORDS.search(t) for t in texts):
            out.append(f"{spec.name}: intent {name} lets the user delegate a choice, but no rule its outcomes cite "
                       "writes the order (best, cheapest, earliest, first ... then)")
    return out


def shortfalls(spec: DomainSpec, engine: DomainEngine) -> list[str]:
    out = phrasing_shortfalls(spec) + wording_shortfalls(spec) + choice_shortfalls(spec)
    tools, rows, _ = TABLE5.get(spec.name, (14, 0, 0))
    total_rows = seeded_rows(spec, engine)
    if len(spec.tools) < tools:
        out.append(f"{len(spec.tools)} tools; needs >= {tools}")
    if total_rows < rows:
        out.append(f"{total_rows} rows; needs >= {rows}")
    linked = {t.name for t in spec.tables if any(c.references for c in t.columns)}
    linked |= {c.references[0] for t in spec.tables for c in t.columns if c.references}
    if len(linked) < 4:
        out.append(f"{len(linked)} tables linked by foreign keys; needs >= 4")
    writes = [t for t in spec.tools if t.kind == "write"]
    if len(writes) < 6:
        out.append(f"{len(writes)} write tools; needs >= 6")
    for t in writes:
        if not t.preconditions:
            out.append(f"write tool {t.name} has no precondition")
    for tool in spec.tools:
        expects = {e["expect"] for e in tool.examples}
        if expects != {"ok", "error"}:
            out.append(f"tool {tool.name} needs both an 'ok' and an 'error' example (has {sorted(expects)})")
        for k, ex in enumerate(tool.examples):
            db = engine.fresh()
            result = db.call(tool.name, ex["arguments"])
            if not result.ok and ("exceeded its budget" in str(result.error) or ": refused: " in str(result.error)):
                out.append(f"tool {tool.name} example {k}: {result.error}")  # a spec fault, whatever was expected
            elif result.ok != (ex["expect"] == "ok"):
                out.append(f"tool {tool.name} example {k}: expected {ex['expect']}, got "
                           f"{'ok' if result.ok else 'error: ' + str(result.error)}")
            if not result.ok and db.fingerprint() != engine.fingerprint:
                out.append(f"tool {tool.name} example {k}: the failing call changed the database")
            if result.ok and tool.kind == "write" and not result.writes:
                out.append(f"tool {tool.name} example {k}: a write call that wrote no row")
            db.close()
    return (out + rule_shortfalls(spec, engine) + invariant_breaking_writes(spec, engine)
            + rule_truth_shortfalls(spec, engine))


def rule_truth_shortfalls(spec: DomainSpec, engine: DomainEngine) -> list[str]:
    """A rule listed among the tools' checks that a generated violating call gets through, and two rules one request
    breaks that name no precedence (``synthesis/rule_cases.py``)."""
    if spec.users is None:
        return []
    from synthesis.rule_cases import rule_cases, rule_conflicts  # local: the cases bind intents as synthesis does

    out = [f"rule {rule} is listed among the tools' checks, yet {c.call.name}({c.call.arguments}) went through "
           f"({c.source})" for rule, cases in rule_cases(spec, engine).items() for c in cases if not c.refused]
    return out + [f"rules {c.first} and {c.second} decide {c.call.name}({c.call.arguments}) differently: {c.problem}; "
                  f"name the one that decides with before:" for c in rule_conflicts(spec, engine)]


def rule_shortfalls(spec: DomainSpec, engine: DomainEngine) -> list[str]:
    """Every rule has an example or says why it has none (``no_example``). The example breaks the rule on seed 0,
    after its ``after`` calls (which must succeed): it fails when the tools check the rule, with a refusal rather
    than a lookup miss, and succeeds, writing, when only the agent applies it. A rule a precondition checks or a
    refusal cites is one a call can break, so "no call breaks it" is no reason for it to lack an example."""
    out = []
    breakable = breakable_rules(spec)
    for rule in spec.rules:
        if rule.tell and rule.example is None:
            continue  # a tell rule is about what the agent says: no call breaks it
        if rule.example is None:
            if not rule.no_example:
                out.append(f"rule {rule.id}: no example call breaking it and no no_example saying why")
            elif rule.id in breakable and "no call breaks it" in rule.no_example:
                out.append(f"rule {rule.id}: a precondition or a refusal shows a call can break it, yet no_example "
                           f"says {rule.no_example!r}")
            continue
        result = rule_example_result(engine, rule)
        if isinstance(result, str):
            out.append(f"rule {rule.id}: {result}")
        elif rule.checked_by == "tool" and result.ok:
            out.append(f"rule {rule.id} (checked_by: tool): its example {rule.example.tool} succeeded")
        elif rule.checked_by == "tool" and "not found" in str(result.error).lower():
            out.append(f"rule {rule.id} (checked_by: tool): its example {rule.example.tool} names a record that "
                       f"does not exist ({result.error}); break the rule on a real one")
        elif rule.checked_by == "agent" and not result.ok:
            out.append(f"rule {rule.id} (checked_by: agent): its example {rule.example.tool} failed: {result.error}")
        elif rule.checked_by == "agent" and spec.tool(rule.example.tool).kind == "write" and not result.writes:
            out.append(f"rule {rule.id} (checked_by: agent): its example {rule.example.tool} wrote nothing")
    return out


def rule_example_result(engine: DomainEngine, rule: Rule) -> ToolResult | str:
    """The result of a rule's example call on a fresh seed-0 database, after its set-up calls; a string naming
    the set-up call that failed."""
    assert rule.example is not None
    with engine.fresh() as db:
        for k, call in enumerate(rule.example_after):
            done = db.call(call.tool, call.arguments)
            if not done.ok:
                return f"its example's set-up call after[{k}] {call.tool} failed: {done.error}"
        return db.call(rule.example.tool, rule.example.arguments)


def breakable_rules(spec: DomainSpec) -> set[str]:
    """Ids of rules a call can break: one a precondition checks, or one a refusal outcome cites in an intent
    whose other outcomes write (so the refused request is a write some tool makes)."""
    out = {r for t in spec.tools for p in t.preconditions for r in p.rules}
    for intent in spec.intents:
        writes = [any(spec.tool(c.tool).kind == "write" for c in o.calls if spec.tool(c.tool)) for o in intent.outcomes]
        if any(writes):
            out |= {o.rule for o, w in zip(intent.outcomes, writes) if not w and o.rule}
    return out


def invariant_breaking_writes(spec: DomainSpec, engine: DomainEngine) -> list[str]:
    """Writes the tools let through that leave a declared invariant broken on seed 0. Each write tool's passing
    examples and each agent rule's example are run (after its set-up calls) and the invariants evaluated; a new
    violation is a shortfall unless the call breaks a policy-only precondition (a rule the agent must apply,
    whose breach the state check is there to catch). The fix is a precondition the tools check, with its rule."""
    from domains.invariants import violations  # local: invariants imports the seeder, which check need not load

    strict = DomainEngine(dataclasses.replace(spec, tools=tuple(dataclasses.replace(t, preconditions=tuple(
        dataclasses.replace(p, enforced_by="tool") for p in t.preconditions)) for t in spec.tools)), 0)
    runs: list[tuple[str, tuple[CallTemplate, ...], CallTemplate]] = []
    for tool in (t for t in spec.tools if t.kind == "write"):
        runs += [(f"tool {tool.name} example {k}", (), CallTemplate(tool.name, ex["arguments"]))
                 for k, ex in enumerate(tool.examples) if ex["expect"] == "ok"]
    runs += [(f"rule {r.id}'s example", r.example_after, r.example) for r in spec.rules
             if r.example is not None and spec.tool(r.example.tool).kind == "write"]
    with engine.fresh() as db:
        before = {name: set(keys) for name, keys in violations(db.conn, spec).items()}
    out = []
    for label, setup, call in runs:
        with engine.fresh() as db:
            if not all(db.call(c.tool, c.arguments).ok for c in setup) or not db.call(call.tool, call.arguments).ok:
                continue
            broken = {n: sorted(set(k) - before[n], key=str) for n, k in violations(db.conn, spec).items()}
        broken = {n: k for n, k in broken.items() if k}
        if not broken:
            continue
        with strict.fresh() as db:
            if all(db.call(c.tool, c.arguments).ok for c in setup) and not db.call(call.tool, call.arguments).ok:
                continue  # a policy-only rule stops it: the agent's mistake, which the state check catches
        out += [f"{label}: {call.tool} succeeds and breaks invariant {n} (rows {', '.join(map(str, k[:3]))}); "
                f"add a precondition the tools check" for n, k in broken.items()]
    return out


def unexampled_rules(spec: DomainSpec) -> list[str]:
    """Ids of rules a precondition checks or a refusal cites that declare no example call (each says why in
    ``no_example``: no reachable state breaks it on seed 0)."""
    breakable = breakable_rules(spec)
    return [r.id for r in spec.rules if r.id in breakable and r.example is None]


def resolve(arg: str) -> Path:
    """A spec file, a domain folder (``<dir>/<dir name>.yaml``) or a known domain's name -> its spec file."""
    path = Path(arg)
    if arg.endswith((".yaml", ".yml")):
        return path
    if path.is_dir():
        spec = path / f"{path.resolve().name}.yaml"
        if not spec.is_file():
            raise CheckUsageError(f"folder {arg} holds no {spec.name}")
        return spec
    if os.sep in arg or arg.startswith("."):
        raise CheckUsageError(f"{arg} is neither a spec file nor a folder")
    try:
        return spec_path(arg)
    except KeyError as exc:
        raise CheckUsageError(str(exc.args[0])) from None


class CheckUsageError(ValueError):
    """A command-line argument names no spec."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m domains.check",
                                     description="Check domain specs against the project's bar. Exit status: "
                                                 "0 all pass, 1 something falls short, 2 usage error.")
    parser.add_argument("specs", nargs="+", metavar="PATH_OR_NAME",
                        help="a spec file, a domain folder, or the name of a known domain")
    parser.add_argument("--domains-dir", metavar="DIR", help="a folder of your own domains, to check them by name")
    args = parser.parse_args(argv)
    if args.domains_dir:
        os.environ[DOMAINS_DIR_ENV] = os.pathsep.join(filter(None, [args.domains_dir,
                                                                    os.environ.get(DOMAINS_DIR_ENV)]))
    status = 0
    for arg in args.specs:
        try:
            path = resolve(arg)
        except (CheckUsageError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = max(status, 2)
            continue
        try:
            spec = load_spec(path)
        except SpecError as exc:
            print(f"FAIL {path}:\n  " + "\n  ".join(exc.problems))
            status = max(status, 1)
            continue
        try:
            engine = DomainEngine(spec, 0)
        except SpecError as exc:  # seeding found a value the spec cannot store
            print(f"FAIL {path}:\n  " + "\n  ".join(exc.problems))
            status = 1
            continue
        problems = shortfalls(spec, engine)
        bare = unexampled_rules(spec)
        writes = sum(t.kind == "write" for t in spec.tools)
        print(f"{'FAIL' if problems else 'OK  '} {spec.name}: {len(spec.tables)} tables, "
              f"{seeded_rows(spec, engine)} rows, {len(spec.tools)} tools ({writes} write)")
        for p in problems:
            print(f"  - {p}")
        if bare:
            print(f"  note: rules a call can break with no example on seed 0 (no_example says why): {', '.join(bare)}")
        status = max(status, int(bool(problems)))
    return status


if __name__ == "__main__":
    sys.exit(main())
