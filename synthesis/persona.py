"""Who a realistic task's user is: the persona, how it is worded ("a doctor", "an instructor"), and reading the
user's role back from a task's tau2 ``user_scenario`` (as data; old snapshots only had it in the persona text)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# role words that personas spelt out before the role travelled as data ("Ann Lee, a staff: brisk")
_LEGACY_ROLES = ("customer", "staff")
_LEGACY_PERSONA = re.compile(r"[^,]*, an? ([A-Za-z_]+):")
# words that start with a vowel letter but a consonant sound ("a university lecturer"), and the reverse
_A_BEFORE = ("uni", "use", "usu", "uti", "eu", "one", "once")
_AN_BEFORE = ("hour", "honest", "honor", "honour", "heir")


def with_article(noun: str) -> str:
    """The noun with its indefinite article, by how it is said.

    >>> with_article("instructor"), with_article("doctor"), with_article("hourly worker"), with_article("user")
    ('an instructor', 'a doctor', 'an hourly worker', 'a user')
    """
    low = noun.lower()
    if low.startswith(_AN_BEFORE):
        return f"an {noun}"
    if low.startswith(_A_BEFORE):
        return f"a {noun}"
    return f"{'an' if low[:1] and low[0] in 'aeiou' else 'a'} {noun}"


@dataclass(frozen=True)
class Persona:
    """The task's user: their name, their spec role (``customer``/``staff``), how that role is said, and a manner."""

    name: str
    role: str
    manner: str
    noun: str = ""  # how a person in the role is described ("doctor"); empty: the role's name

    @property
    def described_as(self) -> str:
        """'a doctor', 'an instructor', 'a customer'."""
        return with_article(self.noun or self.role)

    def describe(self) -> str:
        return f"{self.name}, {self.described_as}: {self.manner}"


_PERSONA_TEXT = re.compile(r"^(?P<name>[^,]+), an? (?P<noun>[a-z][a-z -]*): (?P<manner>.+)$", re.DOTALL)


def stored_persona(user_scenario: dict[str, Any] | None) -> Persona | None:
    """The persona of a stored task, rebuilt from its ``user_scenario`` (persona text and role); None when the text
    is not one this code writes or the role is unknown."""
    scenario = user_scenario or {}
    text, role = scenario.get("persona"), scenario_role(scenario)
    match = _PERSONA_TEXT.match(text) if isinstance(text, str) else None
    if match is None or role is None:
        return None
    noun = match.group("noun")
    return Persona(match.group("name"), role, match.group("manner"), "" if noun == role else noun)


def scenario_role(user_scenario: dict[str, Any] | None) -> str | None:
    """The user's spec role of a stored task: the scenario's ``role``, else (snapshots written before it travelled
    as data) the role word of the persona text, when that word is a role name."""
    scenario = user_scenario or {}
    role = scenario.get("role")
    if isinstance(role, str) and role:
        return role
    persona = scenario.get("persona")
    match = _LEGACY_PERSONA.match(persona) if isinstance(persona, str) else None
    return match.group(1) if match and match.group(1) in _LEGACY_ROLES else None


__all__ = ["Persona", "scenario_role", "stored_persona", "with_article"]
