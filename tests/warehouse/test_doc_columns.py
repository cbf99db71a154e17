"""docs/warehouse.md lists every column of every table and view, with its type, exactly as a real warehouse has it."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from pipeline.regenerate import RegenerateConfig, regenerate

DOC = Path(__file__).resolve().parents[2] / "docs" / "warehouse.md"
HEADING = re.compile(r"^### `(?P<name>\w+)`$")
ROW = re.compile(r"^\| `(?P<column>\w+)` \| (?P<type>[A-Z][A-Z ]*[A-Z]) \|")


def documented() -> dict[str, list[tuple[str, str]]]:
    """``{relation: [(column, type), ...]}`` from the ``### `name` `` sections under Tables and Views."""
    relations: dict[str, list[tuple[str, str]]] = {}
    current = None
    section = ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section, current = line[3:].strip(), None
        elif section in ("Tables", "Views") and (heading := HEADING.match(line)):
            current = heading["name"]
            relations[current] = []
        elif current and (row := ROW.match(line)):
            relations[current].append((row["column"], row["type"]))
    return relations


@pytest.fixture(scope="module")
def real_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("doc-columns")
    path = root / "wh.duckdb"
    result, _ = regenerate(RegenerateConfig(domains=["weather"], tasks_per_domain=5, workers=1, base_per_shard=8,
                                            evolution_rounds=1, warehouse=str(path), work_dir=str(root / "work")),
                           progress=lambda _: None)
    assert result.status == "published"
    return path


def test_every_table_and_view_column_is_documented_with_its_type(real_warehouse: Path) -> None:
    con = duckdb.connect(str(real_warehouse), read_only=True)
    try:
        names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                           "WHERE table_schema = 'main' ORDER BY table_name").fetchall()]
        actual = {n: [(r[0], r[1]) for r in con.execute(f'DESCRIBE "{n}"').fetchall()] for n in names}
    finally:
        con.close()
    doc = documented()
    assert sorted(doc) == sorted(actual), "documented relations differ from the warehouse's"
    for name, columns in actual.items():
        assert doc[name] == columns, f"docs/warehouse.md section `{name}` differs from DESCRIBE {name}"


def test_the_parser_sees_every_section() -> None:
    doc = documented()
    assert {"snapshots", "tasks", "latest_tasks", "llm_calls", "preference_pairs", "snapshot_audit"} <= set(doc)
    assert all(doc.values())
    assert ("quality_json", "VARCHAR") in doc["snapshots"] and ("root_id", "VARCHAR") in doc["evolution_lineage"]
    assert ("final_checkpoint", "VARCHAR") in doc["training_runs"] and ("loss", "DOUBLE") in doc["training_steps"]
