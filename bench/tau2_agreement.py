"""Agreement with tau2 on an imported domain: final databases of every gold replay, the known-bad tasks, and
our verifier's verdicts against tau2's evaluator on gold, empty and altered trajectories.

    PYTHONPATH=. python bench/tau2_agreement.py retail            # all tasks
    PYTHONPATH=. python bench/tau2_agreement.py retail --limit 20 --json out.json

Needs a Python with tau2 (scripts/setup_tau2.sh, or $TOOLSCALE_TAU2_PYTHON / $TOOLSCALE_EXTERNAL_SITE).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict

from interop.tau2_agreement import measure
from interop.tau2_bridge import Tau2Worker, missing_reason, tau2_python


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("domain", nargs="?", default="retail")
    ap.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    ap.add_argument("--no-verdicts", action="store_true", help="compare final databases only")
    ap.add_argument("--json", default=None, help="also write every per-task result to this file")
    args = ap.parse_args(argv)
    if tau2_python() is None:
        print(f"error: {missing_reason()}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    with Tau2Worker() as worker:
        report = measure(args.domain, worker, args.limit, verdicts=not args.no_verdicts)
    fig = report.figures()
    print(f"{args.domain}: {fig['tasks']} tau2 tasks compared in {time.perf_counter() - started:.1f}s")
    print(f"  seeded state vs tau2's db.json: {len(report.initial_differences)} differing record(s)")
    print(f"  identical final DB: {fig['identical_final_db']}/{fig['tasks']} "
          f"({fig['identical_final_db_outside_known_bad']}/{fig['tasks'] - fig['known_bad']} outside known-bad)")
    print(f"  same failing gold calls in both: {fig['same_call_errors']}/{fig['tasks']}")
    print(f"  known-bad (a gold call raises in tau2): {fig['known_bad']}")
    for t in report.tasks:
        if t.known_bad:
            print(f"    task {t.task_id}: {'; '.join(t.tau2_errors)}")
    for t in report.tasks:
        if t.state_differences:
            print(f"  final DB differs, task {t.task_id}: {', '.join(t.state_differences[:4])}")
    if not args.no_verdicts:
        print(f"  verdict agreement outside known-bad: {fig['verdicts_agree']}/{fig['verdicts_total']} "
              f"= {fig['agreement']:.2%}  ({', '.join(f'{k} {v}' for k, v in fig['per_kind'].items())})")
        print(f"  our strictest reading (every check, completeness included, whatever the task's criteria): "
              f"{fig['strict_agree']}/{fig['verdicts_total']} = {fig['strict_agreement']:.2%}")
        for t, kind in report.disagreements():
            ours, theirs = t.verdicts[kind]
            why = t.our_reasons.get(kind, "")
            print(f"    task {t.task_id} {kind}: ours {'pass' if ours else 'fail'}, tau2 {'pass' if theirs else 'fail'}"
                  f"{' (' + t.altered + ')' if kind == 'altered' else ''}{': ' + why if why else ''}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"figures": fig, "initial_differences": report.initial_differences,
                       "tasks": [asdict(t) for t in report.tasks]}, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
