"""Profile files load, carry the paper's settings, and bad ones fail with one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from train.stages.profiles import PROFILES_DIR, ProfileError, load_profile


def test_shipped_profiles_load() -> None:
    smoke = load_profile("cpu-smoke")
    assert smoke.model.name == "smollm2-gguf" and smoke.model.use_cpu and smoke.grpo.max_steps >= 2
    h100 = load_profile("h100")
    assert h100.model.name == "Qwen/Qwen3-8B" and h100.model.dtype == "bfloat16" and h100.grpo.use_vllm
    g = h100.grpo
    assert (g.learning_rate, g.num_generations, g.tasks_per_step, g.beta) == (1e-6, 8, 16, 1e-4)
    assert (h100.data.max_prompt_tokens, h100.episode.max_completion_tokens, h100.episode.max_turns) == (24_000, 8_000, 50)
    assert h100.processes == 16 and h100.per_device_batch() == 8  # 16 tasks x 8 rollouts over 16 GPUs


def test_launch_files_are_consistent_with_the_profile() -> None:
    h100 = load_profile("h100")
    acc = yaml.safe_load((PROFILES_DIR / h100.launch.accelerate_config).read_text())
    assert acc["num_machines"] == h100.launch.nodes and acc["num_processes"] == h100.processes
    assert acc["distributed_type"] == "DEEPSPEED"
    assert acc["deepspeed_config"]["deepspeed_config_file"] == f"train/profiles/{h100.launch.deepspeed_config}"
    ds = json.loads((PROFILES_DIR / h100.launch.deepspeed_config).read_text())
    assert ds["zero_optimization"]["stage"] == 3 and ds["bf16"]["enabled"]


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["grpo"].update(num_generations=1), "num_generations must be at least 2"),
    (lambda d: d["grpo"].update(learning_rate="fast"), "grpo.learning_rate: expected float"),
    (lambda d: d["grpo"].update(lr=1e-6), "grpo: unknown key(s) lr"),
    (lambda d: d.pop("model"), "model: missing"),
    (lambda d: d["model"].update(dtype="int4"), "model.dtype must be float32 or bfloat16"),
    (lambda d: d["episode"].update(max_turn_tokens=10_000), "max_turn_tokens must be in"),
    (lambda d: d["grpo"].update(tasks_per_step=3), "must divide evenly"),
    (lambda d: d["launch"].update(accelerate_config="nope.yaml"), "launch.accelerate_config: no file"),
    (lambda d: d["data"].update(domains="weather"), "data.domains: expected a list"),
    (lambda d: d["grpo"].update(task_pool="easy"), "grpo.task_pool must be one of all, rft_solved"),
    (lambda d: d["grpo"].update(task_pool="rft_solved"), "task_pool rft_solved draws on the rft stage"),
    (lambda d: d.update(rft={"max_tasks": 0}), "rft.max_tasks: 0 is out of range"),
    (lambda d: d.update(rft={"learning_rate": 0.0}), "rft.learning_rate: 0.0 is out of range"),
    (lambda d: d["environment"].update(tool_format="yaml"), "environment.tool_format must be json or lines"),
])
def test_bad_profiles_fail_with_a_clear_line(tmp_path: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    data = yaml.safe_load((PROFILES_DIR / "h100.yaml").read_text())
    edit(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_unknown_profile_names_the_known_ones() -> None:
    with pytest.raises(ProfileError, match="known: cpu-learn, cpu-learn-domains, cpu-smoke, cpu-smoke-2proc, gpu-learn, h100"):
        load_profile("tpu")
