"""``toolscale preferences`` and ``toolscale pricing`` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "toolscale.cli"]
REPO = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, cwd=REPO)


def test_preferences_build_then_show(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh.duckdb")
    built = _run("preferences", "--count", "40", "--seed", "3", "--warehouse", wh)
    assert built.returncode == 0, built.stderr
    assert "40 pairs (eval 8, train 32), 0 inconsistent" in built.stdout
    assert "pricing schedules (synthetic)" in built.stdout and "synthetic-heldout-deepinfra" in built.stdout
    shown = _run("preferences", "show", "-n", "3", "--split", "eval", "--json", "--warehouse", wh)
    assert shown.returncode == 0, shown.stderr
    pairs = json.loads(shown.stdout)
    assert len(pairs) == 3 and all(p["split"] == "eval" and p["schedule_synthetic"] for p in pairs)
    assert all(len(p["vector"]) == len(p["tools"]) + 3 for p in pairs)
    text = _run("preferences", "show", "-n", "1", "--warehouse", wh)
    assert "PI: " in text.stdout and "(synthetic)" in text.stdout


def test_pricing_lists_schedules_and_labels_synthetic_ones() -> None:
    listed = _run("pricing")
    assert listed.returncode == 0 and "nominal-toolorchestra" in listed.stdout
    assert sum(line.startswith("synthetic-train-") for line in listed.stdout.splitlines()) == 10
    held = json.loads(_run("pricing", "--schedule", "synthetic-heldout-deepinfra", "--json").stdout)
    assert held and all(r["synthetic"] and r["kind"] == "synthetic" and r["split"] == "heldout" for r in held)


def test_bad_input_gets_one_error_line(tmp_path: Path) -> None:
    template = _run("pricing", "load", "data/pricing/provider_template.yaml", "--warehouse", str(tmp_path / "w.duckdb"))
    assert template.returncode == 2 and template.stderr.strip().count("\n") == 0
    assert "provider is empty" in template.stderr and not (tmp_path / "w.duckdb").exists()
    assert _run("pricing", "--schedule", "deepinfra").returncode == 2
    nothing = _run("preferences", "show", "--warehouse", str(tmp_path / "none.duckdb"))
    assert nothing.returncode == 2 and "no warehouse at" in nothing.stderr
