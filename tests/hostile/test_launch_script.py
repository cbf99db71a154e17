"""Hostile values in the slurm job script: each value a flow parameter can set is quoted for the shell, or refused in
one line when it holds a newline or a NUL. The script is rendered and run under bash with stand-in ``srun`` and
``scontrol`` on PATH and a stand-in interpreter; nothing but that interpreter runs, and it receives each value as
one intact argument. Placeholders are the template's only: a value that spells one is passed on as written."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from train.stages.command import Site
from train.stages.inputs import BadInput
from train.stages.launch import main as launch_main
from train.stages.profiles import PROFILES_DIR, ProfileError, load_profile
from train.stages.records import TrainRunConfig
from train.stages.slurm import render_sbatch

STANDINS = {
    # srun runs its command once, as node 0 would (the flag before it dropped)
    "srun": '#!/bin/bash\nshift\nexport SLURM_NODEID=0\nexec "$@"\n',
    "scontrol": "#!/bin/bash\necho node-a\necho node-b\n",
    # the interpreter: writes each argument it got on a line of its own (the values hold no newline)
    "python": '#!/bin/bash\nprintf "%s\\n" "$@" > "$STANDIN/argv"\n',
}
INJECTIONS = [
    ("command substitution", "/tmp/o$(touch PWNED)"),
    ("backticks", "/tmp/o`touch PWNED`"),
    ("semicolon", "/tmp/o; touch PWNED"),
    ("single quotes", "/tmp/o'; touch PWNED; echo '"),
    ("double quotes", '/tmp/o"; touch PWNED; echo "'),
    ("and-and", "/tmp/o && touch PWNED"),
    ("pipe", "/tmp/o | touch PWNED"),
    ("redirect", "/tmp/o > PWNED"),
    ("a space", "/tmp/o o/train"),
    ("a variable", "/tmp/$HOME/PWNED"),
    ("a glob", "/tmp/*"),
    ("the node placeholder", "/tmp/__NODE_RANK__"),
    ("the host placeholder", "/tmp/__MAIN_HOST__"),
    ("a dollar brace", "/tmp/${PWD}x"),
    ("escaped newline", "/tmp/o\\ntouch PWNED"),
]
FIELDS = ["output_root", "snapshot", "work_dir", "warehouse", "preference_run"]
OPTION = {"output_root": "--output-root", "snapshot": "--snapshot", "work_dir": "--work-dir",
          "warehouse": "--warehouse", "preference_run": "--preference-run"}


def _config(field: str, value: str, base: Path) -> TrainRunConfig:
    values = {"output_root": str(base / "out"), "snapshot": "latest", "work_dir": str(base / "work"),
              "warehouse": str(base / "wh.duckdb"), "preference_run": None, field: value}
    return TrainRunConfig("h100", values["warehouse"], values["snapshot"], values["output_root"], values["work_dir"],
                          0, values["preference_run"])


def _run_script(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in STANDINS.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "job.sbatch").write_text(script)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "STANDIN": str(tmp_path), "HOME": str(tmp_path),
           "SLURM_JOB_NODELIST": "node-[a-b]"}
    return subprocess.run(["bash", str(tmp_path / "job.sbatch")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=30)


# every value goes through the same quoting: all of them in --output-root, three in each other field
CASES = [(label, value, "output_root") for label, value in INJECTIONS] + [
    (label, value, field) for field in FIELDS[1:] for label, value in INJECTIONS
    if label in ("command substitution", "single quotes", "the node placeholder")]


@pytest.mark.parametrize(("label", "value", "field"), CASES, ids=[f"{f}-{label}" for label, _, f in CASES])
def test_a_hostile_value_reaches_the_trainer_as_one_argument_and_runs_nothing(label: str, value: str, field: str,
                                                                             tmp_path: Path) -> None:
    site = Site(python=str(tmp_path / "bin" / "python"), root=str(tmp_path), cwd=str(tmp_path))
    cfg = _config(field, value, tmp_path)
    script = render_sbatch(load_profile("h100"), cfg, tmp_path / "logs", site)
    done = _run_script(script, tmp_path)
    assert done.returncode == 0, done.stderr
    assert not list(tmp_path.rglob("PWNED")) and not Path("PWNED").exists()
    argv = (tmp_path / "argv").read_text().splitlines()
    at = argv.index(OPTION[field]) + 1
    shown = value if field in ("snapshot", "preference_run") else str(Path(value).absolute())
    assert argv[at] == shown  # the value as written: no placeholder substituted inside it, nothing split off
    assert argv[argv.index("--machine_rank") + 1] == "0"  # the template's placeholders are substituted
    assert argv[argv.index("--main_process_ip") + 1] == "node-a"


def test_the_injection_of_issue_38_is_refused_in_one_line_and_nothing_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = "/tmp/o\ntouch /tmp/PWNED\n#"
    status = launch_main(["--profile", "h100", "--render-sbatch", "--output-root", root])
    out = capsys.readouterr()
    assert status == 2 and out.out == ""
    assert out.err.count("\n") == 1 and "newline" in out.err and out.err.startswith("error: --output-root")
    assert not Path("/tmp/o").exists() or Path("/tmp/o").is_dir()


NEWLINES = [("--output-root", "/tmp/a\nb"), ("--snapshot", "ts-1\ntouch x"), ("--work-dir", "w\rx"),
            ("--warehouse", "wh.duckdb\n#"), ("--preference-run", "p\nq"), ("--profile", "h100\n")]


@pytest.mark.parametrize(("option", "value"), NEWLINES, ids=[o for o, _ in NEWLINES])
def test_a_newline_in_any_value_is_refused_before_rendering(option: str, value: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    status = launch_main(["--profile", "h100", "--render-sbatch", option, value] if option != "--profile"
                         else ["--profile", value, "--render-sbatch"])
    out = capsys.readouterr()
    assert status == 2 and out.out == "" and out.err.count("\n") == 1 and out.err.startswith("error: ")


@pytest.mark.parametrize("field", FIELDS)
def test_a_nul_in_a_value_is_refused(field: str, tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="newline or a NUL"):
        render_sbatch(load_profile("h100"), _config(field, "/tmp/a\0b", tmp_path), tmp_path / "logs")


SEEDS = [("-5", "--pricing-seed"), ("99999999999", "--pricing-seed"), ("2147483648", "--pricing-seed")]


@pytest.mark.parametrize(("seed", "needle"), SEEDS, ids=[s for s, _ in SEEDS])
def test_a_pricing_seed_outside_the_warehouse_column_is_refused_before_rendering(
        seed: str, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = launch_main(["--profile", "h100", "--render-sbatch", "--pricing-seed", seed])
    out = capsys.readouterr()
    assert status == 2 and out.out == "" and needle in out.err and "2,147,483,647" in out.err


@pytest.mark.parametrize("profile", ["cpu-smoke", "cpu-smoke-2proc", "cpu-learn"])
def test_render_sbatch_applies_the_slurm_profile_checks(profile: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = launch_main(["--profile", profile, "--render-sbatch"])
    out = capsys.readouterr()
    assert status == 2 and out.out == "" and "cannot run as a slurm job" in out.err and "use_cpu" in out.err


def test_the_largest_seed_renders(capsys: pytest.CaptureFixture[str]) -> None:
    assert launch_main(["--profile", "h100", "--render-sbatch", "--pricing-seed", "2147483647"]) == 0
    assert "--pricing-seed 2147483647" in capsys.readouterr().out


def _own_profile(tmp_path: Path, config_text: str | None) -> Path:
    """h100 copied into a folder of one's own, with its own launch/accelerate-2x8.yaml (``config_text``) or none."""
    data = yaml.safe_load((PROFILES_DIR / "h100.yaml").read_text())
    data["launch"]["accelerate_config"] = "launch/accelerate-2x8.yaml"
    (tmp_path / "launch").mkdir()
    shutil.copy(PROFILES_DIR / data["launch"]["deepspeed_config"], tmp_path / data["launch"]["deepspeed_config"])
    if config_text is not None:
        (tmp_path / "launch" / "accelerate-2x8.yaml").write_text(config_text)
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_launcher_config_that_is_checked_is_the_one_that_runs(tmp_path: Path) -> None:
    path = _own_profile(tmp_path, "compute_environment: LOCAL_MACHINE\n# mine\n")
    cfg = TrainRunConfig(str(path), "/data/wh.duckdb", "latest", "/data/train", "/data/work")
    script = render_sbatch(load_profile(path), cfg, "/data/logs", Site("/opt/py", "/srv/toolscale", "/srv/run"))
    assert f"--config_file {tmp_path / 'launch' / 'accelerate-2x8.yaml'}" in script  # its own, not the shipped one
    assert "/srv/toolscale/train/profiles/launch/accelerate-2x8.yaml" not in script


def test_a_shipped_profiles_config_is_the_shipped_file_as_the_nodes_see_it() -> None:
    cfg = TrainRunConfig("h100", "/data/wh.duckdb", "latest", "/data/train", "/data/work")
    script = render_sbatch(load_profile("h100"), cfg, "/data/logs", Site("/opt/py", "/srv/toolscale", "/srv/run"))
    assert "--config_file /srv/toolscale/train/profiles/launch/accelerate-2x8.yaml" in script


def test_a_stages_profile_asking_for_two_processes_is_refused_when_it_loads(tmp_path: Path) -> None:
    data = yaml.safe_load((PROFILES_DIR / "cpu-learn.yaml").read_text())
    data["launch"]["processes"] = 2
    data["grpo"]["tasks_per_step"] = 2
    (tmp_path / "two.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError, match="stages run in one process: launch.processes must be 1"):
        load_profile(tmp_path / "two.yaml")
