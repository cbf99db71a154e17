"""Keep a domain's share of forbidden requests inside the quality gate's range after dedup.

Shards steer towards the target share as they accept tasks (synthesis/realistic_tasks.py, ``OutcomeBalance``), but
dedup comes after them and its near-duplicate rejections fall mostly on plain requests: a request with a forbidden
add-on is longer and reads less like its neighbours. Where few distinct plain requests exist (telecom's one phone
and eight lines) or many tasks are drawn (100,000), the published share then rises above the gate's ceiling.

``trim_forbidden`` rejects, per domain, just enough accepted tasks with a forbidden request to bring the share to
the ceiling, and only in a domain whose share the gate would refuse: a snapshot that passes is left as it was. It
drops the deepest first, then the latest (a child keeps its parent's forbidden request, so no kept task loses its
parent to the trim), so the same records give the same snapshot."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from warehouse.quality import MIN_SAMPLE_FOR_SHARE, SHARE_GATES, wilson_bounds

REASON = "forbidden_share"


def _forbidden(record: dict[str, Any]) -> bool:
    return bool(record["realism"].get("forbidden"))


def trim_forbidden(records: list[dict[str, Any]], apply: bool = True) -> dict[str, int]:
    """Reject forbidden-request tasks beyond the gate's ceiling, in place; returns the count rejected per domain.
    ``apply=False`` only counts them (a regeneration sizes its top-up rounds by the tasks left after the trim)."""
    most = SHARE_GATES["forbidden_share"][1]
    assert most is not None
    by_domain: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["accepted"] and r.get("realism"):  # the population the audit and the gate count
            by_domain[r["domain"]].append(r)
    trimmed: dict[str, int] = {}
    for domain, accepted in sorted(by_domain.items()):
        n, f = len(accepted), sum(_forbidden(r) for r in accepted)
        if n < MIN_SAMPLE_FOR_SHARE or wilson_bounds(f / n, n)[0] <= most:
            continue  # the gate judges this share as it is
        k = math.ceil((f - most * n) / (1 - most) - 1e-9)  # (f - k) / (n - k) <= most
        trimmed[domain] = k
        if not apply:
            continue
        order = sorted(((i, r) for i, r in enumerate(accepted) if _forbidden(r)),
                       key=lambda p: (-int(p[1].get("depth") or 0), -p[0]))
        for _, r in order[:k]:
            r["accepted"] = False
            r["reason"] = REASON
            r["reason_detail"] = (f"{REASON}: {f} of {n} accepted {domain} tasks carried a forbidden request, above "
                                  f"the gate's {most:.0%}; the deepest and latest {k} were left out")
    return trimmed
