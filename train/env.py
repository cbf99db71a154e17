"""The orchestration environment: one multi-turn episode of an agent, a simulated user and the tool catalog over
one published task, scored by the project's verifier.

Protocol (docs/environment.md): the system prompt holds the domain policy and the instance's tools as one JSON list
(name, description, parameters; optionally each tool's price and latency) and optionally the user's preference
instruction. Each agent turn is either ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, which the
environment executes through the ToolCatalog and answers with a ``<tool_response>`` observation, or a plain message
to the user, whom the simulator answers. Unusable output is a counted format error answered with an error
observation; nothing the agent or a tool does raises. The episode ends when the user writes the stop token, at the
turn limit, at the token limit, or when the agent's endpoint fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from domains.registry import get_engine, get_spec
from domains.engine import ToolCall
from inference.pricing import ScheduleSet
from train.episode import parse_turn
from train.experts import ExpertPool, ExpertTool
from train.policies import Policy
from train.randomise import InstanceDraw, draw_instance
from train.rewards import Preference, RolloutStats
from train.tasks import DEFAULT_PRICE, TrainingTask
from train.tools import CodeInterpreterTool, DomainTool, LocalSearchTool, Tool, ToolCatalog, domain_tools
from train.user_sim import UserSimulator, is_stop
from verifiers.types import Trajectory
from verifiers.verify import verify

ENDINGS = ("user_stop", "turn_limit", "token_limit", "policy_error", "user_error")


def approx_tokens(text: str) -> int:
    """About four characters a token: the default count when no tokenizer is given."""
    return len(text) // 4 + 1


@dataclass(frozen=True)
class EnvConfig:
    max_turns: int = 50  # agent turns
    max_tokens: int = 32_000  # agent, user and observation text after the system prompt, all turns together
    mode: str = "train"  # train: training pricing schedules; eval: held-out ones only
    run_seed: int = 0
    subset_tools: bool = True  # offer a random subset of the non-gold tools
    local_search: bool = False
    code_interpreter: bool = False
    show_prices: bool = True
    preference_instruction: str | None = None
    max_observation_chars: int = 4_000


@dataclass
class ToolUsage:
    calls: int = 0
    errors: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0


@dataclass
class EpisodeResult:
    task_id: str
    domain: str
    instance_seed: int
    mode: str
    schedule: str | None
    tools: tuple[str, ...]
    solved: bool
    ended_by: str
    turns: int
    tokens: int
    format_errors: int
    format_error_reasons: list[str] = field(default_factory=list)
    usage: dict[str, ToolUsage] = field(default_factory=dict)
    failed_checks: list[str] = field(default_factory=list)
    error: str | None = None  # why a policy_error / user_error ending happened
    messages: list[dict[str, str]] = field(default_factory=list)

    @property
    def cost_usd(self) -> float:
        return sum(u.cost_usd for u in self.usage.values())

    @property
    def latency_s(self) -> float:
        return sum(u.latency_s for u in self.usage.values())

    def stats(self, group_id: str, preference: Preference | None = None) -> RolloutStats:
        """What the reward (train/rewards.py) needs to know about this episode."""
        return RolloutStats(group_id, self.tools, {n: u.calls for n, u in self.usage.items() if u.calls},
                            self.solved, self.cost_usd, self.latency_s, self.format_errors,
                            self.ended_by == "user_stop", preference or Preference.accuracy_first())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cost_usd": self.cost_usd, "latency_s": self.latency_s}


def role_tools(task: TrainingTask) -> tuple[str, ...] | None:
    """The tools the task's user role may ask for, when the domain spec declares roles; else None (all tools)."""
    users = getattr(get_spec(task.domain), "users", None)
    role = users.role(task.role) if users is not None and task.role and hasattr(users, "role") else None
    return tuple(role.may_call) if role is not None and getattr(role, "may_call", None) else None


def system_prompt(policy: str, catalog: ToolCatalog, prices: dict[str, dict[str, Any]] | None = None,
                  preference_instruction: str | None = None) -> str:
    entries = []
    for schema in catalog.schemas():
        if prices is not None and schema["name"] in prices:
            schema = {**schema, **prices[schema["name"]]}
        entries.append(schema)
    parts = ["You are a customer-service agent. Follow this policy.", f"# Policy\n{policy}",
             f"# Tools\n{json.dumps(entries, ensure_ascii=False)}"]
    if preference_instruction:
        parts.append(f"# The user's preference\n{preference_instruction}")
    parts.append("To call tools, write one or more <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call> "
                 "blocks and nothing after them; each result comes back in a <tool_response>. To talk to the user, "
                 "write plain text without any tool call.")
    return "\n\n".join(parts)


class Environment:
    """Runs episodes. Holds what episodes share: the pricing schedules, the LLM experts and the token counter."""

    def __init__(self, config: EnvConfig = EnvConfig(), schedules: ScheduleSet | None = None,
                 experts: ExpertPool | None = None, count_tokens: Callable[[str], int] = approx_tokens) -> None:
        self.config = config
        self.schedules = schedules
        self.experts = experts
        self.count_tokens = count_tokens

    def draw(self, task: TrainingTask, domain_names: list[str]) -> InstanceDraw:
        candidates = list(domain_names)
        candidates += ["local_search"] if self.config.local_search else []
        candidates += ["code_interpreter"] if self.config.code_interpreter else []
        candidates += self.experts.aliases if self.experts else []
        return draw_instance(task.task_id, candidates, {c.name for c in task.gold_calls}, self.schedules,
                             self.config.run_seed, self.config.mode, self.config.subset_tools)

    def run(self, task: TrainingTask, policy: Policy, user: UserSimulator) -> EpisodeResult:
        """One episode of ``policy`` on ``task`` with ``user``; never raises for anything the agent writes."""
        spec = get_spec(task.domain)
        with get_engine(task.domain, task.seed).fresh() as db:
            allowed = role_tools(task)
            if allowed is not None:  # the gold's tools always stay, whatever the role lists
                allowed = tuple(dict.fromkeys([*allowed, *(c.name for c in task.gold_calls)]))
            domain = domain_tools(db, allowed)
            draw = self.draw(task, [t.name for t in domain])
            pool: list[Tool] = [*domain]
            if self.config.local_search:
                pool.append(LocalSearchTool(spec))
            if self.config.code_interpreter:
                pool.append(CodeInterpreterTool())
            if self.experts:
                pool += self.experts.tools(draw.schedule)
            # the draw thins the domain tools; search, code and experts stay whenever they are configured
            catalog = ToolCatalog(t for t in pool if t.name in draw.tool_names or not isinstance(t, DomainTool))
            prices = listed_prices(catalog) if self.config.show_prices else None
            prompt = system_prompt(spec.policy, catalog, prices, self.config.preference_instruction)
            return _Loop(self, task, catalog, draw, policy, user, prompt).run()


def listed_prices(catalog: ToolCatalog) -> dict[str, dict[str, Any]]:
    """Per tool, the price and latency the agent is shown."""
    out: dict[str, dict[str, Any]] = {}
    for name in catalog.names:
        tool = catalog[name]
        if isinstance(tool, DomainTool):
            cost, latency = DEFAULT_PRICE.get(tool.kind, DEFAULT_PRICE["read"])
            out[name] = {"usd_per_call": cost, "typical_latency_s": latency}
        elif isinstance(tool, ExpertTool):
            out[name] = tool.listed_price()
        else:
            out[name] = {"usd_per_call": 0.0}
    return out


class _Loop:
    """The state of one running episode."""

    def __init__(self, env: Environment, task: TrainingTask, catalog: ToolCatalog, draw: InstanceDraw,
                 policy: Policy, user: UserSimulator, prompt: str) -> None:
        self.env, self.task, self.catalog, self.draw = env, task, catalog, draw
        self.policy, self.user = policy, user
        self.messages: list[dict[str, str]] = [{"role": "system", "content": prompt}]
        self.usage: dict[str, ToolUsage] = {name: ToolUsage() for name in catalog.names}
        self.domain_calls: list[ToolCall] = []
        self.said: list[str] = []
        self.format_reasons: list[str] = []
        self.tokens = 0
        self.turns = 0
        self.error: str | None = None

    def add(self, role: str, content: str) -> None:
        self.messages.append({"role": role, "content": content})
        self.tokens += self.env.count_tokens(content)

    def observe(self, payload: Any) -> None:
        text = json.dumps(payload, ensure_ascii=False, default=str)[: self.env.config.max_observation_chars]
        self.add("user", f"<tool_response>\n{text}\n</tool_response>")

    def run(self) -> EpisodeResult:
        config = self.env.config
        ended_by = self.converse(config)
        solved, failed = False, []
        if ended_by == "user_stop":
            verdict = verify(self.task.verifiable(), Trajectory(tuple(self.domain_calls), "\n".join(self.said)))
            solved, failed = verdict.solved, list(verdict.failed_checks())
        return EpisodeResult(self.task.task_id, self.task.domain, self.draw.seed, self.draw.mode,
                             self.draw.schedule.name if self.draw.schedule else None, tuple(self.catalog.names),
                             solved, ended_by, self.turns, self.tokens, len(self.format_reasons),
                             self.format_reasons, self.usage, failed, self.error, self.messages)

    def converse(self, config: EnvConfig) -> str:
        try:
            self.add("user", self.user.opening())
        except Exception as exc:  # a user simulator bug ends the episode, it does not crash the run
            self.error = f"user simulator failed: {type(exc).__name__}: {exc}"
            return "user_error"
        while True:
            if self.turns >= config.max_turns:
                return "turn_limit"
            if self.tokens >= config.max_tokens:
                return "token_limit"
            try:
                text = self.policy.act(list(self.messages))
            except Exception as exc:
                self.error = f"agent failed: {type(exc).__name__}: {exc}"[:500]
                return "policy_error"
            self.turns += 1
            if not isinstance(text, str):
                self.format_error(f"the turn is not text (got {type(text).__name__})")
                continue
            self.add("assistant", text)
            turn = parse_turn(text, self.catalog.names, self.argument_problem)
            if turn.error is not None:
                self.format_error(turn.error)
                continue
            if turn.message:
                self.said.append(turn.message)
            if turn.calls:
                self.observe([self.execute(call) for call in turn.calls])
                continue
            try:
                reply = self.user.reply(turn.message)
            except Exception as exc:
                self.error = f"user simulator failed: {type(exc).__name__}: {exc}"[:500]
                return "user_error"
            if is_stop(reply):
                return "user_stop"
            self.add("user", reply)

    def format_error(self, reason: str) -> None:
        self.format_reasons.append(reason)
        self.observe({"format_error": reason})

    def argument_problem(self, name: str, arguments: dict[str, Any]) -> str | None:
        try:
            return self.catalog[name].argument_problem(arguments)
        except Exception as exc:  # a validator choking on odd input still means unusable arguments
            return f"arguments could not be checked ({type(exc).__name__})"

    def execute(self, call: ToolCall) -> dict[str, Any]:
        tool = self.catalog[call.name]
        result = tool.call(call.arguments)
        usage = self.usage[call.name]
        usage.calls += 1
        usage.errors += 0 if result.ok else 1
        if isinstance(tool, DomainTool):
            self.domain_calls.append(call)  # only domain calls change or read the state the verifier compares
            usage.cost_usd += DEFAULT_PRICE.get(tool.kind, DEFAULT_PRICE["read"])[0]
            usage.latency_s += DEFAULT_PRICE.get(tool.kind, DEFAULT_PRICE["read"])[1]
        else:
            usage.cost_usd += result.cost_usd
            usage.latency_s += result.latency_s
        try:
            observation: Any = json.loads(result.observation)
        except ValueError:
            observation = result.observation
        return {"name": call.name, "result": observation}
