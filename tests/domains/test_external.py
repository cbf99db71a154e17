"""External seed data (sources/from/field), its inverse, JSON array parameters and computed parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domains import external
from domains.engine import DomainEngine
from domains.registry import DOMAIN_NAMES, available_domains, is_default
from domains.spec import SpecError, parse_spec

STORE = {
    "users": {
        "u1": {"user_id": "u1", "name": {"first": "Ada", "last": "Lovelace"}, "orders": ["o1", "o2"],
               "cards": {"gc_1": {"id": "gc_1", "kind": "gift_card", "balance": 50.0}}},
        "u2": {"user_id": "u2", "name": {"first": "Alan", "last": "Turing"}, "orders": [], "cards": {}},
    },
    "orders": {
        "o1": {"order_id": "o1", "user_id": "u1", "status": "pending", "lines": [{"sku": "a", "price": 5.5},
                                                                               {"sku": "b", "price": 2.0}]},
        "o2": {"order_id": "o2", "user_id": "u1", "status": "delivered", "lines": [{"sku": "a", "price": 5.5}]},
    },
}


def _spec(data_path: Path, package: str | None = None) -> dict:
    # a path source is relative to a folder the operator names ($TOOLSCALE_EXTERNAL_SITE; see the fixtures)
    source = {"package": package, "resource": "store.json"} if package else {"path": data_path.name}
    f = lambda path, **kw: {"kind": "field", "path": path, **kw}  # noqa: E731
    return {
        "domain": "store", "description": "A tiny imported store.", "now": "2025-01-01T00:00:00", "default": False,
        "sources": {"store": {**source, "hint": "Make the store file first."}},
        "tables": [
            {"name": "users", "noun": "user", "primary_key": "user_id", "from": {"source": "store", "records": "users"},
             "columns": [{"name": "user_id", "type": "text", "seed": f("user_id")},
                         {"name": "first_name", "type": "text", "seed": f("name.first")},
                         {"name": "last_name", "type": "text", "seed": f("name.last")}]},
            {"name": "cards", "noun": "card", "primary_key": "card_id",
             "from": {"source": "store", "records": "users", "each": "cards"},
             "columns": [{"name": "card_id", "type": "text", "seed": f("id")},
                         {"name": "user_id", "type": "text", "references": "users.user_id", "seed": f("@parent.@key")},
                         {"name": "kind", "type": "text", "seed": f("kind")},
                         {"name": "balance", "type": "real", "nullable": True, "seed": f("balance")}]},
            {"name": "orders", "noun": "order", "primary_key": "order_id",
             "from": {"source": "store", "records": "orders"},
             "columns": [{"name": "order_id", "type": "text", "seed": f("order_id")},
                         {"name": "user_id", "type": "text", "references": "users.user_id", "seed": f("user_id")},
                         {"name": "status", "type": "text", "seed": f("status")}]},
            {"name": "user_orders", "noun": "order of a user", "primary_key": "user_order_id",
             "from": {"source": "store", "records": "users", "each": "orders"},
             "columns": [{"name": "user_order_id", "type": "integer", "seed": f("@ordinal")},
                         {"name": "user_id", "type": "text", "references": "users.user_id", "seed": f("@parent.@key")},
                         {"name": "order_id", "type": "text", "references": "orders.order_id", "seed": f("@value")}]},
            {"name": "lines", "noun": "order line", "primary_key": "line_id",
             "from": {"source": "store", "records": "orders", "each": "lines"},
             "columns": [{"name": "line_id", "type": "integer", "seed": f("@ordinal")},
                         {"name": "order_id", "type": "text", "references": "orders.order_id", "seed": f("@parent.@key")},
                         {"name": "sku", "type": "text", "seed": f("sku")},
                         {"name": "price", "type": "real", "seed": f("price")}]},
        ],
        "tools": [
            {"name": "count_lines", "kind": "read", "entity": "lines",
             "description": "Count how many of the given skus an order holds.",
             "parameters": {"type": "object", "required": ["order_id", "skus"], "properties": {
                 "order_id": {"type": "string"}, "skus": {"type": "array", "items": {"type": "string"}}}},
             "returns": {"sql": "SELECT COUNT(*) AS n FROM lines WHERE order_id = :order_id AND sku IN "
                                "(SELECT value FROM json_each(:skus))"}},
            {"name": "calculate", "kind": "read", "entity": "lines",
             "description": "Calculate an arithmetic expression, rounded to two decimals.",
             "parameters": {"type": "object", "required": ["expression"],
                            "properties": {"expression": {"type": "string"}}},
             "computed": {"result": {"how": "arithmetic", "from": "expression"}},
             "returns": {"sql": "SELECT :result AS result"}},
            {"name": "top_up", "kind": "write", "entity": "cards",
             "description": "Add an amount to a gift card's balance.",
             "parameters": {"type": "object", "required": ["card_id", "amount"], "properties": {
                 "card_id": {"type": "string"}, "amount": {"type": "number"}}},
             "preconditions": [{"sql": "SELECT 1 FROM cards WHERE card_id = :card_id", "error": "Card not found"}],
             "effects": ["UPDATE cards SET balance = ROUND(balance + :amount, 2) WHERE card_id = :card_id"],
             "returns": {"sql": "SELECT balance FROM cards WHERE card_id = :card_id"}},
        ],
        "utterances": {"count_lines": ["count {skus} in order {order_id}"], "calculate": ["work out {expression}"],
                       "top_up": ["add {amount} to card {card_id}"]},
    }


@pytest.fixture(autouse=True)
def operator_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's folder is the one the operator named for external data."""
    monkeypatch.setenv(external.SITE_ENV, str(tmp_path))
    return tmp_path


@pytest.fixture()
def store_file(tmp_path: Path) -> Path:
    path = tmp_path / "store.json"
    path.write_text(json.dumps(STORE))
    return path


def test_rows_come_from_the_external_records_and_map_back_exactly(store_file: Path) -> None:
    spec = parse_spec(_spec(store_file))
    engine = DomainEngine(spec)
    with engine.fresh() as db:
        assert [r["first_name"] for r in db.table_rows("users")] == ["Ada", "Alan"]
        assert db.table_rows("cards") == [{"card_id": "gc_1", "user_id": "u1", "kind": "gift_card", "balance": 50.0}]
        assert [(r["user_id"], r["order_id"]) for r in db.table_rows("user_orders")] == [("u1", "o1"), ("u1", "o2")]
        back = external.to_records(spec, {t.name: db.table_rows(t.name) for t in spec.tables})
    # the inverse rebuilds the nested shape: dicts keyed by id, lists in order, scalar lists, empty collections
    assert back == STORE


def test_a_write_shows_in_the_nested_shape(store_file: Path) -> None:
    spec = parse_spec(_spec(store_file))
    with DomainEngine(spec).fresh() as db:
        assert db.call("top_up", {"card_id": "gc_1", "amount": 12.345}).ok
        back = external.to_records(spec, {t.name: db.table_rows(t.name) for t in spec.tables}, keep={"users": {"u1"}})
    assert back["users"]["u1"]["cards"]["gc_1"]["balance"] == 62.35
    assert set(back["users"]) == {"u1"}  # keep: only the named root records


def test_array_parameters_reach_sql_as_json(store_file: Path) -> None:
    with DomainEngine(parse_spec(_spec(store_file))).fresh() as db:
        assert db.call("count_lines", {"order_id": "o1", "skus": ["a", "b", "z"]}).output == {"n": 2}
        assert db.call("count_lines", {"order_id": "o1", "skus": []}).output == {"n": 0}
        assert not db.call("count_lines", {"order_id": "o1", "skus": "a"}).ok  # still schema-checked


def test_computed_arithmetic_is_evaluated_without_eval(store_file: Path) -> None:
    with DomainEngine(parse_spec(_spec(store_file))).fresh() as db:
        assert db.call("calculate", {"expression": "(2 + 3) * 1.1 / 3"}).output == {"result": 1.83}
        bad = db.call("calculate", {"expression": "__import__('os')"})
        assert not bad.ok and "Invalid" in bad.error
        assert "Division by zero" in db.call("calculate", {"expression": "1 / 0"}).error


def test_missing_external_data_is_one_line_saying_how_to_provide_it(tmp_path: Path) -> None:
    spec = parse_spec(_spec(tmp_path / "absent.json"))  # loading the spec needs no data
    with pytest.raises(external.ExternalDataMissing) as info:
        DomainEngine(spec)
    assert "\n" not in str(info.value) and "absent.json" in str(info.value) and "Make the store file" in str(info.value)
    spec = parse_spec(_spec(tmp_path / "x", package="no_such_package_for_toolscale"))
    with pytest.raises(external.ExternalDataMissing, match="not installed here.*TOOLSCALE_EXTERNAL_SITE"):
        DomainEngine(spec)


def test_a_package_resource_is_found_in_a_configured_site_folder(tmp_path: Path, store_file: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    (site / "fake_store_pkg").mkdir(parents=True)
    (site / "fake_store_pkg" / "store.json").write_text(store_file.read_text())
    monkeypatch.setenv(external.SITE_ENV, str(site))
    spec = parse_spec(_spec(store_file, package="fake_store_pkg"))
    with DomainEngine(spec).fresh() as db:
        assert len(db.table_rows("lines")) == 3


def test_spec_problems_of_the_new_kinds(store_file: Path) -> None:
    raw = _spec(store_file)
    raw["tables"][0]["from"]["source"] = "nowhere"
    raw["tools"][1]["computed"]["result"]["from"] = "missing_param"
    with pytest.raises(SpecError) as info:
        parse_spec(raw)
    text = str(info.value)
    assert "tables[0].from.source: unknown source 'nowhere'" in text
    assert "computed.result.from: 'missing_param' is not a declared parameter" in text
    raw = _spec(store_file)
    del raw["tables"][0]["from"]
    with pytest.raises(SpecError, match=r"tables\[0\]\.rows: a table needs rows|field recipe needs the table"):
        parse_spec(raw)


def test_imported_domains_stay_out_of_a_plain_regenerate() -> None:
    assert "retail" in available_domains()
    assert "retail" not in DOMAIN_NAMES and len(DOMAIN_NAMES) == 10
    assert not is_default(Path(__file__).resolve().parents[2] / "domains" / "retail" / "retail.yaml")


SCHEDULE = {"flights": {
    "F1": {"number": "F1", "origin": "JFK", "dates": {"2024-05-01": {"status": "landed"},
                                      "2024-05-02": {"status": "available", "seats": {"economy": 3, "business": 1}}}},
    "F2": {"number": "F2", "origin": "LAX",
           "dates": {"2024-05-01": {"status": "available", "seats": {"economy": 0, "business": 2}}}},
}}


def test_a_child_dict_keyed_by_repeating_keys_maps_back(tmp_path: Path) -> None:
    """flights.<no>.dates.<date>: the same dates under every flight, so the row key is a position and an ``@key``
    column holds the dict key; a nested object that is absent stays absent (no empty ``seats``)."""
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps(SCHEDULE))
    f = lambda p: {"kind": "field", "path": p}  # noqa: E731
    spec = parse_spec({
        "domain": "schedule", "description": "Flights by date.", "now": "2024-05-15T15:00:00", "default": False,
        "sources": {"s": {"path": path.name}},
        "tables": [
            {"name": "flights", "noun": "flight", "primary_key": "number",
             "from": {"source": "s", "records": "flights"},
             "columns": [{"name": "number", "type": "text", "seed": f("number")},
                         {"name": "origin", "type": "text", "seed": f("origin")}]},
            {"name": "flight_dates", "noun": "flight date", "primary_key": "flight_date_id",
             "from": {"source": "s", "records": "flights", "each": "dates"},
             "columns": [{"name": "flight_date_id", "type": "integer", "seed": f("@ordinal")},
                         {"name": "number", "type": "text", "references": "flights.number", "seed": f("@parent.@key")},
                         {"name": "date", "type": "text", "seed": f("@key")},
                         {"name": "status", "type": "text", "seed": f("status")},
                         {"name": "seats_economy", "type": "integer", "nullable": True, "seed": f("seats.economy")},
                         {"name": "seats_business", "type": "integer", "nullable": True,
                          "seed": f("seats.business")}]},
        ],
        "tools": [{"name": "take_seat", "kind": "write", "entity": "flight_dates",
                   "description": "Take one economy seat on a flight on a date.",
                   "parameters": {"type": "object", "required": ["number", "date"],
                                  "properties": {"number": {"type": "string"}, "date": {"type": "string"}}},
                   "preconditions": [{"sql": "SELECT 1 FROM flight_dates WHERE number = :number AND date = :date "
                                             "AND seats_economy > 0", "error": "No seat"}],
                   "effects": ["UPDATE flight_dates SET seats_economy = seats_economy - 1 "
                               "WHERE number = :number AND date = :date"],
                   "returns": {"sql": "SELECT seats_economy FROM flight_dates "
                                      "WHERE number = :number AND date = :date"}}],
        "utterances": {"take_seat": ["book me on {number} on {date}"]},
    })
    with DomainEngine(spec).fresh() as db:
        assert [(r["number"], r["date"]) for r in db.table_rows("flight_dates")] == [
            ("F1", "2024-05-01"), ("F1", "2024-05-02"), ("F2", "2024-05-01")]
        assert external.to_records(spec, {t.name: db.table_rows(t.name) for t in spec.tables}) == SCHEDULE
        assert db.call("take_seat", {"number": "F1", "date": "2024-05-02"}).ok
        assert not db.call("take_seat", {"number": "F2", "date": "2024-05-01"}).ok
        back = external.to_records(spec, {t.name: db.table_rows(t.name) for t in spec.tables})
    assert back["flights"]["F1"]["dates"]["2024-05-02"]["seats"] == {"economy": 2, "business": 1}
    assert back["flights"]["F2"] == SCHEDULE["flights"]["F2"]
