"""Every write that is not a snapshot (LLM calls, pricing, preference pairs, evaluation and training records) goes
through the single writer's ``atomic_edit``: the same preflight, lock and atomic swap as ``publish``."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from inference.records import CallRecord, write_llm_calls
from warehouse.errors import WarehouseError
from warehouse.writer import atomic_edit


def _call(call_id: str) -> CallRecord:
    return CallRecord(call_id, "run-1", datetime(2026, 11, 30), "local-smollm2", "smollm2", "llama.cpp", "test",
                      "hash", 10, 5, 0.0, 0.1, False, 1)


def _calls(path: Path) -> list[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return [r[0] for r in con.execute("SELECT call_id FROM llm_calls ORDER BY call_id").fetchall()]
    finally:
        con.close()


def test_a_symlinked_warehouse_stays_a_symlink_and_its_real_file_gets_the_rows(tmp_path: Path) -> None:
    real = tmp_path / "data" / "wh.duckdb"
    real.parent.mkdir()
    link = tmp_path / "wh.duckdb"
    link.symlink_to(real)
    assert write_llm_calls(link, [_call("c1")]) == 1
    assert write_llm_calls(real, [_call("c2")]) == 1  # the same file by another path: one lock, one file
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert _calls(real) == ["c1", "c2"]
    assert sorted(p.name for p in real.parent.iterdir()) == ["wh.duckdb", "wh.duckdb.lock"]  # no copy left


def test_a_failed_block_leaves_the_warehouse_as_it_was_and_no_copy_behind(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    write_llm_calls(path, [_call("c1")])
    before = path.read_bytes()
    with pytest.raises(RuntimeError, match="halfway"):
        with atomic_edit(path) as con:
            con.execute("DELETE FROM llm_calls")
            raise RuntimeError("halfway")
    assert path.read_bytes() == before and _calls(path) == ["c1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wh.duckdb", "wh.duckdb.lock"]


def test_a_path_that_is_no_warehouse_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    with pytest.raises(WarehouseError, match="directory"):
        write_llm_calls(folder, [_call("c1")])
    foreign = tmp_path / "notes.duckdb"
    foreign.write_text("not a database")
    with pytest.raises(WarehouseError):
        write_llm_calls(foreign, [_call("c1")])
    assert foreign.read_text() == "not a database" and list(folder.iterdir()) == []
