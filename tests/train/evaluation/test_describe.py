"""``describe-llm-tools`` end to end against the REAL local llama.cpp server (SmolLM2-135M): a progress line per
trial, the description stored with its evidence; then an agent whose calls all time out (counted and reported)
with a writer whose description the trials contradict (refused, the previous one kept); then an endpoint that
does not answer: recorded as unreachable, its previous description kept."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import duckdb
import pytest
import yaml

pytest.importorskip("llama_cpp", reason="llama-cpp-python[server] is not installed (pip install -e .[llm])")

from inference.endpoints import Endpoint  # noqa: E402
from tests.train.llm_registry import DEAD_PORT, write_registry  # noqa: E402
from tests.train.fixed_llm import FixedLLM  # noqa: E402
from train.evaluation.describe import DescribeConfig, describe_llm_tools, evidence_text  # noqa: E402
from train.evaluation.describe_evidence import contradiction, evidence_of  # noqa: E402
from warehouse.eval_store import current_descriptions  # noqa: E402

pytestmark = pytest.mark.llm


@pytest.fixture(scope="module")
def served(eval_server: Endpoint) -> Endpoint:
    return eval_server


def config(warehouse: Path, registry: Path, endpoints: list[str]) -> DescribeConfig:
    return DescribeConfig(warehouse=str(warehouse), registry=str(registry), endpoints=endpoints, writer="local",
                          tasks=2, max_turns=1, agent_max_tokens=16, writer_max_tokens=40, timeout_s=300)


def test_describe_stores_evidence_then_an_unreachable_endpoint_keeps_its_description(
        served: Endpoint, snapshot_warehouse: str, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh.duckdb"
    shutil.copyfile(snapshot_warehouse, warehouse)
    registry = write_registry(tmp_path, served)

    lines: list[str] = []
    first = describe_llm_tools(config(warehouse, registry, ["local"]), progress=lines.append)
    [real] = first.endpoints
    # SmolLM2's own text is accepted or refused by what it claims (it has claimed "10%" of 0/2); either way the
    # evidence and the writer's text are stored
    assert real.status in ("described", "refused") and real.trials == 2 and real.proposed, real.reason
    assert real.status == "described" or real.reason.startswith("contradicted by the trials: ")
    trial_lines = [line for line in lines if ": trial " in line]
    assert len(trial_lines) == 2 and all(re.search(r"^local: trial [12]/2 weather \(\S+\): .+, \d+\.\d s$", line)
                                         for line in trial_lines), lines
    assert lines[-1].endswith(f"{real.solved}/2 solved, {real.timeouts} timed out")
    con = duckdb.connect(str(warehouse), read_only=True)
    trials = con.execute("SELECT trial_id, task_id, domain, kinds, ended_by, prompt_tokens, completion_tokens, "
                         "latency_s, trajectory_json, error FROM llm_tool_trials WHERE run_id = ? ORDER BY trial_id",
                         [first.run_id]).fetchall()
    stored = con.execute("SELECT evidence_trial_ids_json, description, model, evidence_json, proposed_description "
                         "FROM llm_tool_descriptions WHERE run_id = ?", [first.run_id]).fetchone()
    con.close()
    assert [t[0] for t in trials] == json.loads(stored[0]) == real.evidence_trial_ids
    assert stored[1] == real.description and stored[2] == "SmolLM2-135M-Instruct"
    assert json.loads(stored[3]) == real.evidence and stored[4] == real.proposed
    assert real.evidence["trials"] == 2 and sum(n for _, n in real.evidence["per_kind"].values()) == 2
    for _, task_id, domain, kinds, ended_by, prompt_tokens, completion_tokens, latency, trajectory, error in trials:
        assert domain == "weather" and kinds and task_id, ended_by
        if error and "(timeout)" in error:
            continue  # a loaded machine: counted as a timeout (real.timeouts), checked below with a slow agent
        assert ended_by != "policy_error", error
        assert prompt_tokens > 0 and completion_tokens > 0 and latency > 0  # the model really ran
        messages = json.loads(trajectory)
        assert messages[0]["role"] == "system" and any(m["role"] == "assistant" for m in messages)

    # every agent call times out; an honest writer's text is stored with that evidence, then a writer that claims
    # what the trials contradict is refused and the honest description stays current
    with FixedLLM("I am sorry.", delay_s=3.0) as slow, \
            FixedLLM("It solved 0 of 2 tasks: every call timed out, and it failed the weather requests.") as honest, \
            FixedLLM("It solved 3 out of 5 tasks and is strong at weather requests.") as liar:
        body = yaml.safe_load(registry.read_text())
        body["endpoints"]["local"]["base_url"] = slow.base_url
        for name, fixed in (("honest", honest), ("liar", liar)):
            body["endpoints"][name] = {"base_url": fixed.base_url, "model": "fixed", "provider": "local",
                                       "pricing_key": "fixed"}
        registry.write_text(yaml.safe_dump(body))
        cfg = config(warehouse, registry, ["local"])
        cfg.writer, cfg.timeout_s = "honest", 1.0
        local = describe_llm_tools(cfg, progress=lambda m: None).endpoints[0]
        assert (local.status, local.timeouts) == ("described", 2), local.reason
        assert current_descriptions(warehouse)["local"]["evidence"] == local.evidence
        assert local.evidence["timeouts"] == 2
        cfg.writer = "liar"
        lines = []
        refused = describe_llm_tools(cfg, progress=lines.append).endpoints[0]
    timed = [line for line in lines if ": trial " in line]
    assert len(timed) == 2 and all(re.search(r"\): timed out, \d+\.\d s$", line) for line in timed), lines
    assert lines[-1].endswith("0/2 solved, 2 timed out")
    assert (refused.status, refused.solved, refused.trials, refused.timeouts) == ("refused", 0, 2, 2)
    assert refused.reason.startswith("contradicted by the trials: claims 3 of 5, but the trials show: overall 0/2")
    assert refused.description == local.description and refused.proposed.startswith("It solved 3 out of 5")
    described_run = current_descriptions(warehouse)["local"]["run_id"]
    assert described_run != first.run_id and current_descriptions(warehouse)["local"]["description"] == \
        local.description

    # the same endpoint name now points where nothing answers, beside an endpoint that never answered
    body["endpoints"]["local"]["base_url"] = f"http://127.0.0.1:{DEAD_PORT}/v1"
    registry.write_text(yaml.safe_dump(body))
    second = describe_llm_tools(config(warehouse, registry, ["local", "dead"]), progress=lambda m: None)
    assert [(o.endpoint, o.status) for o in second.endpoints] == [("local", "unreachable"), ("dead", "unreachable")]
    assert "unreachable" in second.endpoints[0].reason
    assert second.endpoints[0].description == local.description  # reported as kept
    current = current_descriptions(warehouse)
    assert current["local"]["run_id"] == described_run and current["local"]["description"] == local.description
    assert "dead" not in current
    con = duckdb.connect(str(warehouse), read_only=True)
    rows = con.execute("SELECT endpoint, status, description, trials FROM llm_tool_descriptions WHERE run_id = ? "
                       "ORDER BY endpoint", [second.run_id]).fetchall()
    new_trials = con.execute("SELECT COUNT(*) FROM llm_tool_trials WHERE run_id = ?", [second.run_id]).fetchone()
    con.close()
    assert rows == [("dead", "unreachable", None, 0), ("local", "unreachable", None, 0)] and new_trials == (0,)


def test_the_evidence_tallies_solved_per_domain_and_kind() -> None:
    trials = [{"domain": "weather", "kinds": "lookup", "solved": True, "ended_by": "user_stop", "turns": 2,
               "format_errors": 0},
              {"domain": "weather", "kinds": "write", "solved": False, "ended_by": "turn_limit", "turns": 8,
               "format_errors": 3},
              {"domain": "retail", "kinds": "lookup", "solved": False, "ended_by": "user_stop", "turns": 1,
               "format_errors": 0}]
    text = evidence_text(trials)
    assert "Solved per domain: retail 0/1; weather 1/2" in text
    assert "Solved per task kind: lookup 1/2; write 0/1" in text


def test_a_description_the_trials_contradict_is_refused_with_the_reason() -> None:
    none_solved = evidence_of([{"domain": "weather", "kinds": "identify+intent", "solved": False,
                                "error": "agent failed: RuntimeError: agent endpoint failed (timeout): no answer"}]
                              * 8 + [{"domain": "railway", "kinds": "identify+intent+forbidden", "solved": False,
                                      "error": None}] * 2)
    assert (none_solved.trials, none_solved.solved, none_solved.timeouts) == (10, 0, 8)
    assert contradiction("X solved 3 out of 5 tasks.", none_solved).startswith("claims 3 of 5")
    assert contradiction("It is reliable, with 60% of requests answered.", none_solved).startswith("claims 60%")
    assert "solved 0 of 10" in contradiction("X handles identity checks well.", none_solved)
    assert contradiction("X solved 0 of 10 tasks; it timed out on 8 and failed the railway ones.", none_solved) \
        is None

    some = evidence_of([{"domain": "weather", "kinds": "identify+intent", "solved": True, "error": None},
                        {"domain": "railway", "kinds": "identify+intent+forbidden", "solved": False, "error": None}])
    assert contradiction("It solved 1 of 2 tasks (50%): good at weather, weak on railway.", some) is None
    assert contradiction("It is strong on railway requests.", some) == \
        "claims a strength in railway ('It is strong on railway requests.'), but solved 0 of 1 there"
