"""The policy text an agent reads: the spec's own policy plus what the spec declares elsewhere (the clock,
how each role is identified, and every written rule by id, split truthfully into the rules the tools check and
the rules the agent must apply itself)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from domains.realism_spec import Rule, Users

TOOL_RULES_HEADING = ("Rules the tools check (a call that breaks one fails with an error, and nothing is "
                      "changed):")
AGENT_RULES_HEADING = ("Rules the agent must apply itself (the tools will not stop you: a call that breaks one "
                       "succeeds, and doing it is a mistake):")


def policy_text(policy: str, now: str, users: Users | None, rules: tuple[Rule, ...]) -> str:
    """``policy`` followed by the current date and time, the identification rules and the rules by id."""
    from domains.realism_spec import BUILTIN_RULES  # local: realism_spec is imported by spec, which imports this

    try:
        shown = f"{datetime.fromisoformat(now):%A %d %B %Y, %H:%M} ({now})"
    except ValueError:  # the loader reports the bad clock itself, with its path; the text just shows it
        shown = repr(now)
    lines = [policy] if policy else []
    lines.append(f"The current date and time is {shown}; every rule about dates and times is judged against it.")
    if users is not None:
        lines += [role.rule for role in users.roles if role.rule]
    every = rules + (BUILTIN_RULES if users is not None else ())
    for heading, kind in ((TOOL_RULES_HEADING, "tool"), (AGENT_RULES_HEADING, "agent")):
        chosen = [r for r in every if r.checked_by == kind]
        if chosen:
            lines.append(heading)
            lines += [f"- {rule_line(r)}" for r in chosen]
    return "\n".join(lines)


def rule_line(rule: Rule) -> str:
    """How the policy writes one rule: ``[id] sentence``."""
    return f"[{rule.id}] {rule.text}"
