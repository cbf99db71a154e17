"""The LLM evolution stage: an LLM picks how to make a task harder from a menu built from the task's own data;
the project builds the child with the generic evolution operators and keeps it only if it verifies.

The LLM never writes a request, a call or code. For each task the project runs every menu operator a few times
on the task's replayed end state and lists the distinct results as numbered options; the LLM answers with one
JSON object ``{"operator": NAME, "option": N}``. Anything else (not JSON, other keys, an unknown operator, an
operator not offered for this task, an option out of range) is refused and counted by reason. The chosen child
is then verified (gold replay, no-action fails, mutation kill rate over the threshold) before it is accepted.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar

from domains.registry import get_engine
from inference.client import ChatRequest, LLMClient
from inference.stage_tally import StageTally
from synthesis.evolve import OPERATORS
from synthesis.generate import admission
from synthesis.realistic_tasks import add_forbidden, add_goal, is_converted
from synthesis.task import THEN, Task
from synthesis.toolgraph import ToolGraph

STAGE = "evolve"
# add_constraint rewrites the task's last request; the child keeps the parent's wording verbatim, so only
# operators that add a request (or a distractor line) can be offered
MENU_OPERATORS = ("add_entity", "add_conditional", "add_follow_up", "require_computed_figure", "add_distractor")
# domains with users and intents evolve the way their regeneration does: the same user, one more goal or a
# forbidden request
REALISTIC_OPERATORS = {"add_goal": add_goal, "add_forbidden": add_forbidden}
OPTIONS_PER_OPERATOR = 2
MAX_OUTPUT_CHARS = 2000  # what is kept of a refused answer in llm_stage_rejections
SYSTEM = ("You make customer-support tasks harder. You are shown a task and numbered options, each a change "
          "that makes it harder. Choose one. Reply with one JSON object only, exactly like "
          '{"operator": "add_follow_up", "option": 1}')
EXAMPLE = ("Task: Please cancel booking BK0042.\nOptions:\n"
           'add_follow_up 1: Then tell me the new status of booking BK0042.\n'
           'add_entity 1: Then change the phone of customer CU0007 to 555-0101.\n'
           'add_entity 2: Then close ticket MT0032.',
           '{"operator": "add_entity", "option": 2}')


@dataclass
class LLMEvolvedTask(Task):
    """A child whose request is the parent's text followed by the new requests (rendered as follow-ons)."""

    base_text: str = ""
    base_requests: int = 0

    def reason_for_call(self) -> str:
        parts = [self.base_text]
        for i, r in enumerate(self.requests[self.base_requests:]):
            parts.append(THEN[(self.style + i) % len(THEN)].format(c=r.clause))
        return " ".join(parts)


@dataclass(frozen=True)
class MenuOption:
    operator: str
    number: int  # 1-based within the operator
    text: str  # what the option adds, as the user would say it
    child: LLMEvolvedTask


@dataclass(frozen=True)
class Rejection:
    task_id: str
    reason: str  # llm_error | budget_exceeded | no_options | invalid_json | bad_shape | unknown_operator
    # | operator_not_offered | bad_value | not_verified
    detail: str
    output: str | None

    @property
    def subject_id(self) -> str:
        return self.task_id


@dataclass
class EvolveResult(StageTally):
    stage: ClassVar[str] = STAGE
    accepted: list[LLMEvolvedTask] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)


@cache
def _graph(domain: str, seed: int) -> ToolGraph:
    return ToolGraph(get_engine(domain, seed))


def menu(task: Task, options_per_operator: int = OPTIONS_PER_OPERATOR,
         kill_threshold: float = 0.9) -> list[MenuOption]:
    """The numbered ways to make ``task`` harder, each a ready child that passes the regeneration's admission
    (verification, and the realism gate where the domain declares intents); built from the task's data, seeded
    by its id."""
    graph = _graph(task.domain, task.seed)
    converted = is_converted(graph)
    if converted and (task.user is None or task.persona is None):
        return []  # a stored task of a snapshot written before contracts were kept: no user to grow from
    operators = REALISTIC_OPERATORS if converted else {n: OPERATORS[n] for n in MENU_OPERATORS}
    out: list[MenuOption] = []
    for name, operator in operators.items():
        seen: set[str] = set()
        for attempt in range(options_per_operator * 2):  # a few extra draws: operators repeat themselves
            if len(seen) == options_per_operator:
                break
            made = operator(graph, task, random.Random(f"{task.task_id}:{name}:{attempt}"))
            if made is None:
                continue
            child = _as_child(task, made)
            text = _added_text(task, child)
            if text and text not in seen and admission(child, graph, kill_threshold)[1]:
                seen.add(text)
                out.append(MenuOption(name, len(seen), text, child))
    return out


def parse_choice(text: str, options: list[MenuOption]) -> MenuOption | Rejection:
    """The option an answer names, or why the answer is refused (``task_id`` left empty for the caller)."""
    data = _first_json_object(text)
    if data is None:
        return Rejection("", "invalid_json", "no JSON object in the answer", text)
    if not isinstance(data, dict) or set(data) != {"operator", "option"}:
        keys = sorted(data) if isinstance(data, dict) else type(data).__name__
        return Rejection("", "bad_shape", f"expected exactly the keys operator and option, got {keys}", text)
    operator, number = data["operator"], data["option"]
    if not isinstance(operator, str) or (operator not in OPERATORS and operator not in REALISTIC_OPERATORS):
        return Rejection("", "unknown_operator", f"operator {str(operator)[:80]!r} is not an evolution operator",
                         text)
    offered = [o for o in options if o.operator == operator]
    if not offered:
        return Rejection("", "operator_not_offered", f"{operator} was not offered for this task", text)
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= len(offered):
        return Rejection("", "bad_value", f"option {str(number)[:40]!r} of {operator}: choose 1..{len(offered)}",
                         text)
    return offered[number - 1]


def evolve_tasks(tasks: list[Task], llm: LLMClient, *, temperature: float = 0.2, max_tokens: int = 40,
                 kill_threshold: float = 0.9) -> EvolveResult:
    """Ask ``llm`` to pick one harder variant per task and keep the choices whose child verifies."""
    result = EvolveResult()
    menus = {t.task_id: menu(t, kill_threshold=kill_threshold) for t in tasks}
    asked = [t for t in tasks if menus[t.task_id]]
    for t in tasks:
        if not menus[t.task_id]:
            result.rejections.append(Rejection(t.task_id, "no_options", "no menu operator applies to this task",
                                               None))
    requests = [ChatRequest(messages=prompt(t, menus[t.task_id]),
                            params={"temperature": temperature, "max_tokens": max_tokens,
                                    "seed": int(t.content_hash()[:8], 16)},
                            stage=STAGE, task_id=t.task_id) for t in asked]
    for task, reply in zip(asked, llm.chat_many(requests)):
        if not reply.ok:
            reason = "budget_exceeded" if reply.error_kind == "budget_exceeded" else "llm_error"
            result.rejections.append(Rejection(task.task_id, reason, f"{reply.error_kind}: {reply.error_detail}",
                                               None))
            continue
        text = (reply.text or "")[:MAX_OUTPUT_CHARS]
        choice = parse_choice(text, menus[task.task_id])
        if isinstance(choice, Rejection):
            result.rejections.append(Rejection(task.task_id, choice.reason, choice.detail, text))
            continue
        _, ok, why, _ = admission(choice.child, _graph(task.domain, task.seed), kill_threshold)
        if ok:
            result.accepted.append(choice.child)
        else:
            result.rejections.append(Rejection(task.task_id, "not_verified",
                                               f"{choice.operator} {choice.number}: {why}", text))
    return result


def prompt(task: Task, options: list[MenuOption]) -> list[dict[str, str]]:
    lines = "\n".join(f"{o.operator} {o.number}: {o.text}" for o in options)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": EXAMPLE[0]},
            {"role": "assistant", "content": EXAMPLE[1]},
            {"role": "user", "content": f"Task: {task.reason_for_call()}\nOptions:\n{lines}"}]


def _as_child(parent: Task, made: Task) -> LLMEvolvedTask:
    return LLMEvolvedTask(domain=made.domain, seed=made.seed, requests=list(made.requests), style=made.style,
                          evolved_from=parent.task_id, operator=f"llm:{made.operator}", depth=made.depth,
                          distractors=list(made.distractors), persona=made.persona, user=made.user,
                          identify_tools=made.identify_tools, base_text=parent.reason_for_call(),
                          criteria=made.criteria, setup_calls=made.setup_calls,
                          env_assertions=made.env_assertions, actions=made.actions,
                          base_requests=len(parent.requests))


def _added_text(parent: Task, child: LLMEvolvedTask) -> str:
    extra = child.reason_for_call()[len(child.base_text):].strip()
    lines = child.distractors[len(parent.distractors):]
    return " ".join([extra, *lines]).strip()


_OPEN_FENCE = re.compile(r"```(?:json)?")


def _first_json_object(text: str) -> Any:
    """The first JSON value that starts at a '{' in ``text`` (code fences ignored), or None."""
    text = _OPEN_FENCE.sub("", text)
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            return decoder.raw_decode(text, match.start())[0]
        except ValueError:
            continue
    return None


__all__ = ["EvolveResult", "LLMEvolvedTask", "MENU_OPERATORS", "MenuOption", "Rejection", "evolve_tasks", "menu",
           "parse_choice", "prompt"]
