"""The policy text an agent reads: the spec's own policy plus what the spec declares elsewhere (the clock,
how each role is identified, and every written rule by id, split truthfully: the rules the tools check are exactly
those a checked precondition cites, each sentence the description of that executable check; the terms the tools
apply (a fee, a price) follow; every other rule is the agent's to apply itself)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from domains.realism_spec import Rule, Users

TOOL_RULES_HEADING = ("Rules the tools check (a call that breaks one fails with an error, and nothing is "
                      "changed):")
TERMS_HEADING = ("Terms the tools apply (how an allowed operation is priced or carried out; nothing to check, "
                 "the tool's result shows it):")
AGENT_RULES_HEADING = ("Rules the agent must apply itself (the tools will not stop you: a call that breaks one "
                       "succeeds, and doing it is a mistake):")
TELL_RULES_HEADING = "What the agent always tells the user (even when the user did not ask):"


def section_of(rule: Rule, checked: frozenset[str]) -> str:
    """Where the policy lists ``rule``: "tool" when a precondition the tools enforce cites it, "term" for a rule the
    spec says the tools apply that no call breaks (a fee, a price), "tell" for an "always tell the user ..." rule,
    and "agent" for every other rule."""
    if rule.tell:
        return "tell"
    if rule.id in checked:
        return "tool"
    if rule.checked_by == "tool" and rule.example is None:
        return "term"
    return "agent"


def policy_text(policy: str, now: str, users: Users | None, rules: tuple[Rule, ...],
                checked: frozenset[str] = frozenset(), why_stopped: bool = False) -> str:
    """``policy`` followed by the current date and time, the identification rules and the rules by id; ``checked``:
    the ids of the rules a precondition the tools enforce cites (``domains.spec.checked_rule_ids``);
    ``why_stopped``: some outcome cites the built-in tell rule ``tell_why_stopped``, so the policy states it."""
    # local: realism_spec is imported by spec, which imports this
    from domains.realism_spec import BUILTIN_RULES, TELL_WHY_STOPPED

    try:
        shown = f"{datetime.fromisoformat(now):%A %d %B %Y, %H:%M} ({now})"
    except ValueError:  # the loader reports the bad clock itself, with its path; the text just shows it
        shown = repr(now)
    lines = [policy] if policy else []
    lines.append(f"The current date and time is {shown}; every rule about dates and times is judged against it.")
    if users is not None:
        lines += [role.rule for role in users.roles if role.rule]
    every = rules + (BUILTIN_RULES if users is not None else ()) + ((TELL_WHY_STOPPED,) if why_stopped else ())
    for heading, kind in ((TOOL_RULES_HEADING, "tool"), (TERMS_HEADING, "term"), (AGENT_RULES_HEADING, "agent"),
                          (TELL_RULES_HEADING, "tell")):
        chosen = [r for r in every if section_of(r, checked) == kind]
        if chosen:
            lines.append(heading)
            lines += [f"- {rule_line(r)}" for r in chosen]
    return "\n".join(lines)


def rule_line(rule: Rule) -> str:
    """How the policy writes one rule: ``[id] sentence``."""
    text = f"[{rule.id}] {rule.text}"
    if rule.alternative is not None:
        text = f"{text} {rule.alternative.sentence()}"
    if rule.before:
        text += f" Where {' or '.join(f'[{r}]' for r in rule.before)} also applies, this rule decides."
    return text


_NOT_CHECKED = re.compile(r"tools (do|does|will) not (check|stop)|not checked by the tools|the tools let .{0,40} through",
                          re.IGNORECASE)
_ALL_CHECKED = re.compile(r"\b(every|each|all)\b[^.:]{0,60}\b(rule|rules|check|checks|condition|conditions)\b[^.:]{0,60}"
                          r"\b(is|are) checked before the operation runs", re.IGNORECASE)


def policy_contradictions(text: str, spec: Any = None) -> list[str]:
    """What makes a policy text contradict itself about who checks the rules: a sentence saying every rule is
    checked before the operation runs beside one saying the tools do not check some; and, given the spec, a
    policy-only check listed among the checks the tools run, or an agent rule stated under the tools' heading."""
    out = []
    if _NOT_CHECKED.search(text) and _ALL_CHECKED.search(text):
        out.append(f"says both {_ALL_CHECKED.search(text).group(0)!r} and {_NOT_CHECKED.search(text).group(0)!r}")
    if spec is not None:
        checked = text.split(AGENT_RULES_HEADING, 1)[0].split(TERMS_HEADING, 1)[0]
        writes = text.split("## Write operations", 1)[1] if "## Write operations" in text else ""
        for tool in spec.tools:
            for p in tool.preconditions:
                if p.enforced_by == "policy" and f"- {p.error}" in writes:
                    out.append(f"{tool.name}: the policy-only check {p.error!r} is listed among the tools' checks")
        for rule in spec.all_rules:
            if rule.id not in spec.checked_rules and f"- {rule_line(rule)}" in checked:
                out.append(f"rule {rule.id} is checked by no tool, yet it is listed among the tools' checks")
    return out
