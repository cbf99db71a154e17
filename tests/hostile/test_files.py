"""Hostile files: endpoint registries, price files and domain specs that are FIFOs, devices, alias bombs, too
large, or hold figures and names that cannot be stored as written. Each is one error line, exit status 2, in
seconds, and the warehouse is left exactly as it was."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
import yaml

from domains.engine import DomainEngine
from domains.registry import get_engine
from domains.spec import SpecError, parse_spec
from tests.hostile.conftest import LABEL, spec_error, weather_raw
from tests.hostile.test_cli import assert_one_error_line, folder_state, run_cli, untouched, warehouse  # noqa: F401

# 8 levels of 10 aliases each: about 600 bytes on disk, 10^8 values once expanded
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]\n" for i in range(8))

REGISTRY = """default: local
endpoints:
  local:
    base_url: http://127.0.0.1:9/v1
    model: m
    provider: local
    pricing_key: m
"""


def price_file(provider: str = "open-ai", models: str | None = None) -> str:
    body = models or "  - name: gpt-4o-mini\n    input_usd_per_1M: 0.15\n    output_usd_per_1M: 0.6\n"
    return (f'provider: "{provider}"\nsource: "https://example.org/prices"\nretrieved: "2026-11-01"\n'
            f"currency: USD\nmodels:\n{body}")


def _special(kind: str, tmp_path: Path) -> Path:
    if kind == "fifo":
        os.mkfifo(tmp_path / "special.yaml")
        return tmp_path / "special.yaml"
    if kind == "device":
        return Path("/dev/zero")
    if kind == "folder":
        (tmp_path / "special.yaml").mkdir()
        return tmp_path / "special.yaml"
    if kind == "bomb":
        (tmp_path / "special.yaml").write_text(ALIAS_BOMB)
        return tmp_path / "special.yaml"
    (tmp_path / "special.yaml").write_text("# padding\n" * 150_000)  # 1.5 MB of comments
    return tmp_path / "special.yaml"


SPECIAL = [("fifo", "is a FIFO (named pipe), not a regular file"), ("device", "is a character device"),
           ("folder", "is a folder, not a regular file"), ("bomb", "alias bomb"), ("huge", "may be at most 1,000,000")]


@pytest.mark.parametrize(("kind", "needle"), SPECIAL, ids=[k for k, _ in SPECIAL])
def test_an_endpoint_registry_that_is_not_a_small_regular_file(kind: str, needle: str, tmp_path: Path) -> None:
    path = _special(kind, tmp_path)
    started = time.perf_counter()
    assert_one_error_line(run_cli("endpoints", "--registry", str(path), timeout=60), 2, "endpoint registry", needle)
    assert time.perf_counter() - started < 45


@pytest.mark.parametrize(("kind", "needle"), SPECIAL, ids=[k for k, _ in SPECIAL])
def test_a_price_file_that_is_not_a_small_regular_file(kind: str, needle: str, untouched: Path,
                                                       tmp_path: Path) -> None:
    path = _special(kind, tmp_path)
    started = time.perf_counter()
    out = run_cli("pricing", "load", str(path), "--warehouse", str(untouched), timeout=60)
    assert_one_error_line(out, 2, "price file", needle)
    assert time.perf_counter() - started < 45


PRICE_CASES = [
    (price_file(models="  - name: m\n    input_usd_per_1M: .inf\n    output_usd_per_1M: 1\n"),
     "models[0].input_usd_per_1M: inf is not a finite figure"),
    (price_file(models="  - name: m\n    input_usd_per_1M: 1\n    output_usd_per_1M: 1.0e+300\n"),
     "models[0].output_usd_per_1M"),
    (price_file(models="  - name: m\n    input_usd_per_1M: 1\n    output_usd_per_1M: 1\n    latency_s: .inf\n"),
     "models[0].latency_s"),
    (price_file(models="".join(f"  - {{name: m{i}, input_usd_per_1M: 1, output_usd_per_1M: 1}}\n"
                               for i in range(1_001))), "at most 1,000"),
    (price_file(provider="!!!"), "provider '!!!' has no letters or digits"),
    (price_file(provider="   "), "no letters or digits"),
]


@pytest.mark.parametrize(("text", "needle"), PRICE_CASES, ids=["inf", "1e300", "latency-inf", "1001-models", "!!!",
                                                               "blank"])
def test_price_files_with_figures_or_names_that_cannot_be_stored(text: str, needle: str, untouched: Path,
                                                                 tmp_path: Path) -> None:
    (tmp_path / "prices.yaml").write_text(text)
    out = run_cli("pricing", "load", str(tmp_path / "prices.yaml"), "--warehouse", str(untouched), timeout=60)
    assert_one_error_line(out, 2, needle)


def test_two_spellings_of_one_provider_are_refused(warehouse: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.duckdb"
    shutil.copy(warehouse, copy)
    (tmp_path / "first.yaml").write_text(price_file("open-ai"))
    assert run_cli("pricing", "load", str(tmp_path / "first.yaml"), "--warehouse", str(copy)).returncode == 0
    before = copy.read_bytes()
    (tmp_path / "second.yaml").write_text(price_file("Open AI"))
    out = run_cli("pricing", "load", str(tmp_path / "second.yaml"), "--warehouse", str(copy))
    assert_one_error_line(out, 2, "provider 'Open AI'", "already holds provider 'open-ai'")
    assert copy.read_bytes() == before
    # the same spelling again is a new version of the same provider's prices, and is stored
    assert run_cli("pricing", "load", str(tmp_path / "first.yaml"), "--warehouse", str(copy)).returncode == 0


@pytest.mark.parametrize("title", ["trip\x00hidden", "\x00", "a" * 10 + "\x00" + "b" * 10])
def test_a_nul_byte_in_a_text_argument_is_refused_and_nothing_is_stored(title: str) -> None:
    engine = get_engine("travel")
    with engine.fresh() as db:
        (before,) = db.conn.execute("SELECT COUNT(*) FROM trips").fetchone()
        result = db.call("create_trip", {"traveller_id": "TR0001", "title": title})
        (after,) = db.conn.execute("SELECT COUNT(*) FROM trips").fetchone()
    assert not result.ok and "NUL character" in (result.error or "") and "\n" not in (result.error or "")
    assert after == before


def test_the_cli_refuses_a_nul_byte_in_call_arguments() -> None:
    out = run_cli("call", "travel", "create_trip", "--args", '{"traveller_id": "TR0001", "title": "trip\\u0000hidden"}')
    assert_one_error_line(out, 2, "NUL character")


def test_a_spec_of_16_tables_of_100000_rows_is_refused_by_the_total_row_limit() -> None:
    raw = weather_raw()
    template = raw["tables"][0]
    raw["tables"] = [{**template, "rows": 100_000} for _ in range(16)]
    started = time.perf_counter()
    with pytest.raises(SpecError) as err:
        parse_spec(raw, label=LABEL)
    assert any("1,600,000 seeded rows in all; a spec may seed at most 100,000" in p for p in err.value.problems)
    assert time.perf_counter() - started < 10


def test_a_spec_just_over_the_row_limit_is_refused_with_one_problem() -> None:
    raw = weather_raw()
    spare = 100_001 - sum(t.get("rows", 0) for t in raw["tables"])
    next(t for t in raw["tables"] if t["name"] == "observations")["rows"] += spare
    assert "100,001 seeded rows in all" in spec_error(raw)


def test_an_invariant_broken_by_thousands_of_seeded_rows_is_refused_in_seconds() -> None:
    raw = weather_raw()
    for t in raw["tables"]:
        if t["name"] == "alert_subscriptions":
            t["rows"] = 8_000
    spec = parse_spec(raw, label=LABEL)
    started = time.perf_counter()
    with pytest.raises(SpecError) as err:
        DomainEngine(spec, 0)
    (problem,) = err.value.problems
    assert "seeded rows of alert_subscriptions; at most 1,000 may need a redraw" in problem
    assert time.perf_counter() - started < 60


def test_the_shipped_profiles_registry_and_price_template_still_load() -> None:
    from inference.endpoints import load_endpoints
    from inference.pricing import NOMINAL_PATH, PricingError, load_provider_file
    from train.stages.profiles import load_profile

    assert load_profile("cpu-smoke").name == "cpu-smoke" and load_profile("h100").name == "h100"
    assert load_endpoints().endpoints
    with pytest.raises(PricingError, match="is empty; fill it in"):
        load_provider_file(NOMINAL_PATH.with_name("provider_template.yaml"))
    assert yaml.safe_load(REGISTRY)["default"] == "local"
