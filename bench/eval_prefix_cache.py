"""What keeping the attention cache between turns saves an evaluated checkpoint: real evaluation prompts (the
role's whole catalog) of a snapshot's test split, each played for three turns (the agent's reply and a short tool
response appended each time), once reading every prompt afresh and once with the kept cache. Prints seconds per
turn for both, the ratio, the share of prompt tokens served from the cache, and whether the replies are equal.

    PYTHONPATH=. python bench/eval_prefix_cache.py --warehouse W [--domain weather] [--tasks 3] [--bf16]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inference.pricing import synthetic_schedules  # noqa: E402
from train.environment.env import Environment  # noqa: E402
from train.evaluation.evaluate import EvalConfig, evaluation_set  # noqa: E402
from train.models.checkpoint_policy import CheckpointPolicy  # noqa: E402
from train.models.model import smollm2_folder  # noqa: E402
from warehouse.errors import WarehouseError  # noqa: E402
from warehouse.location import default_warehouse  # noqa: E402

TOOL_RESPONSE = '<tool_response>{"status": "ok"}</tool_response>'


def play(policy: CheckpointPolicy, openings: list[list[dict[str, str]]], turns: int) -> tuple[float, list[str]]:
    replies: list[str] = []
    start = time.perf_counter()
    for opening in openings:
        messages = list(opening)
        for _ in range(turns):
            reply = policy.act(messages)
            replies.append(reply)
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": TOOL_RESPONSE}]
    return time.perf_counter() - start, replies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warehouse", default=default_warehouse())
    ap.add_argument("--domain", default="weather")
    ap.add_argument("--tasks", type=int, default=3)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--bf16", action="store_true", help="CPU bf16 autocast, as the cpu-learn profiles evaluate")
    ap.add_argument("--work-dir", default="work")
    args = ap.parse_args()
    for name in ("tasks", "turns", "max_new_tokens"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    cfg = EvalConfig(warehouse=args.warehouse, model="any", domains=[args.domain], limit=args.tasks)
    env = Environment(cfg.env_config(), synthetic_schedules(0))
    try:  # a missing warehouse or an empty test split is one line, before any model loads
        openings = [env.opening_messages(t) for t in evaluation_set(cfg).tasks]
    except WarehouseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    folder = str(smollm2_folder(args.work_dir))
    results = {}
    for reuse in (False, True):
        policy = CheckpointPolicy.load(folder, args.max_new_tokens, bf16=args.bf16, reuse_prefix=reuse)
        seconds, replies = play(policy, openings, args.turns)
        results[reuse] = (seconds, replies, policy)
    n = len(openings) * args.turns
    (afresh, r0, p0), (kept, r1, p1) = results[False], results[True]
    print(f"{len(openings)} {args.domain} tasks x {args.turns} turns, prompts of {p0.prompt_tokens / n:.0f} tokens "
          f"on average, {args.max_new_tokens} new tokens at most, bf16={args.bf16}")
    print(f"read afresh: {afresh / n:.2f} s/turn   kept cache: {kept / n:.2f} s/turn   "
          f"ratio {afresh / kept:.2f}x   prompt tokens from the cache: {p1.reused_tokens / p1.prompt_tokens:.0%}")
    print(f"replies equal: {sum(a == b for a, b in zip(r0, r1))} of {n}")


if __name__ == "__main__":
    main()
