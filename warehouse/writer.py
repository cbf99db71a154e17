"""The single writer of the warehouse: builds a snapshot in a copy of the file and swaps it in atomically.

Readers open the warehouse read-only and never see a partial snapshot: every change happens in
``<file>.tmp-<pid>``, which replaces the file with one ``os.replace`` once the snapshot is complete and its
quality suite has run. Symlinks are resolved once, so the real file is replaced and a symlink stays a symlink,
and the lock file (``<file>.lock``) sits beside that real file: every path to it shares one lock, and writers go
one at a time. A writer that fails removes its copy; one killed halfway leaves only a stale copy, removed by the
next writer (matched by exact name, never by a pattern built from the user's path).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from verifiers.values import typed_values
from warehouse.atomic import fsync_dir, fsync_file
from warehouse.checks import check_target, first_line, lock_path
from warehouse.errors import WarehouseError
from warehouse.schema import ensure_schema

__all__ = ["PublishResult", "SnapshotBundle", "WarehouseError", "atomic_edit", "check_target", "publish",
           "remove_stale_copies"]
STALE_SUFFIX = re.compile(r"[0-9]+(\.wal)?")  # what follows "<file>.tmp-" in a copy this writer made


@dataclass
class SnapshotBundle:
    """Everything one snapshot writes, already deduplicated and in canonical order."""

    snapshot_id: str
    code_version: str
    config_hash: str
    config: dict[str, Any]
    requested: dict[str, int]
    records: list[dict[str, Any]]
    domains: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)
    seconds: float | None = None
    # completes a batch of ``records`` for the write, where the caller holds only some fields of each (a
    # regeneration: pipeline.regenerate.full_records); None: the records are whole
    expand: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None
    # every database the tasks run on (``domain_databases`` table); empty: each domain's one, ``domains.db_seed``
    databases: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class PublishResult:
    snapshot_id: str
    status: str
    quality: dict[str, Any]
    already_existed: bool = False


@contextmanager
def writer_lock(target: Path) -> Iterator[None]:
    """Hold the exclusive lock of the resolved warehouse file ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = lock_path(target)
    # no O_TRUNC, no following a planted symlink, and a FIFO put there cannot block the open
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WarehouseError(f"the lock file {lock} is not a regular file; remove it")
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def remove_stale_copies(target: Path) -> list[Path]:
    """Delete the copies (``<file>.tmp-<pid>``, and their ``.wal``) that killed writers of ``target`` left.

    Names are compared exactly: ``target``'s name may hold ``*``, ``?`` or ``[``, and no other file may go."""
    prefix = target.name + ".tmp-"
    removed = []
    with os.scandir(target.parent) as entries:
        for entry in entries:
            if (entry.name.startswith(prefix) and STALE_SUFFIX.fullmatch(entry.name[len(prefix):])
                    and entry.is_file(follow_symlinks=False)):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def existing_status(path: Path, snapshot_id: str) -> str | None:
    if not path.exists():
        return None
    con = duckdb.connect(str(path), read_only=True)
    try:
        if not con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = 'snapshots'").fetchone():
            return None
        row = con.execute("SELECT status FROM snapshots WHERE snapshot_id = ?", [snapshot_id]).fetchone()
        return row[0] if row else None
    finally:
        con.close()


def publish(path: str | Path, bundle: SnapshotBundle, quality_check: Any) -> PublishResult:
    """Write ``bundle`` as a new snapshot; ``quality_check(con, snapshot_id, requested) -> dict`` decides
    published vs failed. Idempotent: a snapshot id that is already published is left as it is."""
    target = check_target(path)
    try:
        with writer_lock(target):
            check_target(path)  # again under the lock: another writer may have replaced the file meanwhile
            if existing_status(target, bundle.snapshot_id) == "published":
                return PublishResult(bundle.snapshot_id, "published", {}, already_existed=True)
            remove_stale_copies(target)
            return _publish_locked(target, bundle, quality_check)
    except (OSError, duckdb.Error) as exc:
        raise WarehouseError(f"could not publish snapshot {bundle.snapshot_id} to {os.fspath(path)}: "
                             f"{first_line(exc)}; the warehouse is unchanged") from exc


@contextmanager
def _working_copy(target: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to ``<file>.tmp-<pid>``, a copy of ``target`` (mode kept, schema ensured), which replaces
    ``target`` atomically when the block completes and is removed when it fails. The caller holds the lock."""
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    try:
        if target.exists():
            shutil.copyfile(target, tmp)
            shutil.copymode(target, tmp)
        ensure_schema(tmp)
        con = duckdb.connect(str(tmp))
        try:
            yield con
            con.execute("CHECKPOINT")
        finally:
            con.close()
        fsync_file(tmp)
        os.replace(tmp, target)
    except BaseException:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            leftover.unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


@contextmanager
def atomic_edit(path: str | Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """One transaction by the single writer, for everything that is not a snapshot (LLM calls, pricing,
    preference pairs, evaluation and training records): the same preflight, lock, stale-copy cleanup and
    atomic swap as ``publish``. A block that raises leaves the warehouse as it was."""
    target = check_target(path)
    with writer_lock(target):
        check_target(path)  # again under the lock: another writer may have replaced the file meanwhile
        remove_stale_copies(target)
        with _working_copy(target) as con:
            con.execute("BEGIN")
            yield con
            con.execute("COMMIT")


def _publish_locked(target: Path, bundle: SnapshotBundle, quality_check: Any) -> PublishResult:
    with _working_copy(target) as con:
        parent = _latest_published(con)
        _write_rows(con, bundle, parent)
        quality = quality_check(con, bundle.snapshot_id, bundle.requested)
        status = "published" if quality["success"] else "failed"
        con.execute("UPDATE snapshots SET status = ?, quality_json = ? WHERE snapshot_id = ?",
                    [status, json.dumps(quality, default=str), bundle.snapshot_id])
    return PublishResult(bundle.snapshot_id, status, quality)


def _latest_published(con: duckdb.DuckDBPyConnection) -> str | None:
    row = con.execute("SELECT snapshot_id FROM snapshots WHERE status = 'published' "
                      "ORDER BY created_at DESC, snapshot_id DESC LIMIT 1").fetchone()
    return row[0] if row else None


def _write_rows(con: duckdb.DuckDBPyConnection, bundle: SnapshotBundle, parent: str | None) -> None:
    sid = bundle.snapshot_id
    accepted = sum(bool(r["accepted"]) for r in bundle.records)
    con.execute("BEGIN")
    for table in ("task_rules", "gold_calls", "verdicts", "tasks", "rejections", "tools", "domain_databases",
                  "domains", "snapshots"):
        con.execute(f"DELETE FROM {table} WHERE snapshot_id = ?", [sid])  # a failed earlier attempt
    s = bundle.summary
    con.execute(
        "INSERT INTO snapshots (snapshot_id, parent_id, created_at, code_version, config_hash, config_json, status,"
        " tasks, candidates, rejected, gold_errors, noop_passes, median_kill_rate, evolved_fraction, yield_rate,"
        " seconds, summary_json) VALUES (?, ?, ?, ?, ?, ?, 'building', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [sid, parent, datetime.now(timezone.utc).replace(tzinfo=None), bundle.code_version, bundle.config_hash,
         json.dumps(bundle.config, sort_keys=True), accepted, len(bundle.records), len(bundle.records) - accepted,
         s.get("gold_errors", 0), s.get("noop_passes", 0), s.get("median_kill_rate"), s.get("evolved_fraction"),
         s.get("yield"), bundle.seconds, json.dumps(s, sort_keys=True, default=str)])
    _insert(con, "domains", [{"snapshot_id": sid, **d} for d in bundle.domains])
    _insert(con, "domain_databases", [{"snapshot_id": sid, **d} for d in bundle.databases])
    _insert(con, "tools", [{"snapshot_id": sid, **t} for t in bundle.tools])
    # in batches: the rows (and whole records) of one batch exist at a time, not the snapshot's; each table's
    # rows go in in the records' order. Each batch is committed: the copy is this writer's alone until it replaces
    # the file, so no reader sees a partial snapshot either way, and DuckDB need not hold every uncommitted row
    # of a 100,000-task snapshot in memory until one final commit.
    for batch in _chunks(bundle.records):
        batch = bundle.expand(batch) if bundle.expand is not None else batch
        _insert_batch(con, sid, [r for r in batch if r["accepted"]], [r for r in batch if not r["accepted"]])
        con.execute("COMMIT")
        con.execute("BEGIN")
    con.execute("COMMIT")


def _insert_batch(con: duckdb.DuckDBPyConnection, sid: str, accepted: list[dict[str, Any]],
                  rejected: list[dict[str, Any]]) -> None:
    """One batch's task, gold-call, rule and verdict rows (from its accepted records) and rejection rows."""
    if accepted:
        chunk = accepted
        _insert(con, "tasks", [_task_row(sid, r) for r in chunk])
        _insert(con, "gold_calls", [{
            "snapshot_id": sid, "task_id": r["task_id"], "position": i, "name": c["name"],
            "arguments_json": json.dumps(c["arguments"], ensure_ascii=False, sort_keys=True, default=str),
            "side": c.get("side")} for r in chunk for i, c in enumerate(r["gold_calls"])])
        _insert(con, "task_rules", task_rule_rows(sid, chunk))
        _insert(con, "verdicts", [{
            "snapshot_id": sid, "task_id": r["task_id"], "gold_valid": r["gold_valid"],
            "gold_reason": r["gold_reason"], "noop_fails": r["noop_fails"], "noop_reason": r["noop_reason"],
            "mutants": r["mutants"], "mutants_killed": r["mutants_killed"], "kill_rate": r["kill_rate"],
            "survivors_json": json.dumps(r["survivors"], ensure_ascii=False)} for r in chunk])
    if rejected:
        _insert(con, "rejections", [{
            "snapshot_id": sid, "candidate_id": r["candidate_id"], "domain": r["domain"], "shard_id": r["shard_id"],
            "content_hash": r["content_hash"], "reason": r["reason"], "detail": r["reason_detail"],
            "kinds": "+".join(r["kinds"]), "operator": r["operator"], "depth": r["depth"],
            "instruction": r["instruction"], "gold_json": json.dumps(r["gold_calls"], ensure_ascii=False, default=str),
            "kill_rate": r["kill_rate"]} for r in rejected])


INSERT_BATCH = 5000  # records per insert: bounds the rows held at once, few enough statements to stay fast


def _chunks(records: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(records), INSERT_BATCH):
        yield records[start: start + INSERT_BATCH]


def _task_row(sid: str, r: dict[str, Any]) -> dict[str, Any]:
    return {
        "snapshot_id": sid, "task_id": r["task_id"], "content_hash": r["content_hash"], "domain": r["domain"],
        "seed": r["seed"], "shard_id": r["shard_id"], "kinds": "+".join(r["kinds"]), "instruction": r["instruction"],
        "communicate_info_json": json.dumps(r["communicate_info"], ensure_ascii=False),
        "evolved_from": r["evolved_from"], "operator": r["operator"], "depth": r["depth"], "calls": r["calls"],
        "distinct_tools": r["distinct_tools"], "write_calls": r["write_calls"],
        "tau2_json": json.dumps(r["tau2"], ensure_ascii=False, default=str),
        "source": r.get("source", "synthesised"),
        "verification_json": json.dumps(r["verification"], ensure_ascii=False, default=str)
        if r.get("verification") else None,
        "argument_sources_json": json.dumps(r["argument_sources"], ensure_ascii=False, default=str)
        if r.get("argument_sources") else None,
        "communicate_values_json": json.dumps(typed_values(r["communicate_info"],
                                                           (r.get("argument_sources") or {}).get("communicate_info")),
                                              ensure_ascii=False)}


def task_rule_rows(snapshot_id: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``rule=<id>`` notes of each record, with whether the tools or the agent check that rule."""
    from domains.registry import get_spec  # local: only snapshots with realistic tasks carry rule notes

    rows = []
    for r in records:
        ids = [n[5:] for n in r.get("notes") or () if n.startswith("rule=")]
        try:
            spec = get_spec(r["domain"]) if ids else None
        except KeyError:  # a domain outside the registry (a test's own spec folder): the id alone
            spec = None
        for k, rule_id in enumerate(ids):
            rule = spec.rule(rule_id) if spec is not None else None
            rows.append({"snapshot_id": snapshot_id, "task_id": r["task_id"], "position": k, "rule_id": rule_id,
                         "checked_by": rule.checked_by if rule else None})
    return rows


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]]) -> None:
    """Bulk insert through a DataFrame (DuckDB's own scan, far faster than row inserts)."""
    if not rows:
        return
    frame = pd.DataFrame(rows)
    con.register("_incoming", frame)
    try:
        cols = ", ".join(frame.columns)
        con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _incoming")
    finally:
        con.unregister("_incoming")
