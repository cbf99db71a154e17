"""The tau2 export runs inside tau2 itself: a real snapshot is exported, and its packages are imported and scored
by tau2's ``evaluate_simulation`` in tau2's own venv (.venv-tau2, made by scripts/setup_tau2.sh).

The tau2 side (scripts/tau2_check.py) runs with nothing of this project importable; its replays of the gold
calls are then compared here, call by call and table by table, with the project's own engine.

Every domain a default regenerate exports is checked, from one small regenerate shared by the module (40 tasks
per domain, 32 scored per domain). Measured on the 2-core machine at load 2.4: 194 s for the module, of which the
regenerate and export take 58 s and tau2's scoring of the ten domains 112 s.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from domains.engine import ToolCall
from domains.policy import policy_contradictions
from domains.registry import DOMAIN_NAMES, get_engine, get_spec
from pipeline.regenerate import RegenerateConfig, regenerate
from warehouse.exports import export_tau2
from tests.warehouse.tau2_export import observation, run_tau2_check, snapshot_seeds
from warehouse.tau2_package import package_name, tau2_domain_name
from verifiers.types import Trajectory, VerifiableTask
from verifiers.verify import outcome_reward
from warehouse.tau2_package.build import keyed_db

DOMAINS = sorted(DOMAIN_NAMES)  # every domain a default regenerate exports
MIN_TASKS = 30  # per domain, the floor
LIMIT = 32  # tasks checked per domain: the floor plus a little, to keep the test short


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("tau2-runtime")
    result, _ = regenerate(RegenerateConfig(domains=DOMAINS, tasks_per_domain=40, warehouse=str(root / "wh.duckdb"),
                                            work_dir=str(root / "work")), progress=lambda _: None)
    assert result.status == "published"
    summary = export_tau2(root / "wh.duckdb", "latest", root / "tau2")
    return {"root": root, "out": root / "tau2", "summary": summary, "seeds": snapshot_seeds(root / "wh.duckdb")}


def overdo_calls(domain: str, seed: int, task: dict[str, Any], k: int) -> list[list[Any]] | None:
    """One write the policy forbids, added after the gold: the violating example of a rule the agent must apply
    (policy-only preconditions first), rotated by ``k``, that still goes through after the gold and changes the
    end state. None when no such call exists for this task."""
    spec, engine = get_spec(domain), get_engine(domain, seed)
    policy_only = {p.rule for t in spec.tools for p in t.preconditions if p.enforced_by == "policy"}
    rules = sorted((r for r in spec.rules if r.checked_by == "agent" and r.example is not None
                    and not r.example_after and spec.tool(r.example.tool).kind == "write"), key=lambda r: (r.id not in policy_only, r.id))
    gold = [(a["name"], a["arguments"]) for a in task["evaluation_criteria"]["actions"]]
    for rule in rules[k % len(rules):] + rules[:k % len(rules)]:
        with engine.fresh() as db:
            for name, arguments in gold:
                db.call(name, arguments)
            before = db.fingerprint()
            if db.call(rule.example.tool, rule.example.arguments).ok and db.fingerprint() != before:
                return [[rule.example.tool, rule.example.arguments]]
    return None


@pytest.fixture(scope="module")
def overdo(exported: dict[str, Any]) -> dict[str, dict[str, list[list[Any]]]]:
    out: dict[str, dict[str, list[list[Any]]]] = {}
    for domain in DOMAINS:
        tasks = json.loads((exported["out"] / domain / "tasks.json").read_text())
        found = {t["id"]: overdo_calls(domain, exported["seeds"][domain], t, k) for k, t in enumerate(tasks)}
        out[domain] = {task_id: calls for task_id, calls in found.items() if calls}
    return out


@pytest.fixture(scope="module")
def tau2_run(exported: dict[str, Any], overdo: dict[str, dict[str, list[list[Any]]]]) -> dict[str, Any]:
    overdo_file = exported["root"] / "overdo.json"
    overdo_file.write_text(json.dumps(overdo, ensure_ascii=False), encoding="utf-8")
    return run_tau2_check(exported["out"], DOMAINS, exported["root"], "--min-tasks", str(MIN_TASKS),
                          "--limit", str(LIMIT), "--overdo", str(overdo_file))


def test_export_writes_the_package_tools_splits_and_a_dated_policy(exported: dict[str, Any]) -> None:
    for domain in DOMAINS:
        spec, folder = get_spec(domain), exported["out"] / domain
        tools = json.loads((folder / "tools.json").read_text())
        assert {t["function"]["name"]: t["kind"] for t in tools} == {t.name: t.kind for t in spec.tools}
        assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in tools)
        ids = [t["id"] for t in json.loads((folder / "tasks.json").read_text())]
        splits = json.loads((folder / "split_tasks.json").read_text())
        assert splits["base"] == ids and splits["test"] and splits["train"]
        assert sorted(splits["train"] + splits["test"]) == sorted(ids)
        assert f"The current date and time is {spec.now.replace('T', ' ')}." in (folder / "policy.md").read_text()
        assert policy_contradictions((folder / "policy.md").read_text(), spec) == []
        pkg = folder / package_name(domain)
        assert (pkg / "__init__.py").exists() and (pkg / "runtime.py").exists()
        data = json.loads((pkg / "data" / "domain.json").read_text())
        assert data["tau2_domain"] == tau2_domain_name(domain) and data["now"] == spec.now
        runtime = (pkg / "runtime.py").read_text()
        assert not any(line.startswith(("from domains", "import domains", "from warehouse"))
                       for line in runtime.splitlines())
        db = json.loads((pkg / "data" / "db.json").read_text())
        for table in spec.tables:  # keyed by primary key, booleans as JSON booleans
            assert len(db[table.name]) == table.rows
            key, row = next(iter(db[table.name].items()))
            assert key == str(row[table.primary_key])
            for col in (c for c in table.columns if c.type == "boolean"):
                assert all(r[col.name] in (True, False, None) for r in db[table.name].values())


def test_tau2_scores_gold_one_and_empty_and_altered_zero(tau2_run: dict[str, Any]) -> None:
    report = tau2_run["report"]
    assert tau2_run["rc"] == 0 and report["ok"], json.dumps(report, indent=1)[:4000]
    for domain in DOMAINS:
        r = report["domains"][domain]
        assert r["evaluated"] >= MIN_TASKS
        assert r["gold"] == {"1.0": r["evaluated"]}
        assert r["empty"] == {"0.0": r["evaluated"]}
        assert r["altered"] == {"0.0": r["evaluated"]}
        # most alterations must be calls the tool accepts, so the zero is the DB comparison, not an error
        assert r["altered_calls_refused_by_tool"] < r["evaluated"] / 2


def test_a_forbidden_write_after_the_gold_scores_zero_in_tau2_and_in_our_verifier(
        exported: dict[str, Any], overdo: dict[str, dict[str, list[list[Any]]]], tau2_run: dict[str, Any]) -> None:
    """The export enforces what the engine enforces: a policy-only rule's breach goes through in tau2 too, so the
    database differs from the gold's and tau2 scores 0, as our verifier does."""
    for domain in DOMAINS:
        r = tau2_run["report"]["domains"][domain]
        scored = sum(r["overdo"].values())
        assert scored >= MIN_TASKS and r["overdo"] == {"0.0": scored}, r["overdo"]
        assert r["overdo_calls_refused_by_tool"] == 0  # the runtime lets the breach through, as the engine does
        tasks = {t["id"]: t for t in json.loads((exported["out"] / domain / "tasks.json").read_text())}
        ours = 0
        for task_id, calls in overdo[domain].items():
            task = tasks[task_id]
            gold = tuple(ToolCall(a["name"], a["arguments"]) for a in task["evaluation_criteria"]["actions"])
            verifiable = VerifiableTask(domain, exported["seeds"][domain], gold,
                                        tuple(task["evaluation_criteria"]["communicate_info"]))
            said = " ".join(verifiable.communicate_info) or "Done."
            extra = tuple(ToolCall(name, arguments) for name, arguments in calls)
            assert outcome_reward(verifiable, Trajectory(gold + extra, said)) == 0.0, task_id
            ours += 1
        assert ours >= MIN_TASKS
        print(f"overdo {domain}: tau2 scored {scored} tasks 0, our verifier {ours} tasks 0", file=sys.stderr)


def test_tau2_runtime_matches_the_engine_call_by_call(exported: dict[str, Any], tau2_run: dict[str, Any]) -> None:
    compared = 0
    for domain in DOMAINS:
        spec = get_spec(domain)
        engine = get_engine(domain, exported["seeds"][domain])
        tasks = {t["id"]: t for t in json.loads((exported["out"] / domain / "tasks.json").read_text())}
        for task_id, replay in tau2_run["replays"][domain].items():
            gold = [(a["name"], a["arguments"]) for a in tasks[task_id]["evaluation_criteria"]["actions"]]
            with engine.fresh() as db:
                seen = [observation(db.call(name, args)) for name, args in gold]
                final = keyed_db(spec, {t.name: db.table_rows(t.name) for t in spec.tables})
            assert [json.loads(o) if not o.startswith("Error:") else o for o in replay["observations"]] == \
                [json.loads(o) if not o.startswith("Error:") else o for o in seen], task_id
            assert replay["final_db"] == final, task_id
            altered = replay["altered"]
            calls = gold[:altered["position"]] + [(altered["tool"], altered["arguments"])]
            with engine.fresh() as db:
                results = [db.call(name, args) for name, args in calls]
            assert observation(results[-1]) == altered["observation"], task_id
            assert altered["refused_by_tool"] == (not results[-1].ok), task_id
            compared += 1
    assert compared >= MIN_TASKS * len(DOMAINS)
