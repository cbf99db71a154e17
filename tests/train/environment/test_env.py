"""The orchestration environment over a published snapshot of all ten domains: format fuzz, the oracle and the
empty agent, the scripted user, per-instance randomisation and the system prompt."""

from __future__ import annotations

import json
import random
import string
from collections import Counter
from typing import Any

import pytest

from domains.registry import DOMAIN_NAMES, get_spec
from inference.pricing import synthetic_schedules
from train.environment.env import EnvConfig, Environment, system_prompt
from train.environment.policies import EmptyPolicy, OraclePolicy, ScriptedPolicy, tool_call_text
from train.environment.randomise import draw_instance
from train.environment.tasks import TrainingSet, TrainingTask, load_training_set
from train.environment.tools import ToolCatalog
from train.environment.user_sim import STOP, ScriptedUser, first_person, make_user

SCHEDULES = synthetic_schedules(seed=0)


@pytest.fixture(scope="module")
def data(all_domains_warehouse: str) -> TrainingSet:
    return load_training_set(all_domains_warehouse)


def per_domain(data: TrainingSet, n: int) -> list[TrainingTask]:
    picked: dict[str, list[TrainingTask]] = {}
    for task in data.tasks:
        if len(picked.setdefault(task.domain, [])) < n:
            picked[task.domain].append(task)
    return [t for tasks in picked.values() for t in tasks]


def test_the_oracle_scores_one_on_200_tasks_across_all_domains_and_the_empty_agent_zero(data: TrainingSet) -> None:
    tasks = per_domain(data, 20)
    assert len(tasks) == 200 and {t.domain for t in tasks} == set(DOMAIN_NAMES)
    env = Environment(EnvConfig(run_seed=3), SCHEDULES)
    oracle = [env.run(t, OraclePolicy(t), ScriptedUser(t)) for t in tasks]
    failed = [(r.task_id, r.ended_by, r.failed_checks) for r in oracle if not r.solved]
    assert sum(r.solved for r in oracle) / len(oracle) == 1.0, failed[:5]
    assert all(r.format_errors == 0 and r.ended_by == "user_stop" for r in oracle)
    for task, r in zip(tasks, oracle):
        assert {c.name for c in task.gold_calls} <= set(r.tools)  # the gold's tools always stay
        assert sum(u.calls for u in r.usage.values()) == len(task.gold_calls)
        assert r.cost_usd > 0 and r.latency_s > 0 and r.schedule and r.schedule.startswith("synthetic-train-")
    assert len({r.instance_seed for r in oracle}) == len(oracle)
    empty = [env.run(t, EmptyPolicy(), ScriptedUser(t)) for t in tasks]
    assert sum(r.solved for r in empty) == 0
    assert all(r.ended_by == "user_stop" and r.cost_usd == 0 for r in empty)


def _garbage(rng: random.Random, tool: str) -> Any:
    """A turn that no reading can use: broken tags or JSON, an unknown tool, bad arguments, or not text at all."""
    noise = "".join(rng.choice(string.printable + "ünï\x00{}[]\"") for _ in range(rng.randrange(0, 120)))
    kind = rng.randrange(9)
    if kind == 0:
        return rng.choice(["<tool_call>", "</tool_call>"]) + noise
    if kind == 1:
        return f"<tool_call>{noise}</tool_call>"
    if kind == 2:
        return tool_call_text(rng.choice(["no_such_tool", "", "DROP TABLE", tool.upper()]), {"x": noise})
    if kind == 3:
        return f'<tool_call>{{"name": "{tool}", "arguments": {json.dumps(rng.choice([[1], 3, "x", None]))}}}</tool_call>'
    if kind == 4:
        return tool_call_text(tool, {})  # a required argument is missing
    if kind == 5:
        return tool_call_text(tool, {"zzz": noise}) + " and some text after the call"
    if kind == 6:
        return rng.choice([None, 42, b"bytes", {"name": tool}, ["a"], 3.5])
    if kind == 7:
        return rng.choice(["", "   ", "\n\t", "<think>only thinking</think>"])
    return f'<tool_call>{{"name": "{tool}", "arguments": {{}}, "extra": {noise!r:.40}}}</tool_call>'


def test_1000_garbage_outputs_raise_nothing_and_each_is_counted(data: TrainingSet) -> None:
    rng = random.Random(11)
    tasks = per_domain(data, 5)  # 50 episodes x 20 turns
    env = Environment(EnvConfig(max_turns=20, max_tokens=10**9), SCHEDULES)
    total, reasons = 0, Counter[str]()
    for task in tasks:
        tool = next(t for t in get_spec(task.domain).tools if t.parameters.get("required"))
        outputs = [_garbage(rng, tool.name) for _ in range(20)]
        result = env.run(task, ScriptedPolicy(outputs), ScriptedUser(task))
        assert result.ended_by == "turn_limit" and result.turns == 20 and not result.solved
        assert result.format_errors == 20 and sum(u.calls for u in result.usage.values()) == 0
        # every bad turn got an error observation
        observations = [m for m in result.messages if m["content"].startswith("<tool_response>")]
        assert len(observations) == 20 and all("format_error" in m["content"] for m in observations)
        total += result.format_errors
        reasons.update(r.split(" ")[0] for r in result.format_error_reasons)
    assert total == 1000
    assert len(reasons) >= 5, reasons  # the fuzz reached many different failure kinds


def test_the_turn_and_token_limits_end_an_episode_unscored(data: TrainingSet) -> None:
    task = next(t for t in data.tasks if len(t.gold_calls) >= 2)
    call = task.gold_calls[0]
    looping = ScriptedPolicy([tool_call_text(call.name, call.arguments)])
    by_turns = Environment(EnvConfig(max_turns=3)).run(task, looping, ScriptedUser(task))
    assert (by_turns.ended_by, by_turns.turns, by_turns.solved) == ("turn_limit", 3, False)
    by_tokens = Environment(EnvConfig(max_tokens=200)).run(task, ScriptedPolicy([tool_call_text(
        call.name, call.arguments)]), ScriptedUser(task))
    assert by_tokens.ended_by == "token_limit" and by_tokens.tokens >= 200 and by_tokens.turns < 50


def test_an_agent_whose_endpoint_fails_ends_the_episode_as_a_policy_error(data: TrainingSet) -> None:
    class Broken:
        def act(self, messages: list[dict[str, str]]) -> str:
            raise RuntimeError("connection refused")

    task = data.tasks[0]
    result = Environment().run(task, Broken(), ScriptedUser(task))
    assert result.ended_by == "policy_error" and "connection refused" in (result.error or "") and not result.solved


def test_the_scripted_user_opens_with_the_request_answers_from_known_facts_and_stops(data: TrainingSet) -> None:
    task = next(t for t in data.tasks if any(":" in f for f in t.known_facts))
    user = ScriptedUser(task)
    assert user.opening() == task.user_scenario["instructions"]["reason_for_call"]
    fact = next(f for f in task.known_facts if ":" in f)
    key = fact.partition(":")[0]
    answer = user.reply(f"Could you give me the {key}, please?")
    assert first_person(fact) in answer and STOP not in answer
    assert user.reply("Your request is complete.").endswith(STOP)
    everything = ScriptedUser(task)
    vague = "Hm?"  # a question whose words name no fact (realistic facts are whole sentences: "you can ...")
    assert not any("hm" in f.lower().split() for f in task.known_facts)
    first = everything.reply(vague)
    assert all(first_person(f) in first for f in task.known_facts)  # a question naming no fact gets all of them
    assert not any(w in first.lower().split() for w in ("you", "your"))  # ... in the first person
    assert STOP in everything.reply("Anything else I can do?")  # nothing left to tell: the user leaves


def test_randomisation_keeps_the_gold_tools_records_the_seed_and_keeps_held_out_pricing_for_evaluation() -> None:
    names = [f"t{i}" for i in range(12)]
    draws = [draw_instance(f"task-{i}", names, {"t3", "t7"}, SCHEDULES, run_seed=5) for i in range(200)]
    assert all({"t3", "t7"} <= set(d.tool_names) for d in draws)
    assert len({d.tool_names for d in draws}) > 50  # subsets really vary
    assert {d.schedule.split for d in draws} == {"train"} and len({d.schedule.name for d in draws}) == 10
    evals = [draw_instance(f"task-{i}", names, {"t3"}, SCHEDULES, run_seed=5, mode="eval") for i in range(50)]
    assert {d.schedule.name for d in evals} == {"synthetic-heldout-deepinfra"}
    again = draw_instance("task-0", names, {"t3", "t7"}, SCHEDULES, run_seed=5)
    assert again == draws[0] and draw_instance("task-0", names, {"t3", "t7"}, SCHEDULES, run_seed=6) != draws[0]
    with pytest.raises(ValueError, match="t99"):
        draw_instance("task-x", names, {"t99"}, SCHEDULES)


def test_the_system_prompt_holds_policy_tools_prices_and_the_preference(data: TrainingSet) -> None:
    task = data.tasks[0]
    env = Environment(EnvConfig(preference_instruction="Keep the cost low."), SCHEDULES)
    result = env.run(task, EmptyPolicy(), ScriptedUser(task))
    prompt = result.messages[0]["content"]
    assert get_spec(task.domain).policy in prompt and "Keep the cost low." in prompt
    tools = json.loads(prompt.split("# Tools\n", 1)[1].split("\n\n", 1)[0])
    assert [t["name"] for t in tools] == list(result.tools)
    assert all({"name", "description", "parameters", "usd_per_call", "typical_latency_s"} <= set(t) for t in tools)
    bare = system_prompt("P", ToolCatalog(), None, None)
    assert "# Tools\n[]" in bare and "preference" not in bare


def test_evaluation_mode_prices_episodes_with_the_held_out_schedule_only(data: TrainingSet) -> None:
    env = Environment(EnvConfig(mode="eval", run_seed=9), SCHEDULES)
    results = [env.run(t, OraclePolicy(t), ScriptedUser(t)) for t in per_domain(data, 1)]
    assert {(r.mode, r.schedule) for r in results} == {("eval", "synthetic-heldout-deepinfra")}
    assert all(r.solved for r in results)
    with pytest.raises(ValueError, match="mode"):
        draw_instance("t", ["a"], set(), SCHEDULES, mode="test")


def test_the_role_comes_from_the_scenario_and_user_modes_are_checked() -> None:
    task = TrainingTask("t", "weather", 0, "hi", (),
                        user_scenario={"persona": "Ann Lee, a forecaster: brisk", "role": "staff"})
    assert task.role == "staff" and TrainingTask("u", "weather", 0, "hi", ()).role is None
    legacy = TrainingTask("v", "weather", 0, "hi", (), user_scenario={"persona": "Ann Lee, a staff: brisk"})
    assert legacy.role == "staff"  # snapshots written before the role travelled as data
    assert isinstance(make_user("scripted", task), ScriptedUser)
    with pytest.raises(ValueError, match="needs an LLM client"):
        make_user("llm", task)
    with pytest.raises(ValueError, match="unknown user mode 'human'"):
        make_user("human", task)


def test_local_search_and_the_code_interpreter_run_inside_the_loop(data: TrainingSet) -> None:
    import os

    task = next(t for t in data.tasks if t.domain == "railway")
    search = tool_call_text("local_search", {"query": "refund policy", "k": 2})
    code = tool_call_text("code_interpreter", {"code": "print(6 * 7)"})
    turns = [search, code] + [tool_call_text(c.name, c.arguments) for c in task.gold_calls]
    turns.append("All done. " + " ".join(task.communicate_info))
    env = Environment(EnvConfig(local_search=True, code_interpreter=True), SCHEDULES)
    result = env.run(task, ScriptedPolicy(turns), ScriptedUser(task))
    assert {"local_search", "code_interpreter"} <= set(result.tools)  # listed after the domain tools, gold kept
    hits = json.loads(result.messages[3]["content"].split("\n")[1])[0]["result"]["results"]
    assert len(hits) == 2 and all(h["id"] for h in hits)
    ran = json.loads(result.messages[5]["content"].split("\n")[1])[0]["result"]
    if os.geteuid() == 0:  # the sandbox needs root (or user namespaces); elsewhere it is an error result
        assert ran == 42
    assert result.usage["local_search"].calls == 1 and result.usage["code_interpreter"].calls == 1
    assert result.usage["local_search"].cost_usd == 0 and result.usage["local_search"].latency_s > 0
    assert result.solved and result.format_errors == 0  # extra reads of no state do not break the outcome


def test_the_reward_judges_a_loaded_task_as_admission_did_identification_included(data: TrainingSet) -> None:
    from verifiers.types import Trajectory
    from verifiers.verify import verify

    with_user = [t for t in data.tasks if t.contract and t.contract["user"]]
    assert with_user and all(t.contract["criteria"] == ["execution", "fidelity", "completeness", "identification"]
                             for t in data.tasks)
    task = with_user[0]
    verifiable = task.verifiable()
    assert verifiable.user == tuple(task.contract["user"]) and verifiable.identify_tools
    said = " ".join(task.communicate_info)
    assert verify(verifiable, Trajectory(task.gold_calls, said)).solved
    # the same calls with the identification call moved after the first write: the state is the gold's, yet the
    # policy's first rule is broken, and the reward says so (it did not before the contract was stored)
    writes = {t.name for t in data.tools[task.domain] if t.kind == "write"}
    calls = list(task.gold_calls)
    ident = next((i for i, c in enumerate(calls) if c.name in verifiable.identify_tools), None)
    first_write = next((i for i, c in enumerate(calls) if c.name in writes), None)
    if ident is not None and first_write is not None and ident < first_write:
        moved = calls[:ident] + calls[ident + 1:first_write + 1] + [calls[ident]] + calls[first_write + 1:]
        verdict = verify(verifiable, Trajectory(tuple(moved), said))
        assert not verdict.solved and verdict.failed_checks() == ["identification"]


def test_an_imported_tau2_request_is_said_in_the_first_person_and_a_synthesised_one_is_left_as_written() -> None:
    narrated = {"instructions": {"reason_for_call": "You received your order #W2378156 and wish to exchange the "
                                                    "keyboard. If there is none, you'd rather keep yours.",
                                 "known_info": "You are Yusuf Rossi in zip code 19122."}}
    imported = TrainingTask("retail-tau2-0", "retail", 0, "", (), user_scenario=narrated)
    assert ScriptedUser(imported).opening() == ("I received my order #W2378156 and wish to exchange the keyboard. "
                                                "If there is none, I'd rather keep mine.")
    spoken = {"instructions": {"reason_for_call": "Hi, could you check the status of my order #W1? You said it "
                                                  "would ship today."}}
    synthesised = TrainingTask("ecommerce-s0-1", "ecommerce", 0, "", (), user_scenario=spoken)
    assert ScriptedUser(synthesised).opening() == spoken["instructions"]["reason_for_call"]
