"""Local search: FAISS over MiniLM embeddings of one domain's documents, answers citing document ids.

Documents: each policy sentence (``policy#N``, from 1), each tool's doc (``tool:NAME``), each table's
description (``table:NAME``; written from the table's columns when the spec gives none) and the domain's
own description (``domain:NAME``). The index is built once per (domain, spec hash) and cached in-process.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from domains.spec import DomainSpec, Table
from domains.spec import Tool as SpecTool
from train.environment.tools.base import Tool, ToolResult

# A sentence ends at . ! or ? followed by space and a capital, a digit or a quote, but not after an
# abbreviation ("e.g. ST001" is one sentence).
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\betc\.)(?<!\bvs\.)\s+(?=[A-Z0-9\"'(])")


@dataclass(frozen=True)
class Document:
    doc_id: str
    text: str


@dataclass(frozen=True)
class Hit:
    doc_id: str
    text: str
    score: float  # cosine similarity to the query


def policy_sentences(policy: str) -> list[str]:
    out: list[str] = []
    for paragraph in re.split(r"\n\s*\n", policy):
        out += [s.strip() for s in _SENTENCE_END.split(" ".join(paragraph.split())) if s.strip()]
    return out


def tool_doc(tool: SpecTool) -> str:
    props = tool.parameters.get("properties", {})
    params = "; ".join(f"{name}: {p.get('description', p.get('type', ''))}".strip() for name, p in props.items())
    return f"{tool.name} ({tool.kind} tool): {tool.description} Parameters: {params.rstrip('.') or 'none'}."


def table_doc(table: Table) -> str:
    if table.description:
        return f"Table {table.name}: {table.description}"
    columns = []
    for col in table.columns:
        text = col.label
        if col.enum:
            text += " (" + ", ".join(map(str, col.enum)) + ")"
        columns.append(text)
    return f"Table {table.name}: one row per {table.noun}, keyed by {table.primary_key}. Columns: {', '.join(columns)}."


def domain_documents(spec: DomainSpec) -> list[Document]:
    docs = [Document(f"domain:{spec.name}", spec.description)] if spec.description else []
    docs += [Document(f"policy#{i}", s) for i, s in enumerate(policy_sentences(spec.policy), start=1)]
    docs += [Document(f"tool:{t.name}", tool_doc(t)) for t in spec.tools]
    docs += [Document(f"table:{t.name}", table_doc(t)) for t in spec.tables]
    return docs


_embed_lock = threading.Lock()


def _embed(texts: list[str]) -> np.ndarray:
    """Unit vectors for ``texts``, encoded on one torch thread: for a query or a few dozen short documents
    intra-op parallelism only adds synchronisation (measured 20x slower with 2 threads on a busy 2-core box)."""
    import torch

    from synthesis.dedup import minilm  # the project's one offline loader of the packaged model

    model = minilm()
    with _embed_lock:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
        finally:
            torch.set_num_threads(threads)
    return np.asarray(vectors, dtype="float32")


class DomainIndex:
    """A domain's documents in a FAISS inner-product index over unit vectors (inner product = cosine)."""

    def __init__(self, spec: DomainSpec):
        import faiss

        self.domain = spec.name
        self.documents = domain_documents(spec)
        vectors = _embed([d.text for d in self.documents])
        self.index = faiss.IndexFlatIP(vectors.shape[1])
        self.index.add(vectors)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        k = max(1, min(k, len(self.documents)))
        scores, rows = self.index.search(_embed([query]), k)
        return [Hit(self.documents[r].doc_id, self.documents[r].text, round(float(s), 4))
                for s, r in zip(scores[0], rows[0]) if r >= 0]


_indexes: dict[tuple[str, str], DomainIndex] = {}
_lock = threading.Lock()


def domain_index(spec: DomainSpec) -> DomainIndex:
    """The cached index of ``spec``; built on first use (about a second on CPU)."""
    key = (spec.name, spec.spec_hash)
    with _lock:
        if key not in _indexes:
            _indexes[key] = DomainIndex(spec)
        return _indexes[key]


class LocalSearchTool(Tool):
    """Semantic search over the domain's policy, tool and table documentation; free, latency measured."""

    name = "local_search"
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look up, in plain words."},
            "k": {"type": "integer", "minimum": 1, "maximum": 10, "description": "How many passages (default 3)."},
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    def __init__(self, spec: DomainSpec):
        self.spec = spec
        self.description = (f"Search the {spec.name} domain's policy, tool and table documentation. Returns the "
                            "most relevant passages, each with its document id to cite (policy#N, tool:NAME, "
                            "table:NAME).")

    def invoke(self, arguments: dict[str, Any]) -> ToolResult:
        hits = domain_index(self.spec).search(arguments["query"], arguments.get("k", 3))
        results = [{"id": h.doc_id, "text": h.text, "score": h.score} for h in hits]
        return ToolResult(json.dumps({"results": results}, ensure_ascii=False))
