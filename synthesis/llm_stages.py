"""The plain job behind the ``llm-stages`` flow: run the LLM stages (paraphrase, evolve, propose) on a sample of a
warehouse snapshot under one budget, and write the calls, the per-stage acceptance and the refusals to the
warehouse in one transaction.

The endpoint's managed server (llama.cpp or vLLM) is started for the run when it is not already answering.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from domains.propose import GateConfig, propose_domains
from inference.budget import Budget
from inference.client import LLMClient
from inference.cost import PricingLookup, price_for, run_lookup
from inference.pricing import load_provider_file, nominal_schedule
from inference.endpoints import Endpoint, check_health, load_endpoints
from inference.server import ManagedServer
from synthesis.llm_evolve import evolve_tasks
from synthesis.paraphrase import paraphrase_tasks
from synthesis.stored import sample_snapshot

STAGES = ("paraphrase", "evolve", "propose")
Progress = Callable[[str], None]


@dataclass
class LLMStagesConfig:
    warehouse: str
    work_dir: str = "work"
    stages: list[str] = field(default_factory=lambda: list(STAGES))
    sample: int = 8  # snapshot tasks given to paraphrase and evolve
    proposals: int = 2  # domain specs asked for
    propose_max_tokens: int = 400  # the longest spec answer asked for (SmolLM2's context is 2048 tokens)
    endpoint: str | None = None  # a registry name; None: the registry's default
    registry: str | None = None
    budget_usd: float | None = None  # for the whole run, all stages together
    seed: int = 0
    snapshot: str = "latest"
    domains: list[str] | None = None
    kill_threshold: float = 0.9
    port: int | None = None  # where a managed server started for this run listens (default: its base_url's)
    max_concurrency: int = 4
    prices: str | None = None  # a provider price file (inference/pricing.py); the nominal table prices the rest

    def check(self) -> None:
        """Raise ValueError naming the first bad setting."""
        unknown = [s for s in self.stages if s not in STAGES]
        if unknown or not self.stages:
            raise ValueError(f"unknown stage(s) {', '.join(unknown) or '(none given)'}; use: {', '.join(STAGES)}")
        if self.sample < 1 or self.proposals < 1:
            raise ValueError(f"sample and proposals must be >= 1, got {self.sample} and {self.proposals}")
        if self.budget_usd is not None and self.budget_usd < 0:
            raise ValueError(f"budget must be >= 0 USD, got {self.budget_usd}")
        pricing = stage_pricing(self.prices)  # a bad price file fails here, before any call
        if self.budget_usd is not None:
            endpoint = load_endpoints(self.registry).get(self.endpoint)
            if price_for(endpoint, pricing) is None:
                raise ValueError(f"--budget needs a price for endpoint {endpoint.name!r} (pricing key "
                                 f"{endpoint.pricing_key!r}): neither the nominal table nor a --prices file has it")


@dataclass
class LLMStagesReport:
    run_id: str
    snapshot_id: str | None
    endpoint: str
    stages: dict[str, dict[str, Any]]  # stage -> summary (attempted, accepted, acceptance_rate, reasons)
    totals: dict[str, Any]  # the client's: calls, cache hits, tokens, cost, failures
    calls_written: int
    proposed_specs: list[str]  # paths of accepted specs
    budget_spent_usd: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@contextmanager
def serving(endpoint: Endpoint, port: int | None, progress: Progress) -> Iterator[Endpoint]:
    """The endpoint to call: as is when it answers; else, when the project manages its server, started for the
    length of the block."""
    target = endpoint.with_port(port) if port and endpoint.server else endpoint
    if check_health(target).ok or not endpoint.server:
        yield target
        return
    progress(f"starting the {endpoint.server} server for {endpoint.name}")
    with ManagedServer(endpoint, port=port) as server:
        yield server.endpoint


def stage_pricing(prices: str | None) -> PricingLookup:
    """What the run's calls cost: the price file's figures first, then the nominal ToolOrchestra table; a local
    endpoint that neither prices costs $0, any other is unknown (and a budget on it is refused)."""
    schedules = [load_provider_file(prices)] if prices else []
    return run_lookup(*schedules, nominal_schedule())


def run_llm_stages(cfg: LLMStagesConfig, progress: Progress = print) -> LLMStagesReport:
    """Run the configured stages and record everything in ``cfg.warehouse``; see the module docstring."""
    cfg.check()
    endpoint = load_endpoints(cfg.registry).get(cfg.endpoint)
    needs_tasks = any(s in cfg.stages for s in ("paraphrase", "evolve"))
    sample = sample_snapshot(cfg.warehouse, cfg.sample, seed=cfg.seed, snapshot=cfg.snapshot, domains=cfg.domains) \
        if needs_tasks else None
    if sample is not None:
        progress(f"snapshot {sample.snapshot_id}: {len(sample.tasks)} of {sample.available} tasks sampled")
    budget = Budget(cfg.budget_usd)
    pricing = stage_pricing(cfg.prices)
    summaries: dict[str, dict[str, Any]] = {}
    proposed: list[str] = []
    with serving(endpoint, cfg.port, progress) as target, \
            LLMClient(target, cache_dir=Path(cfg.work_dir) / "llm-cache", stage="llm-stages", budget=budget,
                      pricing=pricing, max_concurrency=cfg.max_concurrency,
                      snapshot_id=sample.snapshot_id if sample else None) as llm:
        outcomes = []
        for stage in cfg.stages:
            if stage == "paraphrase" and sample is not None:
                result: Any = paraphrase_tasks(list(sample.tasks), llm, kill_threshold=cfg.kill_threshold)
            elif stage == "evolve" and sample is not None:
                result = evolve_tasks(list(sample.tasks), llm, kill_threshold=cfg.kill_threshold)
            else:
                result = propose_domains(llm, Path(cfg.work_dir) / "proposed_domains", count=cfg.proposals,
                                         max_tokens=cfg.propose_max_tokens,
                                         gate=GateConfig(kill_threshold=cfg.kill_threshold))
                proposed += [p.path for p in result.accepted]
            summaries[stage] = result.summary()
            outcomes.append(result.outcome(llm))
            progress(f"{stage}: {result.summary()}")
        totals = llm.totals()
        written = llm.flush_records(cfg.warehouse, outcomes)
        run_id = llm.run_id
    return LLMStagesReport(run_id=run_id, snapshot_id=sample.snapshot_id if sample else None, endpoint=endpoint.name,
                           stages=summaries, totals=totals, calls_written=written, proposed_specs=proposed,
                           budget_spent_usd=budget.spent_usd)


__all__ = ["LLMStagesConfig", "LLMStagesReport", "STAGES", "run_llm_stages", "serving"]
