"""A small published snapshot for tests: the plain regeneration job (no Prefect) into a scratch warehouse."""

from __future__ import annotations

from pathlib import Path

from pipeline.regenerate import RegenerateConfig, regenerate


def published_warehouse(folder: Path, domains: list[str], tasks_per_domain: int = 20) -> str:
    """Regenerate ``domains`` into ``folder``/wh.duckdb and return its path; the snapshot must publish."""
    cfg = RegenerateConfig(domains=domains, tasks_per_domain=tasks_per_domain, workers=1, base_per_shard=8,
                           warehouse=str(folder / "wh.duckdb"), work_dir=str(folder / "work"))
    result, _ = regenerate(cfg, progress=lambda m: None)
    assert result.status == "published", result
    return cfg.warehouse
