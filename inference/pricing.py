"""Tool pricing as data: the nominal ToolOrchestra table, provider price files, and seeded synthetic schedules.

Every figure carries its source. The nominal table is read from ``data/pricing/toolorchestra_nominal.yaml``
(a copy of the project's sourced table; nothing is added to it). Real provider figures come only from a price
file a user fills in (``schemas/pricing.schema.json``). Everything else is a *synthetic* schedule: the nominal
table times seeded log-normal multipliers, named ``synthetic-...`` and marked ``synthetic`` everywhere.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from pipeline.config_files import ConfigFileError, load_config_yaml

ROOT = Path(__file__).resolve().parent.parent
NOMINAL_PATH = ROOT / "data" / "pricing" / "toolorchestra_nominal.yaml"
PROVIDER_SCHEMA_PATH = ROOT / "schemas" / "pricing.schema.json"
SPLITS = ("reference", "train", "heldout")
# The paper trains under 10 providers' pricing and evaluates under one it held out (App. E, App. H).
TRAINING_SCHEDULES = 10
HELDOUT_NAME = "synthetic-heldout-deepinfra"
MAX_PRICED_MODELS = 1_000  # a provider prices tens of models; more is a generated file, not a price page
MAX_PRICE_FIGURE = 1_000_000.0  # USD per 1M tokens (or seconds per call); the dearest real model is under 1,000


class PricingError(ValueError):
    """A price file or schedule request is wrong; the message names the file and the field."""


@dataclass(frozen=True)
class LatencyFigure:
    """Seconds per call as shown to the orchestrator; ``alias`` is the tool role (``answer-1``) or ``any``."""

    alias: str
    seconds: float
    source: str


@dataclass(frozen=True)
class ModelPrice:
    model: str
    input_usd_per_1m: float
    output_usd_per_1m: float
    source: str
    latencies: tuple[LatencyFigure, ...] = ()
    note: str | None = None

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_usd_per_1m + completion_tokens * self.output_usd_per_1m) / 1_000_000


@dataclass(frozen=True)
class PricingSchedule:
    """One price table: ``kind`` nominal | provider | synthetic; ``split`` reference | train | heldout."""

    name: str
    kind: str
    split: str
    source: str
    prices: tuple[ModelPrice, ...]
    seed: int | None = None
    params: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def synthetic(self) -> bool:
        return self.kind == "synthetic"

    @property
    def schedule_id(self) -> str:
        """Content-addressed: the same figures under the same name give the same id on every run."""
        body = json.dumps([self.name, self.kind, self.split, self.source,
                           [[p.model, p.input_usd_per_1m, p.output_usd_per_1m,
                             [[lat.alias, lat.seconds] for lat in p.latencies]] for p in self.prices]])
        return f"{self.name}-{hashlib.sha256(body.encode()).hexdigest()[:10]}"

    @property
    def models(self) -> list[str]:
        return [p.model for p in self.prices]

    def price(self, model: str) -> ModelPrice:
        for p in self.prices:
            if p.model == model:
                return p
        raise PricingError(f"schedule {self.name!r} has no price for model {model!r}")


@dataclass(frozen=True)
class ScheduleSet:
    """Training schedules and held-out ones; a training draw can only ever return a training schedule."""

    training: tuple[PricingSchedule, ...]
    heldout: tuple[PricingSchedule, ...]

    def draw_training(self, rng: random.Random) -> PricingSchedule:
        return rng.choice(self.training)

    def draw_heldout(self, rng: random.Random) -> PricingSchedule:
        return rng.choice(self.heldout)

    @property
    def all(self) -> tuple[PricingSchedule, ...]:
        return self.training + self.heldout


def source_tags(path: Path = NOMINAL_PATH) -> dict[str, str]:
    """The ``[R:tools]``-style tags the nominal file's header defines, with their descriptions."""
    tags: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        match = re.match(r"#\s+(\[[A-Za-z0-9:]+\])\s+(.*)", line)
        if match:
            tags[match.group(1)] = match.group(2).strip()
    return tags


@cache
def nominal_schedule(path: Path = NOMINAL_PATH) -> PricingSchedule:
    """The ToolOrchestra table as published: only models the file prices, only figures it gives."""
    data = yaml.safe_load(path.read_text())
    rel = path.name
    prices = []
    for i, entry in enumerate(data.get("models") or []):
        where = f"{rel}: models[{i}]"
        name = entry.get("name")
        figures = entry.get("price_usd_per_1M") or {}
        tags = entry.get("sources") or []
        if not name or not tags or not isinstance(figures.get("input"), (int, float)) \
                or not isinstance(figures.get("output"), (int, float)):
            raise PricingError(f"{where}: needs a name, sources and numeric price_usd_per_1M input and output")
        source = f"{rel} {' '.join(tags)}"
        latencies = tuple(LatencyFigure(str(alias), float(seconds), source)
                          for alias, seconds in (entry.get("latency_s") or {}).items())
        prices.append(ModelPrice(name, float(figures["input"]), float(figures["output"]), source, latencies,
                                 entry.get("note")))
    if not prices:
        raise PricingError(f"{rel}: no priced models")
    return PricingSchedule("nominal-toolorchestra", "nominal", "reference", f"{rel}: {data['pricing_basis']['evaluation']}",
                           tuple(prices))


def synthetic_schedule(base: PricingSchedule, name: str, split: str, seed: int, price_sigma: float = 0.5,
                       latency_sigma: float = 0.25) -> PricingSchedule:
    """``base`` with every model's prices (input and output together, as a provider prices a model) and its
    latencies scaled by seeded log-normal multipliers. The name must start with ``synthetic-``."""
    if not name.startswith("synthetic-"):
        raise PricingError(f"a synthetic schedule's name must start with 'synthetic-', got {name!r}")
    if split not in ("train", "heldout"):
        raise PricingError(f"split must be 'train' or 'heldout', got {split!r}")
    rng = random.Random(f"{seed}:{name}")  # per-name stream: adding schedules never changes existing ones
    prices = []
    for p in base.prices:
        price_x = math.exp(rng.gauss(0.0, price_sigma))
        latency_x = math.exp(rng.gauss(0.0, latency_sigma))
        source = (f"synthetic: {base.name} ({p.source}) x price multiplier {price_x:.4f} "
                  f"(log-normal sigma {price_sigma}, seed {seed}, schedule {name})")
        latency_source = (f"synthetic: {base.name} ({p.source}) x latency multiplier {latency_x:.4f} "
                          f"(log-normal sigma {latency_sigma}, seed {seed}, schedule {name})")
        prices.append(ModelPrice(p.model, round(p.input_usd_per_1m * price_x, 6),
                                 round(p.output_usd_per_1m * price_x, 6), source,
                                 tuple(LatencyFigure(lat.alias, round(lat.seconds * latency_x, 3), latency_source)
                                       for lat in p.latencies)))
    return PricingSchedule(name, "synthetic", split, f"synthetic: seeded perturbation of {base.name}",
                           tuple(prices), seed,
                           {"base": base.schedule_id, "price_sigma": price_sigma, "latency_sigma": latency_sigma})


def synthetic_schedules(seed: int = 0, training: int = TRAINING_SCHEDULES, price_sigma: float = 0.5,
                        latency_sigma: float = 0.25, base: PricingSchedule | None = None) -> ScheduleSet:
    """``training`` schedules ``synthetic-train-NN`` and the held-out ``synthetic-heldout-deepinfra`` (it stands
    in for the provider the paper held out; its figures are synthetic, not DeepInfra's)."""
    if training < 1:
        raise PricingError(f"need at least one training schedule, got {training}")
    base = base or nominal_schedule()
    train = tuple(synthetic_schedule(base, f"synthetic-train-{i:02d}", "train", seed, price_sigma, latency_sigma)
                  for i in range(1, training + 1))
    held = (synthetic_schedule(base, HELDOUT_NAME, "heldout", seed, price_sigma, latency_sigma),)
    return ScheduleSet(train, held)


@cache
def _provider_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(PROVIDER_SCHEMA_PATH.read_text()))


def load_provider_file(path: str | Path, split: str = "train") -> PricingSchedule:
    """A provider price file (YAML or JSON) filled with real figures, as a ``provider`` schedule.

    Raises ``PricingError`` with one line naming the file and the first wrong field."""
    path = Path(path)
    if split not in SPLITS:
        raise PricingError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    try:
        data = load_config_yaml(path, "price file")  # YAML is a superset of JSON; FIFOs and alias bombs refused
    except ConfigFileError as exc:
        raise PricingError(str(exc)) from None
    if isinstance(data, dict) and isinstance(data.get("models"), list) and len(data["models"]) > MAX_PRICED_MODELS:
        raise PricingError(f"{path}: models lists {len(data['models']):,} models; a price file may list at most "
                           f"{MAX_PRICED_MODELS:,}")
    if isinstance(data, dict) and hasattr(data.get("retrieved"), "isoformat"):
        data["retrieved"] = data["retrieved"].isoformat()  # an unquoted YAML date is still a date
    errors = sorted(_provider_validator().iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        err = errors[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path).lstrip(".")
        if err.instance is None or err.instance == "":
            hint = " (or remove that model)" if where.startswith("models[") else ""
            raise PricingError(f"{path}: {where} is empty; fill it in from the provider's price page{hint}")
        raise PricingError(f"{path}: {where or 'top level'}: {err.message}")
    seen: set[str] = set()
    for i, m in enumerate(data["models"]):
        if m["name"] in seen:
            raise PricingError(f"{path}: models[{i}].name: {m['name']!r} is listed twice")
        seen.add(m["name"])
        for key in ("input_usd_per_1M", "output_usd_per_1M", "latency_s"):
            value = m.get(key)
            if value is not None and not (math.isfinite(value) and value <= MAX_PRICE_FIGURE):
                raise PricingError(f"{path}: models[{i}].{key}: {value} is not a finite figure up to "
                                   f"{MAX_PRICE_FIGURE:,}")
    slug = provider_slug(data["provider"])
    if not slug:
        raise PricingError(f"{path}: provider {data['provider']!r} has no letters or digits to name its schedule by")
    file_source = f"{data['provider']}: {data['source']} (read {data['retrieved']})"
    prices = []
    for m in data["models"]:
        source = f"{data['provider']}: {m.get('source') or data['source']} (read {data['retrieved']})"
        latencies = (LatencyFigure("any", float(m["latency_s"]), source),) if m.get("latency_s") is not None else ()
        prices.append(ModelPrice(m["name"], float(m["input_usd_per_1M"]), float(m["output_usd_per_1M"]), source,
                                 latencies, m.get("note")))
    return PricingSchedule(f"provider-{slug}", "provider", split, file_source, tuple(prices))


def provider_slug(provider: str) -> str:
    """The schedule name's part for a provider: "Open AI", "open-ai" and "OPEN_AI" all give ``open-ai``."""
    return re.sub(r"[^a-z0-9]+", "-", provider.lower()).strip("-")


def provider_of(source: str) -> str:
    """The provider as a price file spelled it, from a stored provider schedule's ``source``."""
    return source.split(": ", 1)[0]


def schedule_rows(schedules: list[PricingSchedule] | tuple[PricingSchedule, ...], loaded_at: Any) -> dict[str, list[dict[str, Any]]]:
    """Warehouse rows (``pricing_schedules``, ``model_prices``, ``model_latencies``) for ``schedules``."""
    out: dict[str, list[dict[str, Any]]] = {"schedules": [], "prices": [], "latencies": []}
    for s in schedules:
        sid = s.schedule_id
        out["schedules"].append({"schedule_id": sid, "name": s.name, "kind": s.kind, "split": s.split,
                                 "synthetic": s.synthetic, "seed": s.seed, "source": s.source,
                                 "params_json": json.dumps(s.params, sort_keys=True), "loaded_at": loaded_at})
        for p in s.prices:
            out["prices"].append({"schedule_id": sid, "model": p.model, "input_usd_per_1m": p.input_usd_per_1m,
                                  "output_usd_per_1m": p.output_usd_per_1m, "synthetic": s.synthetic,
                                  "source": p.source, "note": p.note})
            out["latencies"] += [{"schedule_id": sid, "model": p.model, "alias": lat.alias,
                                  "latency_s": lat.seconds, "synthetic": s.synthetic, "source": lat.source}
                                 for lat in p.latencies]
    return out
