"""Hostile LLM-proposed specs: paths that reach the host, message templates that run code or allocate, and names
that shadow the exported runtime. Each is refused with one line (at load, so ``domains.check`` and the propose
stage refuse it too), the line never repeats an environment variable's value, and nothing is written."""

from __future__ import annotations

import copy
import os
import subprocess
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from domains import external
from domains.engine import DomainEngine
from domains.external import ExternalDataMissing, Source
from domains.propose import Rejection, judge_spec
from domains.registry import spec_path
from domains.reserved import (RUNTIME, TAU2_TOOLKIT_FALLBACK, class_members, reserved_table_names,
                              reserved_tool_names)
from synthesis.realistic import render
from tests.hostile.conftest import spec_error, tool_of, weather_engine, weather_raw, with_tool

REPO = Path(__file__).resolve().parents[2]
SECRET = "host-secret-7f3a"
Mutation = Callable[[dict[str, Any]], None]


@pytest.fixture(autouse=True)
def nothing_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every case: a secret sits in the environment, and afterwards the repository and the scratch folder are
    as they were."""
    monkeypatch.setenv("TOOLSCALE_TEST_SECRET", SECRET)
    before = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    listed = sorted(p.name for p in tmp_path.iterdir())
    yield
    after = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listed


def _source(**source: str) -> Mutation:
    return lambda raw: raw.setdefault("sources", {}).__setitem__("host", source)


def _error(tool: str, message: str) -> Mutation:
    return lambda raw: tool_of(raw, tool)["preconditions"][0].__setitem__("error", message)


def _phrasing(text: str) -> Mutation:
    return lambda raw: raw["intents"][0]["phrasings"].__setitem__(0, text)


def _say(text: str) -> Mutation:
    def mutate(raw: dict[str, Any]) -> None:
        outcome = next(iter(raw["intents"][0]["outcomes"].values()))
        outcome["say"] = [text]
    return mutate


def _extra_tool(name: str) -> Mutation:
    """A copy of get_station under ``name`` (with its utterances): only the name can be wrong."""
    def mutate(raw: dict[str, Any]) -> None:
        tool = copy.deepcopy(tool_of(raw, "get_station"))
        tool["name"] = name
        raw["tools"].append(tool)
        raw["utterances"][name] = ["look up station {station_id}"]
    return mutate


def _extra_table(name: str) -> Mutation:
    def mutate(raw: dict[str, Any]) -> None:
        raw["tables"].append({"name": name, "noun": "thing", "rows": 3, "primary_key": f"{name}_key",
                              "columns": [{"name": f"{name}_key", "type": "text",
                                           "seed": {"kind": "sequence", "prefix": "TH", "width": 3}},
                                          {"name": f"{name}_label", "type": "text",
                                           "seed": {"kind": "provider", "provider": "full_name"}}]})
    return mutate


PATH_REFUSED = "refused: it names an environment variable ($); spec paths are taken literally and never expanded"
TILDE = "refused: it starts with ~; spec paths are taken literally and never expanded"
ABSOLUTE = "refused: it is absolute; write it relative to a folder named with --external-site"
CLIMBS = "refused: it climbs out of its folder (..)"

# (case, mutation, fragment of the one error line)
CASES: list[tuple[str, Mutation, str]] = [
    # sources: nothing expanded, nothing absolute, nothing climbing out
    ("path names $HOME", _source(path="$HOME/.bashrc"), f"sources.host.path: {PATH_REFUSED}"),
    ("path names ${VAR} holding a secret", _source(path="${TOOLSCALE_TEST_SECRET}/db.json"),
     f"sources.host.path: {PATH_REFUSED}"),
    ("path names $VAR mid-way", _source(path="data/$TOOLSCALE_TEST_SECRET.json"), f"sources.host.path: {PATH_REFUSED}"),
    ("path starts with ~", _source(path="~/.ssh/config.json"), f"sources.host.path: {TILDE}"),
    ("path starts with ~user", _source(path="~root/db.json"), f"sources.host.path: {TILDE}"),
    ("absolute path to a host file", _source(path="/etc/passwd"), f"sources.host.path: {ABSOLUTE}"),
    ("absolute path to /proc", _source(path="/proc/self/environ"), f"sources.host.path: {ABSOLUTE}"),
    ("windows drive path", _source(path="C:/Users/x/db.json"), f"sources.host.path: {ABSOLUTE}"),
    ("backslash root path", _source(path="\\\\server\\share\\db.json"), f"sources.host.path: {ABSOLUTE}"),
    ("path climbs out", _source(path="../../../../etc/passwd"), f"sources.host.path: {CLIMBS}"),
    ("path climbs out mid-way", _source(path="data/../../db.json"), f"sources.host.path: {CLIMBS}"),
    ("path climbs with backslashes", _source(path="data\\..\\..\\db.json"), f"sources.host.path: {CLIMBS}"),
    ("path holds a NUL", _source(path="db.json\x00.txt"), "sources.host.path: refused: it holds a control character"),
    ("resource climbs out of its package", _source(package="tau2", resource="../../../../etc/passwd"),
     f"sources.host.resource: {CLIMBS}"),
    ("resource is absolute", _source(package="tau2", resource="/etc/shadow"), f"sources.host.resource: {ABSOLUTE}"),
    ("resource names $VAR", _source(package="tau2", resource="$TOOLSCALE_TEST_SECRET/db.json"),
     f"sources.host.resource: {PATH_REFUSED}"),
    ("package name climbs", _source(package="..", resource="db.json"), "sources.host.package: '..' does not match"),
    ("package name with an empty part", _source(package="tau2..data", resource="db.json"),
     "sources.host.package: 'tau2..data' does not match"),
    # precondition messages: {parameter} and nothing else
    ("message reads attributes", _error("get_station", "{station_id.__class__.__mro__}"),
     "preconditions[0].error: placeholder {station_id.__class__.__mro__} is refused"),
    ("message pads to 2 GB", _error("get_station", "Station {station_id:>2000000000} not found."),
     "preconditions[0].error: placeholder {station_id:>2000000000} is refused"),
    ("message indexes", _error("get_station", "Station {station_id[0]} not found."),
     "preconditions[0].error: placeholder {station_id[0]} is refused"),
    ("message converts", _error("get_station", "Station {station_id!r} not found."),
     "preconditions[0].error: placeholder {station_id!r} is refused"),
    ("message has an empty field", _error("get_station", "Station {} not found."),
     "preconditions[0].error: placeholder {} is refused"),
    ("message has a positional field", _error("get_station", "Station {0} not found."),
     "preconditions[0].error: placeholder {0} is refused"),
    ("message has a lone {", _error("get_station", "Station { not found."),
     "preconditions[0].error: a lone '{': braces are only for {parameter} placeholders"),
    ("message has a lone }", _error("get_station", "Station } not found."),
     "preconditions[0].error: a lone '}': braces are only for {parameter} placeholders"),
    ("message nests a field in a format spec", _error("get_station", "{station_id:{station_id}}"),
     "preconditions[0].error: a lone '{': braces are only for {parameter} placeholders"),
    ("message reaches globals through now", _error("get_station", "{now.__init__.__globals__}"),
     "preconditions[0].error: placeholder {now.__init__.__globals__} is refused"),
    ("message names no parameter", _error("get_station", "Station {password} not found."),
     "preconditions[0].error: slot {password} is not a parameter"),
    ("mention reads attributes", lambda raw: tool_of(raw, "find_station_by_name").__setitem__(
        "mention", "the {name.__class__} station"), ".mention: placeholder {name.__class__} is refused"),
    # realism templates: {slot}, {slot[key]}, a short number format
    ("phrasing reads attributes", _phrasing("send me {hazard.__class__.__mro__} alerts for {region_name}"),
     "intents[0].phrasings[0]: placeholder {hazard.__class__.__mro__} is refused"),
    ("phrasing converts", _phrasing("send me {hazard!r} alerts for {region_name}"),
     "intents[0].phrasings[0]: placeholder {hazard!r} is refused"),
    ("phrasing pads to 2 GB", _phrasing("send me {hazard:>2000000000} alerts for {region_name}"),
     "intents[0].phrasings[0]: placeholder {hazard:>2000000000} is refused"),
    ("phrasing has unbalanced braces", _phrasing("send me {hazard alerts for {region_name}"),
     "intents[0].phrasings[0]: unbalanced braces"),
    ("say reaches globals", _say("done: {result.__init__.__globals__}"),
     "placeholder {result.__init__.__globals__} is refused"),
    # names the exported tau2 runtime uses itself
    ("tool named update_db", _extra_tool("update_db"), "'update_db' is a name the exported tau2 toolkit uses itself"),
    ("tool named conn (an instance attribute)", _extra_tool("conn"), "'conn' is a name the exported tau2 toolkit"),
    ("tool named domain (set on every toolkit)", _extra_tool("domain"), "'domain' is a name the exported tau2"),
    ("tool named run_tool", _extra_tool("run_tool"), "'run_tool' is a name the exported tau2 toolkit uses itself"),
    ("tool named use_tool (tau2's own)", _extra_tool("use_tool"), "'use_tool' is a name the exported tau2 toolkit"),
    ("tool named get_db_hash", _extra_tool("get_db_hash"), "'get_db_hash' is a name the exported tau2 toolkit"),
    ("tool named tools", _extra_tool("tools"), "'tools' is a name the exported tau2 toolkit uses itself"),
    ("table named dump (tau2's DB)", _extra_table("dump"), "'dump' is a name of the exported tau2 DB model itself"),
    ("table named model_fields (pydantic)", _extra_table("model_fields"), "'model_fields' is a name of the exported"),
    ("table named copy (pydantic)", _extra_table("copy"), "'copy' is a name of the exported tau2 DB model itself"),
]


@pytest.mark.parametrize("case, mutate, expected", CASES, ids=[c[0] for c in CASES])
def test_hostile_spec_is_refused_with_one_line(case: str, mutate: Mutation, expected: str):
    raw = weather_raw()
    mutate(raw)
    start = time.monotonic()
    line = spec_error(raw)
    assert expected in line, line
    assert SECRET not in line and os.environ["HOME"] + "/" not in line
    assert time.monotonic() - start < 10  # the checks stay fast


def test_the_refusal_never_repeats_the_variable_or_its_value():
    raw = weather_raw()
    _source(path="${TOOLSCALE_TEST_SECRET}/db.json")(raw)
    line = spec_error(raw)
    assert "${" not in line and "TOOLSCALE_TEST_SECRET" not in line and SECRET not in line


# ---- the propose stage: its rejection detail is what the warehouse stores ----------------------------------

def _proposal(mutate: Mutation) -> str:
    raw = weather_raw()
    raw["domain"] = "proposed_weather"
    mutate(raw)
    return "```yaml\n" + yaml.safe_dump(raw, sort_keys=False) + "```"


@pytest.mark.parametrize("mutate", [_source(path="${TOOLSCALE_TEST_SECRET}/db.json"), _source(path="/etc/passwd"),
                                    _source(path="~/x.json"), _error("get_station", "{station_id:>2000000000}"),
                                    _extra_tool("update_db")],
                         ids=["env var", "host file", "home", "2 GB pad", "update_db"])
def test_a_proposal_is_rejected_as_invalid_and_its_detail_holds_no_secret(mutate: Mutation):
    judged = judge_spec("proposal-0", _proposal(mutate))
    assert isinstance(judged, Rejection) and judged.reason == "invalid_spec", judged
    assert "\n" not in judged.detail and SECRET not in judged.detail and "${" not in judged.detail


# ---- call-time: a message that slipped past the load checks is substituted, never formatted -----------------

@pytest.mark.parametrize("message", ["Station {station_id:>2000000000} not found.", "{station_id.__class__.__mro__}",
                                     "{station_id!r} {0} {} { }"])
def test_engine_fills_messages_by_substitution_only(message: str):
    engine = weather_engine()
    spec = with_tool(engine.spec, "get_station", preconditions=tuple(
        p.__class__(**{**p.__dict__, "error": message}) for p in engine.spec.tool("get_station").preconditions))
    tracemalloc.start()
    with DomainEngine(spec, 0).fresh() as db:
        result = db.call("get_station", {"station_id": "ST9999"})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert not result.ok and result.error == message  # kept literally: no class, no padding
    assert peak < 200 << 20


def test_realism_render_refuses_an_unsafe_template():
    assert render("{user_name.__class__}", {"user_name": "Ann"}) is None
    assert render("{amount:>999999999}", {"amount": 3}) is None
    assert render("{amount:.2f} due", {"amount": 3}) == "3.00 due"


# ---- resolving sources: only operator-named folders, nothing outside them ----------------------------------

def test_a_path_source_needs_an_operator_named_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(external.SITE_ENV, raising=False)
    monkeypatch.chdir(REPO)
    with pytest.raises(ExternalDataMissing) as info:
        external.resolve(Source("host", path="pyproject.toml"))  # exists relative to the working folder
    assert "\n" not in str(info.value) and "0 folder(s) named with --external-site" in str(info.value)


def test_a_symlink_out_of_the_operator_folder_is_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    site = tmp_path / "site"
    site.mkdir()
    (site / "db.json").symlink_to("/etc/hostname")
    monkeypatch.setenv(external.SITE_ENV, str(site))
    try:
        with pytest.raises(ExternalDataMissing, match="no file db.json in the 1 folder"):
            external.resolve(Source("host", path="db.json"))
    finally:
        (site / "db.json").unlink()
        site.rmdir()


def test_a_package_resource_may_not_leave_its_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pkg = tmp_path / "site" / "fake_pkg_for_toolscale"
    pkg.mkdir(parents=True)
    (pkg / "db.json").symlink_to(REPO / "pyproject.toml")
    monkeypatch.setenv(external.SITE_ENV, str(tmp_path / "site"))
    try:
        with pytest.raises(ExternalDataMissing, match="has no db.json"):
            external.resolve(Source("host", package="fake_pkg_for_toolscale", resource="db.json"))
        with pytest.raises(ExternalDataMissing, match="climbs out"):
            external.resolve(Source("host", package="fake_pkg_for_toolscale", resource="../../x"))
    finally:
        (pkg / "db.json").unlink()
        pkg.rmdir()
        pkg.parent.rmdir()


def test_a_file_in_an_operator_folder_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    site = tmp_path / "site"
    (site / "data").mkdir(parents=True)
    (site / "data" / "db.json").write_text("{}")
    monkeypatch.setenv(external.SITE_ENV, str(site))
    try:
        assert external.resolve(Source("ok", path="data/db.json")) == (site / "data" / "db.json").resolve()
    finally:
        (site / "data" / "db.json").unlink()
        (site / "data").rmdir()
        site.rmdir()


# ---- the reserved names are derived, not only listed --------------------------------------------------------

def test_reserved_tool_names_follow_the_runtime_source():
    source = RUNTIME.read_text(encoding="utf-8").replace(
        "    def run_tool(self", "    def brand_new_helper(self) -> None:\n        self.cache_dir = None\n\n"
                                "    def run_tool(self", 1)
    members = class_members(source, "SpecToolKit")
    assert {"brand_new_helper", "cache_dir", "run_tool", "conn", "domain"} <= members
    assert TAU2_TOOLKIT_FALLBACK <= reserved_tool_names()  # tau2's own members, from its source when installed
    assert "model_dump" in reserved_table_names() and "get_station" not in reserved_tool_names()


def test_shipped_specs_use_no_reserved_name():
    for name in ("weather", "retail", "railway"):
        raw = yaml.safe_load(spec_path(name).read_text())
        assert not {t["name"] for t in raw["tools"]} & reserved_tool_names()
        assert not {t["name"] for t in raw["tables"]} & reserved_table_names()
