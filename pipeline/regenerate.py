"""Regenerate a ToolScale snapshot: plan shards, run them (resumably), dedup, gate, publish.

Plain Python, below the CLI; ``flows/regenerate.py`` wires the same steps into Prefect. Shard results are files under
``<work_dir>/<config_hash>/``: a rerun after a crash loads finished shards instead of recomputing them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from domains.registry import (DOMAIN_NAMES, DOMAINS_DIR, available_domains, default_task_count, domain_order,
                              get_engine, get_spec, spec_path, unknown_domain)
from synthesis.dedup import Dedup, dedup, forget_embeddings, minilm
from pipeline.balance import trim_forbidden
from pipeline.lifecycle import exit_when_orphaned
from pipeline.stage_cost import add_shard_cpu, cpu_price, stage_rows
from synthesis.generate import ShardConfig, generate_shard
from toolscale.version import code_version
from warehouse.audit_models import audit_rows, write_audit
from warehouse.cost_models import write_stage_costs
from warehouse.quality import run_quality_suite
from warehouse.location import default_warehouse
from warehouse.writer import PublishResult, SnapshotBundle, check_target, publish

TASKS_PER_BASE = 1.75  # accepted tasks per base candidate (measured); only sizes the first plan
# ... per domain where the default run (seed 0, ToolScale's counts) measured less: published tasks per base
# candidate over all their shards (7 December 2026, after the world's invariants and the order-free check: weather
# 398 from 15 shards of 24, 1.105), rounded down to below what the last shard short of the count gave, so that
# the first plan of the default is the shards a top-up used to end with: the same tasks, in one round. The others
# publish 1.85-2.14 and keep 1.75; finance keeps 1.52, which plans more shards than it needs.
DOMAIN_TASKS_PER_BASE = {"finance": 1.52, "sport": 1.45, "medicine": 1.70, "education": 1.37, "restaurant": 1.34,
                         "travel": 1.65, "weather": 1.10}
# ... and per domain spread over several databases (about TASKS_PER_DATABASE tasks on each, where near duplicates
# are rarer in some domains and commoner in others than at the default's few hundred): published tasks per base
# candidate over all shards of the 100,000-task run (c641b06), rounded down. It planned these domains with the
# figures above, and published 104,406 tasks for 100,000 (railway 11,910), after top-ups for four others.
DOMAIN_TASKS_PER_BASE_SPREAD = {"ecommerce": 1.94, "education": 1.37, "entertainment": 1.91, "finance": 1.51,
                                "medicine": 1.57, "railway": 2.07, "restaurant": 1.71, "sport": 1.40,
                                "travel": 1.65, "weather": 1.25}
MAX_TOP_UPS = 6
# One database per this many requested tasks of a domain: a domain's fixed-size database holds only so many distinct
# pieces of work (at 10,000 restaurant tasks on one database, 2,004 distinct golds, one of them asked 94 times), and
# tasks with the same gold are what dedup must embed and compare. The default run (at most 622 per domain) keeps one.
TASKS_PER_DATABASE = 1_000
DATABASE_SEED_STRIDE = 1_000_000  # database k of a run with seed s is seeded s + k * stride (k = 0: s itself) ...
SEEDS = 2**31  # ... modulo this: the warehouse keeps seeds as 32-bit integers (the CLI takes 0 to 2**31 - 1)
LATEST_SHARE = 4  # a top-up is sized by the yield of the latest quarter of its domain's shards
Progress = Callable[[str], None]


@dataclass
class RegenerateConfig:
    domains: list[str] = field(default_factory=lambda: list(DOMAIN_NAMES))
    tasks_per_domain: int | None = None  # None: ToolScale's Table 5 count per domain
    seed: int = 0
    evolution_rounds: int = 2
    kill_threshold: float = 0.9
    near_dup_threshold: float = 0.9
    base_per_shard: int = 24
    warehouse: str = field(default_factory=default_warehouse)
    work_dir: str = "work"
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)  # processes for shards (local runs)
    imported_limit: int | None = None  # only the first N imported tasks of each importing domain (None: all)
    tasks_per_database: int = TASKS_PER_DATABASE  # a domain asked for more tasks gets another database per this many

    def requested(self) -> dict[str, int]:
        known = available_domains()
        unknown = [d for d in self.domains if d not in known]
        if unknown:
            raise ValueError(unknown_domain(unknown[0]))
        return {d: self.tasks_per_domain if self.tasks_per_domain is not None else default_task_count(d)
                for d in self.domains}

    def identity(self) -> dict[str, Any]:
        """What decides the data (not where it is written)."""
        ident = asdict(self)
        for key in ("warehouse", "work_dir", "workers"):
            ident.pop(key)
        if self.imported_limit is None:  # the default leaves every earlier configuration's hash as it was
            ident.pop("imported_limit")
        if all(self.databases(d) == 1 for d in self.domains):  # one database per domain: as before it was a choice
            ident.pop("tasks_per_database")
        ident["domains"] = sorted(self.domains)
        ident["code_version"] = code_version()
        # a user's own domain is not covered by the code version: its spec's hash decides its data instead
        own = {d: get_spec(d).spec_hash for d in sorted(self.domains) if DOMAINS_DIR not in spec_path(d).parents}
        if own:
            ident["user_specs"] = own
        # an imported domain's data lives outside the code: its files' digests decide its data too
        outside = {d: external_digest(get_spec(d)) for d in sorted(self.domains) if get_spec(d).sources}
        if outside:
            ident["external_data"] = outside
        return ident

    def config_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.identity(), sort_keys=True).encode()).hexdigest()[:16]

    def shard_dir(self) -> Path:
        return Path(self.work_dir) / self.config_hash() / "shards"

    def __post_init__(self) -> None:
        if not isinstance(self.tasks_per_database, int) or self.tasks_per_database < 1:
            raise ValueError(f"tasks_per_database must be a positive whole number, not {self.tasks_per_database!r}")

    def databases(self, domain: str) -> int:
        """How many databases the domain's tasks are spread over: 1 unless asked for more than tasks_per_database,
        and 1 for a domain whose records come from outside (tau2's retail, airline, telecom: the seed changes
        nothing there, so a second database would hold the same records). Never more than the shards the domain's
        first plan runs (``planned_shards``): shard i runs on database i mod k, so a database past the shard count
        would hold no task (``--tasks-per-database 1`` with 40 tasks asked for 40 databases, and 2 got tasks)."""
        if get_spec(domain).sources:
            return 1
        wanted = max(1, math.ceil(self.requested()[domain] / self.tasks_per_database))
        return min(wanted, self.planned_shards(domain, spread=wanted > 1))

    def planned_shards(self, domain: str, spread: bool | None = None) -> int:
        """How many shards the domain's first plan runs: its tasks over what a shard yields, as measured on one
        database or (``spread``: on several) on many."""
        if spread is None:
            spread = self.databases(domain) > 1
        measured = DOMAIN_TASKS_PER_BASE_SPREAD if spread else DOMAIN_TASKS_PER_BASE
        per_base = measured.get(domain, DOMAIN_TASKS_PER_BASE.get(domain, TASKS_PER_BASE))
        return max(1, math.ceil(self.requested()[domain] / (self.base_per_shard * per_base)))

    def database_seed(self, index: int) -> int:
        return (self.seed + index * DATABASE_SEED_STRIDE) % SEEDS

    def shard(self, domain: str, index: int) -> ShardConfig:
        """Shard ``index`` of a domain, on database ``index`` mod the domain's count (top-ups keep the spread)."""
        seed = self.database_seed(index % self.databases(domain))
        return ShardConfig(domain, seed, index, self.base_per_shard, self.evolution_rounds,
                           kill_threshold=self.kill_threshold)


def external_digest(spec: Any) -> dict[str, str]:
    """sha256 (16 hex digits) of each external file a spec reads; 'missing' for one that cannot be found."""
    from domains import external

    out = {}
    for name, source in sorted(spec.sources.items()):
        try:
            path = external.resolve(source)
        except external.ExternalDataMissing:
            out[name] = "missing"
            continue
        stat = path.stat()
        out[name] = _file_digest(path, stat.st_mtime_ns, stat.st_size)
    return out


@functools.cache
def _file_digest(path: Path, mtime_ns: int, size: int) -> str:
    # keyed by mtime and size: the config hash is computed often, the file is read once
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def published_snapshot(cfg: RegenerateConfig) -> str | None:
    """The id of a snapshot of exactly this configuration (same config hash, so same code and data) that the
    warehouse already holds as published, or None. Cheap: lets a rerun stop before any shard work."""
    import duckdb

    from warehouse.reader import WarehouseError

    path = Path(cfg.warehouse)
    if not path.exists():
        return None
    if not path.is_file():  # a folder or a FIFO (opening a FIFO would block forever)
        raise WarehouseError(f"warehouse {path} is not a regular file")
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise WarehouseError(f"warehouse {path} cannot be opened as DuckDB: {str(exc).splitlines()[0]}") from None
    try:
        if not con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = 'snapshots'").fetchone():
            return None
        row = con.execute("SELECT snapshot_id FROM snapshots WHERE config_hash = ? AND status = 'published' "
                          "ORDER BY created_at DESC LIMIT 1", [cfg.config_hash()]).fetchone()
        return str(row[0]) if row else None
    except duckdb.Error as exc:
        raise WarehouseError(f"warehouse {path} cannot be read: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()


def initial_plan(cfg: RegenerateConfig) -> list[ShardConfig]:
    plan = []
    for domain in cfg.requested():
        plan += [cfg.shard(domain, i) for i in range(cfg.planned_shards(domain))]
        if get_spec(domain).imported_tasks is not None:  # its imported tasks come on top of the requested count
            plan.append(replace(cfg.shard(domain, 0), imported=True, imported_limit=cfg.imported_limit))
    return plan


def shard_file(cfg: RegenerateConfig, shard: ShardConfig) -> Path:
    return cfg.shard_dir() / f"{shard.shard_id}.json"


def run_shard(cfg: RegenerateConfig, shard: ShardConfig) -> dict[str, Any]:
    """Generate one shard, or load it if a previous run finished it. Written atomically (tmp + rename)."""
    path = shard_file(cfg, shard)
    if path.exists():
        summary = json.loads(path.read_text())
        return {**_shard_summary(summary), "resumed": True}
    result = generate_shard(shard)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps(result, ensure_ascii=False, default=str))
    os.replace(tmp, path)
    return {**_shard_summary(result), "resumed": False}


def _shard_summary(result: dict[str, Any]) -> dict[str, Any]:
    recs = result["records"]
    return {"shard_id": result["shard_id"], "candidates": len(recs),
            "accepted": sum(r["accepted"] for r in recs), "seconds": result["seconds"],
            "cpu_s": result.get("cpu_s") or {},  # a shard file written before CPU was kept: none
            # the database's fingerprint, so the run need not build every engine again to list it (None: not kept)
            "database": (result["shard"]["domain"], result["shard"]["seed"], result.get("db_fingerprint"))}


BATCHES_PER_WORKER = 6  # enough batches that the last ones even out the workers' finishing times


def shard_batches(shards: list[ShardConfig], workers: int) -> list[list[ShardConfig]]:
    """Group shards into about ``BATCHES_PER_WORKER`` batches per worker, each batch from one database (a domain,
    or one of a large domain's), largest first.

    One batch is one worker task: a shard takes under a second, and a task runner's own cost per task (a
    Prefect task run's API calls, states, logs) would otherwise be a large part of the run. One database per
    batch lets a worker reuse the engine it built for the batch's first shard, and what it remembers of the golds
    it verified there (``verifiers/memo.py``). Largest first so that
    the small batches fill in the end of the run. What a shard produces does not depend on its batch, so the
    snapshot does not either."""
    if not shards:
        return []
    size = max(1, math.ceil(len(shards) / (max(1, workers) * BATCHES_PER_WORKER)))
    by_database: dict[tuple[str, int], list[ShardConfig]] = {}
    for shard in shards:
        by_database.setdefault((shard.domain, shard.seed), []).append(shard)
    batches = []
    for group in by_database.values():
        count = math.ceil(len(group) / size)
        step = len(group) / count  # even chunks: 10 shards at most 9 a batch are 5 + 5, not 9 + 1
        batches += [group[round(i * step): round((i + 1) * step)] for i in range(count)]
    return sorted(batches, key=len, reverse=True)  # stable: equal sizes stay in plan order


def run_batch(cfg: RegenerateConfig, batch: list[ShardConfig]) -> list[dict[str, Any]]:
    """Run (or resume) a batch of shards one after another; each shard's file is written as soon as it is done,
    so a run killed mid-batch resumes from the shards it finished."""
    return [run_shard(cfg, shard) for shard in batch]


def run_local(cfg: RegenerateConfig, batch: list[ShardConfig]) -> Iterator[dict[str, Any]]:
    """Run shards in this process, or in a pool of ``cfg.workers`` processes (the work is CPU-bound Python), in
    batches (``shard_batches``); yields each batch's shard summaries as soon as the batch is done."""
    if cfg.workers <= 1 or len(batch) <= 1:
        yield from (run_shard(cfg, s) for s in batch)
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed

    batches = shard_batches(batch, cfg.workers)
    with ProcessPoolExecutor(max_workers=min(cfg.workers, len(batches)), initializer=exit_when_orphaned) as pool:
        for done in as_completed([pool.submit(run_batch, cfg, b) for b in batches]):
            yield from done.result()


def _canonical(shards: Iterable[ShardConfig]) -> list[ShardConfig]:
    return sorted(shards, key=lambda s: (domain_order(s.domain), s.shard))


# What dedup, the forbidden-share trim, the summary, the audit and the snapshot id never read: a regeneration
# leaves these out of the records it holds (about 70% of a candidate's memory: 20 KB -> 6 KB of Python objects)
# and the warehouse write reads them back from the shard files, a batch at a time (``full_records``).
WRITE_ONLY_FIELDS = ("tau2", "argument_sources", "gold_calls", "survivors", "persona", "notes", "communicate_info",
                     "underivable")


def load_records(cfg: RegenerateConfig, shards: Iterable[ShardConfig], slim: bool = False) -> list[dict[str, Any]]:
    """Every candidate of the given shards in canonical order (domain order, shard index, position); ``slim``
    leaves out ``WRITE_ONLY_FIELDS`` (``full_records`` puts them back)."""
    records = []
    for shard in _canonical(shards):
        result = json.loads(shard_file(cfg, shard).read_text())
        for i, rec in enumerate(result["records"]):
            if slim:
                rec = {k: v for k, v in rec.items() if k not in WRITE_ONLY_FIELDS}
            rec["candidate_id"] = f"{shard.shard_id}-{i:05d}"
            records.append(rec)
    return records


def full_records(cfg: RegenerateConfig, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Slim records (``load_records(slim=True)``) with their left-out fields read back from their shard files;
    what the run decided since loading (accepted, reason, detail) is the slim record's. Each shard file is read
    once per call: pass a batch in canonical order."""
    out: list[dict[str, Any]] = []
    shard_id, stored = None, []
    for rec in records:
        shard, position = rec["candidate_id"].rsplit("-", 1)  # "<shard id>-<position>" (load_records)
        if shard != shard_id:
            shard_id = shard
            stored = json.loads((cfg.shard_dir() / f"{shard_id}.json").read_text())["records"]
        out.append({**stored[int(position)], **rec})
    return out


def _synthesised(record: dict[str, Any]) -> bool:
    return record.get("source", "synthesised") == "synthesised"


def _kept(records: list[dict[str, Any]]) -> Counter[str]:
    """Synthesised tasks per domain that the snapshot would publish: accepted, less those the forbidden-share trim
    would leave out (``pipeline/balance.py``; it runs once, on the final records)."""
    have = Counter(r["domain"] for r in records if r["accepted"] and _synthesised(r))
    have.subtract(trim_forbidden(records, apply=False))
    return have


def shortfall(cfg: RegenerateConfig, records: list[dict[str, Any]]) -> dict[str, int]:
    """Synthesised tasks still missing per domain (imported tasks do not count towards the requested number)."""
    have = _kept(records)
    return {d: n - have[d] for d, n in cfg.requested().items() if have[d] < n}


def top_up_plan(cfg: RegenerateConfig, shards: list[ShardConfig], missing: dict[str, int],
                records: list[dict[str, Any]]) -> list[ShardConfig]:
    """More shards for the domains that fell short, sized by the yield of each domain's latest shards.

    Not its average yield: dedup compares a shard with every earlier one of its domain, so the more tasks a domain
    has, the more of a new shard's tasks are near duplicates. Sized by the average, a 100,000-task run topped up
    finance 4+ times and still ended 2 tasks short after the last round allowed (``MAX_TOP_UPS``)."""
    extra = []
    have = _kept(records)
    accepted = Counter(r["domain"] for r in records if r["accepted"] and _synthesised(r))
    by_shard = Counter(r["shard_id"] for r in records if r["accepted"] and _synthesised(r))
    for domain, n in missing.items():
        done = sorted((s for s in shards if s.domain == domain and not s.imported), key=lambda s: s.shard)
        latest = done[-max(1, len(done) // LATEST_SHARE):]
        # accepted per latest shard, scaled by the share of the domain's accepted tasks the trim keeps
        kept_share = have[domain] / accepted[domain] if accepted[domain] else 1.0
        per_shard = max(sum(by_shard[s.shard_id] for s in latest) / len(latest) * kept_share, 1.0)
        count = max(1, math.ceil(n * 1.1 / per_shard))
        extra += [cfg.shard(domain, done[-1].shard + 1 + i) for i in range(count)]
    return extra


def summarise(records: list[dict[str, Any]], dedup_counts: dict[str, int]) -> dict[str, Any]:
    accepted = [r for r in records if r["accepted"]]
    kills = [r["kill_rate"] for r in accepted]
    return {
        "tasks": len(accepted), "candidates": len(records),
        "per_domain": dict(sorted(Counter(r["domain"] for r in accepted).items())),
        "gold_errors": sum(not r["gold_valid"] for r in accepted),
        "noop_passes": sum(not r["noop_fails"] for r in accepted),
        "median_kill_rate": statistics.median(kills) if kills else None,
        "evolved_fraction": round(sum(r["evolved_from"] is not None for r in accepted) / len(accepted), 4)
        if accepted else 0.0,
        "yield": round(len(accepted) / len(records), 4) if records else 0.0,
        "rejection_reasons": dict(Counter(r["reason"] for r in records if not r["accepted"]).most_common()),
        "operators": dict(Counter(r["operator"] for r in accepted if r["operator"]).most_common()),
        "dedup": dedup_counts,
    }


Fingerprints = dict[tuple[str, int], str]  # (domain, seed) -> the fingerprint a shard's worker reported


def _fingerprint(name: str, seed: int, known: Fingerprints | None) -> str:
    """A database's fingerprint: as a shard reported it, else from building its engine (100 engines take ~25 s)."""
    return (known or {}).get((name, seed)) or get_engine(name, seed).fingerprint


def domain_rows(cfg: RegenerateConfig, known: Fingerprints | None = None
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    domains, tools = [], []
    for name in cfg.domains:
        spec = get_spec(name)
        domains.append({"domain": name, "spec_hash": spec.spec_hash, "db_seed": cfg.seed,
                        "fingerprint": _fingerprint(name, cfg.seed, known), "tables": len(spec.tables),
                        "rows": sum(t.rows for t in spec.tables),
                        "read_tools": sum(t.kind == "read" for t in spec.tools),
                        "write_tools": sum(t.kind == "write" for t in spec.tools),
                        "description": spec.description, "policy": spec.policy})  # policy: with clock and rules
        tools += [{"domain": name, "name": t.name, "kind": t.kind, "entity": t.entity,
                   "description": t.description, "parameters_json": json.dumps(t.parameters, sort_keys=True)}
                  for t in spec.tools]
    return domains, tools


def database_rows(cfg: RegenerateConfig, records: list[dict[str, Any]],
                  known: Fingerprints | None = None) -> list[dict[str, Any]]:
    """Every database the snapshot's tasks run on: its domain, index, seed, fingerprint and published tasks."""
    published = Counter((r["domain"], r["seed"]) for r in records if r["accepted"])
    rows = []
    for name in cfg.domains:
        for index in range(cfg.databases(name)):
            seed = cfg.database_seed(index)
            if index and not published[(name, seed)]:  # no empty database: its shards' tasks were all cut
                continue
            rows.append({"domain": name, "db_index": index, "db_seed": seed,
                         "fingerprint": _fingerprint(name, seed, known), "tasks": published[(name, seed)]})
    return rows


def snapshot_id_for(cfg: RegenerateConfig, records: list[dict[str, Any]]) -> str:
    digest = hashlib.sha256(cfg.config_hash().encode())
    for r in records:
        if r["accepted"]:
            digest.update(r["content_hash"].encode())
    return f"ts-{digest.hexdigest()[:12]}"


def finalize(cfg: RegenerateConfig, shards: list[ShardConfig], started: float, progress: Progress = print,
             deduped: tuple[list[dict[str, Any]], dict[str, int]] | None = None,
             timings: dict[str, float] | None = None,
             cpu_s: dict[str, float] | None = None,
             expand: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
             screening: dict[str, int] | None = None,
             fingerprints: Fingerprints | None = None) -> tuple[PublishResult, dict[str, Any]]:
    """Dedup all shards' candidates (unless given already deduped), build the snapshot, gate it, publish.
    ``started`` is the job's ``time.perf_counter()`` start, for the recorded wall time; ``cpu_s`` the CPU
    seconds per stage so far (pipeline/stage_cost.py), stored in ``stage_costs`` with the gate's and the write's;
    ``expand`` completes a batch of slim deduped records for the write (``full_records``); ``screening`` is the
    dedup's bf16 screen figures (``Dedup.screening``), kept in the summary."""
    timings = dict(timings or {})
    cpu = dict(cpu_s or {})
    price = cpu_price()
    if deduped is None:
        records = load_records(cfg, shards)
        tick_cpu = time.process_time()
        counts = dedup(records, cfg.near_dup_threshold)
        cpu["dedup"] = cpu.get("dedup", 0.0) + time.process_time() - tick_cpu
    else:
        records, counts = deduped
    trimmed = trim_forbidden(records)  # after dedup, which rejects mostly plain requests (pipeline/balance.py)
    summary = summarise(records, counts)
    if trimmed:
        progress(f"forbidden-request share above the gate's ceiling: left out {trimmed}")
        summary["forbidden_trimmed"] = trimmed
    summary["shards"] = len(shards)
    if screening:
        summary["dedup_screen"] = screening
    domains, tools = domain_rows(cfg, fingerprints)
    bundle = SnapshotBundle(
        snapshot_id=snapshot_id_for(cfg, records), code_version=code_version(), config_hash=cfg.config_hash(),
        config={**cfg.identity(), "tasks_per_domain": cfg.requested()}, requested=cfg.requested(),
        records=records, domains=domains, tools=tools, summary=summary, expand=expand,
        databases=database_rows(cfg, records, fingerprints))
    progress(f"publishing {bundle.snapshot_id}: {summary['tasks']} tasks from {summary['candidates']} candidates")
    tick = time.perf_counter()
    # stored in the snapshot row: the time up to the warehouse write (the write cannot time itself)
    bundle.seconds = round(tick - started, 2)
    summary["timings"] = {k: round(v, 2) for k, v in timings.items()}
    audit = audit_rows(records)
    summary["audit"] = {row["domain"]: row for row in audit}

    tick_cpu = time.process_time()
    gate_seconds = [0.0]

    def gate(con: Any, sid: str, req: dict[str, int]) -> dict[str, Any]:
        write_audit(con, sid, audit)  # in the snapshot's temporary copy, so it lands with the snapshot
        gate_cpu, gate_started = time.process_time(), time.perf_counter()
        try:
            quality = run_quality_suite(con, sid, req, cfg.kill_threshold)
        finally:
            gate_seconds[0] = time.perf_counter() - gate_started
        gate_cpu = time.process_time() - gate_cpu
        # the write's CPU up to here (the final swap of the file cannot be counted in the file it swaps in)
        written = time.process_time() - tick_cpu - gate_cpu
        write_stage_costs(con, sid, stage_rows(
            sid, {**cpu, "gate": gate_cpu, "publish": written},
            {"dedup": timings.get("dedup_s"), "gate": gate_seconds[0],
             "publish": time.perf_counter() - tick - gate_seconds[0]},
            {"synthesis": len(records), "verification": len(records), "dedup": len(records),
             "gate": summary["tasks"], "publish": summary["tasks"]}, price))
        return quality

    publish_cpu = time.process_time()
    result = publish(cfg.warehouse, bundle, gate)
    # the stages add up: publish_s is the warehouse write (rows, audit, copy and swap) without the gate
    timings["gate_s"] = round(gate_seconds[0], 2)
    timings["publish_s"] = round(time.perf_counter() - tick - gate_seconds[0], 2)
    timings["publish_cpu_s"] = round(time.process_time() - publish_cpu, 2)  # gate included
    summary["timings"] = {k: round(v, 2) for k, v in timings.items()}
    summary["seconds"] = round(time.perf_counter() - started, 2)
    progress(f"{result.status} {result.snapshot_id} in {summary['seconds']}s "
             f"({', '.join(f'{k} {v}' for k, v in summary['timings'].items())})")
    return result, summary


def regenerate(cfg: RegenerateConfig, progress: Progress = print,
               run: Callable[[list[ShardConfig]], Iterable[dict[str, Any]]] | None = None) -> tuple[PublishResult, dict[str, Any]]:
    """The whole job. ``run`` executes a batch of shards and yields their summaries (default: ``run_local``)."""
    check_target(cfg.warehouse)  # a warehouse path that cannot be published to fails here, before any shard work
    cpu_price()  # ... and so does a CPU price that is not one
    started = time.perf_counter()
    timings = {"shards_s": 0.0, "dedup_s": 0.0}
    cpu: dict[str, float] = {}  # CPU seconds per stage (pipeline/stage_cost.py)
    fingerprints: Fingerprints = {}  # of the databases the shards ran on, as their workers reported them
    run = run or (lambda batch: run_local(cfg, batch))
    warm = None
    if cfg.workers > 1:  # load the embedding model while the shards run elsewhere; dedup needs it at the end
        warm = threading.Thread(target=minilm, name="warm-minilm")
        warm.start()
    shards = initial_plan(cfg)
    batch = shards
    deduper = Dedup(cfg.near_dup_threshold)
    by_shard: dict[str, list[dict[str, Any]]] = {}
    progress(f"config {cfg.config_hash()} (code {code_version()}): {len(batch)} shards for {sum(cfg.requested().values())} tasks")
    try:
        for attempt in range(MAX_TOP_UPS + 1):
            tick = time.perf_counter()
            for s in run(batch):
                if not s["resumed"]:  # one thread of CPU-bound Python: its CPU seconds on an idle machine, more when busy
                    timings["shard_compute_s"] = timings.get("shard_compute_s", 0.0) + s["seconds"]
                how = "resumed from its file" if s["resumed"] else f"in {s['seconds']:.2f}s"
                progress(f"shard {s['shard_id']}: {s['accepted']}/{s['candidates']} accepted, {how}")
                add_shard_cpu(cpu, [s])
                domain, seed, fingerprint = s.get("database") or (None, None, None)
                if fingerprint:
                    fingerprints[(domain, seed)] = fingerprint
            timings["shards_s"] += time.perf_counter() - tick
            if warm is not None:  # joined, never left running: a loader thread alive at exit aborts the interpreter
                warm.join()
                warm = None
            tick, tick_cpu = time.perf_counter(), time.process_time()
            # only this round's shards are read and deduped: they follow every earlier shard of their domain
            by_shard.update({s.shard_id: load_records(cfg, [s], slim=True) for s in batch})
            counts = deduper.add([r for s in _canonical(batch) for r in by_shard[s.shard_id]])
            records = [r for s in _canonical(shards) for r in by_shard[s.shard_id]]
            timings["dedup_s"] += time.perf_counter() - tick
            dedup_cpu = time.process_time() - tick_cpu  # all its threads
            timings["dedup_cpu_s"] = timings.get("dedup_cpu_s", 0.0) + dedup_cpu
            cpu["dedup"] = cpu.get("dedup", 0.0) + dedup_cpu
            missing = shortfall(cfg, records)
            if not missing or attempt == MAX_TOP_UPS:
                break
            batch = top_up_plan(cfg, shards, missing, records)
            shards += batch
            progress(f"short of the requested counts ({missing}); adding {len(batch)} shards")
    finally:  # a failed shard must not leave the loader running at exit either
        if warm is not None:
            warm.join()
    screening = dict(deduper.screening)  # how many of counts["compared"] (screened in bf16) were embedded in fp32
    del deduper, by_shard  # dedup's groups and vectors: the write needs only the records (and the memory)
    forget_embeddings()
    return finalize(cfg, shards, started, progress, (records, counts), timings, cpu,
                    expand=functools.partial(full_records, cfg), screening=screening, fingerprints=fingerprints)
