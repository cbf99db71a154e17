"""Hostile domain specs: each mutation of a real spec is refused with one line naming file and path, and
the guards that SQLite enforces at call time leave the database unchanged."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from domains import check
from domains.engine import DomainEngine
from domains.registry import spec_path
from domains.spec import Precondition, SpecError, load_spec, parse_spec
from tests.hostile.conftest import column_of, located, spec_error, tool_of, weather_engine, weather_raw, with_tool

RUNAWAY = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT x FROM n"
Mutation = Callable[[dict[str, Any]], None]


def _returns(tool: str, sql: str) -> Mutation:
    return lambda raw: tool_of(raw, tool)["returns"].__setitem__("sql", sql)


def _precondition(tool: str, sql: str) -> Mutation:
    return lambda raw: tool_of(raw, tool)["preconditions"][0].__setitem__("sql", sql)


def _effect(tool: str, sql: str) -> Mutation:
    return lambda raw: tool_of(raw, tool)["effects"].__setitem__(0, sql)


def _seed(table: str, column: str, recipe: dict[str, Any], **extra: Any) -> Mutation:
    def mutate(raw: dict[str, Any]) -> None:
        col = column_of(raw, table, column)
        col["seed"] = recipe
        col.update(extra)
    return mutate


# (case, mutation, expected fragment of the one error line); all refused by load_spec/domains.check
LOAD_TIME: list[tuple[str, Mutation, str]] = [
    ("read tool deletes through a CTE",
     _returns("get_alert", "WITH x AS (SELECT 1) DELETE FROM alerts WHERE alert_id = :alert_id RETURNING *"),
     "tools[<get_alert>].returns.sql: refused: a read statement may not write (DELETE on alerts)"),
    ("read tool updates through a CTE",
     _returns("get_alert", "WITH x AS (SELECT 1) UPDATE alerts SET status = 'cancelled' "
                           "WHERE alert_id = :alert_id RETURNING *"),
     "tools[<get_alert>].returns.sql: refused: a read statement may not write (UPDATE on alerts)"),
    ("read tool inserts through a CTE",
     _returns("get_station", "WITH x AS (SELECT 1) INSERT INTO regions (region_id, name, country, climate) "
                             "VALUES ('RG999', 'n', 'c', 'temperate') RETURNING *"),
     "tools[<get_station>].returns.sql: refused: a read statement may not write (INSERT on regions)"),
    ("write tool's returns.sql deletes",
     _returns("cancel_alert", "WITH x AS (SELECT 1) DELETE FROM stations RETURNING station_id"),
     "tools[<cancel_alert>].returns.sql: refused: a read statement may not write (DELETE on stations)"),
    ("precondition deletes",
     _precondition("cancel_alert", "WITH x AS (SELECT 1) DELETE FROM alerts WHERE alert_id = :alert_id "
                                   "RETURNING alert_id"),
     "tools[<cancel_alert>].preconditions[0].sql: refused: a read statement may not write (DELETE on alerts)"),
    ("precondition updates",
     _precondition("get_station", "WITH x AS (SELECT 1) UPDATE stations SET status = 'retired' RETURNING 1"),
     "tools[<get_station>].preconditions[0].sql: refused: a read statement may not write (UPDATE on stations)"),
    ("pragma function in a read",
     _returns("get_alert", "SELECT name FROM pragma_table_info('alerts') WHERE :alert_id IS NOT NULL"),
     "tools[<get_alert>].returns.sql: refused: it uses SQLite's own table sqlite_master (PRAGMA functions"),
    ("pragma database list in a precondition",
     _precondition("get_alert", "SELECT 1 FROM pragma_database_list WHERE :alert_id IS NOT NULL"),
     "tools[<get_alert>].preconditions[0].sql: refused: it uses SQLite's own table sqlite_master (PRAGMA functions"),
    ("pragma function in an effect",
     _effect("cancel_alert", "UPDATE alerts SET status = (SELECT count(*) FROM pragma_foreign_key_list('alerts')) "
                             "WHERE alert_id = :alert_id"),
     "tools[<cancel_alert>].effects[0]: refused: it uses SQLite's own table sqlite_master (PRAGMA functions"),
    ("reads the schema table",
     _returns("get_alert", "SELECT sql FROM sqlite_master WHERE name = :alert_id"),
     "tools[<get_alert>].returns.sql: refused: it uses SQLite's own table sqlite_master"),
    ("non-deterministic function",
     _returns("get_alert", "SELECT alert_id, random() AS r FROM alerts WHERE alert_id = :alert_id"),
     "tools[<get_alert>].returns.sql: refused: it calls random()"),
    ("double-quoted text in a read",
     _returns("get_alert", 'SELECT * FROM alerts WHERE status = "active" AND alert_id = :alert_id'),
     'tools[<get_alert>].returns.sql: double-quoted "active" names no column'),
    ("double-quoted text in a precondition",
     _precondition("cancel_alert", 'SELECT 1 FROM alerts WHERE alert_id = :alert_id AND status = "active"'),
     'tools[<cancel_alert>].preconditions[0].sql: double-quoted "active" names no column'),
    ("double-quoted text in an effect",
     _effect("cancel_alert", 'UPDATE alerts SET status = "cancelled" WHERE alert_id = :alert_id'),
     'tools[<cancel_alert>].effects[0]: double-quoted "cancelled" names no column'),
    ("text choice in an integer column",
     _seed("stations", "elevation_m", {"kind": "choice", "values": ["high", "low"]}),
     "tables[<stations>].columns[<stations.elevation_m>].seed.values: 'high' is not an integer"),
    ("text constant in a real column",
     _seed("observations", "temperature_c", {"kind": "constant", "value": "warm"}),
     "tables[<observations>].columns[<observations.temperature_c>].seed.value: 'warm' is not a number"),
    ("text constant in a boolean column",
     _seed("observations", "verified", {"kind": "constant", "value": "yes"}),
     "tables[<observations>].columns[<observations.verified>].seed.value: 'yes' is not a boolean"),
    ("integer beyond 64 bits",
     _seed("stations", "elevation_m", {"kind": "constant", "value": 2**70}),
     "tables[<stations>].columns[<stations.elevation_m>].seed.value: 1180591620717411303424 (int) is outside SQLite's 64-bit integer range"),
    ("impossible date in a date column",
     _seed("stations", "installed_on", {"kind": "choice", "values": ["2025-02-30"]}),
     "tables[<stations>].columns[<stations.installed_on>].seed.values: '2025-02-30' is not a real date"),
    ("huge constant text",
     _seed("regions", "climate", {"kind": "constant", "value": "x" * 3000}),
     "tables[<regions>].columns[<regions.climate>].seed.value: a text value of 3,000 characters (limit 2,000)"),
    ("undeclared e-mail format",
     lambda raw: tool_of(raw, "find_subscriber_by_email")["parameters"]["properties"]["email"].pop("format"),
     "tools[<find_subscriber_by_email>].parameters.properties.email: an email parameter must declare format: email"),
    ("undeclared datetime format",
     lambda raw: tool_of(raw, "issue_alert")["parameters"]["properties"]["ends_at"].pop("format"),
     "tools[<issue_alert>].parameters.properties.ends_at: a date-time parameter must declare format: date-time"),
    ("impossible clock", lambda raw: raw.__setitem__("now", "2025-02-30T09:00:00"),
     "now: '2025-02-30T09:00:00' is not a real datetime"),
    ("clock with a trailing newline", lambda raw: raw.__setitem__("now", "2025-06-15T09:00:00\n"),
     "now: '2025-06-15T09:00:00\\n' is not an ISO datetime"),
    ("unknown format",
     lambda raw: tool_of(raw, "get_alert")["parameters"]["properties"]["alert_id"].__setitem__("format", "uuid"),
     "tools[<get_alert>].parameters.properties.alert_id.format: unknown format 'uuid'"),
]


@pytest.mark.parametrize("case,mutate,expected", LOAD_TIME, ids=[c[0] for c in LOAD_TIME])
def test_a_hostile_spec_is_refused_at_load(case: str, mutate: Mutation, expected: str) -> None:
    raw = weather_raw()
    mutate(raw)
    line = spec_error(raw)
    assert line.startswith("weather.yaml: ") and located(expected) in line, line


# (case, mutation, expected fragment); refused when the engine seeds the spec (domains.check does this)
SEED_TIME: list[tuple[str, Mutation, str]] = [
    ("formula text into an integer column",
     _seed("stations", "elevation_m", {"kind": "formula", "expr": "'high'"}),
     "tables[<stations>].columns[<stations.elevation_m>] (elevation_m): row 0: 'high' is not an integer"),
    ("formula divides by zero",
     _seed("stations", "elevation_m", {"kind": "formula", "expr": "randint(1, 5) // 0"}),
     "tables[<stations>].columns[<stations.elevation_m>] (elevation_m): seeding failed: ZeroDivisionError"),
    ("formula of 10 MB per row",
     _seed("stations", "name", {"kind": "formula", "expr": "'x' * 10000000"}),
     "tables[<stations>].columns[<stations.name>] (name): seeding failed: ValueError: the formula builds a value of 10,000,000 items"),
    ("formula of 1 TB per row",
     _seed("stations", "name", {"kind": "formula", "expr": "'x' * 1000000 * 1000000"}),
     "tables[<stations>].columns[<stations.name>] (name): seeding failed: ValueError: the formula builds a value of"),
    ("formula over the text limit",
     _seed("stations", "name", {"kind": "formula", "expr": "'ab' * 1500"}),
     "tables[<stations>].columns[<stations.name>] (name): row 0: a text value of 3,000 characters (limit 2,000)"),
    ("formula overflows a datetime",
     _seed("alerts", "ends_at", {"kind": "formula", "expr": "datetime_add(starts_at, 99999999999999)"}),
     "tables[<alerts>].columns[<alerts.ends_at>] (ends_at): seeding failed: OverflowError"),
    ("formula parses bad text",
     _seed("stations", "elevation_m", {"kind": "formula", "expr": "int('abc')"}),
     "tables[<stations>].columns[<stations.elevation_m>] (elevation_m): seeding failed: ValueError"),
    ("formula adds text and a number",
     _seed("alerts", "ends_at", {"kind": "formula", "expr": "starts_at + 1"}),
     "tables[<alerts>].columns[<alerts.ends_at>] (ends_at): seeding failed: TypeError"),
    ("formula makes a number in a text column",
     _seed("stations", "name", {"kind": "formula", "expr": "randint(1, 5)"}),
     "tables[<stations>].columns[<stations.name>] (name): row 0: "),
    ("formula makes an impossible datetime",
     _seed("alerts", "ends_at", {"kind": "formula", "expr": "'2025-13-01T00:00:00'"}),
     "tables[<alerts>].columns[<alerts.ends_at>] (ends_at): row 0: '2025-13-01T00:00:00' is not a real datetime"),
    ("formula makes NaN",
     _seed("observations", "temperature_c", {"kind": "formula", "expr": "float('nan')"}),
     "tables[<observations>].columns[<observations.temperature_c>] (temperature_c): row 0: nan is not a finite number"),
    ("formula makes null in a required column",
     _seed("stations", "status", {"kind": "formula", "expr": "None"}),
     "tables[<stations>].columns[<stations.status>] (status): row 0: no value (null) in a column that is not nullable"),
    ("date recipe with an impossible start",
     _seed("stations", "installed_on", {"kind": "date", "start": "2025-02-30", "end": "2025-03-30"}),
     "tables[<stations>].columns[<stations.installed_on>] (installed_on): seeding failed: ValueError: day is out of range for month"),
    ("choice weights that are all zero",
     _seed("regions", "climate", {"kind": "choice", "values": ["oceanic", "alpine"], "weights": [0, 0]}),
     "tables[<regions>].columns[<regions.climate>] (climate): seeding failed: ValueError"),
    ("unique column with too few values",
     _seed("regions", "name", {"kind": "formula", "expr": "choice('North', 'South')"}, unique=True),
     "tables[<regions>].columns[<regions.name>] (name): row 2: the value "),
    ("formula value outside the enum",
     _seed("regions", "climate", {"kind": "formula", "expr": "'volcanic'"}),
     "tables[<regions>].columns[<regions.climate>] (climate): row 0: 'volcanic' is not one of the column's enum values"),
]


@pytest.mark.parametrize("case,mutate,expected", SEED_TIME, ids=[c[0] for c in SEED_TIME])
def test_a_seeding_failure_is_a_spec_error_with_its_column(case: str, mutate: Mutation, expected: str) -> None:
    raw = weather_raw()
    mutate(raw)
    start = time.perf_counter()
    line = spec_error(raw, build_engine=True)
    assert line.startswith("weather.yaml: ") and located(expected) in line, line
    assert time.perf_counter() - start < 5


def _write(tmp_path: Path, text: str | bytes, name: str = "weather.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _load_error(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert len(info.value.problems) == 1, info.value.problems
    return info.value.problems[0]


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))


def test_a_yaml_alias_bomb_is_refused_without_being_expanded(tmp_path: Path) -> None:
    # 9**9 nodes if expanded: refusing it must cost about what loading the plain spec costs (a ratio measured in one
    # run, so a busy machine does not fail it), not the minutes an expansion would take.
    plain = tmp_path / "plain"
    plain.mkdir()
    plain_path = _write(plain, spec_path_text())
    start = time.perf_counter()
    load_spec(plain_path)
    plain_s = time.perf_counter() - start
    raw_text = spec_path_text().replace("tools:\n", "bomb_holder: &holder\n" + _indent(ALIAS_BOMB) + "tools:\n", 1)
    start = time.perf_counter()
    line = _load_error(_write(tmp_path, raw_text))
    elapsed = time.perf_counter() - start
    assert "alias bomb" in line and line.startswith("weather.yaml: "), line
    assert elapsed < 5 * plain_s + 0.5, (elapsed, plain_s)


def test_a_bomb_in_tool_parameters_is_refused(tmp_path: Path) -> None:
    text = ALIAS_BOMB + "domain: weather\n"
    assert "alias bomb" in _load_error(_write(tmp_path, text))


def test_too_many_aliases_are_refused(tmp_path: Path) -> None:
    text = "x: &x 1\nitems: [" + ", ".join(["*x"] * 300) + "]\n"
    assert "more than 200 YAML aliases" in _load_error(_write(tmp_path, text))


def test_yaml_nested_too_deep_is_refused(tmp_path: Path) -> None:
    line = _load_error(_write(tmp_path, "a: " + "[" * 5000 + "]" * 5000 + "\n"))
    assert "nested deeper than 64 levels" in line, line


def test_a_spec_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    line = _load_error(_write(tmp_path, "# padding\n" * 220_000))
    assert "a spec may be at most 2,000,000" in line, line


def test_a_spec_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    assert "not UTF-8 text" in _load_error(_write(tmp_path, b"domain: w\xe9ather\n"))


def test_a_directory_named_like_a_spec_is_refused(tmp_path: Path) -> None:
    (tmp_path / "weather.yaml").mkdir()
    assert "not a regular file" in _load_error(tmp_path / "weather.yaml")


def test_broken_yaml_is_one_line(tmp_path: Path) -> None:
    line = _load_error(_write(tmp_path, "domain: [unclosed\n  tools: {\n"))
    assert line.startswith("weather.yaml: not valid YAML: ") and "\n" not in line, line


def test_a_yaml_python_tag_is_refused(tmp_path: Path) -> None:
    line = _load_error(_write(tmp_path, "domain: !!python/object/apply:os.system ['true']\n"))
    assert "not valid YAML" in line, line


def spec_path_text() -> str:
    return spec_path("weather").read_text()


def _indent(text: str) -> str:
    return "".join("  " + line + "\n" for line in text.splitlines())


# ---- call time: a spec built without the load-time checks still cannot write from a read or hang a call

def _call_error(spec_changes: dict[str, Any], tool: str, arguments: dict[str, Any]) -> tuple[str, DomainEngine]:
    base = weather_engine()
    engine = DomainEngine(with_tool(base.spec, tool, **spec_changes), 0)
    with engine.fresh() as db:
        start = time.perf_counter()
        result = db.call(tool, arguments)
        assert time.perf_counter() - start < 3
        assert not result.ok and result.error is not None and "\n" not in result.error, result
        assert db.fingerprint() == engine.fingerprint
        assert db.query("SELECT COUNT(*) FROM alerts") == [(50,)]
    return result.error, engine


def test_a_read_that_deletes_is_an_error_at_call_time_and_deletes_nothing() -> None:
    error, _ = _call_error({"returns_sql": "WITH x AS (SELECT 1) DELETE FROM alerts RETURNING *"},
                           "get_alert", {"alert_id": "AL0001"})
    assert error == "get_alert failed: returns.sql: refused: a read statement may not write (DELETE on alerts)"


def test_a_precondition_that_updates_is_an_error_at_call_time() -> None:
    pre = Precondition("WITH x AS (SELECT 1) UPDATE alerts SET status = 'cancelled' RETURNING alert_id", "no")
    error, _ = _call_error({"preconditions": (pre,)}, "cancel_alert", {"alert_id": "AL0002"})
    assert "preconditions[0]: refused: a read statement may not write (UPDATE on alerts)" in error


def test_a_runaway_recursion_in_a_read_exceeds_its_budget() -> None:
    error, _ = _call_error({"returns_sql": RUNAWAY, "returns_mode": "many"}, "get_alert", {"alert_id": "AL0001"})
    assert "returns.sql: statement exceeded its budget of 10,000,000 SQLite steps" in error, error


def test_a_runaway_recursion_in_a_precondition_exceeds_its_budget() -> None:
    pre = Precondition("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) "
                       "SELECT 1 FROM n WHERE x < 0", "never")
    error, _ = _call_error({"preconditions": (pre,)}, "cancel_alert", {"alert_id": "AL0002"})
    assert "preconditions[0]: statement exceeded its budget" in error, error


def test_a_huge_blob_in_a_read_is_refused() -> None:
    error, _ = _call_error({"returns_sql": "SELECT zeroblob(2000000000) AS b"}, "get_alert", {"alert_id": "AL0001"})
    assert "exceeded the limit of 1,000,000 bytes" in error, error


def test_domains_check_reports_a_runaway_tool_instead_of_hanging(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    raw = weather_raw()
    tool_of(raw, "get_alert")["returns"].update(sql=RUNAWAY + " WHERE x > 0 AND :alert_id IS NOT NULL", mode="many")
    path = _write(tmp_path, yaml.safe_dump(raw, sort_keys=False))
    start = time.perf_counter()
    assert check.main([str(path)]) == 1
    assert time.perf_counter() - start < 20
    out = capsys.readouterr().out
    assert "tool get_alert example 0: get_alert failed: returns.sql: statement exceeded its budget" in out, out


def test_domains_check_reports_a_seeding_error_with_its_column(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    raw = weather_raw()
    _seed("stations", "elevation_m", {"kind": "formula", "expr": "randint(1, 5) / 0"})(raw)
    path = _write(tmp_path, yaml.safe_dump(raw, sort_keys=False))
    assert check.main([str(path)]) == 1
    out = capsys.readouterr().out
    expected = located("weather.yaml: tables[<stations>].columns[<stations.elevation_m>] (elevation_m): seeding failed")
    assert expected + ": ZeroDivisionError" in out, out
    assert "Traceback" not in out


def test_double_quoted_real_columns_and_quotes_inside_text_stay_accepted() -> None:
    raw = weather_raw()
    tool_of(raw, "get_alert")["returns"]["sql"] = (
        'SELECT "alert_id", status, \'say "hi"\' AS note FROM alerts -- "comment"\n WHERE alert_id = :alert_id')
    spec = parse_spec(raw, label="weather.yaml")
    with DomainEngine(spec, 0).fresh() as db:
        result = db.call("get_alert", {"alert_id": "AL0001"})
    assert result.ok and result.output["note"] == 'say "hi"', result
