"""tau2's telecom tasks imported through the same gate as synthesised ones: a spread of 20 tasks, each judged by its
own assertions (and actions) after its setup calls, then published and read back from the warehouse with its
contract (setup calls, assertions, actions) and its user-side gold calls intact."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from domains import external
from domains.engine import ToolCall
from domains.registry import get_engine, get_spec
from interop.tau2_tasks import imported_tasks
from synthesis.generate import ShardConfig
from synthesis.imported import imported_record
from verifiers.assertions import assertion_value
from verifiers.types import Trajectory, VerifiableTask
from verifiers.verify import verify

pytestmark = pytest.mark.skipif(not all(external.available(s) for s in get_spec("telecom").sources.values()),
                                reason="tau2's telecom data is not installed (scripts/setup_tau2.sh)")


@pytest.fixture(scope="module")
def spread() -> list:
    tasks = imported_tasks(get_spec("telecom"))
    return tasks[:: len(tasks) // 20][:20]


def test_gold_accepted_empty_rejected_and_a_changed_gold_fails(spread: list) -> None:
    engine = get_engine("telecom")
    cfg = ShardConfig("telecom", 0, 0, imported=True)
    for imported in spread:
        record = imported_record(imported, cfg)
        assert record["accepted"], (imported.tau2_id, record["reason_detail"])
        # what the warehouse keeps: the gold calls (with their side) and the contract
        task = VerifiableTask.from_dict({"domain": "telecom", "gold_calls": record["gold_calls"],
                                         **record["verification"]})
        assert task == imported.task and task.setup_calls and any(c.side == "user" for c in task.gold_calls)
        assert verify(task, Trajectory(task.gold_calls), engine).solved, imported.tau2_id
        empty = verify(task, Trajectory(), engine)
        assert not empty.solved and not empty.assertions.passed, imported.tau2_id
        changed = verify(task, Trajectory(task.gold_calls[:-1]), engine)  # the last step left undone
        assert not changed.solved, imported.tau2_id


def test_setup_calls_really_run() -> None:
    """A device assertion that holds on the seeded phone is false once the setup has turned mobile data off, and
    the gold that turns it back on is solved only after that setup."""
    engine = get_engine("telecom")
    setup = (ToolCall("set_user_info", {"name": "John Smith", "phone_number": "555-123-2002"}, "setup"),
             ToolCall("turn_data_off", {}, "setup"))
    data_on = {"func_name": "assert_mobile_data_status", "arguments": {"expected_status": True}, "assert_value": True}
    gold = (ToolCall("toggle_data", {}, "user"),)
    with_setup = VerifiableTask("telecom", 0, gold, criteria=("assertions",), setup_calls=setup,
                                env_assertions=(data_on,))
    with engine.fresh() as db:
        assert assertion_value(db, "assert_mobile_data_status", {"expected_status": True}) == (1, None)
    assert verify(with_setup, Trajectory(gold), engine).solved
    assert not verify(with_setup, Trajectory(), engine).assertions.passed  # data stays off: the setup ran
    assert not verify(replace(with_setup, setup_calls=()), Trajectory(gold), engine).solved  # toggled off instead


def test_imported_tasks_publish_and_read_back_with_their_contract(tmp_path: Path) -> None:
    from pipeline.regenerate import RegenerateConfig, regenerate
    from train.environment.tasks import load_training_set

    cfg = RegenerateConfig(domains=["telecom"], tasks_per_domain=1, workers=1, base_per_shard=8, imported_limit=20,
                           warehouse=str(tmp_path / "wh.duckdb"), work_dir=str(tmp_path / "work"))
    result, _ = regenerate(cfg, progress=lambda m: None)
    assert result.status == "published", result
    loaded = [t for t in load_training_set(cfg.warehouse, domains=["telecom"]).tasks if "-tau2-" in t.task_id]
    by_id = {t.task_id: t for t in imported_tasks(get_spec("telecom"))[:20]}
    assert len(loaded) == 20
    engine = get_engine("telecom")
    for stored in loaded:
        task = stored.verifiable()
        assert task == by_id[stored.task_id].task  # setup calls, user-side gold, assertions, criteria
        assert verify(task, Trajectory(task.gold_calls), engine).solved
        assert not verify(task, Trajectory(), engine).solved
