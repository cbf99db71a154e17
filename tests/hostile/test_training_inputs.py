"""Hostile input to the training entry points (``train.stages.grpo``, ``.run``, ``.launch``, ``bench/learning.py``):
each bad value is one line and exit 2, found before any model is converted (nothing is written under the work
dir), a run folder another process trains into is refused naming that process, and a run file cut short or edited
by hand is named in the error."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from bench.learning import main as learning_main
from tests.hostile.test_cli import untouched, warehouse  # noqa: F401
from train.stages.grpo import main as grpo_main
from train.stages.launch import main as launch_main
from train.stages.profiles import load_profile
from train.stages.records import TrainRunConfig, load_built, run_identity
from train.stages.rft import Acceptance, read_acceptance, read_examples, read_solved
from train.stages.run import main as run_main
from train.stages.run_files import RunFileError
from train.stages.run_lock import RunLocked, lock_path, run_lock
from train.stages.sequence import EVALUATIONS, Evaluation, _read_evaluations

ENTRY_POINTS = {"grpo": grpo_main, "run": run_main, "launch": launch_main, "learning": learning_main}
OUT_OPTION = {"grpo": "--output-dir", "run": "--output-root", "launch": "--output-root", "learning": "--out"}


def _one_line(status: int, capsys: pytest.CaptureFixture[str], *needles: str) -> None:
    out = capsys.readouterr()
    assert status == 2, out.err[-2000:]
    assert out.out == "" and out.err.count("\n") == 1 and out.err.startswith("error: "), out.err[-2000:]
    assert "Traceback" not in out.err
    for needle in needles:
        assert needle in out.err, out.err


def _argv(entry: str, wh: str, tmp_path: Path, *extra: str) -> list[str]:
    profile = {"grpo": "cpu-smoke", "run": "cpu-smoke", "launch": "cpu-smoke-2proc", "learning": "cpu-learn"}[entry]
    return ["--profile", profile, "--warehouse", wh, "--work-dir", str(tmp_path / "work"),
            OUT_OPTION[entry], str(tmp_path / "out"), *extra]


def _nothing_written(tmp_path: Path) -> None:
    assert not (tmp_path / "work").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_missing_warehouse_is_found_before_any_model(entry: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    started = time.perf_counter()
    status = ENTRY_POINTS[entry](_argv(entry, str(tmp_path / "absent.duckdb"), tmp_path))
    _one_line(status, capsys, "no warehouse at")
    assert time.perf_counter() - started < 60  # the model conversion alone took up to 135 s
    _nothing_written(tmp_path)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_folder_given_as_the_warehouse_is_one_line(entry: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "wh").mkdir()
    _one_line(ENTRY_POINTS[entry](_argv(entry, str(tmp_path / "wh"), tmp_path)), capsys, "it is a folder")


@pytest.mark.parametrize("entry", ["grpo", "launch", "run"])  # bench/learning.py takes its profile's snapshot
def test_an_unknown_snapshot_is_one_line(entry: str, untouched: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    argv = _argv(entry, str(untouched), tmp_path)
    status = ENTRY_POINTS[entry]([*argv, "--snapshot", "ts-nope"])
    _one_line(status, capsys, "ts-nope")
    _nothing_written(tmp_path)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_an_output_folder_that_is_a_file_is_one_line(entry: str, untouched: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "out").write_text("a file")
    status = ENTRY_POINTS[entry](_argv(entry, str(untouched), tmp_path))
    _one_line(status, capsys, "is a file, not a folder")
    assert (tmp_path / "out").read_text() == "a file" and not (tmp_path / "work").exists()


@pytest.mark.parametrize("entry", ["grpo", "run", "launch"])
def test_a_work_dir_under_a_file_is_one_line(entry: str, untouched: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x")
    argv = _argv(entry, str(untouched), tmp_path)
    argv[argv.index("--work-dir") + 1] = str(tmp_path / "file" / "work")
    _one_line(ENTRY_POINTS[entry](argv), capsys, "is a file, not a folder")


MAX_STEPS_CASES = ["100000000000000000000", "10000001", "0", "-1"]


@pytest.mark.parametrize("steps", MAX_STEPS_CASES)
def test_grpo_max_steps_out_of_the_profiles_range_is_refused(steps: str, untouched: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    _one_line(grpo_main([*_argv("grpo", str(untouched), tmp_path), "--max-steps", steps]), capsys,
              "--max-steps must be a whole number from 1 to 10,000,000")
    _nothing_written(tmp_path)


@pytest.mark.parametrize("seed", ["-5", "99999999999", "2147483648"])
@pytest.mark.parametrize("entry", ["run", "launch"])
def test_a_pricing_seed_outside_the_int32_column_is_refused(entry: str, seed: str, untouched: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    status = ENTRY_POINTS[entry]([*_argv(entry, str(untouched), tmp_path), "--pricing-seed", seed])
    _one_line(status, capsys, "--pricing-seed must be a whole number from 0 to 2,147,483,647")
    _nothing_written(tmp_path)


LEARNING_OPTIONS = [("--max-tasks", "-3"), ("--grpo-steps", "0"), ("--eval-tasks", "0"), ("--sft-steps", "-1"),
                    ("--max-turns", "1000000"), ("--rft-samples", "0")]


@pytest.mark.parametrize(("option", "value"), LEARNING_OPTIONS, ids=[o for o, _ in LEARNING_OPTIONS])
def test_bench_learning_options_are_range_checked(option: str, value: str, untouched: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _one_line(learning_main([*_argv("learning", str(untouched), tmp_path), option, value]), capsys, option)
    _nothing_written(tmp_path)


@pytest.mark.parametrize("entry", ["grpo", "run"])
def test_a_newline_in_the_snapshot_is_refused(entry: str, untouched: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    status = ENTRY_POINTS[entry]([*_argv(entry, str(untouched), tmp_path), "--snapshot", "latest\ntouch x"])
    _one_line(status, capsys, "newline")


# -- the run lock ------------------------------------------------------------------------------------------------

HOLD = """
import sys, time
from train.stages.run_lock import run_lock
with run_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


def _holder(folder: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait(timeout=30)


def test_a_second_holder_of_a_run_folder_is_refused_naming_the_first_pid(tmp_path: Path) -> None:
    first = _holder(tmp_path / "train-x")
    try:
        with pytest.raises(RunLocked, match=rf"run folder .*train-x is in use by pid {first.pid} \(started "):
            with run_lock(tmp_path / "train-x"):
                pass
    finally:
        _stop(first)
    with run_lock(tmp_path / "train-x"):  # the kernel dropped the first lock with its process: a rerun goes on
        assert json.loads(lock_path(tmp_path / "train-x").read_text())["pid"] > 0


def test_a_second_train_run_of_the_same_identity_refuses_naming_the_first(untouched: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    cfg = TrainRunConfig("cpu-smoke", str(untouched), "latest", str(tmp_path / "out"), str(tmp_path / "work"))
    profile = load_profile("cpu-smoke")
    folder = Path(cfg.output_root) / run_identity(profile, load_built(cfg, profile))[0]
    first = _holder(folder)
    try:
        status = run_main(_argv("run", str(untouched), tmp_path))
    finally:
        _stop(first)
    _one_line(status, capsys, f"is in use by pid {first.pid}")
    assert not folder.exists() and not (tmp_path / "work").exists()  # no model converted, nothing trained


def test_grpo_refuses_an_output_dir_another_run_trains_into(untouched: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    first = _holder(tmp_path / "out")
    try:
        status = grpo_main(_argv("grpo", str(untouched), tmp_path))
    finally:
        _stop(first)
    _one_line(status, capsys, f"is in use by pid {first.pid}")


# -- run files read back -----------------------------------------------------------------------------------------

EVALUATION = {"label": "base", "model": "m", "eval_run_id": "e1", "episodes": 4, "solved": 1,
              "format_error_episodes": 0, "mean_cost_usd": 0.0, "calls_per_tool": {}, "diagnosis": [],
              "seconds": 1.0}
EVALUATIONS_CASES = [
    ("an unknown key", [{**EVALUATION, "extra": 1}], "unknown key(s) 'extra'"),
    ("a missing key", [{k: v for k, v in EVALUATION.items() if k != "solved"}], "missing solved"),
    ("a wrong type", [{**EVALUATION, "episodes": "four"}], "episodes must be int"),
    ("not a list", {"base": EVALUATION}, "expected a JSON list"),
    ("cut short", json.dumps([EVALUATION])[:40], "is not valid JSON"),
    ("a row that is a list", [[1, 2]], "expected a JSON object"),
]


@pytest.mark.parametrize(("label", "stored", "needle"), EVALUATIONS_CASES, ids=[c[0] for c in EVALUATIONS_CASES])
def test_evaluations_read_back_are_checked_and_name_the_file(label: str, stored: Any, needle: str,
                                                             tmp_path: Path) -> None:
    path = tmp_path / EVALUATIONS
    path.write_text(stored if isinstance(stored, str) else json.dumps(stored))
    with pytest.raises(RunFileError) as caught:
        _read_evaluations(tmp_path)
    assert str(caught.value).startswith(str(path)) and needle in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_good_evaluations_file_still_reads(tmp_path: Path) -> None:
    (tmp_path / EVALUATIONS).write_text(json.dumps([EVALUATION]))
    assert _read_evaluations(tmp_path) == [Evaluation(**EVALUATION)]


ROUND_FILES = [
    ("acceptance.json", '{"round": 1, "sampled": 4, "accep', read_acceptance, "is not valid JSON"),
    ("acceptance.json", '{"round": 1, "sampled": 4, "accepted": 9}', read_acceptance, "accepted at most sampled"),
    ("acceptance.json", '{"round": 1, "sampled": "4", "accepted": 1}', read_acceptance, "sampled must be int"),
    ("acceptance.json", '{"round": 1, "sampled": 4, "accepted": 1, "x": 0}', read_acceptance, "unknown key(s)"),
    ("solved.json", '{"weather-1": 2, "weather-', read_solved, "is not valid JSON"),
    ("solved.json", '{"weather-1": -2}', read_solved, "whole counts"),
    ("solved.json", '["weather-1"]', read_solved, "whole counts"),
]


@pytest.mark.parametrize(("name", "text", "reader", "needle"), ROUND_FILES,
                         ids=[f"{n}: {needle}" for n, _, _, needle in ROUND_FILES])
def test_a_rounds_files_are_checked_and_named(name: str, text: str, reader: Any, needle: str, tmp_path: Path) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(RunFileError) as caught:
        reader(tmp_path)
    assert str(caught.value).startswith(str(tmp_path / name)) and needle in str(caught.value)


def test_a_kept_episode_cut_short_names_its_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "examples.jsonl"
    path.write_text('{"task_id": "t", "input_ids": [1], "labels": [1]}\n{"task_id": "t", "inp')
    with pytest.raises(RunFileError, match=r"examples.jsonl: line 2 is not valid JSON"):
        read_examples(path)


def test_a_good_acceptance_still_reads(tmp_path: Path) -> None:
    (tmp_path / "acceptance.json").write_text(json.dumps(asdict(Acceptance(1, 4, 2))))
    assert read_acceptance(tmp_path) == Acceptance(1, 4, 2)
