"""The policy text an agent reads: the spec's own policy plus what the spec declares elsewhere (the clock,
how each role is identified, the rules only the policy enforces)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from domains.realism_spec import Users
    from domains.spec import Tool


def policy_text(policy: str, now: str, users: Users | None, tools: list[Tool]) -> str:
    """``policy`` followed by the current date and time, the identification rules and the policy-only rules."""
    try:
        shown = f"{datetime.fromisoformat(now):%A %d %B %Y, %H:%M} ({now})"
    except ValueError:  # the loader reports the bad clock itself, with its path; the text just shows it
        shown = repr(now)
    lines = [policy] if policy else []
    lines.append(f"The current date and time is {shown}; every rule about dates and times is judged against it.")
    if users is not None:
        for role in users.roles:
            if role.rule:
                lines.append(role.rule)
        lines.append("Act only for the identified user: never read out, change or cancel another person's "
                     "records, and refuse any request the user's role may not make.")
    rules = list(dict.fromkeys(p.rule for t in tools for p in t.preconditions if p.enforced_by == "policy" and p.rule))
    if rules:
        lines.append("The tools do not check the following rules; the agent must: " + " ".join(rules))
    return "\n".join(lines)
