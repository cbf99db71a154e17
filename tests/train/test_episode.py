"""The minimal episode: strict parsing, counted format errors, the verifier as outcome, and token bookkeeping."""

from __future__ import annotations

import json
import random
import string
from typing import Any

from train.episode import EpisodeLimits, instance_tools, parse_turn, run_episodes, start_episode
from train.tasks import TrainingTask, load_training_set


class ScriptedGenerator:
    """A policy that writes given texts turn by turn (the thing under test is the episode, not a network).

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
            text = script[min(turn, len(script) - 1)]
            out.append(self.tokenizer.encode(text, add_special_tokens=False)[:max_new_tokens - 1]
                       + [self.tokenizer.eos_token_id])
        return out


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


def test_parse_turn_is_strict() -> None:
    from train.tasks import CatalogTool

    tools = {"get_station": CatalogTool("get_station", "", {})}
    ok = parse_turn('Looking.\n' + _call("get_station", {"station_id": "WS0001"}), tools)
    assert ok.error is None and ok.calls[0].name == "get_station" and ok.message == "Looking."
    assert parse_turn("The station is active.", tools).final
    for bad in ("", "   ", "<tool_call>{}", _call("get_station", {}) + " then", _call("nope", {}),
                '<tool_call>{"name": "get_station", "arguments": 3}</tool_call>',
                '<tool_call>{"name": "get_station", "extra": 1}</tool_call>', "<tool_call>not json</tool_call>"):
        assert parse_turn(bad, tools).error, bad


def test_hundreds_of_garbage_outputs_never_raise_and_are_counted(snapshot_warehouse: str, tokenizer: Any) -> None:
    data = load_training_set(snapshot_warehouse, domains=["weather"])
    rng = random.Random(7)
    tool = data.tools["weather"][0].name
    episodes, scripts = [], []
    for round_ in range(15):  # 15 rounds x ~20 tasks x 3 turns: several hundred garbage turns
        batch = [start_episode(t, instance_tools(data.tools["weather"], t, None, rng), data.policies["weather"],
                               tokenizer, f"g{round_}") for t in data.tasks]
        texts = [[_garbage(rng, tool) for _ in range(3)] for _ in batch]
        limits = EpisodeLimits(max_turns=3, max_completion_tokens=4_000, max_turn_tokens=2_000)
        run_episodes(batch, ScriptedGenerator(tokenizer, batch, texts), tokenizer, limits)
        episodes += batch
        scripts += texts
    bad_turns = 0
    for e, script in zip(episodes, scripts):
        assert e.done and e.turns <= 3 and len(e.env_mask) == len(e.completion_ids)
        bad_turns += e.format_errors
        assert e.format_errors + len(e.calls) + int(e.has_final) >= 1  # every turn is accounted for
        assert not e.solved  # garbage never solves a task
    assert bad_turns >= 300  # nearly every garbage turn is a format error; none raised


def test_oracle_policy_replaying_the_gold_solves_and_an_empty_answer_does_not(snapshot_warehouse: str,
                                                                              tokenizer: Any) -> None:
    data = load_training_set(snapshot_warehouse, domains=["weather"], limit=6)
    limits = EpisodeLimits(max_turns=20, max_completion_tokens=20_000, max_turn_tokens=2_000)
    runs: dict[str, list[Any]] = {"oracle": [], "empty": []}
    for name in runs:
        scripts = []
        for task in data.tasks:
            tools = instance_tools(data.tools["weather"], task, 3, random.Random(task.task_id))
            assert {c.name for c in task.gold_calls} <= {t.name for t in tools}
            runs[name].append(start_episode(task, tools, data.policies["weather"], tokenizer, task.task_id))
            gold = [_call(c.name, c.arguments) for c in task.gold_calls]
            said = "Done. " + " ".join(task.communicate_info)
            scripts.append(gold + [said] if name == "oracle" else ["I cannot help with that."])
        run_episodes(runs[name], ScriptedGenerator(tokenizer, runs[name], scripts), tokenizer, limits)
    oracle, empty = runs["oracle"], runs["empty"]
    assert all(e.solved and e.has_final and e.format_errors == 0 for e in oracle), [e.said for e in oracle]
    assert not any(e.solved for e in empty)
    stats = oracle[0].stats()
    assert sum(stats.tool_calls.values()) == len(data.tasks[0].gold_calls) and stats.cost > 0 and stats.latency > 0
    # observation tokens are masked out of the loss, model tokens are not
    assert 0 in oracle[0].env_mask and 1 in oracle[0].env_mask


def test_turn_limit_ends_an_episode_without_a_final_answer(snapshot_warehouse: str, tokenizer: Any) -> None:
    data = load_training_set(snapshot_warehouse, domains=["weather"], limit=1)
    task: TrainingTask = data.tasks[0]
    tools = data.tools["weather"]
    call = task.gold_calls[0]
    e = start_episode(task, tools, data.policies["weather"], tokenizer, "g")
    run_episodes([e], ScriptedGenerator(tokenizer, [e], [[_call(call.name, call.arguments)]]), tokenizer,
                 EpisodeLimits(max_turns=2, max_completion_tokens=10_000, max_turn_tokens=1_000))
    assert e.turns == 2 and not e.has_final and not e.solved and e.stats().has_final is False
