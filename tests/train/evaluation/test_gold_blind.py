"""Evaluation is blind to the gold: every evaluation prompt offers the whole catalog of the task's user role, in
the spec's order, whatever the gold calls; a cap on tools at evaluation is refused. Training's randomisation
(a subset that always keeps the gold's tools) stays, and the same check sees the gold in its prompts."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from domains.engine import ToolCall
from domains.registry import get_spec
from inference.pricing import synthetic_schedules
from train.environment.env import EnvConfig, Environment, role_tools
from train.environment.tasks import TrainingTask
from train.evaluation.evaluate import EvalConfig, evaluation_set
from train.stages.profiles import load_profile
from train.stages.sequence import stage_eval_config

SCHEDULES = synthetic_schedules(0)


def offered(env: Environment, task: TrainingTask) -> list[str]:
    """The tool names the task's system prompt lists, in order (a JSON list, or one ``- name(...)`` line each)."""
    prompt = env.opening_messages(task)[0]["content"]
    tools = prompt.split("# Tools\n", 1)[1].split("\n\n", 1)[0]
    if env.config.tool_format == "lines":
        return re.findall(r"^- ([A-Za-z0-9_-]+)\(", tools, re.MULTILINE)
    return [t["name"] for t in json.loads(tools)]


def other_golds(task: TrainingTask, tasks: list[TrainingTask]) -> list[tuple[ToolCall, ...]]:
    """Golds to swap in: none, each other task's of the domain, and one that calls every agent tool of the domain."""
    every = tuple(ToolCall(t.name, {}) for t in get_spec(task.domain).side_tools("agent"))
    return [(), every] + [t.gold_calls for t in tasks if t.domain == task.domain and t.task_id != task.task_id]


@pytest.mark.parametrize("tool_format", ["json", "lines"])
def test_no_evaluation_prompt_depends_on_the_gold(snapshot_warehouse: str, tool_format: str) -> None:
    cfg = EvalConfig(warehouse=snapshot_warehouse, model="any", seed=3, tool_format=tool_format)
    tasks = evaluation_set(cfg).tasks
    env = Environment(cfg.env_config(), SCHEDULES)
    assert tasks and env.config.mode == "eval"
    for task in tasks:
        names = offered(env, task)
        spec_order = [t.name for t in get_spec(task.domain).side_tools("agent")]
        allowed = role_tools(task)
        assert names == [n for n in spec_order if allowed is None or n in allowed], task.task_id  # whole, in order
        for gold in other_golds(task, tasks):
            assert offered(env, replace(task, gold_calls=gold)) == names, task.task_id


def test_training_prompts_keep_the_gold_so_the_check_can_see_it(snapshot_warehouse: str) -> None:
    cfg = EvalConfig(warehouse=snapshot_warehouse, model="any")
    tasks = evaluation_set(cfg).tasks
    env = Environment(EnvConfig(mode="train", max_tools=2), SCHEDULES)  # cpu-learn's training randomisation
    differs = [t.task_id for t in tasks if any(offered(env, replace(t, gold_calls=g)) != offered(env, t)
                                               for g in other_golds(t, tasks))]
    assert differs  # the training draw keeps the gold's tools: the comparison above would catch that in evaluation


def test_search_and_code_are_offered_at_evaluation_when_the_profile_enables_them(snapshot_warehouse: str) -> None:
    cfg = EvalConfig(warehouse=snapshot_warehouse, model="any", local_search=True, code_interpreter=True)
    task = evaluation_set(cfg).tasks[0]
    names = offered(Environment(cfg.env_config(), SCHEDULES), task)
    assert names[-2:] == ["local_search", "code_interpreter"]


def test_a_cap_on_tools_at_evaluation_is_refused() -> None:
    with pytest.raises(ValueError, match="whole catalog"):
        EnvConfig(mode="eval", max_tools=2)
    with pytest.raises(ValueError, match="whole catalog"):
        EvalConfig(warehouse="w.duckdb", model="any", max_tools=2).validate()
    with pytest.raises(ValueError, match="catalog must be one of"):
        EnvConfig(mode="eval", catalog="some")
    with pytest.raises(ValueError, match="evaluation only"):
        EnvConfig(mode="train", catalog="gold")


def test_the_evaluate_stage_drops_the_training_cap_and_keeps_the_profiles_tools(tmp_path) -> None:
    profile = load_profile("cpu-learn")
    assert profile.data.max_tools == 2  # training's prompt size: a random subset that keeps the gold's tools
    cfg = stage_eval_config(profile, "w.duckdb", "ts-x", "model-folder", tmp_path, pricing_seed=0)
    assert cfg.max_tools is None and cfg.catalog == "role"
    assert (cfg.local_search, cfg.code_interpreter) == (profile.environment.local_search,
                                                        profile.environment.code_interpreter)
    env = cfg.env_config()
    assert env.mode == "eval" and env.max_tools is None


def test_the_gold_tools_hint_is_labelled_and_offers_only_the_gold(snapshot_warehouse: str) -> None:
    cfg = EvalConfig(warehouse=snapshot_warehouse, model="any", catalog="gold")
    task = next(t for t in evaluation_set(cfg).tasks if t.gold_calls)
    names = offered(Environment(cfg.env_config(), SCHEDULES), task)
    gold = {c.name for c in task.gold_calls if c.side == "agent"}
    assert names == [t.name for t in get_spec(task.domain).side_tools("agent") if t.name in gold]


def test_tools_written_one_line_each_keep_every_argument_and_price_in_half_the_text(snapshot_warehouse: str) -> None:
    """``environment.tool_format: lines`` (bench/prompt_tokens.py: about half the tokens of the JSON list): each tool
    on its own line with its arguments (optional ones marked ``?``, an enum by its values) and its listed price;
    the profile carries it to training and to every evaluation, and an unknown format is refused."""
    cfg = EvalConfig(warehouse=snapshot_warehouse, model="any", tool_format="lines")
    task = evaluation_set(cfg).tasks[0]
    as_json = Environment(replace(cfg, tool_format="json").env_config(), SCHEDULES).opening_messages(task)[0]
    as_lines = Environment(cfg.env_config(), SCHEDULES).opening_messages(task)[0]
    entries = json.loads(as_json["content"].split("# Tools\n", 1)[1].split("\n\n", 1)[0])
    lines = as_lines["content"].split("# Tools\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(lines) == len(entries) and len(as_lines["content"]) < 0.75 * len(as_json["content"])
    for entry, line in zip(entries, lines):
        assert line.startswith(f"- {entry['name']}(") and entry["description"] in line
        params = entry["parameters"]
        for arg, prop in params.get("properties", {}).items():
            optional = "" if arg in params.get("required", []) else "?"
            kind = "|".join(map(str, prop["enum"])) if "enum" in prop else prop["type"]
            assert f"{arg}{optional}: {kind}" in line, (arg, line)
        assert f"usd_per_call {entry['usd_per_call']}" in line
    profile = replace(load_profile("cpu-learn"), environment=replace(load_profile("cpu-learn").environment,
                                                                     tool_format="lines"))
    assert stage_eval_config(profile, "w.duckdb", "ts-x", "m", Path("f"), 0).env_config().tool_format == "lines"
    with pytest.raises(ValueError, match="tool_format must be one of json, lines"):
        EnvConfig(tool_format="yaml")
