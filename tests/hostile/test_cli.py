"""Hostile input to the ``toolscale`` CLI: each case exits with its documented code, says what was wrong in one
line on stderr (no traceback) and leaves the warehouse and its folder exactly as they were."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pipeline.regenerate import RegenerateConfig, regenerate
from tests.hostile.procs import MARK, processes_marked

CLI = [sys.executable, "-m", "toolscale.cli"]


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", **(env or {})})


def folder_state(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real published warehouse (weather, 20 tasks) that every case must leave untouched."""
    tmp = tmp_path_factory.mktemp("hostile-wh")
    cfg = RegenerateConfig(domains=["weather"], tasks_per_domain=20, workers=1, warehouse=str(tmp / "wh.duckdb"),
                           work_dir=str(tmp / "work"))
    result, _ = regenerate(cfg, progress=lambda m: None)
    assert result.status == "published"
    return tmp / "wh.duckdb"


@pytest.fixture()
def untouched(warehouse: Path) -> Iterator[Path]:
    before = folder_state(warehouse.parent)
    yield warehouse
    assert folder_state(warehouse.parent) == before


def assert_one_error_line(out: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    assert out.returncode == code, (out.returncode, out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


REGEN_BAD_OPTIONS = [
    (["--tasks-per-domain", "0"], "--tasks-per-domain"),
    (["--tasks-per-domain", "-5"], "--tasks-per-domain"),
    (["--tasks-per-domain", "ten"], "not a whole number"),
    (["--kill-threshold", "1.5"], "--kill-threshold"),
    (["--kill-threshold", "nan"], "--kill-threshold"),
    (["--kill-threshold", "inf"], "--kill-threshold"),
    (["--near-dup-threshold", "-1"], "--near-dup-threshold"),
    (["--near-dup-threshold", "0x1p-3x"], "not a number"),
    (["--evolution-rounds", "-1"], "--evolution-rounds"),
    (["--tasks-per-database", "0"], "--tasks-per-database"),
    (["--seed", "-1"], "--seed"),
    (["--seed", "99999999999999999999"], "--seed"),
    (["--domains", "atlantis"], "unknown domain 'atlantis'"),
    (["--domains", "weather", "WEATHER"], "unknown domain 'WEATHER'"),
    (["--domains", "weather", "weather"], "more than once"),
    (["--domains", "../domains/weather"], "unknown domain"),
    (["--task-runner", "gpu"], "--task-runner"),
    (["--task-runner", "dask:"], "no usable scheduler address"),
    (["--task-runner", "dask:tcp://127.0.0.1:notaport"], "not a port number"),
    (["--bogus-flag"], "unrecognized arguments"),
]


@pytest.mark.parametrize(("extra", "needle"), REGEN_BAD_OPTIONS, ids=[" ".join(e) for e, _ in REGEN_BAD_OPTIONS])
def test_regenerate_refuses_bad_options_before_any_work(extra: list[str], needle: str, untouched: Path,
                                                        tmp_path: Path) -> None:
    work = tmp_path / "work"
    out = run_cli("regenerate", "--warehouse", str(untouched), "--work-dir", str(work), *extra)
    assert_one_error_line(out, 2, needle)
    assert not work.exists()  # refused before the work dir was even created


def test_a_bad_cpu_price_is_refused_before_any_work_and_leaves_no_server(untouched: Path, tmp_path: Path) -> None:
    """The price is checked while the run's Prefect server boots (beside the imports): the refusal kills the server
    at once and removes the work folder the command made for its log."""
    mark = uuid.uuid4().hex
    out = run_cli("regenerate", "--warehouse", str(untouched), "--work-dir", str(tmp_path / "new" / "work"),
                  env={"TOOLSCALE_CPU_USD_PER_HOUR": "abc", MARK: mark, "PREFECT_HOME": str(tmp_path / "ph")})
    assert_one_error_line(out, 2, "is not a price")
    assert not (tmp_path / "new").exists()
    assert processes_marked(mark) == []


def test_unreachable_dask_scheduler_fails_in_seconds(untouched: Path, tmp_path: Path) -> None:
    started = time.perf_counter()
    out = run_cli("regenerate", "--warehouse", str(untouched), "--work-dir", str(tmp_path / "w"),
                  "--task-runner", f"dask:tcp://127.0.0.1:{_closed_port()}")
    assert_one_error_line(out, 2, "cannot reach the Dask scheduler")
    assert time.perf_counter() - started < 15


def test_a_blackholed_dask_address_times_out_in_seconds(untouched: Path, tmp_path: Path) -> None:
    started = time.perf_counter()  # 192.0.2.0/24 is reserved for documentation: nothing answers there
    out = run_cli("regenerate", "--warehouse", str(untouched), "--work-dir", str(tmp_path / "w"),
                  "--task-runner", "dask:tcp://192.0.2.1:8786")
    assert_one_error_line(out, 2, "cannot reach the Dask scheduler")
    assert time.perf_counter() - started < 15


def test_warehouse_that_is_a_folder_or_fifo_is_refused(untouched: Path, tmp_path: Path) -> None:
    folder = tmp_path / "adir"
    folder.mkdir()
    fifo = tmp_path / "fifo.duckdb"
    os.mkfifo(fifo)
    for target, why in ((folder, "is a directory"), (fifo, "is a FIFO")):
        out = run_cli("regenerate", "--domains", "weather", "--warehouse", str(target),
                      "--work-dir", str(tmp_path / "w"), timeout=30)
        assert_one_error_line(out, 2, why)
        out = run_cli("snapshots", "--warehouse", str(target), timeout=30)
        assert_one_error_line(out, 2, why)


def test_work_dir_that_is_a_file_is_refused(untouched: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "work"
    blocker.write_text("not a folder")
    out = run_cli("regenerate", "--domains", "weather", "--warehouse", str(untouched), "--work-dir", str(blocker))
    assert_one_error_line(out, 2, "not a folder")
    assert blocker.read_text() == "not a folder"


CALL_BAD_INPUT = [
    (["call", "weather", "get_alert", "--args", "{alert_id: AL0002"], 2, "not valid JSON"),
    (["call", "weather", "get_alert", "--args", "[\"AL0002\"]"], 2, "must be a JSON object"),
    (["call", "weather", "get_alert", "--args", "\"AL0002\""], 2, "must be a JSON object"),
    (["call", "weather", "get_alert", "--args", '{"alert_id": "AL0001", "alert_id": "AL0002"}'], 2, "twice"),
    (["call", "weather", "get_alert", "--args", "[" * 5000 + "]" * 5000], 2, "--args"),
    (["call", "weather", "get_alert", "--args", '{"alert_id": "AL9999"}'], 1, "AL9999"),
    (["call", "weather", "get_alert", "--args", '{"alert_id": 7}'], 1, "alert_id"),
    (["call", "weather", "no_such_tool"], 2, "has no tool 'no_such_tool'"),
    (["call", "atlantis", "get_alert"], 2, "unknown domain 'atlantis'"),
    (["call", "weather", "get_alert", "--seed", "-3"], 2, "--seed"),
    (["tools", "atlantis"], 2, "unknown domain 'atlantis'"),
    (["tools", "weather", "--domains-dir", "/nonexistent/folder"], 2, "not a folder"),
    (["export", "latest", "--format", "parquet", "--out", "x"], 2, "invalid choice"),
    (["snapshots", "--warehouse", "/nonexistent/wh.duckdb"], 2, "no warehouse at"),
    ([], 2, "required"),
    (["frobnicate"], 2, "invalid choice"),
]


@pytest.mark.parametrize(("argv", "code", "needle"), CALL_BAD_INPUT, ids=[" ".join(a)[:60] for a, _, _ in CALL_BAD_INPUT])
def test_bad_input_gets_one_error_line(argv: list[str], code: int, needle: str, untouched: Path) -> None:
    assert_one_error_line(run_cli(*argv), code, needle)


def test_export_of_a_missing_snapshot_writes_nothing(untouched: Path, tmp_path: Path) -> None:
    out = run_cli("export", "ts-nope", "--format", "tau2", "--out", str(tmp_path / "out"), "--warehouse", str(untouched))
    assert_one_error_line(out, 2, "ts-nope")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_truncated_warehouse_is_one_error_line(tmp_path: Path, warehouse: Path) -> None:
    broken = tmp_path / "broken.duckdb"
    broken.write_bytes(warehouse.read_bytes()[:5000])
    before = broken.read_bytes()
    out = run_cli("regenerate", "--domains", "weather", "--tasks-per-domain", "20", "--warehouse", str(broken),
                  "--work-dir", str(tmp_path / "w"))
    assert_one_error_line(out, 2, str(broken))
    assert broken.read_bytes() == before and not (tmp_path / "w").exists()


def test_a_broken_pipe_is_quiet() -> None:
    for argv in (["domains", "--json"], ["tools", "railway"]):
        proc = subprocess.run(" ".join([*CLI, *argv]) + " | head -1", shell=True, capture_output=True, text=True,
                              timeout=120)
        assert proc.stderr == "", proc.stderr
        assert proc.stdout.strip() in ("[", "railway: 25 tools (seed 0)") or proc.stdout.startswith("railway")


def test_the_gate_failure_report_exits_1_with_the_failed_expectations(tmp_path: Path) -> None:
    """A real snapshot that fails the real quality suite: asked for more tasks than its shards hold."""
    cfg = RegenerateConfig(domains=["weather"], tasks_per_domain=20, workers=1, warehouse=str(tmp_path / "wh.duckdb"),
                           work_dir=str(tmp_path / "work"))
    from pipeline.regenerate import finalize, initial_plan, run_shard

    shards = initial_plan(cfg)
    for shard in shards:
        run_shard(cfg, shard)
    greedy = RegenerateConfig(**{**cfg.__dict__, "tasks_per_domain": 100_000})
    greedy.shard_dir().parent.mkdir(parents=True, exist_ok=True)
    cfg.shard_dir().rename(greedy.shard_dir())
    result, _ = finalize(greedy, shards, time.perf_counter(), progress=lambda m: None)
    assert result.status == "failed"
    code = ("import sys; from toolscale.regenerate_cmd import report; "
            f"sys.exit(report({str(tmp_path / 'wh.duckdb')!r}, {result.snapshot_id!r}, 1.0))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert_one_error_line(out, 1, "failed the quality gate", "domain_counts")
    assert f"snapshot {result.snapshot_id} failed" in out.stdout and "warehouse: " in out.stdout


def test_domains_check_command_line(tmp_path: Path) -> None:
    check = [sys.executable, "-m", "domains.check"]
    none = subprocess.run(check, capture_output=True, text=True, timeout=60)
    assert none.returncode == 2 and "required: PATH_OR_NAME" in none.stderr
    helped = subprocess.run([*check, "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "usage" in helped.stdout.lower()
    missing = subprocess.run([*check, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and missing.stderr.count(str(tmp_path)) == 1, missing.stderr


def test_a_users_domain_folder_is_discovered(tmp_path: Path) -> None:
    """A domain is just its spec file: copied under a new name into a folder of one's own, it is listed and
    callable without any edit to the code."""
    src = (Path(__file__).resolve().parents[2] / "domains" / "weather" / "weather.yaml").read_text()
    own = tmp_path / "mine" / "skyline"
    own.mkdir(parents=True)
    (own / "skyline.yaml").write_text(src.replace("name: weather", "name: skyline", 1))
    out = run_cli("domains", "--json", "--domains-dir", str(tmp_path / "mine"))
    assert out.returncode == 0, out.stderr
    rows = {r["domain"]: r for r in json.loads(out.stdout)}
    assert "skyline" in rows and "weather" in rows, sorted(rows)  # listed beside the shipped ones
    call = run_cli("call", "skyline", "get_alert", "--args", '{"alert_id": "AL0002"}',
                   env={"TOOLSCALE_DOMAINS_DIR": str(tmp_path / "mine")})
    assert call.returncode == 0 and json.loads(call.stdout)["alert_id"] == "AL0002", call.stderr
    clash = tmp_path / "clash" / "weather"
    clash.mkdir(parents=True)
    (clash / "weather.yaml").write_text(src)
    assert_one_error_line(run_cli("domains", "--domains-dir", str(tmp_path / "clash")), 2, "defined twice")


def _hashes(warehouse: Path) -> list[tuple[str, str]]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return con.execute("SELECT snapshot_id, content_hash FROM tasks ORDER BY 1, 2").fetchall()
    finally:
        con.close()


def _kill_at(moment: str, argv: list[str], env: dict[str, str]) -> str:
    """Start the CLI, SIGKILL it at ``moment``; returns its output so far."""
    proc = subprocess.Popen([*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **env})
    seen = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if ((moment == "early" and line.startswith("config ")) or (moment == "shards" and line.startswith("shard "))
                or (moment == "publish" and line.startswith("publishing "))):
            if moment == "early":
                time.sleep(2)  # the temporary Prefect server is starting
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait(60)
    assert proc.returncode == -signal.SIGKILL, "".join(seen)[-2000:]
    return "".join(seen)


@pytest.mark.slow
def test_kill_9_at_three_moments_leaves_nothing_running_and_the_rerun_matches(tmp_path: Path) -> None:
    reference = RegenerateConfig(domains=["weather"], tasks_per_domain=60, workers=1,
                                 warehouse=str(tmp_path / "ref.duckdb"), work_dir=str(tmp_path / "refwork"))
    ref_result, _ = regenerate(reference, progress=lambda m: None)
    argv = ["regenerate", "--domains", "weather", "--tasks-per-domain", "60", "--warehouse",
            str(tmp_path / "wh.duckdb"), "--work-dir", str(tmp_path / "work")]
    env = {"PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    for moment in ("early", "shards", "publish"):
        mark = uuid.uuid4().hex
        _kill_at(moment, argv, {**env, MARK: mark})
        deadline = time.monotonic() + 10  # pool workers notice their parent is gone within a second
        while processes_marked(mark) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert processes_marked(mark) == [], moment
    mark = uuid.uuid4().hex
    out = run_cli(*argv, env={**env, MARK: mark}, timeout=600)
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[:3000])
    assert f"snapshot {ref_result.snapshot_id} published" in out.stdout
    assert processes_marked(mark) == []
    rows = _hashes(tmp_path / "wh.duckdb")
    assert len(rows) == len(set(rows)) and {sid for sid, _ in rows} == {ref_result.snapshot_id}
    assert [h for _, h in rows] == [h for _, h in _hashes(tmp_path / "ref.duckdb")]
    started = time.perf_counter()
    again = run_cli(*argv, env=env)
    assert again.returncode == 0 and f"already published, unchanged: {ref_result.snapshot_id}" in again.stdout
    assert time.perf_counter() - started < 10


@pytest.mark.slow
def test_a_small_run_is_quiet_and_says_where_the_warehouse_is(tmp_path: Path) -> None:
    env = {"PREFECT_HOME": str(tmp_path / "prefect")}
    out = run_cli("regenerate", "--domains", "weather", "--tasks-per-domain", "40", "--warehouse",
                  str(tmp_path / "wh.duckdb"), "--work-dir", str(tmp_path / "work"), env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr == ""  # no Prefect log flood, no telemetry error, no warm-up thread traceback
    assert "shard weather-s0-0000" in out.stdout
    assert f"warehouse: {tmp_path / 'wh.duckdb'}" in out.stdout
    # the CLI exits without the interpreter's teardown (toolscale.cli.entry), but only after the log has been flushed
    log = (tmp_path / "work" / "prefect.log").read_text()
    assert "Flow run" in log and "Finished in state Completed()" in log[-2000:]
    assert not list(tmp_path.glob("wh.duckdb.wal"))  # the warehouse was closed, not left for a replay
