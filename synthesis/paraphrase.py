"""The paraphrase stage: an LLM rewrites a task's user request in other words; the rewrite is kept only if every
value the user needs survives verbatim and the task still verifies. Rejections are kept with their reasons.

Values the user needs are: the record values each request spells out (a realistic request's ``says``: the region,
the alert type, the date), what the user knows that the request repeats (the value of a fact "your X is Y" or
"X: Y"), every gold-call argument the request spells out, and every token of the request that carries a digit
(ids, dates, times, amounts). A request that names nothing ("how many feeds do I follow?") needs no value.
Beyond the values, the rewrite must mean the same (``synthesis.meaning``): the same domain values and no new one,
no invented word, no added request, no sweeping quantifier and no negation that the original does not have.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from domains.registry import get_engine
from inference.client import ChatRequest, LLMClient
from inference.stage_tally import StageTally
from synthesis.meaning import meaning_change
from synthesis.requests import show
from synthesis.task import Task
from synthesis.toolgraph import ToolGraph
from verifiers.checks import normalise

STAGE = "paraphrase"
SYSTEM = ("You rewrite messages that customers send to a support agent, in different words, as the same person "
          "might write them. Copy every listed value exactly. Add nothing. Reply with the rewritten message only.")
# one worked example: a 135M model follows a shown pattern far better than a described one
EXAMPLE = ("Rewrite: Could you cancel booking BK0042 for me? Then change my phone to 555-0101.\n"
           "Keep exactly: BK0042, 555-0101",
           "Please cancel my booking BK0042, and after that update my phone number to 555-0101.")
DIGITS = re.compile(r"[\w.:/+@-]*\d[\w.:/+@-]*")
MAX_GROWTH = 3.0  # a rewrite more than 3x longer than the original is chatter, not a paraphrase


@dataclass
class ParaphrasedTask(Task):
    """A task whose user request is the accepted rewrite; everything else (gold calls, answers) is the parent's."""

    paraphrase: str = ""

    def reason_for_call(self) -> str:
        return self.paraphrase


@dataclass(frozen=True)
class Rejection:
    task_id: str
    reason: str  # llm_error | budget_exceeded | empty | unchanged | too_long | lost_value | added_value
    # | negated | widened_scope | added_request | invented_word (synthesis/meaning.py) | leaks_answer | not_verified
    detail: str
    paraphrase: str | None

    @property
    def subject_id(self) -> str:
        return self.task_id

    @property
    def output(self) -> str | None:
        return self.paraphrase


@dataclass
class ParaphraseResult(StageTally):
    stage: ClassVar[str] = STAGE
    accepted: list[ParaphrasedTask] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)


def required_values(task: Task) -> list[str]:
    """The strings a rewrite of ``task``'s request must contain verbatim, in order of first appearance."""
    original = task.reason_for_call()
    values: list[str] = []
    values += [v for r in task.requests for v in r.says]
    known = task.instructions()["known_info"] or ""
    for item in known.split("; "):
        _, sep, value = item.partition(": ") if ": " in item else item.partition(" is ")
        if sep and value:
            values.append(value.strip())
    values += [show(v) for c in task.gold_calls for v in c.arguments.values()
               if v is not None and show(v) and show(v) in original]
    values += [m.group(0).rstrip(".:-/") for m in DIGITS.finditer(original)]
    return [v for v in dict.fromkeys(values) if v and v in original]


def judge(task: Task, paraphrase: str, kill_threshold: float = 0.9) -> Rejection | None:
    """None when ``paraphrase`` may replace the task's request, else the first reason it may not.

    A rewrite that keeps every value but asks for something else is invisible to verification (the gold calls do
    not depend on the text) and to MiniLM similarity (measured: a faithful hand-written rewrite scored 0.75, a
    SmolLM2 rewrite that dropped a condition 0.86), so ``synthesis.meaning.meaning_change`` compares the texts:
    the domain values named, invented words, added requests, sweeping quantifiers and negations."""
    original = task.reason_for_call()
    if not paraphrase:
        return Rejection(task.task_id, "empty", "the model returned no text", paraphrase)
    if normalise(paraphrase) == normalise(original):
        return Rejection(task.task_id, "unchanged", "the rewrite is the original request", paraphrase)
    if len(paraphrase) > MAX_GROWTH * len(original):
        return Rejection(task.task_id, "too_long", f"{len(paraphrase)} characters for an original of "
                                                   f"{len(original)}", paraphrase)
    lost = [v for v in required_values(task) if not _contains(paraphrase, v)]
    if lost:
        return Rejection(task.task_id, "lost_value", "missing: " + ", ".join(repr(v) for v in lost), paraphrase)
    original_tokens = {m.group(0).rstrip(".:-/") for m in DIGITS.finditer(original)}
    added = [t for t in dict.fromkeys(m.group(0).rstrip(".:-/") for m in DIGITS.finditer(paraphrase))
             if t not in original_tokens]
    if added:
        return Rejection(task.task_id, "added_value", "values the user never gave: "
                         + ", ".join(repr(v) for v in added), paraphrase)
    changed = meaning_change(task.domain, original, paraphrase, task.seed,
                             tuple(dict.fromkeys(c.name for c in task.gold_calls)))
    if changed:
        return Rejection(task.task_id, changed.reason, changed.detail, paraphrase)
    leaked = [i for i in task.communicate_info if normalise(i) in normalise(paraphrase)
              and normalise(i) not in normalise(original)]
    if leaked:
        return Rejection(task.task_id, "leaks_answer", "the request now says what the agent must find: "
                         + ", ".join(repr(i) for i in leaked), paraphrase)
    rewritten = _rewritten(task, paraphrase)
    # the same admission a regenerated candidate gets: verification, then the realism gate where it applies
    from synthesis.generate import admission

    _, ok, reason, _ = admission(rewritten, ToolGraph(get_engine(task.domain, task.seed)), kill_threshold)
    if not ok:
        return Rejection(task.task_id, "not_verified", reason, paraphrase)
    return None


def paraphrase_tasks(tasks: list[Task], llm: LLMClient, *, temperature: float = 0.3, max_tokens: int = 160,
                     kill_threshold: float = 0.9) -> ParaphraseResult:
    """Ask ``llm`` for one rewrite per task (concurrently, cached) and keep those that pass ``judge``."""
    requests = [ChatRequest(messages=prompt(t),
                            params={"temperature": temperature, "max_tokens": max_tokens,
                                    "seed": int(t.content_hash()[:8], 16)},
                            stage=STAGE, task_id=t.task_id) for t in tasks]
    result = ParaphraseResult()
    for task, reply in zip(tasks, llm.chat_many(requests)):
        if not reply.ok:
            reason = "budget_exceeded" if reply.error_kind == "budget_exceeded" else "llm_error"
            result.rejections.append(Rejection(task.task_id, reason, f"{reply.error_kind}: {reply.error_detail}",
                                               None))
            continue
        text = clean(reply.text or "")
        rejection = judge(task, text, kill_threshold)
        if rejection is None:
            result.accepted.append(_rewritten(task, text))
        else:
            result.rejections.append(rejection)
    return result


def prompt(task: Task) -> list[dict[str, str]]:
    """The chat that asks for one rewrite: instructions, one worked example, then the task's request and the values
    that must survive."""
    ask = f"Rewrite: {task.reason_for_call()}\nKeep exactly: {', '.join(required_values(task))}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": EXAMPLE[0]},
            {"role": "assistant", "content": EXAMPLE[1]}, {"role": "user", "content": ask}]


def clean(text: str) -> str:
    """The rewrite without wrapping quotes or a lead-in line such as 'Here is the rewritten message:'."""
    text = text.strip()
    first, _, rest = text.partition("\n")
    if rest.strip() and first.rstrip().endswith(":"):
        text = rest.strip()
    return text.strip("\"“”").strip()


def _contains(text: str, value: str) -> bool:
    # words may change case at the start of a sentence; ids, dates and amounts must match exactly
    return value in text or (value.replace(" ", "").isalpha() and value.lower() in text.lower())


def _rewritten(task: Task, paraphrase: str) -> ParaphrasedTask:
    return ParaphrasedTask(domain=task.domain, seed=task.seed, requests=list(task.requests), style=task.style,
                           evolved_from=task.task_id, operator=STAGE, depth=task.depth,
                           distractors=list(task.distractors), persona=task.persona, user=task.user,
                           identify_tools=task.identify_tools, paraphrase=paraphrase, criteria=task.criteria,
                           setup_calls=task.setup_calls, env_assertions=task.env_assertions, actions=task.actions)


__all__ = ["ParaphraseResult", "ParaphrasedTask", "Rejection", "judge", "paraphrase_tasks",
           "required_values"]
