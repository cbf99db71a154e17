"""The environment GRPO rollouts play in, built from a profile's ``environment`` section: the orchestration
environment of train/environment/env.py (the one evaluation runs) with the profile's tools, user simulator and limits."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from inference.client import LLMClient
from inference.endpoints import EndpointError, Registry, load_endpoints
from inference.pricing import synthetic_schedules
from train.environment.env import EnvConfig, Environment
from train.environment.experts import ExpertPool, ExpertSpec
from train.stages.profiles import Profile
from train.environment.tasks import TrainingTask
from train.environment.user_sim import UserSimulator, make_user


@dataclass
class RolloutWorld:
    """What the rollouts share: the environment (catalog, pricing, limits) and who plays the user."""

    env: Environment
    user_mode: str  # scripted | llm
    user_client: LLMClient | None = None
    user_workers: int = 1
    notes: list[str] = field(default_factory=list)  # what the profile asked for and this machine could not give

    def user(self, task: TrainingTask) -> UserSimulator:
        return make_user(self.user_mode, task, self.user_client)

    def close(self) -> None:
        if self.env.experts is not None:
            self.env.experts.close()
        if self.user_client is not None:
            self.user_client.close()


def _missing_endpoint(registry: Registry | None, name: str | None) -> str | None:
    """Why endpoint ``name`` cannot be used (not in the registry, its key not set), or None when it can."""
    if registry is None or name not in registry.endpoints:
        return "not in the endpoint registry"
    key = registry.get(name).api_key_env
    if key and not os.environ.get(key):
        return f"its key ${key} is not set"
    return None


def build_world(profile: Profile, tokenizer: Any, pricing_seed: int = 0,
                progress: Callable[[str], None] | None = None) -> RolloutWorld:
    """The environment the profile describes; the experts and the LLM user only when the endpoint registry
    defines their endpoints (each one left out is one line to ``progress``)."""
    section, notes = profile.environment, []
    registry = None
    if section.experts or section.user == "llm":
        try:
            registry = load_endpoints(section.registry)
        except EndpointError as exc:
            notes.append(f"no endpoint registry ({exc}): no experts, scripted user")
    experts = None
    names = []
    for name in section.experts:
        missing = _missing_endpoint(registry, name)
        if missing is None:
            names.append(name)
        elif registry is not None:
            notes.append(f"expert {name!r} left out: {missing}")
    if names and registry is not None:
        experts = ExpertPool([ExpertSpec(registry.get(n)) for n in names], cache_dir=section.cache_dir)
    user_mode, user_client = section.user, None
    if section.user == "llm":
        missing = _missing_endpoint(registry, section.user_endpoint)
        if missing is None and registry is not None:
            user_client = LLMClient(registry.get(section.user_endpoint), cache_dir=section.cache_dir,
                                    stage="user-simulator")
        else:
            user_mode = "scripted"
            if registry is not None:
                notes.append(f"user endpoint {section.user_endpoint!r} unusable ({missing}): scripted user")
    config = EnvConfig(max_turns=profile.episode.max_turns,
                       # the driver enforces the completion budget in tokens; this bound also covers the opening
                       max_tokens=profile.data.max_prompt_tokens + profile.episode.max_completion_tokens,
                       mode="train", run_seed=profile.data.seed, subset_tools=section.subset_tools,
                       max_tools=profile.data.max_tools, local_search=section.local_search,
                       code_interpreter=section.code_interpreter, show_prices=section.show_prices,
                       tool_format=section.tool_format)
    env = Environment(config, synthetic_schedules(pricing_seed), experts,
                      lambda text: len(tokenizer.encode(text, add_special_tokens=False)))
    for note in notes:
        (progress or (lambda m: print(m, file=sys.stderr)))(f"environment: {note}")
    return RolloutWorld(env, user_mode, user_client, section.user_workers, notes)
