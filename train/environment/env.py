"""The orchestration environment: one multi-turn episode of an agent, a simulated user and the tool catalog over
one published task, scored by the project's verifier.

Protocol (docs/environment.md): the system prompt holds the domain policy and the instance's tools as one JSON list
(name, description, parameters; optionally each tool's price and latency; or the same one line a tool, with
``tool_format="lines"``) and optionally the user's preference
instruction. Each agent turn is either ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, which the
environment executes through the ToolCatalog and answers with a ``<tool_response>`` observation, or a plain message
to the user, whom the simulator answers. Unusable output is a counted format error answered with an error
observation; nothing the agent or a tool does raises. The episode ends when the user writes the stop token, at the
turn limit, at the token limit, or when the agent's endpoint fails.

A ``Session`` is one episode driven turn by turn. ``Environment.run`` drives it with a message-level ``Policy``
(evaluation, describe-llm-tools); train/environment/episode.py drives many sessions in lock step from token-level generations
(GRPO rollouts), so training and evaluation share the prompt, the catalog, the prices, the parsing, the user and
the verdict.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from domains.registry import get_engine, get_spec
from domains.engine import Database, ToolCall
from inference.pricing import ScheduleSet
from train.environment.experts import ExpertPool, ExpertTool
from train.environment.policies import Policy
from train.environment.randomise import InstanceDraw, draw_instance
from train.environment.rewards import Preference, RolloutStats
from train.environment.tasks import DEFAULT_PRICE, TrainingTask
from train.environment.tools import CodeInterpreterTool, DomainTool, LocalSearchTool, Tool, ToolCatalog, domain_tools
from train.environment.turns import MAX_CALLS_PER_TURN, parse_turn
from train.environment.user_sim import Device, UserSimulator, is_stop, opening_message
from verifiers.types import Trajectory
from verifiers.verify import verify

ENDINGS = ("user_stop", "turn_limit", "token_limit", "time_limit", "policy_error", "user_error")
MIN_CODE_RUN_S = 0.5  # less time than this left in the episode: the code interpreter is not started
CATALOGS = ("role", "gold")
# how the system prompt writes the tools: "json", the list of schemas (every protocol and export reads it); "lines",
# one line a tool (about half the tokens: bench/prompt_tokens.py), for small models on a CPU
TOOL_FORMATS = ("json", "lines")


def approx_tokens(text: str) -> int:
    """About four characters a token: the default count when no tokenizer is given."""
    return len(text) // 4 + 1


@dataclass(frozen=True)
class EnvConfig:
    max_turns: int = 50  # agent turns
    max_tokens: int = 32_000  # agent, user and observation text after the system prompt, all turns together
    mode: str = "train"  # train: training pricing schedules; eval: held-out ones only
    run_seed: int = 0
    subset_tools: bool = True  # training: offer a random subset of the non-gold tools (evaluation: never)
    max_tools: int | None = None  # training: at most this many domain tools (the gold's always stay); None: no cap
    local_search: bool = False
    code_interpreter: bool = False
    show_prices: bool = True
    preference_instruction: str | None = None  # for every task; a task's own instruction takes precedence
    max_observation_chars: int = 4_000
    # checked before a turn runs: a turn over either cap is a format error and none of its calls runs
    max_calls_per_turn: int = MAX_CALLS_PER_TURN
    max_writes_per_turn: int = 4
    # wall clock per episode, agent, user and tools (code interpreter included) together; None: no limit
    max_episode_s: float | None = 300.0
    # evaluation: "role" offers the whole catalog of the task's user role, blind to the gold; "gold" only the tools
    # the gold calls (the old hint, measured beside the real score, never as it)
    catalog: str = "role"
    tool_format: str = "json"  # TOOL_FORMATS: how the prompt writes the tools (training and evaluation alike)

    def __post_init__(self) -> None:
        if self.catalog not in CATALOGS:
            raise ValueError(f"catalog must be one of {', '.join(CATALOGS)}, got {self.catalog!r}")
        if self.tool_format not in TOOL_FORMATS:
            raise ValueError(f"tool_format must be one of {', '.join(TOOL_FORMATS)}, got {self.tool_format!r}")
        if self.mode == "eval" and self.max_tools is not None:
            raise ValueError(f"evaluation offers the role's whole catalog: a cap on tools (max_tools={self.max_tools}) "
                             "could only be met by choosing with the gold; cap training prompts only (data.max_tools)")
        if self.catalog == "gold" and self.mode != "eval":
            raise ValueError("catalog 'gold' (only the gold's tools) is for evaluation only, to measure that hint")

    @property
    def gold_blind(self) -> bool:
        """True when nothing the task's gold calls decides which tools the prompt lists (evaluation's catalog)."""
        return self.mode == "eval" and self.catalog == "role"


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
    calls: tuple[ToolCall, ...] = ()  # the domain calls made, in order (what the verifier replayed)
    said: str = ""  # the agent's messages to the user, joined (what fidelity reads)

    @property
    def cost_usd(self) -> float:
        return sum(u.cost_usd for u in self.usage.values())

    @property
    def latency_s(self) -> float:
        return sum(u.latency_s for u in self.usage.values())

    def stats(self, group_id: str, preference: Preference | None = None) -> RolloutStats:
        """What the reward (train/environment/rewards.py) needs to know about this episode."""
        return RolloutStats(group_id, self.tools, {n: u.calls for n, u in self.usage.items() if u.calls},
                            self.solved, self.cost_usd, self.latency_s, self.format_errors,
                            self.ended_by == "user_stop", preference or Preference.accuracy_first(), self.ended_by)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cost_usd": self.cost_usd, "latency_s": self.latency_s}


def role_tools(task: TrainingTask) -> tuple[str, ...] | None:
    """The agent tools the task's user role may ask for, when the domain spec declares roles; else None (all tools).
    A dual-control role's user tools are the user's own, never offered to the agent."""
    spec = get_spec(task.domain)
    users = getattr(spec, "users", None)
    role = users.role(task.role) if users is not None and task.role and hasattr(users, "role") else None
    if role is None or not getattr(role, "may_call", None):
        return None
    agent = {t.name for t in spec.side_tools("agent")}
    return tuple(n for n in role.may_call if n in agent)


def tool_line(entry: dict[str, Any]) -> str:
    """One tool as one line of the prompt: ``- name(arg: type, opt?: a|b): description [price ...]``, an optional
    argument marked ``?``, an enum by its values; the keys beside name, description and parameters (the price and
    latency ``listed_prices`` adds) close the line as they are."""
    params = entry.get("parameters") or {}
    required = set(params.get("required") or ())
    args = []
    for name, prop in (params.get("properties") or {}).items():
        kind = "|".join(map(str, prop["enum"])) if "enum" in prop else str(prop.get("type", "any"))
        args.append(f"{name}{'' if name in required else '?'}: {kind}")
    extra = ", ".join(f"{k} {v}" for k, v in entry.items() if k not in ("name", "description", "parameters"))
    return f"- {entry['name']}({', '.join(args)}): {entry.get('description', '')}" + (f" [{extra}]" if extra else "")


def system_prompt(policy: str, catalog: ToolCatalog, prices: dict[str, dict[str, Any]] | None = None,
                  preference_instruction: str | None = None, tool_format: str = "json") -> str:
    entries = []
    for schema in catalog.schemas():
        if prices is not None and schema["name"] in prices:
            schema = {**schema, **prices[schema["name"]]}
        entries.append(schema)
    tools = (json.dumps(entries, ensure_ascii=False) if tool_format == "json"
             else "\n".join(tool_line(e) for e in entries))
    parts = ["You are a customer-service agent. Follow this policy.", f"# Policy\n{policy}", f"# Tools\n{tools}"]
    if preference_instruction:
        parts.append(f"# The user's preference\n{preference_instruction}")
    parts.append("To call tools, write one or more <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call> "
                 "blocks and nothing after them; each result comes back in a <tool_response>. To talk to the user, "
                 "write plain text without any tool call.")
    return "\n\n".join(parts)


@dataclass(frozen=True)
class EpisodeInstance:
    """What one task's episode offers, fixed before the first turn: the catalog, its draw and the system prompt."""

    catalog: ToolCatalog
    draw: InstanceDraw
    system_prompt: str


def domain_price(kind: str, task: TrainingTask) -> tuple[float, float]:
    """(USD, seconds) a domain tool call costs in this instance: the flat base of ``DEFAULT_PRICE`` scaled by the
    task's drawn pricing schedule (train/stages/trainset.py; 1.0 when none was drawn, as in evaluation)."""
    cost, latency = DEFAULT_PRICE.get(kind, DEFAULT_PRICE["read"])
    return round(cost * task.cost_scale, 8), round(latency * task.latency_scale, 4)


class Environment:
    """Runs episodes. Holds what episodes share: the pricing schedules, the LLM experts and the token counter."""

    def __init__(self, config: EnvConfig = EnvConfig(), schedules: ScheduleSet | None = None,
                 experts: ExpertPool | None = None, count_tokens: Callable[[str], int] = approx_tokens) -> None:
        self.config = config
        self.schedules = schedules
        self.experts = experts
        self.count_tokens = count_tokens

    def draw(self, task: TrainingTask, domain_names: list[str]) -> InstanceDraw:
        """Training: a random subset that keeps the gold's tools. Evaluation: every candidate, the gold unread."""
        candidates = list(domain_names)
        candidates += ["local_search"] if self.config.local_search else []
        candidates += ["code_interpreter"] if self.config.code_interpreter else []
        candidates += self.experts.aliases if self.experts else []
        training = self.config.mode == "train"
        needed = {c.name for c in task.gold_calls if c.side == "agent"} if training else set()  # the user's are its own
        draw = draw_instance(task.task_id, candidates, needed, self.schedules, self.config.run_seed,
                             self.config.mode, self.config.subset_tools and training)
        if task.schedule_id and self.schedules is not None:
            # the training set already drew this instance's schedule: its experts are priced from the same one
            pool = self.schedules.training if draw.mode == "train" else self.schedules.heldout
            pinned = next((s for s in pool if s.schedule_id == task.schedule_id), None)
            draw = replace(draw, schedule=pinned or draw.schedule)
        cap = self.config.max_tools
        drawn = [n for n in draw.tool_names if n in domain_names]
        if cap is not None and len(drawn) > cap:
            others = [n for n in drawn if n not in needed]
            keep = set(random.Random(draw.seed).sample(others, max(0, cap - (len(drawn) - len(others)))))
            draw = replace(draw, tool_names=tuple(n for n in draw.tool_names
                                                  if n in needed or n in keep or n not in domain_names))
        return draw

    def instance(self, task: TrainingTask, db: Database) -> EpisodeInstance:
        """The catalog (tools bound to ``db``), the draw and the system prompt of ``task``'s instance."""
        spec = get_spec(task.domain)
        gold = [c.name for c in task.gold_calls if c.side == "agent"]
        allowed = role_tools(task)
        if self.config.catalog == "gold":  # the hint evaluation measures: only what the gold calls
            allowed = tuple(dict.fromkeys(gold))
        elif allowed is not None and self.config.mode == "train":  # training keeps the gold's tools, whatever the role
            allowed = tuple(dict.fromkeys([*allowed, *gold]))
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
        prices = listed_prices(catalog, task) if self.config.show_prices else None
        preference = task.preference_instruction or self.config.preference_instruction
        return EpisodeInstance(catalog, draw, system_prompt(spec.policy, catalog, prices, preference,
                                                            self.config.tool_format))

    def start(self, task: TrainingTask, user: UserSimulator) -> Session:
        """A session on a fresh copy of the task's database; the caller plays it and then calls ``close``."""
        db = get_engine(task.domain, task.seed).fresh()
        try:
            for call in task.verifiable().setup_calls:  # the task's start (tau2's initialization actions)
                db.call(call.name, call.arguments, "setup")
            return Session(self, task, self.instance(task, db), user, db)
        except BaseException:
            db.close()
            raise

    def opening_messages(self, task: TrainingTask) -> list[dict[str, str]]:
        """The system prompt and the user's first message: what every episode of ``task`` starts from."""
        with get_engine(task.domain, task.seed).fresh() as db:
            prompt = self.instance(task, db).system_prompt
        return [{"role": "system", "content": prompt}, {"role": "user", "content": opening_message(task)}]

    def run(self, task: TrainingTask, policy: Policy, user: UserSimulator) -> EpisodeResult:
        """One episode of ``policy`` on ``task`` with ``user``; never raises for anything the agent writes."""
        session = self.start(task, user)
        try:
            return session.play(policy)
        finally:
            session.close()


def listed_prices(catalog: ToolCatalog, task: TrainingTask | None = None) -> dict[str, dict[str, Any]]:
    """Per tool, the price and latency the agent is shown (domain tools: ``domain_price`` for ``task``)."""
    out: dict[str, dict[str, Any]] = {}
    for name in catalog.names:
        tool = catalog[name]
        if isinstance(tool, DomainTool):
            cost, latency = (domain_price(tool.kind, task) if task is not None
                             else DEFAULT_PRICE.get(tool.kind, DEFAULT_PRICE["read"]))
            out[name] = {"usd_per_call": cost, "typical_latency_s": latency}
        elif isinstance(tool, ExpertTool):
            out[name] = tool.listed_price()
        else:
            out[name] = {"usd_per_call": 0.0}
    return out


class Session:
    """One running episode. Each agent turn goes in through ``agent_turn``; a message to the user waits in
    ``awaiting_user`` until ``user_turn`` gets the reply; ``ended_by`` is set once the episode is over."""

    def __init__(self, env: Environment, task: TrainingTask, instance: EpisodeInstance, user: UserSimulator,
                 db: Database) -> None:
        self.env, self.task, self.instance, self.user, self.db = env, task, instance, user, db
        self.catalog, self.draw = instance.catalog, instance.draw
        self.messages: list[dict[str, str]] = [{"role": "system", "content": instance.system_prompt}]
        self.usage: dict[str, ToolUsage] = {name: ToolUsage() for name in self.catalog.names}
        self.domain_calls: list[ToolCall] = []
        self.said: list[str] = []
        self.format_reasons: list[str] = []
        self.tokens = 0
        self.turns = 0
        self.error: str | None = None
        self.ended_by: str | None = None
        self.awaiting_user: str | None = None  # the agent's message the user has not answered yet
        self._result: EpisodeResult | None = None
        self.started = time.monotonic()
        bind = getattr(user, "bind_device", None)
        if bind is not None and db.engine.spec.side_tools("user"):  # the user's calls join the agent's, in order
            bind(Device(db, self.domain_calls.append))

    @property
    def done(self) -> bool:
        return self.ended_by is not None

    def end(self, ending: str, error: str | None = None) -> None:
        if self.ended_by is None:
            self.ended_by, self.error = ending, error

    def add(self, role: str, content: str) -> None:
        self.messages.append({"role": role, "content": content})
        self.tokens += self.env.count_tokens(content)

    def observe(self, payload: Any) -> None:
        text = json.dumps(payload, ensure_ascii=False, default=str)[: self.env.config.max_observation_chars]
        self.add("user", f"<tool_response>\n{text}\n</tool_response>")

    def open(self) -> None:
        """The user's opening message (a failing simulator ends the episode as ``user_error``)."""
        try:
            self.add("user", self.user.opening())
        except Exception as exc:  # a user simulator bug ends the episode, it does not crash the run
            self.end("user_error", f"user simulator failed: {type(exc).__name__}: {exc}"[:500])

    def at_limit(self) -> bool:
        """Whether the episode is over, ending it at the turn or token limit when one is reached."""
        if not self.done and self.turns >= self.env.config.max_turns:
            self.end("turn_limit")
        if not self.done and self.tokens >= self.env.config.max_tokens:
            self.end("token_limit")
        if not self.done and self.time_left() <= 0:
            self.end("time_limit", f"the episode's {self.env.config.max_episode_s:g} s wall-clock budget is spent")
        return self.done

    def credit(self, seconds: float) -> None:
        """Take ``seconds`` off the wall clock this episode is charged: the time it waited while a lock-step batch
        generated the other episodes' turns (train/environment/episode.py charges each episode its share of a batch)."""
        self.started += seconds

    def time_left(self) -> float:
        """Seconds left of the episode's wall-clock budget (infinite without one)."""
        budget = self.env.config.max_episode_s
        return float("inf") if budget is None else budget - (time.monotonic() - self.started)

    def agent_turn(self, text: Any) -> None:
        """Apply one agent turn: run its tool calls (observation appended), or hold its message for the user."""
        self.turns += 1
        if not isinstance(text, str):
            self.format_error(f"the turn is not text (got {type(text).__name__})")
            return
        self.add("assistant", text)
        turn = parse_turn(text, self.catalog.names, self.argument_problem, self.env.config.max_calls_per_turn)
        if turn.error is not None:
            self.format_error(turn.error)
            return
        writes = sum(1 for c in turn.calls
                     if isinstance(self.catalog[c.name], DomainTool) and self.catalog[c.name].kind == "write")
        if writes > self.env.config.max_writes_per_turn:
            self.format_error(f"{writes} writes in one turn; none of them ran. Make at most "
                              f"{self.env.config.max_writes_per_turn} writes per turn")
            return
        if turn.message:
            self.said.append(turn.message)
        if turn.calls:
            self.observe([self.execute(call) for call in turn.calls])
            return
        self.awaiting_user = turn.message

    def user_turn(self) -> None:
        """The user answers the held message: a reply is appended, the stop token ends the episode."""
        message, self.awaiting_user = self.awaiting_user, None
        if message is None:
            return
        try:
            reply = self.user.reply(message)
        except Exception as exc:
            self.end("user_error", f"user simulator failed: {type(exc).__name__}: {exc}"[:500])
            return
        if is_stop(reply):
            self.end("user_stop")
            return
        self.add("user", reply)

    def cut_off(self, text: str, reason: str) -> None:
        """A turn that ran out of tokens before its end (token-level driver): a format error that ends the episode
        at the token limit, since no usable answer can follow."""
        self.turns += 1
        self.add("assistant", text)
        self.format_reasons.append(reason)
        self.end("token_limit")

    def play(self, policy: Policy) -> EpisodeResult:
        """Run the episode to its end with a message-level policy."""
        self.open()
        while not self.at_limit():
            try:
                text = policy.act(list(self.messages))
            except Exception as exc:
                self.end("policy_error", f"agent failed: {type(exc).__name__}: {exc}"[:500])
                break
            self.agent_turn(text)
            self.user_turn()
        return self.result()

    def result(self) -> EpisodeResult:
        """The scored episode: only one the user ended is verified; every other ending is unsolved."""
        if self._result is None:
            solved, failed = False, []
            if self.ended_by == "user_stop":
                verdict = verify(self.task.verifiable(),
                                 Trajectory(tuple(self.domain_calls), "\n".join(self.said)))
                solved, failed = verdict.solved, list(verdict.failed_checks())
            self._result = EpisodeResult(
                self.task.task_id, self.task.domain, self.draw.seed, self.draw.mode,
                self.draw.schedule.name if self.draw.schedule else None, tuple(self.catalog.names), solved,
                self.ended_by or "turn_limit", self.turns, self.tokens, len(self.format_reasons),
                self.format_reasons, self.usage, failed, self.error, self.messages, tuple(self.domain_calls),
                "\n".join(self.said))
        return self._result

    def close(self) -> None:
        self.db.close()

    def format_error(self, reason: str) -> None:
        self.format_reasons.append(reason)
        self.observe({"format_error": reason})

    def argument_problem(self, name: str, arguments: dict[str, Any]) -> str | None:
        try:
            return self.catalog[name].argument_problem(arguments)
        except Exception as exc:  # a validator choking on odd input still means unusable arguments
            return f"arguments could not be checked ({type(exc).__name__})"

    def execute(self, call: ToolCall) -> dict[str, Any]:
        """Run one call within what is left of the episode's wall-clock budget: none starts once it is spent, and
        the code interpreter gets at most the time that is left."""
        tool = self.catalog[call.name]
        left = self.time_left()
        if left <= 0 or (isinstance(tool, CodeInterpreterTool) and left < MIN_CODE_RUN_S):
            self.end("time_limit", f"the episode's {self.env.config.max_episode_s:g} s wall-clock budget is spent")
            return {"name": call.name, "result": {"error": "not run: the episode's time budget is spent"}}
        if isinstance(tool, CodeInterpreterTool) and left < tool.limits.wall_s:
            tool = CodeInterpreterTool(replace(tool.limits, wall_s=left))
        result = tool.call(call.arguments)
        usage = self.usage[call.name]
        usage.calls += 1
        usage.errors += 0 if result.ok else 1
        if isinstance(tool, DomainTool):
            self.domain_calls.append(call)  # only domain calls change or read the state the verifier compares
            cost, latency = domain_price(tool.kind, self.task)  # what the prompt listed, not the measured time
            usage.cost_usd += cost
            usage.latency_s += latency
        else:
            usage.cost_usd += result.cost_usd
            usage.latency_s += result.latency_s
        try:
            observation: Any = json.loads(result.observation)
        except ValueError:
            observation = result.observation
        return {"name": call.name, "result": observation}
