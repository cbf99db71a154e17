"""A synthesised task: its requests, lineage, rendering into the tau2 task shape, and its content hash."""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from domains.engine import ToolCall
from synthesis.persona import Persona
from synthesis.requests import Request
from synthesis.wording import agree, lower_first, opening_connective, part_of_day, skeleton
from verifiers.types import CHECKS, VerifiableTask
from verifiers.values import nl_assertion, tau2_form, typed_values

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
    now: str | None = None  # the domain's clock (spec ``now``): a greeting says the part of the day it shows
    # dual control (telecom): the calls that set up the start (tau2's initialization_actions), the assertions on
    # the final state (ENV_ASSERTION) and the actions that must be called (ACTION); empty for every other domain
    setup_calls: tuple[ToolCall, ...] = ()
    env_assertions: tuple[dict[str, Any], ...] = ()
    actions: tuple[dict[str, Any], ...] = ()

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
                              self.identify_tools, self.criteria, self.setup_calls, self.env_assertions, self.actions)

    @property
    def notes(self) -> list[str]:
        return [n for r in self.requests for n in r.notes]

    def reason_for_call(self) -> str:
        if self.persona is not None:
            return _spoken(self.requests, self.style, self.now, is_formal(self.persona), self.persona.manner)
        parts = []
        for i, r in enumerate(self.requests):
            pool = OPENERS if i == 0 else (LAST if i == len(self.requests) - 1 and i > 1 else THEN)
            pick = pool[(self.style + i) % len(pool)]
            text = lower_first(r.clause, r.says) if i == 0 else r.clause
            parts.append(pick.format(c=text))
        return _capitalise_sentences(" ".join(parts))

    def clause_skeletons(self) -> tuple[str, ...]:
        """Each spoken request clause with its record values replaced by '{}' (what the audit counts)."""
        if self.persona is None:
            return tuple(skeleton(r.clause, r.says) for r in self.requests if r.clause)
        return tuple(skeleton(c.text, c.says)
                     for c in spoken_clauses(self.requests, self.style, self.now, is_formal(self.persona),
                                             self.persona.manner))

    def said_values(self) -> tuple[str, ...]:
        """The record values the request spells out (names among them keep their case)."""
        return tuple(dict.fromkeys(v for r in self.requests for v in r.says))

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
        facts = list(dict.fromkeys(agree(k) for r in self.requests for k in r.known))
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
        parts: list[Any] = [self.domain, self.seed, self.canonical_gold(), self.communicate_info,
                            self.instruction_text()]
        if self.setup_calls or self.env_assertions or self.actions:  # only a dual-control task: others keep their id
            parts.append([[c.to_dict() for c in self.setup_calls], list(self.env_assertions), list(self.actions)])
        blob = json.dumps(parts, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def task_id(self) -> str:
        return f"{self.domain}-{self.content_hash()[:12]}"

    def tau2(self) -> dict[str, Any]:
        """The task in tau2-bench's Task field names."""
        task_id = self.task_id  # hashes the whole task: once, not once per action
        return {
            "id": task_id,
            "description": {"purpose": self.purpose(), "relevant_policies": self.relevant_policies(), "notes": None},
            # "role" is ToolScale's addition (tau2 ignores it): readers take the role from here, not the persona text
            "user_scenario": {"persona": self.persona.describe() if self.persona else None,
                              "instructions": self.instructions(),
                              **({"role": self.persona.role} if self.persona else {})},
            "initial_state": self._initial_state(),
            "evaluation_criteria": {
                "actions": [{"action_id": f"{task_id}-{i}",
                             "requestor": "user" if c.side == "user" else "assistant", "name": c.name,
                             "arguments": c.arguments, "info": None, "compare_args": None}
                            for i, c in enumerate(self.gold_calls)],
                # tau2 grades by substring: each value in the form most correct answers contain, a date also as a
                # statement for tau2's LLM judge, left out of the reward basis (verifiers/values.py, docs/tau2.md)
                "communicate_info": [tau2_form(v) for v in self.communicate_info],
                "nl_assertions": [a for a in map(nl_assertion, self.communicate_info) if a] or None,
                "communicate_values": typed_values(self.communicate_info),  # ToolScale's addition; tau2 ignores it
                "reward_basis": ["DB", "COMMUNICATE"] if self.communicate_info else ["DB"],
                **self._dual_control_criteria(),
            },
        }

    def _initial_state(self) -> dict[str, Any] | None:
        """tau2's ``initial_state``: the setup calls as initialization actions, each on the toolkit (env) of the side
        whose table its tool sets; None for a task without setup calls."""
        if not self.setup_calls:
            return None
        from domains.registry import get_spec  # local, as in relevant_policies

        spec = get_spec(self.domain)
        device = {t.name for t in spec.side_tables("user")}
        tools = {t.name: t for t in spec.tools}
        return {"initialization_data": None, "initialization_actions": [
            {"env_type": "user" if c.name in tools and tools[c.name].entity in device else "assistant",
             "func_name": c.name, "arguments": c.arguments} for c in self.setup_calls]}

    def _dual_control_criteria(self) -> dict[str, Any]:
        """A dual-control task's env assertions, and its reward basis from its criteria; nothing for other tasks."""
        if not (self.setup_calls or self.env_assertions or self.actions):
            return {}
        basis = {"execution": "DB", "fidelity": "COMMUNICATE", "assertions": "ENV_ASSERTION", "actions": "ACTION"}
        return {"env_assertions": list(self.env_assertions),
                "reward_basis": [basis[c] for c in self.criteria if c in basis]}

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


# at most one word each, so the opening three words still vary with the request itself; "{part}" is the part of
# the day by the domain's clock (a night clock gets the plain greeting after "|"). Many people open with the request
# itself: the blanks keep each greeting under 3% of a domain's requests (issue 39 measured "Greetings." at 7.3%).
# One person writes to one assistant, so no greeting speaks to a group ("Hi all,", "Hey folks,").
_GREETINGS = ("Hi.", "Hello,", "{Part}.|Hello.", "Hey,", "Hiya,", "Good {part}.|Hi there.", "Hello there,",
              "Hello!", "Hi!", "Hey!", "Greetings.", "Right,", "So,", "Okay,", "Hi,", "Hello there.", "Hey there,",
              "Hi again,", "Hello again.", "Good day.", "Hi there,", "Okay then,", "Alright,", "Hi assistant,",
              "Hi team,", "Hello team,", "Hi support,", "Hello support,", "Dear support team,", "Good to reach you.",
              "Howdy,", "Dear assistant,", "Hiya.", "Heya,", "Hey again,", "Hi there!", "Hello there!", "Hallo,",
              "Heya!", "Dear team,", "Dear customer service,", "Good day, team.", "Dear support,",
              "Hello to you.")
OPENINGS = _GREETINGS + ("",) * 60  # each greeting in about 1 request of 100
JOINERS = ("Also, ", "One more thing: ", "Oh, and ", "Separately, ", "While I have you, ", "And ",
           "Another thing - ", "Besides that, ")
# said before the first goal, or after any goal: how people frame a request (the goal itself comes from the spec);
# each starts with its own words, so the opening three words still vary
_LEADS = ("Quick question.", "Hoping you can help.", "Sorry to bother you.", "Need a hand with something.",
          "Can you help me?", "Bit of a favour to ask.", "Something needs sorting out.", "This is a bit urgent.",
          "Got a minute?", "Here's my problem.", "Just a small thing.", "Wondering if you can help.",
          "Thanks for picking this up.", "Apologies for the trouble.", "Me again.", "Not sure who else to ask.",
          "Any chance you can help?", "First time using this chat.", "I hope you can help.", "I have a request.",
          "A question for you.", "I'd be grateful for your help.", "I need some help, please.",
          "I'm hoping this is quick.",
          "There's something I need.", "Short one today.", "Glad I caught you.",
          "I won't keep you long.", "This should be simple.", "I'll be quick.", "Straight to it.", "A small request.",
          "One request today.", "I'd like some help.", "I was told to ask here.", "Maybe you can sort this.",
          "Hopefully an easy one.", "I've been meaning to ask.", "Following up on something.", "Help needed, please.",
          "Could you look into something?", "Here's what I need.", "I'm writing with a request.",
          "I'd appreciate some help.", "Something came up.", "I have a quick one.", "I'm after some help.",
          "A quick request, please.", "Hope you're well.", "Hoping for a quick answer.", "I need to sort something.",
          "Just checking something.", "This one's simple, I think.", "It's a small matter.",
          "I'm contacting you about this.",
          "I could use a hand.", "Can I ask something?", "Quick favour.", "There's a thing I need done.")
# a lead-in before most first goals: what a request says is read with its framing (the audit's clause skeletons), and
# 60 of them keep each near 1% of a domain's requests
LEAD_INS = ("",) * 20 + _LEADS
_THANKS = ("Thanks.", "Thank you.", "Thanks in advance.", "Cheers.", "Much appreciated.", "Thanks so much.",
           "Thanks for your help.", "Many thanks.", "Appreciate it.", "Ta.", "Thanks!", "Thank you very much.",
           "Thanks a lot.", "Thank you kindly.", "Many thanks in advance.", "Grateful for the help.", "Thanks, bye.",
           "Thank you for your time.", "That's all, thanks.", "That's everything, thanks.", "Cheers, thanks.",
           "Thanks ever so much.", "Thank you, that's all.", "Best wishes.", "Thanks very much for this.",
           "Thank you in advance.", "I appreciate the help.", "Many thanks for your time.", "That's it, thanks.",
           "Cheers for that.", "Thanks for sorting it.", "Thank you for looking into it.", "Much obliged.",
           "Thanks a bunch.", "Kind regards.", "Regards.", "With thanks.", "Thanks again.", "Thank you so much.",
           "Really appreciate it.", "Thanks for checking.", "Thanks for your patience.", "Thanks, have a good day.",
           "Thank you, have a nice day.", "That's all I needed.", "That's all for today.",
           "Thanks in advance for this.",
           "Thank you for the help.", "Thanks, you're a star.", "Speak soon.", "Thanks for your time today.",
           "Thank you, much appreciated.", "I'm grateful.", "Thanks for the help.", "Thank you very kindly.",
           "Many thanks again.", "Thanks heaps.", "All the best.", "Thank you for your help today.", "Have a good one.",
           "Thanks, take care.", "Take care.", "Thank you and goodbye.", "That's all from me.",
           "Much appreciated, thanks.",
           "Thanks for getting back to me.", "Thanks for the quick help.", "Thank you for your patience.",
           "Cheers, that's all.", "With many thanks.")
# more ways to sign off: with 70 a closing drawn by the hash alone reached 3.2% of a domain's requests (railway)
_SIGN_OFFS = ("Thanks for taking care of it.", "Thank you for dealing with this.", "Thanks, that helps a lot.",
              "I owe you one.", "You've been a great help.", "Thank you, goodbye.", "Thanks for listening.",
              "Thank you for your assistance.", "Thanks for all your help.", "Looking forward to hearing back.",
              "Hope to hear from you soon.", "Thanks for the assistance.", "Thank you for handling this.",
              "Warm regards.", "Best regards.", "Many thanks, goodbye.", "Thanks a million.", "Lovely, thanks.",
              "Great, thank you.", "Perfect, thanks.", "Thanks for being so helpful.", "Thank you for sorting this.",
              "Thanks for taking a look.", "Thank you for checking.", "That would be all, thank you.",
              "Nothing else for now, thanks.", "Nothing more, thanks.", "Thanks, that's the lot.",
              "I appreciate your time.", "Your help is appreciated.", "Thank you, I appreciate it.",
              "Grateful for your time.", "Thanks, I'll wait to hear.", "Thank you for your quick help.",
              "Thanks for fitting me in.", "Sincere thanks.", "Thank you, all the best.", "Thanks, goodbye for now.",
              "Bye for now.", "Have a lovely day.", "Have a great day.", "Enjoy the rest of your day.",
              "Thank you, take care.", "Thank you, that is very kind.", "Thank you ever so much.",
              "Thanks so much for your help.", "Big thanks.", "Thanks, mate.", "Cheers, mate.", "Nice one, thanks.",
              "Brilliant, thanks.", "Thanks a ton.", "Thank you, that's everything.", "Thank you, that's it.",
              "Appreciate your help.", "Appreciate your time.", "Much appreciated, as always.",
              "Thank you, truly.", "I'm very grateful.", "Thanks kindly.")
# with 130 closings one phrase still reached 2.9% of a domain's requests (travel): more formal ones (a formal speaker
# draws from the rest only); more blanks instead left the audit's clause skeletons too alike (restaurant 2.0%)
_MORE_SIGN_OFFS = ("Thanks for looking into this.", "Many thanks for your help.", "Thanks in advance for your help.",
                   "I look forward to your reply.", "Thank you for your trouble.", "Thanks for your trouble.",
                   "Thanks very much.", "Thanks very much for your help.", "Thank you for the assistance.",
                   "I appreciate your help.", "Thanks for helping.", "Thank you for helping.",
                   "Thank you, have a good day.", "Thanks, have a nice day.", "Thank you for your kind help.",
                   "Thanks for the support.", "Thank you for the support.", "Thanks once again.",
                   "Thank you once more.", "Thanks for sorting it out.", "Thank you for getting this done.",
                   "Thanks for arranging it.", "Thank you for arranging this.", "Thanks for your assistance.",
                   "That is all for now, thank you.", "That will be all, thanks.", "Nothing further, thank you.",
                   "Thank you, that will do.", "All sorted then, thanks.")
CLOSINGS = ("",) * 12 + _THANKS + _SIGN_OFFS + _MORE_SIGN_OFFS
CLOSINGS_AFTER_STATEMENT = ("That would be great.", "I'd appreciate it.", "That would help a lot.")
# after a clause that is not the last one (people thank once, at the end), and only after the first goal: a second
# "that one matters most" would contradict the first
MID_CLOSINGS = ("",) * 60 + ("Hope that's okay.", "No rush on that one.", "That's the main thing.", "If you can.",
                             "That one matters most.", "Fingers crossed.", "If it's not too much trouble.",
                             "That's the big one.", "Whenever you get a chance.", "It's been bugging me.",
                             "That's the urgent bit.", "If that's possible.")
# fillers that contradict a manner (a speaker in a hurry has no "no rush"), and fillers that fit only after a
# question or only after a request for a change ("Fingers crossed." hopes for a yes)
CONTRADICTS = {
    "No rush on that one.": re.compile(r"hurry|impatient|urgent|quick", re.IGNORECASE),
    "Whenever you get a chance.": re.compile(r"hurry|impatient|urgent|quick", re.IGNORECASE),
    "If it's not too much trouble.": re.compile(r"hurry|impatient|brief|short", re.IGNORECASE),
    "That's the urgent bit.": re.compile(r"relaxed|calm|patient|unhurried", re.IGNORECASE),
    "This is a bit urgent.": re.compile(r"relaxed|calm|patient|unhurried", re.IGNORECASE),
    "First time using this chat.": re.compile(r"regular|again|loyal|long-standing", re.IGNORECASE),
    "It's been bugging me.": re.compile(r"formal|brief|short", re.IGNORECASE),
}
AFTER_QUESTION_ONLY = frozenset({"Fingers crossed."})
AFTER_CHANGE_ONLY = frozenset({"Hope that's okay.", "If that's possible.", "If it's not too much trouble."})
# a condition said once: "Do it if you can. If that's possible." says it twice
CONDITIONAL = frozenset({"If you can.", "If that's possible.", "If it's not too much trouble."})
HAS_CONDITION = re.compile(r"\bif\b", re.IGNORECASE)

# what a persona whose manner is formal ("formal; writes complete sentences") does not say: slang greetings, joiners,
# lead-ins and closings (each pick steps to the next phrase of its kind that is not here)
CASUAL = frozenset({"Hey,", "Hiya,", "Hey!", "Hi!", "Hi there.", "Right,", "So,", "Okay,", "Oh, and ",
                    "Another thing - ",
                    "Bit of a favour to ask.", "Got a minute?", "Me again.", "Need a hand with something.",
                    "Something needs sorting out.", "Just a small thing.", "Cheers.", "Ta.", "Fingers crossed.",
                    "That's the big one.", "No rush on that one.", "Hey there,", "Hi again,", "Alright,",
                    "Okay then,", "Hiya.", "Heya,", "Hey again,", "Hi there!", "Hallo,",
                    "Heya!", "Howdy,", "Good to reach you.", "Thanks!", "Thanks, bye.", "Cheers, thanks.",
                    "Thanks ever so much.", "Thanks a bunch.", "Cheers for that.", "Thanks, you're a star.",
                    "Thanks heaps.", "Have a good one.", "Cheers, that's all.", "Quick favour.", "Speak soon.",
                    "It's been bugging me.", "That's the urgent bit.", "Hi there,", "Thanks a million.",
                    "Lovely, thanks.", "Perfect, thanks.", "Thanks, that's the lot.", "Bye for now.", "Big thanks.",
                    "Thanks, mate.", "Cheers, mate.", "Nice one, thanks.", "Brilliant, thanks.", "Thanks a ton.",
                    "I owe you one."})


FORMAL = re.compile(r"\bformal\b", re.IGNORECASE)  # the word, not "informal"


def is_formal(persona: Persona | None) -> bool:
    """Whether the persona's manner asks for formal words (the register of the request follows the manner)."""
    return persona is not None and FORMAL.search(persona.manner) is not None


@dataclass(frozen=True)
class SpokenClause:
    """One request as the user says it: the words joining it to what came before (the greeting for the first),
    the clause with its framing, and the record values it spells out."""

    joiner: str
    text: str
    says: tuple[str, ...] = ()


def greeting(style: int | str, now: str | None, formal: bool = False) -> str:
    """The opening word(s) of a spoken request, chosen stably by ``style`` (the speaker's voice), fitted to the clock
    (never "Evening." at 08:00) and, for a formal speaker, never a casual one; often none."""
    return _pick(tuple(_timed(o, now) for o in OPENINGS), "open", style, formal=formal)


def _timed(opening: str, now: str | None) -> str:
    if "{part}" not in opening.lower():
        return opening
    timed, plain = opening.split("|")
    part = part_of_day(now)
    return plain if part is None else timed.replace("{part}", part).replace("{Part}", part.capitalize())


def _pick(options: tuple[str, ...], *key: object, formal: bool = False, manner: str = "",
          after: str = "") -> str:
    """A stable choice (the same task always reads the same), spread by the clause itself; a formal speaker's
    from the options that are not casual, any speaker's from those that do not contradict their ``manner``, and
    after a clause ending in ``after`` ("?" or ".") only from the fillers that fit it."""
    options = _fitting(options, formal, manner, after)
    digest = hashlib.sha256(json.dumps(key, default=str).encode()).digest()
    return options[int.from_bytes(digest[:4], "big") % len(options)]


@lru_cache(maxsize=4096)
def _fitting(options: tuple[str, ...], formal: bool, manner: str, after: str) -> tuple[str, ...]:
    return tuple(o for o in options if fits(o, formal, manner, after))  # a pool is filtered once per speaker kind


def fits(phrase: str, formal: bool = False, manner: str = "", after: str = "") -> bool:
    """Whether a greeting or filler fits the speaker and the clause it follows (the blank always fits)."""
    if formal and phrase in CASUAL:
        return False
    if manner and phrase in CONTRADICTS and CONTRADICTS[phrase].search(manner):
        return False
    return not ((after == "?" and phrase in AFTER_CHANGE_ONLY) or (after == "." and phrase in AFTER_QUESTION_ONLY))


def _sentence(clause: str) -> str:
    clause = clause.strip()
    return clause if clause[-1:] in ".?!" else clause + "."


def is_forbidden(request: Request) -> bool:
    """A request the user may not make (for another person, or one their role may not ask): it gets no filler."""
    return request.kind == "forbidden" or any(n.startswith("forbidden=") for n in request.notes)


def _framed(clause: str, voice: str, index: int, last: bool, formal: bool = False, manner: str = "",
            forbidden: bool = False) -> tuple[str, str]:
    """A lead-in (first goal only) and a closing (thanks only after the last clause, a filler only after the first
    of several) for one clause; ``voice`` keys the choice to the whole task. A forbidden request gets no lead-in and
    no filler ("That's the big one." on a request the agent must refuse), only a plain closing."""
    if forbidden:
        return "", (_pick(CLOSINGS, "close", voice, index, clause, formal=formal, manner=manner) if last else "")
    lead = _pick(LEAD_INS, "lead", voice, clause, formal=formal, manner=manner) if index == 0 else ""
    if last:
        closings = CLOSINGS + (CLOSINGS_AFTER_STATEMENT if clause.endswith(".") else ())
    else:
        closings = MID_CLOSINGS if index == 0 else ("",)
    if HAS_CONDITION.search(clause):
        closings = tuple(c for c in closings if c not in CONDITIONAL)
    return lead, _pick(closings, "close", voice, index, clause, formal=formal, manner=manner, after=clause[-1:])


def _voice(requests: list[Request], style: int) -> str:
    """What tells two tasks' speakers apart: the style, every clause and the identifying facts (two people asking
    the same slot-free question still frame it their own way)."""
    return json.dumps([style, [(r.clause, r.known, [c.arguments for c in r.calls[:1]]) for r in requests]],
                      sort_keys=True, default=str)


_SPOKEN: OrderedDict[tuple[Any, ...], tuple[tuple[Request, ...], tuple[SpokenClause, ...]]] = OrderedDict()
_SPOKEN_LOCK = threading.Lock()
SPOKEN_MEMO = 256  # a candidate's wording is read ~10 times while it is verified and described, then not again


def spoken_clauses(requests: list[Request], style: int, now: str | None = None,
                   formal: bool = False, manner: str = "") -> list[SpokenClause]:
    """What a person says, clause by clause: an opening fitted to the clock, their first goal, then the rest joined
    as people join them (a clause that opens with its own connective gets no other); ``formal``: in a formal
    speaker's words (``CASUAL`` left out); ``manner``: no filler that contradicts it. Remembered for the last few
    request lists by identity (requests are frozen; the memo holds them, so an id is not reused meanwhile)."""
    key = (tuple(map(id, requests)), style, now, formal, manner)
    with _SPOKEN_LOCK:
        hit = _SPOKEN.get(key)
    if hit is not None:
        return list(hit[1])
    clauses = tuple(_spoken_clauses(requests, style, now, formal, manner))
    with _SPOKEN_LOCK:
        _SPOKEN[key] = (tuple(requests), clauses)
        if len(_SPOKEN) > SPOKEN_MEMO:
            _SPOKEN.popitem(last=False)
    return list(clauses)


def _spoken_clauses(requests: list[Request], style: int, now: str | None, formal: bool,
                    manner: str = "") -> list[SpokenClause]:
    said = [r for r in requests if r.kind != "identify" and r.clause]
    voice = _voice(requests, style)
    out: list[SpokenClause] = []
    for i, r in enumerate(said):
        names = r.says
        clause = agree(_sentence(r.clause))
        own = opening_connective(clause)
        if i == 0:
            joiner = greeting(voice, now, formal)
            if own:
                clause = clause[len(own):]
            lead, closing = _framed(clause, voice, i, i == len(said) - 1, formal, manner, is_forbidden(r))
            text = (lead + " " if lead else "") + (_capitalise_sentences(clause) if lead else clause)
            if joiner.endswith(","):
                text = lower_first(text, names)
            else:
                text = _capitalise_sentences(text)
            joiner = joiner + " " if joiner else ""
        elif own:
            joiner, lead_text = "", _capitalise_sentences(clause)
            _, closing = _framed(clause, voice, i, i == len(said) - 1, formal, manner, is_forbidden(r))
            text = lead_text
        else:
            joiner = _joiner(style + i - 1, clause, formal)
            _, closing = _framed(clause, voice, i, i == len(said) - 1, formal, manner, is_forbidden(r))
            text = lower_first(clause, names)
        out.append(SpokenClause(joiner, text + (" " + closing if closing else ""), names))
    return out


def _joiner(k: int, clause: str, formal: bool = False) -> str:
    """The k-th joiner, or the next one when the clause itself soon says its word ("Also, could you also ...") or
    when it is casual and the speaker formal."""
    pool = tuple(j for j in JOINERS if j not in CASUAL) if formal else JOINERS  # k+1 after k: another joiner
    opening_words = clause.lower().replace(",", " ").split()[:5]
    for step in range(len(pool)):
        joiner = pool[(k + step) % len(pool)]
        if joiner.split()[0].lower().strip(",:") not in opening_words:
            return joiner
    return pool[k % len(pool)]


def _spoken(requests: list[Request], style: int, now: str | None = None, formal: bool = False,
            manner: str = "") -> str:
    return " ".join(c.joiner + c.text for c in spoken_clauses(requests, style, now, formal, manner))
