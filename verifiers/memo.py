"""Results that depend only on a domain engine and a task's checked parts, remembered per engine.

A shard batch verifies many candidates of one domain, and at scale most golds recur (at 100,000 tasks, 126,025 of
180,018 candidates share their gold calls with another). What is replayed from a gold (its report, its realism
figures) is then computed once per batch. Memos are per engine (an engine built from a changed spec starts empty)
and bounded: only the engine used last keeps its memos (about 9 KB an entry; a process that ran every domain
would otherwise keep them all). The values are shared, so callers read them and never change them.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from domains.engine import DomainEngine
    from verifiers.types import VerifiableTask

T = TypeVar("T")
MEMO_ENTRIES = 20_000  # per kind: at 100,000 tasks the domain with the most has 8,202 distinct golds with their checks
_memos: weakref.WeakKeyDictionary[Any, dict[str, OrderedDict[str, Any]]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def task_key(task: VerifiableTask) -> str:
    """Everything the verifier reads from a task: the same key, the same verdicts on the same engine."""
    return json.dumps([task.domain, task.seed, [c.to_dict() for c in task.gold_calls], task.communicate_info,
                       task.contract()], sort_keys=True, ensure_ascii=False, default=repr)


def remembered(engine: DomainEngine, kind: str, key: str, compute: Callable[[], T]) -> T:
    """``compute()``'s value for ``key``, computed once per engine and kind (least recently used dropped past
    ``MEMO_ENTRIES``). Threads may race to compute one key; both get the same value."""
    with _lock:
        if engine not in _memos:  # a batch is one domain's shards: the memos of the domain before it are done
            _memos.clear()
        memo = _memos.setdefault(engine, {}).setdefault(kind, OrderedDict())
        if key in memo:
            memo.move_to_end(key)
            return memo[key]  # type: ignore[no-any-return]
    value = compute()
    with _lock:
        memo[key] = value
        if len(memo) > MEMO_ENTRIES:
            memo.popitem(last=False)
    return value


def forget() -> None:
    """Drop every memo of this process (what a fresh worker starts with)."""
    with _lock:
        _memos.clear()
