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

# Four tables (what is asked, what must be 0, the facts the data keeps, how it reads), each under 120 characters
# wide: (header, figure, format, legend). A header is a plain word or two (at most 10 characters); the legend says
# what it counts and its gate.
TABLES = (
    ("Requests", (
        ("tasks", "tasks", "{}", "published tasks"),
        ("identified", "identified_share", "{:.0%}", "share whose gold first identifies the user"),
        ("by policy", "policy_hinged_share", "{:.0%}", "share whose outcome the written policy decides (gate: >= 20%)"),
        ("forbidden", "forbidden_share", "{:.0%}", "share pairing a forbidden request with an allowed one (gate: 15-30%)"),
        ("writes", "write_share", "{:.0%}", "share whose gold writes something (gate: >= 70%)"),
        ("refuse all", "refuse_all_share", "{:.0%}", "share that turns down every request (gate: <= 10%)"),
        ("personas", "distinct_personas", "{}", "distinct personas"),
        ("bigrams", "distinct_bigrams", "{}", "distinct word pairs over the requests"),
        ("patterns", ("clause_skeletons", "request_clauses"), "{}/{}",
         "distinct request-clause patterns (values blanked) / request clauses"),
    )),
    ("Problems (each gated at 0)", (
        ("do-nothing", "empty_passes", "{}", "tasks an agent that does nothing passes"),
        ("parroting", "parrot_passes", "{}", "tasks an agent that repeats the request passes"),
        ("no-op", "noop_writes", "{}", "gold writes that leave their row unchanged"),
        ("invariant", "invariant_violations", "{}", "broken invariants in seeded data or gold end states"),
        ("no source", "underivable_arguments", "{}", "tasks with a gold value nobody said, wrote or returned"),
        ("staff call", "staff_only_calls", "{}", "staff-only tool calls in customer tasks"),
        ("row ids", "requests_naming_internal_ids", "{}", "requests naming an internal row id"),
        ("unwritten", "unwritten_rule_decisions", "{}", "decisions citing no rule the written policy states"),
    )),
    ("Plausibility", (
        ("invariants", "invariants", "{}", "invariants the domain declares: facts its data and gold end states keep"),
    )),
    ("Wording", (
        ("short say", "short_communicate", "{}", "values to say of 1-2 characters (gate: 0)"),
        ("say in ask", "communicate_in_request", "{}", "values to say already in the request (gate: 0)"),
        ("greeting", "greeting_clock_contradictions", "{}", "greetings contradicting the clock (gate: 0)"),
        ("doubled", "doubled_words", "{}", "a word said twice in a row (gate: 0)"),
        ("joiners", "doubled_joiners", "{}", "sentences opening with two connectives (gate: 0)"),
        ("plurals", "plural_slips", "{}", '"1 stars" or "a abnormal" slips (gate: 0)'),
        ("lowercase", "lowercased_names", "{}", "names that appear only lower-cased (gate: 0)"),
        ("top opener", "top_opening_share", "{:.1%}", "share of the commonest 3-word opening (gate: <= 3%, allowing for sample size)"),
        ("top clause", "top_skeleton_share", "{:.1%}", "share of the commonest clause pattern (gate: <= 2%, allowing for sample size)"),
    )),
)
DOMAIN_WIDTH, CELL_WIDTH = 16, 11


def add_parsers(sub: Any) -> None:
    from warehouse.location import default_warehouse

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
    print(render(sid, stored, rows))
    return 0


def render(snapshot_id: str, stored: bool, rows: list[dict[str, Any]]) -> str:
    """The audit as four tables, each with a legend of its columns; every line fits 120 characters."""
    lines = [f"snapshot {snapshot_id} ({'stored figures' if stored else 'recomputed from its tasks'}); "
             "domains marked * are gated (their spec declares users and intents)"]
    for title, columns in TABLES:
        lines += ["", title, f"{'domain':<{DOMAIN_WIDTH}}" + "".join(f"{h:>{CELL_WIDTH}}" for h, _, _, _ in columns)]
        for r in rows:
            name = r["domain"] + (" *" if r["converted"] else "")
            lines.append(f"{name:<{DOMAIN_WIDTH}}" + "".join(f"{_cell(r, key, fmt):>{CELL_WIDTH}}"
                                                             for _, key, fmt, _ in columns))
        lines += [f"  {h:<11} {what}" for h, _, _, what in columns]
    lines += ["", "'-': a figure this snapshot's stored audit predates. --json prints every figure by its stored name."]
    return "\n".join(lines)


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

    columns = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns "
                                         "WHERE table_name = 'tasks'").fetchall()}
    contract_sql = "verification_json" if "verification_json" in columns else "NULL"  # older snapshots: none stored
    tasks = con.execute(f"SELECT task_id, domain, seed, instruction, communicate_info_json, tau2_json, {contract_sql} "
                        "FROM tasks WHERE snapshot_id = ? ORDER BY domain, task_id", [snapshot_id]).fetchall()
    call_columns = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns "
                                              "WHERE table_name = 'gold_calls'").fetchall()}
    side_sql = "side" if "side" in call_columns else "NULL"
    calls: dict[str, list[ToolCall]] = defaultdict(list)
    for task_id, name, args, side in con.execute(f"SELECT task_id, name, arguments_json, {side_sql} FROM gold_calls "
                                                 "WHERE snapshot_id = ? ORDER BY task_id, position",
                                                 [snapshot_id]).fetchall():
        calls[task_id].append(ToolCall(name, json.loads(args), side or "agent"))
    figures: dict[str, list[dict[str, Any]]] = defaultdict(list)
    requests: dict[str, list[str]] = defaultdict(list)
    for task_id, domain, seed, instruction, info, tau2_json, contract in tasks:
        scenario = json.loads(tau2_json)["user_scenario"]
        request = scenario["instructions"]["reason_for_call"] or ""
        facts = TaskFacts(domain, tuple(calls[task_id]), tuple(json.loads(info)), request, instruction,
                          persona=scenario.get("persona"), role=scenario_role(scenario), seed=int(seed),
                          contract=json.loads(contract) if contract else None)
        figures[domain].append(task_figures(get_engine(domain, int(seed)), facts))
        requests[domain].append(request)
    return [aggregate(d, figures[d], requests[d]) for d in sorted(figures)]
