"""Export a published snapshot: a Hugging Face ``datasets`` data set (+ parquet, card) and tau2-bench task files.

Both exports read the warehouse through a read-only connection and accept ``"latest"`` or a snapshot id.

``export_hf`` (warehouse/hf_export.py) writes under ``out_dir``: ``dataset/`` (a ``DatasetDict`` with the train
and test splits), ``parquet/<split>/<domain>.parquet`` and ``README.md`` (the data set card).

``export_tau2`` writes ``out_dir/<domain>/tasks.json`` (tau2 ``Task`` objects, each validated against
``schemas/tau2_task.schema.json``), ``db.json`` (the seeded database, ``{table: [rows]}``) and ``policy.md``,
plus the package that runs the domain inside tau2 (``warehouse/tau2_package``, see docs/tau2.md). A domain whose
tasks run on several databases (a large run: the ``domain_databases`` table) gets a folder per database,
``<domain>``, ``<domain>_db1``, ..., each a tau2 domain of its own.

Both write atomically (``warehouse/export_folder.py``): everything is read and validated first, then written
into a temporary sibling folder that replaces ``out_dir`` as one unit. ``out_dir`` must be absent or empty,
unless ``overwrite`` is set and it holds an earlier export; a failure leaves it as it was. Each export carries a
``.toolscale-export.json`` marker (format and snapshot id) that later ``overwrite`` runs recognise.
"""

from __future__ import annotations

import json
from contextlib import closing
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from domains.registry import get_engine, get_spec
from domains.spec import DomainSpec
from warehouse.export_folder import check_export_target, staged_export
from warehouse.hf_export import export_hf
from warehouse.reader import WarehouseError, check_domains_known, connect_readonly, published_meta
from warehouse.tau2_package import write_tau2_package

__all__ = ["TAU2_SCHEMA_PATH", "TaskSchemaError", "export_hf", "export_tau2", "policy_markdown", "tau2_problems"]

TAU2_SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "tau2_task.schema.json"


class TaskSchemaError(WarehouseError):
    """A task in the snapshot is not a valid tau2 Task; nothing was exported."""


@cache
def tau2_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(TAU2_SCHEMA_PATH.read_text(encoding="utf-8")))


def tau2_problems(task: Any) -> list[str]:
    """Every way ``task`` breaks the tau2 Task schema, as ``path: message`` lines (empty when valid)."""
    errors = sorted(tau2_validator().iter_errors(task), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors]


def export_tau2(warehouse_path: str | Path, snapshot: str, out_dir: str | Path,
                overwrite: bool = False) -> dict[str, Any]:
    """Write tau2-bench files per domain: ``tasks.json``, ``db.json`` and ``policy.md``.

    Every task is validated first, so an invalid task (named in the ``TaskSchemaError``) leaves nothing written.
    """
    target = check_export_target(out_dir, overwrite=overwrite, warehouse=warehouse_path)
    out = Path(out_dir)
    with closing(connect_readonly(warehouse_path)) as con:
        sid = published_meta(con, snapshot)["snapshot_id"]
        check_domains_known(con, sid)
        domains = con.execute("SELECT domain, db_seed, spec_hash, fingerprint FROM domains WHERE snapshot_id = ? "
                              "ORDER BY domain", [sid]).fetchall()
        listed = con.execute("SELECT domain, db_index, db_seed, fingerprint FROM domain_databases WHERE snapshot_id = ? "
                             "ORDER BY domain, db_index", [sid]).fetchall()
        tasks = con.execute("SELECT task_id, domain, seed, tau2_json FROM tasks WHERE snapshot_id = ? "
                            "ORDER BY domain, task_id", [sid]).fetchall()
    spec_hashes = {d: spec_hash for d, _, spec_hash, _ in domains}
    # a snapshot from before the domain_databases table: each domain's one database, as its domains row says
    databases = listed or [(d, 0, seed, fp) for d, seed, _, fp in domains]
    used = {(d, seed) for _, d, seed, _ in tasks}
    # no empty database folder: a further database no published task runs on is not written (snapshots from before
    # the count was bounded by the shards list some)
    databases = [row for row in databases if row[1] == 0 or (row[0], row[2]) in used]
    folders = {(d, seed): d if index == 0 else f"{d}_db{index}" for d, index, seed, _ in databases}
    per_folder: dict[str, list[dict[str, Any]]] = {name: [] for name in folders.values()}
    for task_id, domain, seed, tau2_json in tasks:
        if (domain, seed) not in folders:
            known = sorted(s for d, s in folders if d == domain)
            raise WarehouseError(f"task {task_id} of snapshot {sid} uses {domain} seed {seed}, but the snapshot's "
                                 f"databases for {domain} have seeds {known}")
        task = json.loads(tau2_json)
        problems = tau2_problems(task)
        if problems:
            raise TaskSchemaError(f"task {task_id} of snapshot {sid} is not a valid tau2 Task "
                                  f"({TAU2_SCHEMA_PATH.name}):\n  " + "\n  ".join(problems[:10]))
        per_folder[folders[(domain, seed)]].append(task)
    written: dict[str, dict[str, Any]] = {}
    with staged_export(target, {"format": "tau2", "snapshot_id": sid}) as stage:
        # one folder per database, each a tau2 domain of its own: <domain>, then <domain>_db1, ... (built and
        # written one at a time: a 100,000-task snapshot has over a hundred)
        for domain, _, seed, fingerprint in databases:
            name = folders[(domain, seed)]
            rows, folder = _seeded_db(sid, domain, seed, spec_hashes[domain], fingerprint), stage / name
            folder.mkdir()
            _write_json(folder / "tasks.json", per_folder[name])
            _write_json(folder / "db.json", rows)
            (folder / "policy.md").write_text(policy_markdown(get_spec(domain)), encoding="utf-8")
            package = write_tau2_package(folder, get_spec(domain), per_folder[name], rows, name)
            written[name] = {"dir": str(out / name), "domain": domain, "db_seed": seed, "tasks": len(per_folder[name]),
                             "db_rows": sum(len(r) for r in rows.values()), **package.summary(stage, out)}
    return {"snapshot_id": sid, "rows": len(tasks), "domains": written}


def policy_markdown(spec: DomainSpec) -> str:
    """The agent policy for a domain: description, policy text, the rules of each write tool, the tool list."""
    lines = [f"# {spec.name.capitalize()} agent policy", "", spec.description.strip(), "",
             f"The current date and time is {spec.now.replace('T', ' ')}.", ""]
    if spec.policy.strip():
        lines += ["## Policy", "", spec.policy.strip(), ""]
    if spec.policy_sources:  # tau2's telecom: its policy and manual, read where the package installed them
        from domains.external import policy_text

        lines += [policy_text(spec).removeprefix(spec.policy).strip(), ""]
    lines += ["## Write operations", "",
              "Each check below runs before the operation; when one fails the operation fails with that message "
              "({placeholders} are filled from the call's arguments). The rules the agent must apply itself are "
              "not among them: the policy above lists those, and the tools will not stop you.", ""]
    for tool in (t for t in spec.tools if t.kind == "write" and t.side == "agent" and not t.setup):
        lines += [f"### {tool.name}", "", tool.description.strip(), ""]
        checked = [p for p in tool.preconditions if p.enforced_by != "policy"]
        lines += [f"- {p.error}" + (f" (rule {p.rule})" if p.rule else "") for p in checked] or ["- (no checks)"]
        lines.append("")
    lines += ["## Tools", ""]
    lines += [f"- `{t.name}` ({t.kind}): {t.description.strip()}" for t in spec.side_tools("agent")]
    if spec.dual:  # the agent cannot call these; it asks the user to, and the user tells it what they see
        lines += ["", "## The user's own tools (on their device)", ""]
        lines += [f"- `{t.name}` ({t.kind}): {t.description.strip()}" for t in spec.side_tools("user")]
    return "\n".join(lines) + "\n"


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
