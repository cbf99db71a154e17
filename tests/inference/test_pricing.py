"""Pricing as data: the nominal table holds exactly the sourced figures, synthetic schedules are seeded and
labelled, held-out schedules stay out of training draws, provider files are validated, and all of it round-trips
through a real DuckDB warehouse."""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path

import duckdb
import pytest
import yaml

from inference.pricing import (HELDOUT_NAME, NOMINAL_PATH, PricingError, load_provider_file, nominal_schedule,
                               schedule_rows, source_tags, synthetic_schedule, synthetic_schedules)
from warehouse.pricing_store import PricingRows, list_schedules, read_schedule_prices, store_pricing

RAW = yaml.safe_load(NOMINAL_PATH.read_text())


def test_every_nominal_figure_names_sources_the_file_header_defines() -> None:
    defined = source_tags()
    assert {"[R:tools]", "[R:tau2e]", "[R:frames]", "[P]"} <= set(defined)
    for price in nominal_schedule().prices:
        tags = price.source.split()[1:]
        assert tags and set(tags) <= set(defined), price
        for latency in price.latencies:
            assert set(latency.source.split()[1:]) <= set(defined)


def test_nominal_table_is_exactly_the_priced_models_of_the_file() -> None:
    table = {p.model: p for p in nominal_schedule().prices}
    assert set(table) == {m["name"] for m in RAW["models"]}
    unpriced = [name for group in RAW["models_without_prices"].values() for name in group]
    assert unpriced and not set(unpriced) & set(table)  # a model the sources do not price stays out
    for m in RAW["models"]:
        p = table[m["name"]]
        assert (p.input_usd_per_1m, p.output_usd_per_1m) == (m["price_usd_per_1M"]["input"],
                                                              m["price_usd_per_1M"]["output"])
        assert {lat.alias: lat.seconds for lat in p.latencies} == (m.get("latency_s") or {})
    assert table["gpt-5"].cost_usd(1_000_000, 100_000) == pytest.approx(1.25 + 1.0)
    assert nominal_schedule().kind == "nominal" and not nominal_schedule().synthetic


def test_synthetic_schedules_are_seeded_labelled_and_stable_per_name() -> None:
    a, b = synthetic_schedules(seed=3), synthetic_schedules(seed=3)
    assert [s.schedule_id for s in a.all] == [s.schedule_id for s in b.all]
    assert a.all == b.all
    other = synthetic_schedules(seed=4)
    assert {s.schedule_id for s in a.all}.isdisjoint(s.schedule_id for s in other.all)
    assert synthetic_schedules(seed=3, training=12).training[:10] == a.training  # more schedules change none
    assert len(a.training) == 10 and [s.name for s in a.heldout] == [HELDOUT_NAME]
    nominal = {p.model: p for p in nominal_schedule().prices}
    for s in a.all:
        assert s.synthetic and s.kind == "synthetic" and s.name.startswith("synthetic-")
        assert s.models == list(nominal)  # perturbs the nominal table, adds no model
        for p in s.prices:
            assert p.source.startswith("synthetic: ") and p.input_usd_per_1m > 0
            ratio = p.input_usd_per_1m / nominal[p.model].input_usd_per_1m
            assert p.output_usd_per_1m == pytest.approx(nominal[p.model].output_usd_per_1m * ratio, rel=1e-4)
    with pytest.raises(PricingError, match="must start with 'synthetic-'"):
        synthetic_schedule(nominal_schedule(), "deepinfra", "heldout", 0)


def test_heldout_schedules_never_appear_in_training_draws() -> None:
    schedules = synthetic_schedules(seed=0)
    rng = random.Random(0)
    drawn = {schedules.draw_training(rng).schedule_id for _ in range(5000)}
    assert drawn == {s.schedule_id for s in schedules.training}
    assert not drawn & {s.schedule_id for s in schedules.heldout}
    assert all(s.split == "heldout" for s in schedules.heldout) and all(s.split == "train" for s in schedules.training)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _filled_from_nominal(tmp_path: Path) -> Path:
    """A provider file filled with figures that exist: the nominal open-weight models' prices, which the paper
    says follow TogetherAI (the nominal file's pricing_basis)."""
    models = [{"name": m["name"], "input_usd_per_1M": m["price_usd_per_1M"]["input"],
               "output_usd_per_1M": m["price_usd_per_1M"]["output"]}
              for m in RAW["models"] if m["name"].startswith(("Qwen/Qwen3-32B", "meta-llama/"))]
    models[0]["latency_s"] = RAW["models"][2]["latency_s"]["answer-4"]
    doc = {"provider": "TogetherAI", "source": "toolorchestra_nominal.yaml pricing_basis.evaluation",
           "retrieved": "2026-11-30", "currency": "USD", "models": models}
    return _write(tmp_path / "together.yaml", yaml.safe_dump(doc))


def test_provider_file_loads_with_its_source(tmp_path: Path) -> None:
    schedule = load_provider_file(_filled_from_nominal(tmp_path), split="heldout")
    assert schedule.kind == "provider" and not schedule.synthetic and schedule.split == "heldout"
    assert schedule.name == "provider-togetherai"
    assert schedule.models == ["Qwen/Qwen3-32B", "meta-llama/Llama-3.3-70B-Instruct"]
    assert all(p.source.startswith("TogetherAI: toolorchestra_nominal.yaml") and "2026-11-30" in p.source
               for p in schedule.prices)
    assert schedule.price("Qwen/Qwen3-32B").latencies[0].alias == "any"


@pytest.mark.parametrize("text, message", [
    ("provider: X\nsource: Y\nretrieved: 2026-11-30\ncurrency: USD\nmodels:\n- {name: a, input_usd_per_1M: 1}\n",
     "models[0]: 'output_usd_per_1M' is a required property"),
    ("provider: X\nsource: Y\nretrieved: 2026-11-30\ncurrency: USD\n"
     "models:\n- {name: a, input_usd_per_1M: cheap, output_usd_per_1M: 1}\n",
     "models[0].input_usd_per_1M: 'cheap' is not of type 'number'"),
    ("provider: X\nsource: Y\nretrieved: 2026-11-30\ncurrency: EUR\nmodels:\n"
     "- {name: a, input_usd_per_1M: 1, output_usd_per_1M: 1}\n", "currency: 'USD' was expected"),
    ("provider: X\nsource: Y\nretrieved: 2026-11-30\ncurrency: USD\nmodels:\n"
     "- {name: a, input_usd_per_1M: 1, output_usd_per_1M: 1}\n- {name: a, input_usd_per_1M: 2, output_usd_per_1M: 2}\n",
     "models[1].name: 'a' is listed twice"),
    ("provider: [unclosed\n", "not valid YAML/JSON"),
    ("provider: X\nsource: Y\nretrieved: 2026-11-30\ncurrency: USD\nmodels:\n"
     "- {name: a, input_usd_per_1M: -1, output_usd_per_1M: 1}\n", "models[0].input_usd_per_1M: -1 is less than"),
])
def test_bad_provider_files_get_one_line_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path / "p.yaml", text)
    with pytest.raises(PricingError) as err:
        load_provider_file(path)
    assert message in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


def test_the_empty_template_is_refused_until_filled() -> None:
    template = NOMINAL_PATH.with_name("provider_template.yaml")
    with pytest.raises(PricingError, match="provider is empty; fill it in"):
        load_provider_file(template)
    raw = yaml.safe_load(template.read_text())
    assert all(raw["models"][0][k] is None for k in ("input_usd_per_1M", "output_usd_per_1M", "latency_s"))
    with pytest.raises(PricingError, match="no such|cannot read"):
        load_provider_file(template.with_name("absent.yaml"))


def test_schedules_round_trip_through_a_real_warehouse(tmp_path: Path) -> None:
    wh = tmp_path / "wh.duckdb"
    provider = load_provider_file(_filled_from_nominal(tmp_path))
    schedules = [nominal_schedule(), *synthetic_schedules(seed=0).all, provider]
    assert store_pricing(wh, PricingRows(**schedule_rows(schedules, datetime(2026, 11, 30)))) == 13
    store_pricing(wh, PricingRows(**schedule_rows(schedules[:2], datetime(2026, 12, 1))))  # re-store replaces
    listed = {s["name"]: s for s in list_schedules(wh)}
    assert len(listed) == 13 and listed[HELDOUT_NAME]["split"] == "heldout" and listed[HELDOUT_NAME]["synthetic"]
    assert not listed["provider-togetherai"]["synthetic"] and not listed["nominal-toolorchestra"]["synthetic"]
    for schedule in schedules:
        back = read_schedule_prices(wh, schedule.schedule_id)
        assert [(r["model"], r["input_usd_per_1m"], r["output_usd_per_1m"]) for r in back] == sorted(
            (p.model, p.input_usd_per_1m, p.output_usd_per_1m) for p in schedule.prices)
        assert all(r["source"] and r["synthetic"] == schedule.synthetic for r in back)
    con = duckdb.connect(str(wh), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM model_prices WHERE source IS NULL OR source = ''").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM model_latencies WHERE schedule_id = ?",
                           [nominal_schedule().schedule_id]).fetchone() == (
            sum(len(p.latencies) for p in nominal_schedule().prices),)
        synthetic_rows = con.execute("SELECT bool_and(p.synthetic), bool_and(p.source LIKE 'synthetic: %') FROM model_prices p"
                                     " JOIN pricing_schedules s USING (schedule_id) WHERE s.kind = 'synthetic'").fetchone()
    finally:
        con.close()
    assert synthetic_rows == (True, True)
