"""Share figures are gated with a one-sided Wilson bound: a small sample of good data whose share lands just past
a threshold passes, the same share over a large sample fails; and a small real run publishes with the outcome
figures stored and printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pipeline.regenerate import RegenerateConfig, regenerate
from synthesis.realism_audit import AUDIT_COLUMNS
from toolscale.cli import main
from warehouse.audit_models import write_audit
from warehouse.quality import SHARE_GATES, realism_gate, wilson_bounds
from warehouse.schema import ensure_schema


def _good_row(tasks: int, **figures: Any) -> dict[str, Any]:
    """An audit row that meets every realism target, with ``figures`` replaced."""
    row: dict[str, Any] = {c: 0 for c in AUDIT_COLUMNS}
    row.update(domain="railway", converted=True, tasks=tasks, request_clauses=tasks, identified_share=1.0,
               policy_hinged_share=0.6,
               forbidden_share=0.22, write_share=0.85, refuse_all_share=0.04, top_opening_share=0.02,
               top_opening="hi could you", distinct_bigrams=500, distinct_personas=40)
    row.update(figures)
    return row


def _gate(tmp_path: Path, row: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / f"wh-{len(list(tmp_path.iterdir()))}.duckdb"
    ensure_schema(path)
    con = duckdb.connect(str(path))
    try:
        write_audit(con, "ts-x", [row])
        return realism_gate(con, "ts-x")
    finally:
        con.close()


def test_the_wilson_bound_allows_for_the_sample_size() -> None:
    low, high = wilson_bounds(4 / 90, 90)  # 4 of 90 tasks share an opening: 4.4%
    assert low < 0.03 < 4 / 90 < high
    assert wilson_bounds(0.044, 900)[0] > 0.03  # the same share in ten times the tasks is a real skew
    assert wilson_bounds(0.0, 50)[0] == 0.0 and wilson_bounds(1.0, 50)[1] == pytest.approx(1.0)
    assert wilson_bounds(0.5, 0) == (0.0, 1.0)
    narrow, wide = wilson_bounds(0.3, 1000), wilson_bounds(0.3, 30)
    assert wide[0] < narrow[0] < 0.3 < narrow[1] < wide[1]


@pytest.mark.parametrize("column", sorted(SHARE_GATES))
def test_a_share_just_past_its_threshold_fails_only_in_a_large_sample(tmp_path: Path, column: str) -> None:
    least, most = SHARE_GATES[column]
    for limit, sign in ((least, -1), (most, 1)):
        if limit is None:
            continue
        value = round(limit + sign * min(0.03, limit / 2), 4)  # 3 points past, or half a small threshold
        small = _gate(tmp_path, _good_row(80, **{column: value}))
        assert small["success"], small["failures"]
        large = _gate(tmp_path, _good_row(3000, **{column: value}))
        assert not large["success"]
        assert any(column in f and "railway=" in f for f in large["failures"]), large["failures"]
    assert _gate(tmp_path, _good_row(3000))["success"]


def test_a_small_run_publishes_with_its_outcome_figures_stored_and_printed(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "wh.duckdb"
    cfg = RegenerateConfig(domains=["railway", "sport"], tasks_per_domain=30, workers=1, warehouse=str(path),
                           work_dir=str(tmp_path / "work"))
    result, summary = regenerate(cfg, progress=lambda _: None)
    assert result.status == "published", summary
    for domain, row in summary["audit"].items():
        assert row["write_share"] >= 0.7 and row["refuse_all_share"] <= 0.1, (domain, row)
        assert 0.15 <= row["forbidden_share"] <= 0.3, (domain, row)
    assert main(["audit", "latest", "--json", "--warehouse", str(path)]) == 0
    stored = json.loads(capsys.readouterr().out)
    assert stored["stored"] and {d["domain"]: d["write_share"] for d in stored["domains"]} == {
        d: r["write_share"] for d, r in summary["audit"].items()}
    assert main(["audit", "latest", "--warehouse", str(path)]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("domain") and "writes" in line)
    assert "refuse all" in header
