"""Hostile options and training profiles: every number finite and in range, every count bounded, every path
confined, each refused in one line with exit status 2 before any work starts, and nothing written."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.hostile.test_cli import assert_one_error_line, folder_state, run_cli, untouched, warehouse  # noqa: F401
from train.stages.profiles import PROFILES_DIR, ProfileError, load_profile

WAREHOUSE_COMMANDS = ("llm-stages", "preferences", "evaluate", "describe-tools")
OPTION_CASES = [
    (["endpoints", "--timeout", "1e9"], "--timeout"),
    (["endpoints", "--timeout", "0"], "--timeout"),
    (["endpoints", "--timeout", "nan"], "not a finite number"),
    (["endpoints", "--timeout", "-3"], "--timeout"),
    (["serve", "--startup-timeout", "nan"], "not a finite number"),
    (["serve", "--startup-timeout", "inf"], "not a finite number"),
    (["serve", "--port", "70000"], "--port"),
    (["llm-stages", "--budget", "nan"], "not a finite number"),
    (["llm-stages", "--budget", "-1"], "--budget"),
    (["llm-stages", "--sample", "0"], "--sample"),
    (["llm-stages", "--proposals", "1000000"], "--proposals"),
    (["llm-stages", "--seed", "-1"], "--seed"),
    (["llm-stages", "--port", "0"], "--port"),
    (["preferences", "--count", "1000000000"], "--count"),
    (["preferences", "--count", "10**23"], "not a whole number"),
    (["preferences", "--count", "1e9"], "not a whole number"),
    (["preferences", "--training-schedules", "1000000"], "--training-schedules"),
    (["preferences", "--eval-fraction", "nan"], "--eval-fraction"),
    (["preferences", "show", "-n", "-5"], "-n"),
    (["pricing", "--seed", "99999999999999999999"], "--seed"),
    (["evaluate", "m", "--timeout", "nan"], "not a finite number"),
    (["evaluate", "m", "--timeout", "-1"], "--timeout"),
    (["evaluate", "m", "--limit", "0"], "--limit"),
    (["evaluate", "m", "--max-turns", "0"], "--max-turns"),
    (["evaluate", "m", "--preference", '{"outcome": NaN}'], "NaN"),
    (["evaluate", "m", "--preference", '{"outcome": Infinity}'], "Infinity"),
    (["evaluate", "m", "--preference", '{"cost": 1e999}'], "finite"),
    (["evaluate", "m", "--preference", '{"tools": {"expert-1": "lots"}}'], "expert-1"),
    (["evaluate", "m", "--preference", '[1, 2]'], "JSON object"),
    (["describe-tools", "--timeout", "0"], "--timeout"),
    (["describe-tools", "--tasks", "100000000"], "--tasks"),
]


@pytest.mark.parametrize(("argv", "needle"), OPTION_CASES, ids=[" ".join(a)[:60] for a, _ in OPTION_CASES])
def test_out_of_range_options_are_refused_before_any_work(argv: list[str], needle: str, untouched: Path,
                                                          tmp_path: Path) -> None:
    work = tmp_path / "work"
    started = time.perf_counter()
    extra = ["--warehouse", str(untouched)] if argv[0] in WAREHOUSE_COMMANDS else []
    extra += ["--work-dir", str(work)] if argv[0] == "llm-stages" else []
    out = run_cli(*argv, *extra, cwd=tmp_path, timeout=60)
    assert_one_error_line(out, 2, needle)
    assert not work.exists() and list(tmp_path.iterdir()) == []  # nothing written, not even a work dir
    assert time.perf_counter() - started < 30


def _h100() -> dict[str, Any]:
    return yaml.safe_load((PROFILES_DIR / "h100.yaml").read_text())


def _set(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    section, key = dotted.split(".")
    data[section][key] = value
    return data


PROFILE_CASES = [
    ("grpo.learning_rate", float("inf"), "grpo.learning_rate: inf is not a finite number"),
    ("grpo.learning_rate", ".inf", "grpo.learning_rate: inf is not a finite number"),
    ("grpo.learning_rate", float("nan"), "not a finite number"),
    ("grpo.top_p", 7, "grpo.top_p: 7.0 is out of range"),
    ("grpo.min_group_std", float("nan"), "grpo.min_group_std: nan is not a finite number"),
    ("grpo.save_total_limit", -5, "grpo.save_total_limit: -5 is out of range"),
    ("data.max_tasks", -1, "data.max_tasks: -1 is out of range"),
    ("grpo.temperature", 0, "grpo.temperature: 0.0 is out of range"),
    ("grpo.max_steps", 10**12, "grpo.max_steps"),
    ("grpo.vllm_gpu_memory_utilization", 3.5, "grpo.vllm_gpu_memory_utilization: 3.5 is out of range"),
    ("environment.cache_dir", "/etc", "environment.cache_dir '/etc' must be a relative folder"),
    ("environment.cache_dir", "../../outside", "environment.cache_dir '../../outside' must be a relative folder"),
    ("environment.cache_dir", "~/.cache", "must be a relative folder"),
    ("launch.deepspeed_config", "/etc/passwd", "launch.deepspeed_config: '/etc/passwd' must be a path relative"),
    ("launch.accelerate_config", "../../../../../etc/shadow", "leads outside the profiles folder"),
    ("launch.accelerate_config", "launch/../../profiles.py", "leads outside the profiles folder"),
    ("launch.accelerate_config", "launch/absent.yaml", "no file"),
]


@pytest.mark.parametrize(("key", "value", "needle"), PROFILE_CASES, ids=[f"{k}={v}" for k, v, _ in PROFILE_CASES])
def test_bad_profile_values_are_one_line(key: str, value: Any, needle: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_set(_h100(), key, value)).replace("'.inf'", ".inf"))
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    message = str(err.value)
    assert needle in message and "\n" not in message, message


@pytest.mark.parametrize("name", ["x/../../../ESCAPED", "../up", "a/b", "", "..", "x" * 200])
def test_a_profile_name_cannot_name_a_folder_elsewhere(name: str, tmp_path: Path) -> None:
    data = _h100()
    data["name"] = name
    path = tmp_path / "named.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError, match="name .* must be 1-64 letters"):
        load_profile(path)


def test_a_profile_looked_up_by_a_path_like_name_is_refused() -> None:
    with pytest.raises(ProfileError, match="a profile name is letters"):
        load_profile("x/../../../ESCAPED")


def test_launch_configs_beside_a_users_own_profile_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "launch").mkdir()
    (tmp_path / "launch" / "mine.yaml").write_text("compute_environment: LOCAL_MACHINE\n")
    data = _set(_h100(), "launch.accelerate_config", "launch/mine.yaml")
    (tmp_path / "own.yaml").write_text(yaml.safe_dump(data))
    assert load_profile(tmp_path / "own.yaml").launch.accelerate_config == "launch/mine.yaml"


def _train_cli(profile: str, tmp_path: Path, warehouse_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "train.stages.run", "--profile", profile, "--warehouse",
                           str(warehouse_path), "--output-root", str(tmp_path / "runs"), "--work-dir",
                           str(tmp_path / "work")], capture_output=True, text=True, timeout=180, cwd=tmp_path)


def test_the_training_command_refuses_an_escaping_profile_and_writes_nothing(untouched: Path, tmp_path: Path) -> None:
    data = yaml.safe_load((PROFILES_DIR / "cpu-smoke.yaml").read_text())
    data["name"] = "x/../../../ESCAPED"
    (tmp_path / "escape.yaml").write_text(yaml.safe_dump(data))
    out = _train_cli(str(tmp_path / "escape.yaml"), tmp_path, untouched)
    assert_one_error_line(out, 2, "must be 1-64 letters")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["escape.yaml"]
    assert not list(tmp_path.parent.glob("**/ESCAPED*"))


def test_the_training_command_refuses_a_fifo_profile_at_once(untouched: Path, tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "fifo.yaml")  # nothing ever writes to it: an open() for reading would block forever
    out = _train_cli(str(tmp_path / "fifo.yaml"), tmp_path, untouched)
    assert_one_error_line(out, 2, "is a FIFO (named pipe), not a regular file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.yaml"]


def test_the_state_of_the_warehouse_folder_is_unchanged_by_a_refused_profile(untouched: Path, tmp_path: Path) -> None:
    before = folder_state(untouched.parent)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8))
    (tmp_path / "bomb.yaml").write_text(bomb)
    started = time.perf_counter()
    with pytest.raises(ProfileError, match="alias bomb"):
        load_profile(tmp_path / "bomb.yaml")
    assert time.perf_counter() - started < 2
    assert folder_state(untouched.parent) == before
