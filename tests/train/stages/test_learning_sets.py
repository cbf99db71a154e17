"""What a learning run trains on and what it is scored on: a held-out domain is never in the training data, tau2's
own tasks are never in it, the extra sets are the ones the profile names, and tau2's evaluator judges an episode
on one of its own tasks (real snapshots, the real tau2 worker)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from domains import external
from domains.registry import get_spec
from inference.pricing import synthetic_schedules
from interop.tau2_bridge import missing_reason, tau2_python
from pipeline.regenerate import RegenerateConfig, regenerate
from tests.snapshots import published_warehouse
from train.environment.env import Environment
from train.environment.policies import EmptyPolicy, OraclePolicy
from train.environment.tasks import load_training_set
from train.environment.user_sim import ScriptedUser
from train.evaluation.evaluate import EvalConfig, evaluation_set, tau2_verdicts
from train.evaluation.tau2_judge import tau2_task_id
from train.stages.learning import mean_interval, planned_sets
from train.stages.profiles import ProfileError, load_profile
from train.stages.records import TrainRunConfig, load_built

TAU2_MISSING = tau2_python() is None or not all(external.available(s) for s in get_spec("retail").sources.values())


def write_profile(folder: Path, name: str, data: dict, evaluate: dict) -> Path:
    body = yaml.safe_load((Path("train/profiles/cpu-learn.yaml")).read_text())
    body.update(name=name, data={**body["data"], **data}, evaluate={**body["evaluate"], **evaluate})
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


@pytest.fixture(scope="module")
def two_domains(tmp_path_factory: pytest.TempPathFactory) -> str:
    return published_warehouse(tmp_path_factory.mktemp("two-domains"), ["weather", "restaurant"], 10)


@pytest.fixture(scope="module")
def retail_with_tau2(tmp_path_factory: pytest.TempPathFactory) -> str:
    if TAU2_MISSING:
        pytest.skip(missing_reason())
    folder = tmp_path_factory.mktemp("retail-tau2")
    cfg = RegenerateConfig(domains=["retail"], tasks_per_domain=4, workers=1, base_per_shard=8, imported_limit=12,
                           warehouse=str(folder / "wh.duckdb"), work_dir=str(folder / "work"))
    result, _ = regenerate(cfg, progress=lambda m: None)
    assert result.status == "published", result
    return cfg.warehouse


def test_a_held_out_domain_is_never_in_the_training_data(two_domains: str, tmp_path: Path) -> None:
    path = write_profile(tmp_path, "leave-one-out", {"domains": ["weather"]}, {"holdout_domains": ["restaurant"]})
    built = load_built(TrainRunConfig(str(path), two_domains), load_profile(path))
    assert built.data.tasks and {t.domain for t in built.data.tasks} == {"weather"}
    held_out = evaluation_set(EvalConfig(warehouse=two_domains, model="any", domains=["restaurant"], split=None))
    assert held_out.tasks and {t.domain for t in held_out.tasks} == {"restaurant"}
    with pytest.raises(ProfileError, match="also in data.domains"):
        load_profile(write_profile(tmp_path, "overlap", {"domains": ["weather", "restaurant"]},
                                   {"holdout_domains": ["restaurant"]}))
    with pytest.raises(ProfileError, match="needs data.domains listed"):
        load_profile(write_profile(tmp_path, "every-domain", {"domains": None}, {"holdout_domains": ["restaurant"]}))
    shipped = load_profile("cpu-learn-domains")
    assert not set(shipped.evaluate.holdout_domains) & set(shipped.data.domains or [])


def test_tau2s_own_tasks_are_never_in_the_training_data(retail_with_tau2: str, tmp_path: Path) -> None:
    everything = load_training_set(retail_with_tau2)
    imported = [t for t in everything.tasks if tau2_task_id(t.task_id)]
    assert imported and len(imported) < len(everything.tasks)  # both kinds are in the snapshot
    path = write_profile(tmp_path, "retail", {"domains": ["retail"]}, {})
    built = load_built(TrainRunConfig(str(path), retail_with_tau2), load_profile(path))
    assert built.data.tasks and not any(tau2_task_id(t.task_id) for t in built.data.tasks)
    assert not any(tau2_task_id(t.task_id) for t in load_training_set(retail_with_tau2, split="train").tasks)
    outside = evaluation_set(EvalConfig(warehouse=retail_with_tau2, model="any", split=None, source="tau2"))
    assert {t.task_id for t in outside.tasks} == {t.task_id for t in imported}


def test_tau2s_evaluator_judges_an_episode_on_its_own_task(retail_with_tau2: str) -> None:
    cfg = EvalConfig(warehouse=retail_with_tau2, model="any", split=None, source="tau2")
    env = Environment(cfg.env_config(), synthetic_schedules(0))
    task = next(t for t in evaluation_set(cfg).tasks if any(c.name.startswith(("cancel", "return", "exchange",
                                                                               "modify")) for c in t.gold_calls))
    solved = env.run(task, OraclePolicy(task), ScriptedUser(task))
    nothing = env.run(task, EmptyPolicy(), ScriptedUser(task))
    assert solved.solved and not nothing.solved  # our verifier
    verdicts = [tau2_verdicts([r])[task.task_id] for r in (solved, nothing)]
    assert verdicts == [True, False]  # tau2's evaluator agrees on both


def test_the_extra_sets_are_the_ones_the_profile_names() -> None:
    profile = load_profile("cpu-learn-domains")
    plan = planned_sets(profile, ["base", "sft", "rft", "grpo"])
    assert [(label, tasks) for label, tasks, _ in plan] == [
        ("base", "holdout"), ("base", "tau2"), ("sft", "holdout"), ("sft", "tau2"), ("sft", "test, gold tools"),
        ("rft", "holdout"), ("rft", "tau2"), ("grpo", "holdout"), ("grpo", "tau2"),
        ("grpo", "control: cost first"), ("grpo", "control: accuracy first")]
    changes = {tasks: c for label, tasks, c in plan if label == "grpo"}
    assert changes["holdout"]["domains"] == ["travel"] and changes["tau2"]["source"] == "tau2"
    assert changes["control: cost first"]["expert_priced_as"] == "gpt-5"
    assert changes["control: cost first"]["preference_instruction"] != changes["control: accuracy first"][
        "preference_instruction"]
    assert mean_interval([0.0, 2.0, 4.0])[0] == 2.0 and mean_interval([])[0] == 0.0
