"""A synthesised task: its requests, lineage, rendering into the tau2 task shape, and its content hash."""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from domains.engine import ToolCall
from synthesis.persona import Persona
from synthesis.requests import Request
from verifiers.types import CHECKS, VerifiableTask

OPENERS = ("I'd like to {c}.", "Could you {c}?", "Please {c}.", "I need you to {c}.", "Can you {c} for me?")
THEN = ("After that, {c}.", "Then {c}.", "Once that is done, {c}.", "Next, {c}.")
LAST = ("Finally, {c}.", "Lastly, {c}.", "And then {c}.")
STYLE = ("You are a customer writing to the {domain} service's support agent. Share only what is asked for; "
         "if the agent asks for something you do not know, say that you do not know it.",
         "You are in a hurry and write short messages to the {domain} service's agent. Do not volunteer "
         "information before the agent asks for it.",
         "You are polite and precise. Give the agent the details below when asked, one request at a time.")


@dataclass
class Task:
    domain: str
    seed: int
    requests: list[Request]
    style: int
    evolved_from: str | None = None
    operator: str | None = None
    depth: int = 0
    distractors: list[str] = field(default_factory=list)
    # realistic tasks (domains with users and intents): who asks, and how they are identified
    persona: Persona | None = None
    user: tuple[str, Any] | None = None
    identify_tools: tuple[str, ...] = ()
    criteria: tuple[str, ...] = CHECKS  # the checks that decide "solved" (a stored tau2 task keeps its own)

    @property
    def gold_calls(self) -> tuple[ToolCall, ...]:
        return tuple(c for r in self.requests for c in r.calls)

    @property
    def communicate_info(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(i for r in self.requests for i in r.communicate))

    @property
    def kinds(self) -> list[str]:
        return [r.kind for r in self.requests]

    def verifiable(self) -> VerifiableTask:
        return VerifiableTask(self.domain, self.seed, self.gold_calls, self.communicate_info, self.user,
                              self.identify_tools, self.criteria)

    @property
    def notes(self) -> list[str]:
        return [n for r in self.requests for n in r.notes]

    def reason_for_call(self) -> str:
        if self.persona is not None:
            return _spoken(self.requests, self.style)
        parts = []
        for i, r in enumerate(self.requests):
            pool = OPENERS if i == 0 else (LAST if i == len(self.requests) - 1 and i > 1 else THEN)
            pick = pool[(self.style + i) % len(pool)]
            text = r.clause[0].lower() + r.clause[1:] if i == 0 else r.clause
            parts.append(pick.format(c=text))
        return _capitalise_sentences(" ".join(parts))

    def instructions(self) -> dict[str, Any]:
        if self.persona is not None:
            return self._persona_instructions()
        known = list(dict.fromkeys(k for r in self.requests for k in r.known))
        unknown = list(dict.fromkeys(u for r in self.requests for u in r.unknown))
        task_text = STYLE[self.style % len(STYLE)].format(domain=self.domain)
        if self.distractors:
            task_text += " " + " ".join(self.distractors)
        return {
            "domain": self.domain,
            "reason_for_call": self.reason_for_call(),
            "known_info": "; ".join(known) if known else None,
            "unknown_info": ("You do not know " + ", ".join(unknown) + ".") if unknown else None,
            "task_instructions": task_text,
        }

    def _persona_instructions(self) -> dict[str, Any]:
        assert self.persona is not None
        facts = list(dict.fromkeys(k for r in self.requests for k in r.known))
        named = any(self.persona.name in k for k in facts)
        known = ([] if named else [f"your name is {self.persona.name}"]) + facts
        return {
            "domain": self.domain,
            "reason_for_call": self.reason_for_call(),
            "known_info": "; ".join(known),
            "unknown_info": "You do not know any internal account or record ids; you only know what is listed.",
            "task_instructions": (f"You are {self.persona.name}, {self.persona.described_as} of the {self.domain} service, "
                                  f"talking to its assistant. Your manner: {self.persona.manner}. Give the details "
                                  f"you know when the agent asks for them. If the agent refuses part of your request "
                                  f"and explains the rule, accept it and carry on with the rest."),
        }

    def instruction_text(self) -> str:
        """The text a user simulator is given; what dedup compares."""
        ins = self.instructions()
        return " ".join(str(ins[k]) for k in ("reason_for_call", "known_info", "task_instructions") if ins[k])

    def features(self) -> dict[str, int]:
        calls = self.gold_calls
        return {"calls": len(calls), "distinct_tools": len({c.name for c in calls}),
                "requests": len(self.requests), "depth": self.depth}

    def canonical_gold(self) -> str:
        return json.dumps([c.to_dict() for c in self.gold_calls], sort_keys=True, ensure_ascii=False, default=str)

    def content_hash(self) -> str:
        """Identity of a task's content: domain, seed, gold calls, what must be said, the instruction."""
        blob = json.dumps([self.domain, self.seed, self.canonical_gold(), self.communicate_info,
                           self.instruction_text()], ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def task_id(self) -> str:
        return f"{self.domain}-{self.content_hash()[:12]}"

    def tau2(self) -> dict[str, Any]:
        """The task in tau2-bench's Task field names."""
        return {
            "id": self.task_id,
            "description": {"purpose": self.purpose(), "relevant_policies": self.relevant_policies(), "notes": None},
            # "role" is ToolScale's addition (tau2 ignores it): readers take the role from here, not the persona text
            "user_scenario": {"persona": self.persona.describe() if self.persona else None,
                              "instructions": self.instructions(),
                              **({"role": self.persona.role} if self.persona else {})},
            "initial_state": None,
            "evaluation_criteria": {
                "actions": [{"action_id": f"{self.task_id}-{i}", "requestor": "assistant", "name": c.name,
                             "arguments": c.arguments, "info": None, "compare_args": None}
                            for i, c in enumerate(self.gold_calls)],
                "communicate_info": list(self.communicate_info),
                "nl_assertions": None,
                "reward_basis": ["DB", "COMMUNICATE"] if self.communicate_info else ["DB"],
            },
        }

    def relevant_policies(self) -> str | None:
        """The written rules that decided this task's requests, one ``[id] sentence`` a line (None: none)."""
        ids = list(dict.fromkeys(n[5:] for n in self.notes if n.startswith("rule=")))
        if not ids:
            return None
        from domains.policy import rule_line  # local: keeps the task model free of the spec loader at import
        from domains.registry import get_spec

        try:
            spec = get_spec(self.domain)
        except KeyError:
            return "\n".join(f"[{i}]" for i in ids)
        return "\n".join(rule_line(r) if (r := spec.rule(i)) else f"[{i}]" for i in ids)

    def purpose(self) -> str:
        tools = ", ".join(dict.fromkeys(c.name for c in self.gold_calls))
        kinds = " + ".join(self.kinds)
        lineage = f" Evolved by {self.operator} (depth {self.depth})." if self.operator else ""
        rules = [n[5:] for n in self.notes if n.startswith("rule=")]
        decided = f" Decided by: {' '.join(dict.fromkeys(rules))}" if rules else ""
        return f"{self.domain}: {kinds} using {tools}.{lineage}{decided}"


def _capitalise_sentences(text: str) -> str:
    return text[:1].upper() + text[1:]


def style_for(rng: random.Random) -> int:
    return rng.randrange(len(STYLE) * len(OPENERS))


# at most one word each, so the opening three words still vary with the request itself
OPENINGS = ("Hi.", "Hello,", "Morning.", "Hey,", "Hiya,", "Evening.", "Afternoon.", "Hello!", "Hi!", "", "Hey!",
            "Greetings.", "Right,", "So,", "Okay,")
JOINERS = ("Also, ", "One more thing: ", "Oh, and ", "Separately, ", "While I have you, ", "And ",
           "Another thing - ", "Besides that, ")


def _sentence(clause: str) -> str:
    clause = clause.strip()
    return clause if clause[-1:] in ".?!" else clause + "."


def _lower_first(clause: str) -> str:
    stripped = re.sub(r"^(and|also),?\s+", "", clause, flags=re.IGNORECASE)  # the joiner already says it
    if stripped != clause:
        return stripped  # what follows 'and' is already mid-sentence (and may be a name)
    return clause if re.match(r"^(I\b|I'|[A-Z]{2})", clause) else clause[:1].lower() + clause[1:]


def _spoken(requests: list[Request], style: int) -> str:
    """What a person says: an opening, their first goal, then the rest joined as people join them."""
    said = [r.clause for r in requests if r.kind != "identify" and r.clause]
    if not said:
        return ""
    opening = OPENINGS[style % len(OPENINGS)]
    first = _sentence(said[0])
    first = _lower_first(first) if opening.endswith(",") else _capitalise_sentences(first)
    parts = [(opening + " " if opening else "") + first]
    for i, clause in enumerate(said[1:]):
        parts.append(JOINERS[(style + i) % len(JOINERS)] + _lower_first(_sentence(clause)))
    return " ".join(parts)
