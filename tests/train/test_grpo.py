"""Real GRPO steps on CPU with SmolLM2 from a published snapshot: checkpoints written, loadable, resumable."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.train.conftest import MODEL_CACHE
from train.grpo import main, train
from train.profiles import load_profile


@pytest.mark.slow
def test_two_grpo_steps_checkpoint_load_and_resume(snapshot_warehouse: str, smollm2_path: str,
                                                   tmp_path: Path) -> None:
    profile = load_profile("cpu-smoke")
    out = str(tmp_path / "run")
    first = train(replace(profile, grpo=replace(profile.grpo, max_steps=1)), snapshot_warehouse, out,
                  str(MODEL_CACHE))
    assert first.global_step == 1 and [Path(c).name for c in first.checkpoints] == ["checkpoint-1"]
    second = train(profile, snapshot_warehouse, out, str(MODEL_CACHE))  # max_steps 2: resumes after step 1
    assert second.global_step == 2 and len(second.step_seconds) == 1
    assert [Path(c).name for c in second.checkpoints] == ["checkpoint-1", "checkpoint-2"]
    state = json.loads((Path(second.checkpoints[-1]) / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    logged = [h for h in second.log_history if "filter/format_error" in h]
    assert logged and all("episode/solved_rate" in h for h in logged)  # every filter is counted per step
    assert second.rollout.episodes == profile.grpo.num_generations * profile.grpo.tasks_per_step

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(second.checkpoints[-1])
    assert sum(p.numel() for p in model.parameters()) > 100_000_000


def test_h100_dry_run_builds_the_datasets_and_trainer(snapshot_warehouse: str, smollm2_path: str,
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--profile", "h100", "--dry-run", "--warehouse", snapshot_warehouse,
                 "--work-dir", str(MODEL_CACHE), "--output-dir", str(tmp_path / "h100")])
    assert code == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["profile"] == "h100" and report["instances"] >= 20
    assert (report["per_device_batch"], report["num_generations"], report["processes"]) == (8, 8, 16)


def test_a_bad_profile_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--profile", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no profile 'nope'") and "\n" not in err
