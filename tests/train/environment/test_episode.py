"""GRPO rollouts at the token level: the same environment as evaluation (prompt, catalog, prices, user simulator,
endings, verdict), counted format errors, and the token bookkeeping TRL needs."""

from __future__ import annotations

import json
import random
import string
import time
from dataclasses import replace
from typing import Any

import pytest

from train.environment.env import ENDINGS, EnvConfig, Environment, domain_price
from train.environment.episode import EpisodeLimits, appended_text, run_episodes, start_episode
from train.stages.rollout_env import build_world
from train.environment.policies import ScriptedPolicy
from train.stages.profiles import load_profile
from train.environment.tasks import TrainingSet, TrainingTask
from train.stages.trainset import build_training_set
from train.environment.turns import parse_turn
from train.environment.user_sim import ScriptedUser, first_person


class ScriptedGenerator:
    """A model that writes given texts turn by turn (the thing under test is the episode, not a network).

    Each episode is recognised by its prompt, so the episodes given to one run must have distinct prompts."""

    def __init__(self, tokenizer: Any, episodes: list[Any], scripts: list[list[str]]):
        self.tokenizer = tokenizer
        self.scripts = {tuple(e.prompt_ids): s for e, s in zip(episodes, scripts)}
        assert len(self.scripts) == len(episodes), "scripted episodes need distinct prompts"
        self.turns: dict[tuple[int, ...], int] = {}

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        out = []
        for context in contexts:
            key = next(k for k in self.scripts if tuple(context[:len(k)]) == k)
            turn = self.turns.get(key, 0)
            self.turns[key] = turn + 1
            script = self.scripts[key]
            out.append(self.ids(script[min(turn, len(script) - 1)])[:max_new_tokens])
        return out

    def ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]


class SlowGenerator(ScriptedGenerator):
    """The scripted model, taking ``delay`` seconds per batched generation (a CPU generating many turns at once)."""

    delay = 0.25

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        time.sleep(self.delay)
        return super().generate(contexts, max_new_tokens)


def _call(name: str, arguments: dict[str, Any]) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def _garbage(rng: random.Random, tool: str) -> str:
    pieces = ["<tool_call>", "</tool_call>", "{", "}", '"name"', '"arguments"', f'"{tool}"', ":", ",", "[", "null",
              "<think>", "</think>", "\x00", "\\u0000", "ünï", "9" * 400, " ", "\n"]
    kind = rng.randrange(4)
    if kind == 0:
        return "".join(rng.choice(string.printable) for _ in range(rng.randrange(0, 200)))
    if kind == 1:
        return "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30)))
    if kind == 2:
        return _call(rng.choice([tool, "no_such_tool", ""]), {"station_id": rng.choice([1, None, "x" * 3000, [], {}])})
    return "<tool_call>" + json.dumps({"name": tool, "arguments": [1, 2]}) + "</tool_call> trailing"


def smoke_world(tokenizer: Any) -> Any:
    """The cpu-smoke profile's environment, with room for the scripted turns (its own limits are tiny)."""
    profile = load_profile("cpu-smoke")
    roomy = replace(profile.episode, max_turns=20, max_completion_tokens=20_000, max_turn_tokens=2_000)
    return build_world(replace(profile, episode=roomy), tokenizer)


@pytest.fixture(scope="module")
def priced(snapshot_warehouse: str) -> TrainingSet:
    """The weather tasks as a training run sees them: each with its drawn training schedule's price scales."""
    data = build_training_set(snapshot_warehouse, "latest", ["weather"], None, pricing_seed=0).data
    assert any(t.cost_scale != 1.0 for t in data.tasks)
    return data


def test_parse_turn_is_strict() -> None:
    tools = {"get_station"}
    ok = parse_turn('Looking.\n' + _call("get_station", {"station_id": "WS0001"}), tools)
    assert ok.error is None and ok.calls[0].name == "get_station" and ok.message == "Looking."
    assert parse_turn("The station is active.", tools).final
    for bad in ("", "   ", "<tool_call>{}", _call("get_station", {}) + " then", _call("nope", {}),
                '<tool_call>{"name": "get_station", "arguments": 3}</tool_call>',
                '<tool_call>{"name": "get_station", "extra": 1}</tool_call>', "<tool_call>not json</tool_call>"):
        assert parse_turn(bad, tools).error, bad


def test_a_rollout_is_the_environment_episode_with_user_replies_in_user_turns(priced: TrainingSet,
                                                                                 tokenizer: Any) -> None:
    """Token level (GRPO) and message level (evaluation) play the same turns to the same messages and verdict."""
    profile = load_profile("cpu-smoke")
    world = smoke_world(tokenizer)
    task = next(t for t in priced.tasks if t.known_facts and t.gold_calls)
    question = "Could you tell me your e-mail address?"
    said = "All done. " + " ".join(task.communicate_info)
    script = [question, *(_call(c.name, c.arguments) for c in task.gold_calls), said]
    limits = EpisodeLimits(max_turns=20, max_completion_tokens=20_000, max_turn_tokens=2_000)
    episode = start_episode(world.env, task, ScriptedUser(task), tokenizer, "g")
    run_episodes([episode], ScriptedGenerator(tokenizer, [episode], [script]), tokenizer, limits)
    result = episode.finish()

    # the user answered the question, the user's stop ended it, and the verifier scored it
    assert result.messages[2] == {"role": "assistant", "content": question}
    reply = result.messages[3]
    assert reply["role"] == "user" and any(first_person(fact) in reply["content"] for fact in task.known_facts)
    assert result.ended_by == "user_stop" and result.solved and result.format_errors == 0
    assert result.turns == len(script)

    # what evaluation's loop gives for the same instance and the same turns
    same = Environment(EnvConfig(max_turns=20, mode="train", run_seed=profile.data.seed,
                                 max_tools=profile.data.max_tools), world.env.schedules)
    reference = same.run(task, ScriptedPolicy(list(script)), ScriptedUser(task))
    assert result.messages[0] == reference.messages[0]  # the same system prompt: policy, tools, prices
    assert result.messages == reference.messages
    assert (result.solved, result.failed_checks, result.ended_by) == (reference.solved, [], "user_stop")
    assert result.cost_usd == pytest.approx(reference.cost_usd) and result.tools == reference.tools

    # prices: the instance's schedule scales the listed figures, and the episode charges what was listed
    listed = {t["name"]: t for t in json.loads(result.messages[0]["content"].split("# Tools\n")[1].split("\n\n")[0])}
    kinds = {t.name: t.kind for t in priced.tools["weather"]}
    for name in result.tools:
        assert (listed[name]["usd_per_call"], listed[name]["typical_latency_s"]) == domain_price(kinds[name], task)
    expected = sum(domain_price(kinds[c.name], task)[0] for c in task.gold_calls)
    assert episode.stats().cost == pytest.approx(expected) and expected != pytest.approx(
        sum(domain_price(kinds[c.name], replace(task, cost_scale=1.0))[0] for c in task.gold_calls))

    # tokens: the model's own turns are trained on (mask 1), everything the environment appended is not (mask 0)
    ids, mask = episode.completion_ids, episode.env_mask
    assert len(ids) == len(mask)
    model_ids = [i for i, m in zip(ids, mask) if m == 1]
    assert model_ids == [t for text in script for t in ScriptedGenerator(tokenizer, [], []).ids(text)]
    first_gap = mask.index(0)
    gap = ids[first_gap: first_gap + mask[first_gap:].index(1)]
    assert gap == tokenizer.encode(appended_text(tokenizer, [reply]), add_special_tokens=False)
    assert tokenizer.decode(gap).startswith("\n<|im_start|>user\n" + reply["content"])  # the template's user turn
    assert ids[-1] == tokenizer.eos_token_id  # the user stopped after the last model turn: nothing appended


def test_hundreds_of_garbage_turns_never_raise_and_are_counted(priced: TrainingSet, tokenizer: Any) -> None:
    world = smoke_world(tokenizer)
    rng = random.Random(7)
    tool = priced.tools["weather"][0].name
    limits = EpisodeLimits(max_turns=3, max_completion_tokens=4_000, max_turn_tokens=2_000)
    bad_turns = 0
    for round_ in range(10):  # 10 rounds x ~20 tasks x up to 3 turns: hundreds of garbage turns
        batch = [start_episode(world.env, t, ScriptedUser(t), tokenizer, f"g{round_}") for t in priced.tasks]
        texts = [[_garbage(rng, tool) for _ in range(3)] for _ in batch]
        run_episodes(batch, ScriptedGenerator(tokenizer, batch, texts), tokenizer, limits)
        for e in batch:
            result = e.finish()
            assert e.done and result.turns <= 3 and len(e.env_mask) == len(e.completion_ids)
            assert result.ended_by in ENDINGS and not result.solved  # garbage never solves a task
            bad_turns += result.format_errors
    assert bad_turns >= 200  # most garbage turns are format errors; none raised


def test_an_empty_answer_fails_and_a_cut_off_turn_ends_at_the_token_limit(priced: TrainingSet,
                                                                          tokenizer: Any) -> None:
    world = smoke_world(tokenizer)
    tasks: list[TrainingTask] = priced.tasks[:4]
    episodes = [start_episode(world.env, t, ScriptedUser(t), tokenizer, t.task_id) for t in tasks]
    run_episodes(episodes, ScriptedGenerator(tokenizer, episodes, [["I cannot help with that."]] * len(tasks)),
                 tokenizer, EpisodeLimits(max_turns=5, max_completion_tokens=2_000, max_turn_tokens=500))
    assert all(e.finish().ended_by == "user_stop" and not e.finish().solved for e in episodes)

    long = start_episode(world.env, tasks[0], ScriptedUser(tasks[0]), tokenizer, "cut")
    run_episodes([long], ScriptedGenerator(tokenizer, [long], [["word " * 100]]), tokenizer,
                 EpisodeLimits(max_turns=5, max_completion_tokens=2_000, max_turn_tokens=20))
    result = long.finish()
    assert (result.ended_by, result.turns, result.format_errors, result.solved) == ("token_limit", 1, 1, False)
    assert len(long.completion_ids) == 20 and set(long.env_mask) == {1} and not long.stats().has_final


def test_the_turn_limit_ends_an_episode_without_a_final_answer(priced: TrainingSet, tokenizer: Any) -> None:
    world = smoke_world(tokenizer)
    task = priced.tasks[0]
    call = task.gold_calls[0]
    e = start_episode(world.env, task, ScriptedUser(task), tokenizer, "g")
    run_episodes([e], ScriptedGenerator(tokenizer, [e], [[_call(call.name, call.arguments)]]), tokenizer,
                 EpisodeLimits(max_turns=2, max_completion_tokens=10_000, max_turn_tokens=1_000))
    result = e.finish()
    assert (result.turns, result.ended_by, result.solved) == (2, "turn_limit", False)
    assert e.stats().has_final is False and e.stats().tool_calls == {call.name: 2}


def test_an_llm_user_profile_without_its_endpoint_falls_back_to_the_scripted_user(tokenizer: Any) -> None:
    h100 = load_profile("h100")
    missing = replace(h100, environment=replace(h100.environment, user_endpoint="no-such-endpoint",
                                                experts=["no-such-expert"]))
    notes: list[str] = []
    world = build_world(missing, tokenizer, progress=notes.append)
    assert world.user_mode == "scripted" and world.env.experts is None
    assert world.env.config.local_search and world.env.config.code_interpreter
    assert any("no-such-endpoint" in n for n in notes) and any("no-such-expert" in n for n in notes)


def test_a_lock_step_batch_charges_each_episode_its_share_of_the_generation_time(priced: TrainingSet,
                                                                                   tokenizer: Any) -> None:
    """Twelve episodes in lock step, each turn's batched generation 0.25 s, each episode's wall-clock budget 0.6 s: every
    gold script plays to its end (the batch size and the machine's speed must not end episodes), while one episode
    alone at the same speed still runs out of its budget."""
    world = smoke_world(tokenizer)
    env = Environment(replace(world.env.config, max_episode_s=0.6), world.env.schedules, world.env.experts,
                      world.env.count_tokens)
    tasks = [t for t in priced.tasks if t.known_facts and t.gold_calls][:12]
    scripts = [["Could you tell me your e-mail address?", *(_call(c.name, c.arguments) for c in t.gold_calls),
                "All done. " + " ".join(t.communicate_info)] for t in tasks]
    assert len(tasks) == 12 and min(len(s) for s in scripts) >= 4  # alone, three turns take 0.75 s, before the last
    limits = EpisodeLimits(max_turns=20, max_completion_tokens=20_000, max_turn_tokens=2_000)
    batch = [start_episode(env, t, ScriptedUser(t), tokenizer, "g") for t in tasks]
    run_episodes(batch, SlowGenerator(tokenizer, batch, scripts), tokenizer, limits)
    results = [e.finish() for e in batch]
    assert [r.ended_by for r in results] == ["user_stop"] * 12 and all(r.solved for r in results)
    alone = start_episode(env, tasks[0], ScriptedUser(tasks[0]), tokenizer, "g")
    run_episodes([alone], SlowGenerator(tokenizer, [alone], scripts[:1]), tokenizer, limits)
    assert alone.finish().ended_by == "time_limit"
