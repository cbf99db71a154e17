"""Export a published snapshot: a Hugging Face ``datasets`` data set (+ parquet, card) and tau2-bench task files.

Both exports read the warehouse through a read-only connection and accept ``"latest"`` or a snapshot id.

``export_hf`` writes under ``out_dir``: ``dataset/`` (``Dataset.save_to_disk``), ``parquet/<domain>.parquet``
(one file per domain, so a single domain loads on its own) and ``README.md`` (the data set card).

``export_tau2`` writes ``out_dir/<domain>/tasks.json`` (tau2 ``Task`` objects, each validated against
``schemas/tau2_task.schema.json``), ``db.json`` (the seeded database, ``{table: [rows]}``) and ``policy.md``,
plus the package that runs the domain inside tau2 (``warehouse/tau2_package``, see docs/tau2.md).

Both write atomically (``warehouse/export_folder.py``): everything is read and validated first, then written
into a temporary sibling folder that replaces ``out_dir`` as one unit. ``out_dir`` must be absent or empty,
unless ``overwrite`` is set and it holds an earlier export; a failure leaves it as it was. Each export carries a
``.toolscale-export.json`` marker (format and snapshot id) that later ``overwrite`` runs recognise.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from contextlib import closing
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import jsonschema
from datasets import Dataset, Features, Value, concatenate_datasets

from domains.registry import get_engine, get_spec
from domains.spec import DomainSpec
from warehouse.export_folder import check_export_target, staged_export
from warehouse.reader import WarehouseError, connect_readonly, resolve_snapshot
from warehouse.tau2_package import write_tau2_package

TAU2_SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "tau2_task.schema.json"
HF_FEATURES = Features({
    "task_id": Value("string"), "domain": Value("string"), "seed": Value("int64"), "kinds": [Value("string")],
    "instruction": Value("string"), "user_scenario": Value("string"),
    "gold_calls": [{"name": Value("string"), "arguments_json": Value("string")}],
    "communicate_info": [Value("string")], "evolved_from": Value("string"), "operator": Value("string"),
    "depth": Value("int64"), "calls": Value("int64"), "distinct_tools": Value("int64"),
    "write_calls": Value("int64"), "kill_rate": Value("float64"), "tau2_json": Value("string"),
    "verification_json": Value("string"), "argument_sources_json": Value("string"),
})


class TaskSchemaError(WarehouseError):
    """A task in the snapshot is not a valid tau2 Task; nothing was exported."""


@cache
def tau2_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(TAU2_SCHEMA_PATH.read_text(encoding="utf-8")))


def tau2_problems(task: Any) -> list[str]:
    """Every way ``task`` breaks the tau2 Task schema, as ``path: message`` lines (empty when valid)."""
    errors = sorted(tau2_validator().iter_errors(task), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors]


def export_hf(warehouse_path: str | Path, snapshot: str, out_dir: str | Path,
              overwrite: bool = False) -> dict[str, Any]:
    """Write the snapshot's tasks as a ``datasets`` Dataset, per-domain parquet files and a data set card."""
    target = check_export_target(out_dir, overwrite=overwrite, warehouse=warehouse_path)
    out = Path(out_dir)
    with closing(connect_readonly(warehouse_path)) as con:
        meta = _snapshot_meta(con, snapshot)
        rows = _task_rows(con, meta["snapshot_id"])
        rejections = dict(con.execute(
            "SELECT reason, COUNT(*) FROM rejections WHERE snapshot_id = ? GROUP BY reason ORDER BY 2 DESC, 1",
            [meta["snapshot_id"]]).fetchall())
    by_domain: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_domain.setdefault(row["domain"], []).append(row)
    parts = {domain: Dataset.from_list(domain_rows, features=HF_FEATURES)
             for domain, domain_rows in sorted(by_domain.items())}
    dataset = concatenate_datasets(list(parts.values())) if parts else Dataset.from_list([], features=HF_FEATURES)
    card_text = _card(meta, rows, rejections)
    with staged_export(target, {"format": "hf", "snapshot_id": meta["snapshot_id"]}) as stage:
        (stage / "parquet").mkdir()
        for domain, part in parts.items():
            part.to_parquet(str(stage / "parquet" / f"{domain}.parquet"))
        dataset.save_to_disk(str(stage / "dataset"))
        (stage / "README.md").write_text(card_text, encoding="utf-8")
    parquet = {domain: out / "parquet" / f"{domain}.parquet" for domain in parts}
    card = out / "README.md"
    return {"snapshot_id": meta["snapshot_id"], "rows": len(rows),
            "per_domain": {d: len(r) for d, r in sorted(by_domain.items())},
            "dataset_dir": str(out / "dataset"), "parquet": {d: str(p) for d, p in parquet.items()},
            "card": str(card)}


def export_tau2(warehouse_path: str | Path, snapshot: str, out_dir: str | Path,
                overwrite: bool = False) -> dict[str, Any]:
    """Write tau2-bench files per domain: ``tasks.json``, ``db.json`` and ``policy.md``.

    Every task is validated first, so an invalid task (named in the ``TaskSchemaError``) leaves nothing written.
    """
    target = check_export_target(out_dir, overwrite=overwrite, warehouse=warehouse_path)
    out = Path(out_dir)
    with closing(connect_readonly(warehouse_path)) as con:
        sid = _snapshot_meta(con, snapshot)["snapshot_id"]
        domains = con.execute("SELECT domain, db_seed, spec_hash, fingerprint FROM domains WHERE snapshot_id = ? "
                              "ORDER BY domain", [sid]).fetchall()
        tasks = con.execute("SELECT task_id, domain, seed, tau2_json FROM tasks WHERE snapshot_id = ? "
                            "ORDER BY domain, task_id", [sid]).fetchall()
    seeds = {d: seed for d, seed, _, _ in domains}
    per_domain: dict[str, list[dict[str, Any]]] = {d: [] for d in seeds}
    for task_id, domain, seed, tau2_json in tasks:
        if seeds.get(domain) != seed:
            raise WarehouseError(f"task {task_id} of snapshot {sid} uses {domain} seed {seed}, but the snapshot's "
                                 f"database for {domain} has seed {seeds.get(domain)}")
        task = json.loads(tau2_json)
        problems = tau2_problems(task)
        if problems:
            raise TaskSchemaError(f"task {task_id} of snapshot {sid} is not a valid tau2 Task "
                                  f"({TAU2_SCHEMA_PATH.name}):\n  " + "\n  ".join(problems[:10]))
        per_domain[domain].append(task)
    databases = {d: _seeded_db(sid, d, seed, spec_hash, fp) for d, seed, spec_hash, fp in domains}
    written: dict[str, dict[str, Any]] = {}
    with staged_export(target, {"format": "tau2", "snapshot_id": sid}) as stage:
        for domain, domain_tasks in per_domain.items():
            folder = stage / domain
            folder.mkdir()
            _write_json(folder / "tasks.json", domain_tasks)
            _write_json(folder / "db.json", databases[domain])
            (folder / "policy.md").write_text(policy_markdown(get_spec(domain)), encoding="utf-8")
            package = write_tau2_package(folder, get_spec(domain), domain_tasks, databases[domain])
            written[domain] = {"dir": str(out / domain), "tasks": len(domain_tasks),
                               "db_rows": sum(len(r) for r in databases[domain].values()),
                               **package.summary(stage, out)}
    return {"snapshot_id": sid, "rows": len(tasks), "domains": written}


def policy_markdown(spec: DomainSpec) -> str:
    """The agent policy for a domain: description, policy text, the rules of each write tool, the tool list."""
    lines = [f"# {spec.name.capitalize()} agent policy", "", spec.description.strip(), "",
             f"The current date and time is {spec.now.replace('T', ' ')}.", ""]
    if spec.policy.strip():
        lines += ["## Policy", "", spec.policy.strip(), ""]
    lines += ["## Write operations", "",
              "Each check below runs before the operation; when one fails the operation fails with that message "
              "({placeholders} are filled from the call's arguments). The rules the agent must apply itself are "
              "not among them: the policy above lists those, and the tools will not stop you.", ""]
    for tool in (t for t in spec.tools if t.kind == "write"):
        lines += [f"### {tool.name}", "", tool.description.strip(), ""]
        checked = [p for p in tool.preconditions if p.enforced_by != "policy"]
        lines += [f"- {p.error}" + (f" (rule {p.rule})" if p.rule else "") for p in checked] or ["- (no checks)"]
        lines.append("")
    lines += ["## Tools", ""]
    lines += [f"- `{t.name}` ({t.kind}): {t.description.strip()}" for t in spec.tools]
    return "\n".join(lines) + "\n"


def _snapshot_meta(con: duckdb.DuckDBPyConnection, snapshot: str) -> dict[str, Any]:
    sid = resolve_snapshot(con, snapshot)
    cur = con.execute("SELECT * FROM snapshots WHERE snapshot_id = ?", [sid])
    meta = dict(zip([d[0] for d in cur.description], cur.fetchone() or ()))
    if meta["status"] != "published":
        raise WarehouseError(f"snapshot {sid} is {meta['status']}, not published; only published snapshots export")
    return meta


def _task_rows(con: duckdb.DuckDBPyConnection, sid: str) -> list[dict[str, Any]]:
    calls: dict[str, list[dict[str, str]]] = {}
    for task_id, name, arguments_json in con.execute(
            "SELECT task_id, name, arguments_json FROM gold_calls WHERE snapshot_id = ? ORDER BY task_id, position",
            [sid]).fetchall():
        calls.setdefault(task_id, []).append({"name": name, "arguments_json": arguments_json})
    # a warehouse written before argument sources were stored exports them as null
    stored = {r[0] for r in con.execute("DESCRIBE tasks").fetchall()}
    sources = "t.argument_sources_json" if "argument_sources_json" in stored else "NULL AS argument_sources_json"
    cur = con.execute(
        "SELECT t.task_id, t.domain, t.seed, t.kinds, t.instruction, t.communicate_info_json, t.evolved_from,"
        " t.operator, t.depth, t.calls, t.distinct_tools, t.write_calls, v.kill_rate, t.tau2_json, t.verification_json,"
        f" {sources} FROM tasks t LEFT JOIN verdicts v USING (snapshot_id, task_id)"
        " WHERE t.snapshot_id = ? ORDER BY t.domain, t.task_id", [sid])
    names = [d[0] for d in cur.description]
    rows = []
    for values in cur.fetchall():
        r = dict(zip(names, values))
        tau2 = json.loads(r["tau2_json"])
        r["kinds"] = r["kinds"].split("+") if r["kinds"] else []
        r["communicate_info"] = json.loads(r.pop("communicate_info_json"))
        r["user_scenario"] = json.dumps(tau2.get("user_scenario"), ensure_ascii=False)
        r["gold_calls"] = calls.get(r["task_id"], [])
        rows.append({k: r[k] for k in HF_FEATURES})
    return rows


def _seeded_db(sid: str, domain: str, seed: int, spec_hash: str, fingerprint: str) -> dict[str, list[dict[str, Any]]]:
    """The domain's seeded database, refused if this code no longer builds the snapshot's exact state."""
    spec = get_spec(domain)
    if spec.spec_hash != spec_hash:
        raise WarehouseError(f"the {domain} spec changed since snapshot {sid} was built (spec hash {spec_hash} "
                             f"then, {spec.spec_hash} now); export it with the code version that built it")
    with get_engine(domain, seed).fresh() as db:
        if db.fingerprint() != fingerprint:
            raise WarehouseError(f"the seeded {domain} database (seed {seed}) differs from the one snapshot {sid} "
                                 "was verified against; export it with the code version that built it")
        return {t.name: db.table_rows(t.name) for t in spec.tables}


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n", encoding="utf-8")


def _card(meta: dict[str, Any], rows: list[dict[str, Any]], rejections: dict[str, int]) -> str:
    sid, n = meta["snapshot_id"], len(rows)
    per_domain = Counter(r["domain"] for r in rows)
    evolved = sum(r["evolved_from"] is not None for r in rows)
    kills = [r["kill_rate"] for r in rows if r["kill_rate"] is not None]
    median_kill = _median(kills)
    config = json.loads(meta["config_json"] or "{}")
    size = next(label for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                                           (float("inf"), "100K<n<1M")) if n < limit)
    front = ["---", f"pretty_name: ToolScale ({sid})", "tags: [tool-use, agents, tau2-bench, function-calling]",
             "task_categories: [text-generation]", f"size_categories: [{size}]", "configs:",
             "- config_name: default", "  data_files:", "  - split: train", "    path: parquet/*.parquet"]
    for domain in sorted(per_domain):
        front += [f"- config_name: {domain}", "  data_files:", "  - split: train",
                  f"    path: parquet/{domain}.parquet"]
    body = [
        "---", "", f"# ToolScale snapshot `{sid}`", "",
        "Verifiable multi-turn tool-use tasks: each comes with gold tool calls that replay without error on the "
        "seeded domain database, fail when mutated, and are not passed by an agent that does nothing.", "",
        "## Counts", "", "| | |", "|---|---|", f"| tasks | {n} |", f"| candidates | {meta['candidates']} |",
        f"| evolved fraction | {evolved / n if n else 0:.4f} ({evolved} evolved) |",
        f"| median kill rate | {median_kill} |", "",
        "| domain | tasks | evolved | median kill rate |", "|---|---|---|---|",
        *[_domain_line(d, [r for r in rows if r["domain"] == d]) for d in sorted(per_domain)], "",
        "Rejected candidates by reason:", "",
        *([f"- {reason}: {count}" for reason, count in rejections.items()] or ["- none"]), "",
        "## Generation", "", f"- snapshot id: `{sid}`", f"- parent snapshot: `{meta['parent_id'] or 'none'}`",
        f"- created at: {meta['created_at']}", f"- code version: `{meta['code_version']}`",
        f"- config hash: `{meta['config_hash']}`", "", "```json", json.dumps(config, indent=2, sort_keys=True), "```",
        "", "## Files and columns", "",
        "`dataset/` is `datasets.load_from_disk`-able; `parquet/<domain>.parquet` holds the same rows per domain. "
        "`user_scenario` and `tau2_json` are JSON strings (the latter a tau2-bench Task); `gold_calls` is the "
        "ordered list of `{name, arguments_json}`; `kill_rate` is the share of gold-call mutants the verifier "
        "rejects; `argument_sources_json` says where each gold argument and each `communicate_info` value came "
        "from (`user`, `policy`, `schema`, `call[i].<field>`, or a named rule over them).", "",
    ]
    return "\n".join(front + body)


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.4f}" if values else "n/a"


def _domain_line(domain: str, rows: list[dict[str, Any]]) -> str:
    evolved = sum(r["evolved_from"] is not None for r in rows)
    kills = [r["kill_rate"] for r in rows if r["kill_rate"] is not None]
    return f"| {domain} | {len(rows)} | {evolved} | {_median(kills)} |"
