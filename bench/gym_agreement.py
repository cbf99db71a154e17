"""Per domain, the exported NeMo Gym server's /verify against the project's verifier on the same trajectories (the
gold, an empty one, the gold with one argument of its last write changed), through the server's HTTP endpoints.

    PYTHONPATH=. python bench/gym_agreement.py --warehouse warehouse/toolscale.duckdb

Prints one JSON line per domain: trajectories scored, verdicts equal to the verifier's, the server's mean reward.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from interop.gym_agreement import agreement
from tests.gym.servers import gym_servers
from train.environment.tasks import load_training_set
from warehouse.gym_export import export_gym


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", default="warehouse/toolscale.duckdb")
    args = parser.parse_args()
    tasks = load_training_set(args.warehouse).tasks
    domains = sorted({t.domain for t in tasks})
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        export_gym(args.warehouse, "latest", root / "gym")
        with gym_servers(root / "gym", domains, root) as urls:
            for domain in domains:
                report = agreement(urls[domain], {t.task_id: t.verifiable() for t in tasks if t.domain == domain})
                kinds = {k: {"scored": v["scored"], "agree": v["agree"], "mean_reward": v["mean_reward"]}
                         for k, v in report["kinds"].items()}
                print(json.dumps({"domain": domain, **kinds, "disagreements": report["disagreements"]}), flush=True)


if __name__ == "__main__":
    main()
