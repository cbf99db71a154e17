"""``toolscale audit SNAPSHOT|latest [--json]``: the realism figures of a snapshot, per domain.

Reads the figures stored with the snapshot (``snapshot_audit``); for a snapshot published before that table
existed, recomputes them from its tasks (slower; decision and forbidden flags are then 0, since such tasks
carry none).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from typing import Any

COLUMNS = (("tasks", "tasks", "{}"), ("identified", "identified_share", "{:.0%}"),
           ("hinged", "policy_hinged_share", "{:.0%}"), ("forbidden", "forbidden_share", "{:.0%}"),
           ("staff", "staff_only_calls", "{}"), ("ids", "requests_naming_internal_ids", "{}"),
           ("invar", "invariant_violations", "{}"), ("noop", "noop_writes", "{}"), ("empty", "empty_passes", "{}"),
           ("parrot", "parrot_passes", "{}"), ("short", "short_communicate", "{}"),
           ("in_req", "communicate_in_request", "{}"), ("underiv", "underivable_arguments", "{}"),
           ("open3", "top_opening_share", "{:.1%}"),
           ("bigrams", "distinct_bigrams", "{}"), ("personas", "distinct_personas", "{}"),
           ("greet", "greeting_clock_contradictions", "{}"), ("dbl_word", "doubled_words", "{}"),
           ("dbl_join", "doubled_joiners", "{}"), ("plural", "plural_slips", "{}"), ("lc_name", "lowercased_names", "{}"),
           ("skeletons", ("clause_skeletons", "request_clauses"), "{}/{}"), ("top_skel", "top_skeleton_share", "{:.1%}"),
           ("writes", "write_share", "{:.0%}"), ("refuse_all", "refuse_all_share", "{:.0%}"),
           ("unwritten", "unwritten_rule_decisions", "{}"))


def add_parsers(sub: Any) -> None:
    from pipeline.regenerate import default_warehouse

    p = sub.add_parser("audit", help="realism figures of a snapshot per domain (identification, policy, lazy agents)")
    p.add_argument("snapshot", help="snapshot id, or 'latest' for the latest published snapshot")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--warehouse", default=default_warehouse(),
                   help="DuckDB file (default: $TOOLSCALE_WAREHOUSE or warehouse/toolscale.duckdb)")
    p.set_defaults(func=run_audit)


def run_audit(args: argparse.Namespace) -> int:
    from warehouse.audit_models import read_audit
    from warehouse.reader import connect_readonly, resolve_snapshot

    con = connect_readonly(args.warehouse)
    try:
        sid = resolve_snapshot(con, args.snapshot)
        rows = read_audit(con, sid)
        stored = bool(rows)
        if not rows:
            rows = recompute(con, sid)
    finally:
        con.close()
    if args.json:
        print(json.dumps({"snapshot_id": sid, "stored": stored, "domains": rows}, indent=2, default=str))
        return 0
    print(f"snapshot {sid} ({'stored figures' if stored else 'recomputed from its tasks'}); "
          f"gated domains marked *")
    print(f"{'domain':<15}" + "".join(f"{h:>11}" for h, _, _ in COLUMNS))
    for r in rows:
        name = r["domain"] + (" *" if r["converted"] else "")
        print(f"{name:<15}" + "".join(f"{_cell(r, key, fmt):>11}" for _, key, fmt in COLUMNS))
    return 0


def _cell(row: dict[str, Any], key: str | tuple[str, ...], fmt: str) -> str:
    """One printed figure; '-' for a figure a snapshot's stored audit predates."""
    keys = (key,) if isinstance(key, str) else key
    return fmt.format(*(row[k] for k in keys)) if all(row.get(k) is not None for k in keys) else "-"


def recompute(con: Any, snapshot_id: str) -> list[dict[str, Any]]:
    """Audit rows computed from a snapshot's stored tasks and gold calls against today's domain specs."""
    from domains.engine import ToolCall
    from domains.registry import get_engine
    from synthesis.persona import scenario_role
    from synthesis.realism_audit import TaskFacts, aggregate, task_figures

    tasks = con.execute("SELECT task_id, domain, seed, instruction, communicate_info_json, tau2_json FROM tasks "
                        "WHERE snapshot_id = ? ORDER BY domain, task_id", [snapshot_id]).fetchall()
    calls: dict[str, list[ToolCall]] = defaultdict(list)
    for task_id, name, args in con.execute("SELECT task_id, name, arguments_json FROM gold_calls WHERE snapshot_id = ? "
                                           "ORDER BY task_id, position", [snapshot_id]).fetchall():
        calls[task_id].append(ToolCall(name, json.loads(args)))
    figures: dict[str, list[dict[str, Any]]] = defaultdict(list)
    requests: dict[str, list[str]] = defaultdict(list)
    for task_id, domain, seed, instruction, info, tau2_json in tasks:
        scenario = json.loads(tau2_json)["user_scenario"]
        request = scenario["instructions"]["reason_for_call"] or ""
        facts = TaskFacts(domain, tuple(calls[task_id]), tuple(json.loads(info)), request, instruction,
                          persona=scenario.get("persona"), role=scenario_role(scenario), seed=int(seed))
        figures[domain].append(task_figures(get_engine(domain, int(seed)), facts))
        requests[domain].append(request)
    return [aggregate(d, figures[d], requests[d]) for d in sorted(figures)]
