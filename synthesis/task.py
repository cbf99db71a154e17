"""A synthesised task: its requests, lineage, rendering into the tau2 task shape, and its content hash."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any

from domains.engine import ToolCall
from synthesis.requests import Request
from verifiers.types import VerifiableTask

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
        return VerifiableTask(self.domain, self.seed, self.gold_calls, self.communicate_info)

    def reason_for_call(self) -> str:
        parts = []
        for i, r in enumerate(self.requests):
            pool = OPENERS if i == 0 else (LAST if i == len(self.requests) - 1 and i > 1 else THEN)
            pick = pool[(self.style + i) % len(pool)]
            text = r.clause[0].lower() + r.clause[1:] if i == 0 else r.clause
            parts.append(pick.format(c=text))
        return _capitalise_sentences(" ".join(parts))

    def instructions(self) -> dict[str, Any]:
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
            "description": {"purpose": self.purpose(), "relevant_policies": None, "notes": None},
            "user_scenario": {"persona": None, "instructions": self.instructions()},
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

    def purpose(self) -> str:
        tools = ", ".join(dict.fromkeys(c.name for c in self.gold_calls))
        kinds = " + ".join(self.kinds)
        lineage = f" Evolved by {self.operator} (depth {self.depth})." if self.operator else ""
        return f"{self.domain}: {kinds} using {tools}.{lineage}"


def _capitalise_sentences(text: str) -> str:
    return text[:1].upper() + text[1:]


def style_for(rng: random.Random) -> int:
    return rng.randrange(len(STYLE) * len(OPENERS))
