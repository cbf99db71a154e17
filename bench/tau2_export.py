"""The tau2 export of an imported domain, scored in tau2 on every task: a scratch regenerate imports the domain's
tau2 tasks, ``toolscale export --format tau2`` writes the package, and scripts/tau2_check.py (in .venv-tau2) scores
gold, empty and altered trajectories with tau2's ``evaluate_simulation``; prints the counts per trajectory kind.

    PYTHONPATH=. python bench/tau2_export.py telecom                 # every imported task
    PYTHONPATH=. python bench/tau2_export.py telecom --imported 300 --every 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipeline.regenerate import RegenerateConfig, regenerate
from interop.tau2_bridge import missing_reason, tau2_python
from warehouse.exports import export_tau2

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("domain", nargs="?", default="telecom")
    ap.add_argument("--imported", type=int, default=None, help="import only the first N tau2 tasks (default: all)")
    ap.add_argument("--every", type=int, default=1, help="score every k-th exported task")
    ap.add_argument("--json", default=None, help="also write tau2_check.py's full report here")
    args = ap.parse_args(argv)
    python = tau2_python()
    if python is None:
        print(f"error: {missing_reason()}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tau2-export-") as scratch:
        root = Path(scratch)
        started = time.perf_counter()
        cfg = RegenerateConfig(domains=[args.domain], tasks_per_domain=1, workers=1, imported_limit=args.imported,
                               warehouse=str(root / "wh.duckdb"), work_dir=str(root / "work"))
        result, _ = regenerate(cfg, progress=lambda _: None)
        if result.status != "published":
            print(f"error: the regenerate was not published ({result.status})", file=sys.stderr)
            return 1
        summary = export_tau2(root / "wh.duckdb", "latest", root / "tau2")
        built = time.perf_counter() - started
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.run([str(python), str(ROOT / "scripts" / "tau2_check.py"),
                               str(root / "tau2"), args.domain, "--every", str(args.every)],
                              capture_output=True, text=True, cwd=root, env=env)
        if not proc.stdout:
            print(proc.stderr[-3000:], file=sys.stderr)
            return 1
        report = json.loads(proc.stdout)
    r = report["domains"][args.domain]
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    print(f"{args.domain}: {summary['domains'][args.domain]['tasks']} tasks exported in {built:.0f} s, "
          f"{r['evaluated']} scored by tau2 in {report['seconds']:.0f} s; skipped {r['skipped'] or 'none'}")
    for kind in ("gold", "empty", "altered"):
        print(f"  {kind:8s} {r[kind]}")
    print(f"  altered by reward basis: {r['altered_by_basis']}")
    print(f"  altered excluded: {r['altered_excluded'] or 'none'}; notes: {r['altered_notes'] or 'none'}")
    print(f"  altered calls the tool refused: {r['altered_calls_refused_by_tool']}; failures: {len(r['failures'])}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
