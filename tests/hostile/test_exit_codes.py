"""One line, the right exit status: README's 2 for bad options or input, 3 for a run that failed. No traceback or
link to a stopped Prefect server reaches the terminal from inside a flow, a failing flow prints the same line as
the plain job, and every message says what was wrong in the user's terms, never only an exception's name."""

from __future__ import annotations

import errno
import logging
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import duckdb
import pytest

from tests.hostile.procs import MARK, processes_marked
from tests.hostile.test_cli import assert_one_error_line, folder_state, run_cli, untouched, warehouse  # noqa: F401
from toolscale.failures import in_user_terms
from toolscale.log_filters import ProgressOnly

UNREACHABLE = """default: dead
endpoints:
  dead:
    base_url: http://127.0.0.1:9/v1
    model: m
    provider: local
    pricing_key: m
  keyed:
    base_url: http://127.0.0.1:9/v1
    model: m
    provider: someone
    pricing_key: m
    api_key_env: TOOLSCALE_TEST_KEY_THAT_IS_NOT_SET
"""


def _llm_stages(tmp_path: Path, wh: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "reg.yaml").write_text(UNREACHABLE)
    return run_cli("llm-stages", "--registry", str(tmp_path / "reg.yaml"), "--warehouse", str(wh),
                   "--work-dir", str(tmp_path / "work"), *extra, env={"PREFECT_HOME": str(tmp_path / "ph")},
                   timeout=90)


LLM_STAGES_CASES = [
    ([], "endpoint 'dead' at http://127.0.0.1:9/v1 does not answer"),
    (["--endpoint", "keyed"], "needs an API key in $TOOLSCALE_TEST_KEY_THAT_IS_NOT_SET"),
    (["--endpoint", "nowhere"], "no endpoint 'nowhere'"),
    (["--sample", "-3"], "--sample"),
    (["--stages", "dream"], "invalid choice"),
]


@pytest.mark.parametrize(("extra", "needle"), LLM_STAGES_CASES, ids=[" ".join(e) or "unreachable" for e, _ in
                                                                    LLM_STAGES_CASES])
def test_llm_stages_refuses_a_bad_endpoint_or_option_with_exit_2(extra: list[str], needle: str, untouched: Path,
                                                                 tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    (tmp_path / "reg.yaml").write_text(UNREACHABLE)
    out = run_cli("llm-stages", "--registry", str(tmp_path / "reg.yaml"), "--warehouse", str(untouched),
                  "--work-dir", str(tmp_path / "work"), *extra,
                  env={"PREFECT_HOME": str(tmp_path / "ph"), MARK: mark}, timeout=90)
    assert_one_error_line(out, 2, needle)
    assert out.stdout == ""  # no flow run was started: no Prefect lines, no flow-run URL
    assert not (tmp_path / "work").exists() and not (tmp_path / "ph").exists()
    assert processes_marked(mark) == []


def test_llm_stages_without_a_warehouse_is_one_line(tmp_path: Path) -> None:
    out = _llm_stages(tmp_path, tmp_path / "absent.duckdb")
    assert_one_error_line(out, 2, "no warehouse at")
    assert not (tmp_path / "absent.duckdb").exists()


def test_llm_stages_with_a_fifo_registry_is_one_line(untouched: Path, tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "fifo.yaml")
    out = run_cli("llm-stages", "--registry", str(tmp_path / "fifo.yaml"), "--warehouse", str(untouched),
                  "--work-dir", str(tmp_path / "work"), timeout=60)
    assert_one_error_line(out, 2, "is a FIFO")


def test_serve_with_a_file_that_is_not_a_model_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "fake.gguf").write_text("this is a text file, not a model\n" * 100)
    (tmp_path / "reg.yaml").write_text(f"""default: local
endpoints:
  local:
    base_url: http://127.0.0.1:9/v1
    model: m
    provider: local
    pricing_key: m
    server: llama_cpp
    model_file: {tmp_path / 'fake.gguf'}
""")
    mark = uuid.uuid4().hex
    out = run_cli("serve", "local", "--registry", str(tmp_path / "reg.yaml"), env={MARK: mark}, timeout=60)
    assert_one_error_line(out, 2, "is not a GGUF model")
    assert "llama" not in out.stderr.lower() and processes_marked(mark) == []


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, timeout=10)
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _unshare_works(), reason="needs a mount namespace to make a tiny full disk")
def test_a_full_disk_at_publish_is_one_line_exit_3_the_plain_jobs_line(tmp_path: Path) -> None:
    """The warehouse folder is a 400 kB tmpfs: the shards fit elsewhere, the publish cannot. The CLI's flow run
    and the plain job report the same line (pids aside); the CLI exits 3 with no traceback on either stream."""
    full = tmp_path / "full"
    full.mkdir()
    mark = uuid.uuid4().hex
    cli = [sys.executable, "-m", "toolscale.cli", "regenerate", "--domains", "weather", "--tasks-per-domain", "25",
           "--warehouse", str(full / "wh.duckdb"), "--work-dir", str(tmp_path / "work")]
    plain = [sys.executable, "-c",
             "import sys; from pipeline.regenerate import RegenerateConfig, regenerate\n"
             "from toolscale.failures import in_user_terms\n"
             f"cfg = RegenerateConfig(domains=['weather'], tasks_per_domain=25, workers=1, "
             f"warehouse={str(full / 'wh.duckdb')!r}, work_dir={str(tmp_path / 'plain')!r})\n"
             "try:\n    regenerate(cfg, progress=lambda m: None)\n"
             "except Exception as exc:\n    print(in_user_terms(exc))\n"]
    script = (f"mount -t tmpfs -o size=400k tmpfs {full} && {subprocess.list2cmdline(plain)} > {tmp_path / 'plain.txt'}"
              f" && exec {subprocess.list2cmdline(cli)}")
    import os

    out = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PREFECT_HOME": str(tmp_path / "ph"), MARK: mark,
                              "PREFECT_SERVER_ANALYTICS_ENABLED": "false"})
    assert_one_error_line(out, 3, "the disk is full", "No space left on device", "the warehouse is unchanged",
                          "details in ")
    assert "Traceback" not in out.stdout and "View at" not in out.stdout and "Finished in state" not in out.stdout
    plain_line = (tmp_path / "plain.txt").read_text().strip()
    cli_line = out.stderr.strip().removeprefix("error: ").split("; details in ")[0]

    def same(line: str) -> str:
        return re.sub(r"tmp-\d+", "tmp-PID", line)

    assert same(cli_line) == same(plain_line)
    assert processes_marked(mark) == []
    assert not (full / "wh.duckdb").exists()  # the tmpfs is gone with its namespace; nothing was left here


WORDED = [
    (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
    (MemoryError(), "ran out of memory"),
    (TypeError("unsupported operand type(s) for +: 'int' and 'str'"), "this is a bug: rerun with TOOLSCALE_DEBUG=1"),
    (KeyError("get_station"), "internal error stopped the run (KeyError: 'get_station')"),
    (duckdb.TransactionException("TransactionContext Error: Conflict on tuple deletion!"), "in use by another process"),
    (duckdb.IOException("IO Error: Could not set lock on file \"w.duckdb\""), "in use by another process"),
    (OSError(errno.ENOSPC, "No space left on device", "/data/wh.duckdb"), "the disk is full (/data/wh.duckdb)"),
    (OSError(errno.EROFS, "Read-only file system", "/ro/x"), "the file system is read-only"),
    (ValueError("could not publish: No space left on device"), "the disk is full: could not publish"),
]


@pytest.mark.parametrize(("exc", "needle"), WORDED, ids=[type(e).__name__ for e, _ in WORDED])
def test_every_failure_is_worded_for_the_user(exc: BaseException, needle: str) -> None:
    line = in_user_terms(exc)
    assert needle in line and "\n" not in line, line
    assert not re.fullmatch(r"\w+(Error|Exception)(: .*)?", line)  # never only the exception's name


def _record(message: str, level: int = logging.INFO, exc: bool = False) -> logging.LogRecord:
    info = None
    if exc:
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            info = sys.exc_info()
    return logging.LogRecord("prefect.flow_runs", level, __file__, 1, message, None, info)


@pytest.mark.parametrize(("record", "shown"), [
    (_record("shard weather-s0-0000: 36/46 accepted"), True),
    (_record("Encountered exception during execution", logging.ERROR, exc=True), False),
    (_record("something failed", logging.INFO, exc=True), False),
    (_record("View at http://127.0.0.1:8328/runs/flow-run/abc"), False),
    (_record("Finished in state Failed('Flow run encountered an exception')", logging.ERROR), False),
    (_record("a warning the user should see", logging.WARNING), True),
], ids=["progress", "error-traceback", "info-traceback", "stale-url", "final-state", "warning"])
def test_only_progress_lines_reach_the_terminal(record: logging.LogRecord, shown: bool) -> None:
    assert ProgressOnly().filter(record) is shown


def test_a_refused_llm_stages_run_leaves_the_warehouse_folder_as_it_was(untouched: Path, tmp_path: Path) -> None:
    before = folder_state(untouched.parent)
    out = _llm_stages(tmp_path, untouched, "--stages", "paraphrase")
    assert out.returncode == 2
    assert folder_state(untouched.parent) == before
