"""The NeMo Gym export runs in Gym's own venv with nothing of this project: every default domain's exported server
(Gym's ``SimpleResourcesServer`` under uvicorn, scripts/gym_serve.py) is played through its HTTP endpoints, and its
``/verify`` must give the project's verifier's reward on the same trajectories (the gold, an empty one, the gold with
one argument of its last write changed) for at least 30 tasks per domain; hostile input gets the environment's
errors and caps; a session never closed is reaped; verify on an unknown session is an error.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from domains.registry import DOMAIN_NAMES
from interop.gym_agreement import GymClient, agreement, response_with
from pipeline.regenerate import RegenerateConfig, regenerate
from tests.gym.servers import gym_servers
from train.environment.splits import snapshot_splits
from train.environment.tasks import load_training_set
from warehouse.gym_export import export_gym
from warehouse.reader import connect_readonly

DOMAINS = sorted(DOMAIN_NAMES)
MIN_TASKS = 30


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("gym-export")
    result, _ = regenerate(RegenerateConfig(domains=DOMAINS, tasks_per_domain=40, warehouse=str(root / "wh.duckdb"),
                                            work_dir=str(root / "work")), progress=lambda _: None)
    assert result.status == "published"
    summary = export_gym(root / "wh.duckdb", "latest", root / "gym")
    tasks = load_training_set(root / "wh.duckdb").tasks
    return {"root": root, "out": root / "gym", "summary": summary, "tasks": tasks}


@pytest.fixture(scope="module")
def servers(exported: dict[str, Any]) -> Any:
    with gym_servers(exported["out"], DOMAINS, exported["root"], "--max-calls", "100", "--max-idle-s", "3") as urls:
        yield urls


def test_rows_follow_the_split_and_carry_the_task(exported: dict[str, Any]) -> None:
    con = connect_readonly(exported["root"] / "wh.duckdb")
    try:
        sid = exported["summary"]["snapshot_id"]
        ids = [t.task_id for t in exported["tasks"]]
        split = snapshot_splits(con, sid, ids)
    finally:
        con.close()
    seen = 0
    for domain in DOMAINS:
        data = exported["out"] / "resources_servers" / f"toolscale_{domain}" / "data"
        for name in ("train", "test"):
            for line in (data / f"{name}.jsonl").read_text().splitlines():
                row = json.loads(line)
                seen += 1
                assert split.of(row["task_id"]) == name == row["split"]
                assert row["domain"] == domain and isinstance(row["seed"], int)
                system, user = row["responses_create_params"]["input"]
                assert "# " in system["content"] and "policy" in system["content"].lower()
                assert user["role"] == "user" and user["content"]
                assert all(t["type"] == "function" and t["parameters"] for t in row["responses_create_params"]["tools"])
        config = (exported["out"] / "resources_servers" / f"toolscale_{domain}" / "configs" /
                  f"toolscale_{domain}.yaml").read_text()
        assert "huggingface_identifier:" in config and "entrypoint: app.py" in config
    assert seen == len(exported["tasks"])


def test_verify_agrees_with_the_verifier(exported: dict[str, Any], servers: dict[str, str]) -> None:
    report: dict[str, Any] = {}
    for domain in DOMAINS:
        tasks = {t.task_id: t.verifiable() for t in exported["tasks"] if t.domain == domain}
        assert len(tasks) >= MIN_TASKS, (domain, len(tasks))
        report[domain] = agreement(servers[domain], tasks)
    print(json.dumps({d: r["kinds"] for d, r in report.items()}))
    for domain, r in report.items():
        kinds = r["kinds"]
        assert not r["disagreements"], (domain, r["disagreements"])
        assert kinds["gold"]["scored"] >= MIN_TASKS and kinds["gold"]["mean_reward"] == 1.0, (domain, kinds)
        assert kinds["empty"]["mean_reward"] == 0.0, (domain, kinds)
        assert kinds["altered"]["scored"] >= MIN_TASKS // 2, (domain, kinds)


def test_hostile_calls_get_the_environments_errors_and_caps(exported: dict[str, Any],
                                                            servers: dict[str, str]) -> None:
    task = next(t for t in exported["tasks"] if t.domain == "weather")
    client = GymClient(servers["weather"])
    try:
        assert client.seed({"responses_create_params": {"input": []}, "task_id": task.task_id}).status_code == 200
        unknown = client.call("drop_all_tables", {}).json()
        assert unknown["error"].startswith("Unknown tool 'drop_all_tables'. Available tools:")
        bad = client.call(task.gold_calls[0].name, {"no_such_argument": 1}).json()
        assert "invalid" in bad["error"], bad
        huge = client.call(task.gold_calls[0].name, {"x": "a" * 300_000})
        assert huge.status_code == 413 and "limit" in huge.json()["error"]
        answers = [client.call(task.gold_calls[0].name, task.gold_calls[0].arguments) for _ in range(10_000)]
        refused = [a.json() for a in answers if "call limit reached" in str(a.json())]
        assert len(refused) == 10_000 - (100 - 2), len(refused)  # the cap is 100; two calls were made before
        verdict = client.verify("nothing").json()
        assert verdict["reward"] == 0.0 and verdict["checks"]["execution"]["passed"] in (True, False)
    finally:
        client.close()


def test_unknown_session_task_and_reaping(exported: dict[str, Any], servers: dict[str, str]) -> None:
    url = servers["weather"]
    stranger = GymClient(url)
    try:
        answer = stranger.verify("hello")
        assert answer.status_code == 404 and "unknown session" in answer.json()["error"]  # an error, not a 0
        unknown = stranger.seed({"responses_create_params": {"input": []}, "task_id": "weather-nope"})
        assert unknown.status_code == 404 and "unknown task" in unknown.json()["error"]
    finally:
        stranger.close()
    task = next(t for t in exported["tasks"] if t.domain == "weather")
    forgotten, later = GymClient(url), GymClient(url)
    try:
        forgotten.seed({"responses_create_params": {"input": []}, "task_id": task.task_id}).raise_for_status()
        time.sleep(4)  # past max_idle_s (3 s): the next session opened reaps it
        later.seed({"responses_create_params": {"input": []}, "task_id": task.task_id}).raise_for_status()
        gone = forgotten.verify("hello")
        assert gone.status_code == 404 and "reaped" in gone.json()["error"]
    finally:
        forgotten.close()
        later.close()


def test_the_server_needs_nothing_of_the_project(exported: dict[str, Any]) -> None:
    folder = exported["out"] / "resources_servers" / "toolscale_weather"
    sources = "\n".join(p.read_text() for p in folder.rglob("*.py"))
    for package in ("domains", "verifiers", "warehouse", "train", "synthesis"):
        assert f"from {package}" not in sources and f"import {package}" not in sources, package
    assert httpx is not None and response_with("x")["output"][0]["content"][0]["text"] == "x"
    assert isinstance(Path(folder / "data" / "db_0.sqlite").stat().st_size, int)
