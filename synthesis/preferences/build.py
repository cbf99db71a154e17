"""Build a run of preference pairs: seeded, split by family and template, every pair checked before it is kept.

    from synthesis.preferences.build import PreferenceConfig, build_preference_pairs, to_bundle
    run = build_preference_pairs(PreferenceConfig(count=1000, seed=0))            # offline, templates only
    run = build_preference_pairs(cfg, paraphrase=chat, judge=chat)                 # with an LLM callable

``chat(messages) -> str`` is any function that sends OpenAI-style messages and returns the reply text.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema

from inference.pricing import (ROOT, PricingSchedule, ScheduleSet, nominal_schedule, schedule_rows,
                               synthetic_schedules)
from synthesis.preferences.catalog import CatalogTool, available_tools, load_catalog, mentioned_tools
from synthesis.preferences.check import Chat, check_pair, judge_pair
from synthesis.preferences.families import (EVAL_FAMILIES, NAMED, TRAIN_FAMILIES, components_of, draw_weights,
                                            render, template_ids)
from synthesis.preferences.pair import NEUTRAL, PreferencePair

if TYPE_CHECKING:
    from warehouse.pricing_store import PreferenceBundle

PAIR_SCHEMA = ROOT / "schemas" / "preference_pair.schema.json"
VERSION_SOURCES = ("synthesis/preferences", "inference/pricing.py", "data/pricing")
MAX_ATTEMPTS_PER_PAIR = 50
REFUSAL = re.compile(r"\b(sorry|apologi[sz]e|as an ai|i can(no|')t (help|assist))\b", re.IGNORECASE)


@dataclass
class PreferenceConfig:
    count: int = 1000
    seed: int = 0
    eval_fraction: float = 0.2
    training_schedules: int = 10
    price_sigma: float = 0.5
    latency_sigma: float = 0.25
    min_tools: int = 4
    max_tools: int = 8

    def validate(self) -> None:
        if self.count < 2:
            raise ValueError(f"count must be at least 2 (one train and one eval pair), got {self.count}")
        if not 0.0 < self.eval_fraction < 1.0:
            raise ValueError(f"eval_fraction must be between 0 and 1, got {self.eval_fraction}")
        if not 2 <= self.min_tools <= self.max_tools:
            raise ValueError(f"need 2 <= min_tools <= max_tools, got {self.min_tools}..{self.max_tools}")


@dataclass
class PreferenceRun:
    config: PreferenceConfig
    run_id: str
    code_version: str
    pairs: list[PreferencePair]
    schedules: ScheduleSet
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> pairs not kept
    paraphrase: Counter[str] = field(default_factory=Counter)  # accepted / rejection reason -> count

    def summary(self) -> dict[str, Any]:
        per_family = Counter(f"{p.split}:{p.family}" for p in self.pairs)
        return {"pairs": len(self.pairs), "per_split": dict(sorted(Counter(p.split for p in self.pairs).items())),
                "per_family": dict(sorted(per_family.items())), "dropped": dict(sorted(self.dropped.items())),
                "inconsistent": sum(n for r, n in self.dropped.items() if r != "duplicate"),
                "paraphrase": dict(sorted(self.paraphrase.items())),
                "judged": dict(sorted(Counter(p.judge_verdict or "not judged" for p in self.pairs).items())),
                "schedules": {s.schedule_id: s.split for s in self.schedules.all}}


@cache
def code_version() -> str:
    """A hash of the code and data that shape the pairs; part of the run id."""
    h = hashlib.sha256()
    for name in VERSION_SOURCES:
        target = ROOT / name
        for path in sorted(target.rglob("*") if target.is_dir() else [target]):
            if path.suffix in (".py", ".yaml") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(ROOT)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:12]


@cache
def _pair_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(Path(PAIR_SCHEMA).read_text()))


def _pick_tools(components: tuple[str, ...], pool: list[CatalogTool], cfg: PreferenceConfig,
                rng: random.Random) -> tuple[list[CatalogTool], dict[str, list[str]]] | None:
    """A tool set (catalog order) and the tools the instruction will name; None when this draw cannot host
    the family (the caller draws again)."""
    size = rng.randint(cfg.min_tools, min(cfg.max_tools, len(pool)))
    chosen = set(t.name for t in rng.sample(pool, size))
    tools = [t for t in pool if t.name in chosen]
    local_only = "local_only" in components
    local = [t for t in tools if t.runs_locally]
    if local_only and (not local or len(local) == len(tools)):
        return None  # the preference must rule something out and leave something in
    named: dict[str, list[str]] = {"avoid": [], "prefer": []}
    # under local-only, naming an off-site tool would be moot (avoid) or contradictory (prefer)
    candidates = [t.name for t in (local if local_only else tools)]
    for component in components:
        if component in NAMED:
            free = [n for n in candidates if n not in named["avoid"] and n not in named["prefer"]]
            k = rng.choice((1, 1, 2))
            if len(free) < k + 1:  # leave at least one usable tool unnamed
                return None
            named[NAMED[component]] = rng.sample(free, k)
    return tools, named


def _make_pair(family: str, split: str, schedule: PricingSchedule, cfg: PreferenceConfig,
               catalog: tuple[CatalogTool, ...], rng: random.Random) -> PreferencePair | None:
    components = components_of(family)
    picked = _pick_tools(components, available_tools(schedule, catalog), cfg, rng)
    if picked is None:
        return None
    tools, named = picked
    labels = {t.name: t.label for t in catalog}
    chosen_templates = [rng.choice(template_ids(c, split)) for c in components]
    sentences = [render(tid, [labels[n] for n in named.get(NAMED.get(c, ""), [])])
                 for c, tid in zip(components, chosen_templates)]
    rng.shuffle(sentences)  # a mixture's parts come in either order
    local_only = "local_only" in components
    prefs = []
    for t in tools:
        if t.name in named["avoid"] or (local_only and not t.runs_locally):
            prefs.append(0.0)
        elif t.name in named["prefer"]:
            prefs.append(1.0)
        else:
            prefs.append(NEUTRAL)
    w = draw_weights(components, rng)
    text = " ".join(sentences)
    return PreferencePair(family, components, tuple(chosen_templates), split, text, text,
                          tuple(t.name for t in tools), tuple(prefs), w.p_accuracy, w.p_cost, w.p_latency,
                          tuple(named["avoid"]), tuple(named["prefer"]), schedule.schedule_id, schedule.synthetic)


def paraphrase_pair(pair: PreferencePair, chat: Chat, catalog: tuple[CatalogTool, ...]) -> tuple[PreferencePair, str]:
    """The pair with an LLM rewording of its instruction, or unchanged with the reason it was refused."""
    try:
        reply = chat([{"role": "system", "content": "Rewrite the user's request in different words. Keep its "
                                                    "meaning and every tool name exactly as written. Reply with "
                                                    "the rewritten request only."},
                      {"role": "user", "content": pair.instruction}])
    except Exception as exc:  # an endpoint failure costs the paraphrase, never the pair
        return pair, f"call_failed:{type(exc).__name__}"
    text = " ".join((reply or "").split()).strip().strip('"')
    if not text:
        return pair, "empty"
    if text.lower() == pair.instruction.lower():
        return pair, "unchanged"
    if len(text) > 3 * len(pair.instruction) + 40:
        return pair, "too_long"
    if REFUSAL.search(text):  # small models answer or apologise instead of rewording
        return pair, "refusal"
    if mentioned_tools(text, catalog) != set(pair.avoid) | set(pair.prefer):
        return pair, "tool_names_changed"
    return replace(pair, instruction=text, paraphrased=True), "accepted"


def _split_sizes(cfg: PreferenceConfig) -> dict[str, int]:
    n_eval = max(1, round(cfg.count * cfg.eval_fraction))
    return {"train": cfg.count - n_eval, "eval": n_eval}


def build_preference_pairs(cfg: PreferenceConfig, paraphrase: Chat | None = None, judge: Chat | None = None,
                           schedules: ScheduleSet | None = None) -> PreferenceRun:
    """``cfg.count`` distinct consistent pairs. Training pairs use training schedules and train families and
    templates; eval pairs use held-out schedules, eval families and eval templates."""
    cfg.validate()
    catalog = load_catalog()
    schedules = schedules or synthetic_schedules(cfg.seed, cfg.training_schedules, cfg.price_sigma,
                                                 cfg.latency_sigma)
    by_id = {s.schedule_id: s for s in schedules.all}
    version = code_version()
    config_key = json.dumps({**asdict(cfg), "paraphrase": paraphrase is not None, "judge": judge is not None,
                             "schedules": sorted(by_id)}, sort_keys=True)
    run_id = "prefs-" + hashlib.sha256(f"{config_key}|{version}".encode()).hexdigest()[:12]
    run = PreferenceRun(cfg, run_id, version, [], schedules)
    seen: set[str] = set()
    rng = random.Random(cfg.seed)
    for split, wanted in _split_sizes(cfg).items():
        families = TRAIN_FAMILIES if split == "train" else EVAL_FAMILIES
        for i in range(wanted):
            family = families[i % len(families)]  # equal shares per family
            for _ in range(MAX_ATTEMPTS_PER_PAIR):
                schedule = schedules.draw_training(rng) if split == "train" else schedules.draw_heldout(rng)
                pair = _make_pair(family, split, schedule, cfg, catalog, rng)
                if pair is None:
                    continue
                if paraphrase is not None:
                    pair, outcome = paraphrase_pair(pair, paraphrase, catalog)
                    run.paraphrase[outcome] += 1
                kept = _admit(pair, by_id[pair.schedule_id], catalog, judge, seen, run.dropped)
                if kept is not None:
                    run.pairs.append(kept)
                    seen.add(kept.pair_id)
                    break
            else:
                raise RuntimeError(f"could not make a consistent {split} pair of family {family} in "
                                   f"{MAX_ATTEMPTS_PER_PAIR} attempts; dropped so far: {dict(run.dropped)}")
    return run


def _admit(pair: PreferencePair, schedule: PricingSchedule, catalog: tuple[CatalogTool, ...], judge: Chat | None,
           seen: set[str], dropped: Counter[str]) -> PreferencePair | None:
    """The pair if it passes every check (with the judge's verdict recorded), else None with the reason counted."""
    if pair.pair_id in seen:
        dropped["duplicate"] += 1
        return None
    if check_pair(pair, schedule, catalog):
        dropped["rule_check"] += 1
        return None
    errors = list(_pair_validator().iter_errors(pair.record()))
    if errors:
        dropped["schema"] += 1
        return None
    if judge is not None:
        try:
            verdict = judge_pair(pair, judge, catalog)
        except Exception:  # a failed judge call leaves the pair unjudged, not rejected
            verdict = "unclear"
        if verdict == "inconsistent":
            dropped["judge"] += 1
            return None
        pair = replace(pair, judge_verdict=verdict)
    return pair


def to_bundle(run: PreferenceRun) -> PreferenceBundle:
    """The run as warehouse rows (``warehouse.pricing_store.PreferenceBundle``)."""
    from warehouse.pricing_store import PreferenceBundle, PricingRows

    now = datetime.now(timezone.utc).replace(tzinfo=None)
    summary = run.summary()
    run_row = {"run_id": run.run_id, "created_at": now, "seed": run.config.seed, "requested": run.config.count,
               "pairs": len(run.pairs), "train_pairs": summary["per_split"].get("train", 0),
               "eval_pairs": summary["per_split"].get("eval", 0), "inconsistent": summary["inconsistent"],
               "code_version": run.code_version, "config_json": json.dumps(asdict(run.config), sort_keys=True),
               "summary_json": json.dumps(summary, sort_keys=True)}
    pairs = [{"run_id": run.run_id, "pair_id": p.pair_id, "position": i, "split": p.split, "family": p.family,
              "components": "+".join(p.components), "template_ids": "+".join(p.template_ids),
              "instruction": p.instruction, "template_instruction": p.template_instruction,
              "paraphrased": p.paraphrased,
              "named_tools_json": json.dumps({"avoid": list(p.avoid), "prefer": list(p.prefer)}),
              "tool_set_id": p.tool_set_id, "tools_json": json.dumps(list(p.tools)),
              "vector_json": json.dumps(p.vector), "p_accuracy": p.p_accuracy, "p_cost": p.p_cost,
              "p_latency": p.p_latency, "schedule_id": p.schedule_id, "schedule_synthetic": p.schedule_synthetic,
              "judge_verdict": p.judge_verdict} for i, p in enumerate(run.pairs)]
    return PreferenceBundle(run_row, pairs, PricingRows(**schedule_rows((nominal_schedule(), *run.schedules.all), now)))


def build_and_store(cfg: PreferenceConfig, warehouse: str | Path, paraphrase: Chat | None = None,
                    judge: Chat | None = None) -> dict[str, Any]:
    """Build a run, store it through the warehouse's writer discipline, and return its summary."""
    from warehouse.pricing_store import store_preferences

    run = build_preference_pairs(cfg, paraphrase=paraphrase, judge=judge)
    store_preferences(warehouse, to_bundle(run))
    return {"run_id": run.run_id, "warehouse": str(warehouse), **run.summary()}


def summary_markdown(summary: dict[str, Any]) -> str:
    """A short report of a run: counts per split and family, what was dropped, the schedules used."""
    lines = [f"# Preference pairs `{summary['run_id']}`", "",
             f"- **pairs:** {summary['pairs']} ({', '.join(f'{k} {v}' for k, v in summary['per_split'].items())})",
             f"- **inconsistent (dropped):** {summary['inconsistent']}; duplicates redrawn: "
             f"{summary['dropped'].get('duplicate', 0)}",
             f"- **paraphrase:** {summary['paraphrase'] or 'off'}; **judge:** {summary['judged']}",
             "- **pricing schedules (all synthetic):** " + ", ".join(f"`{k}` ({v})"
                                                                    for k, v in summary["schedules"].items()),
             "", "| split | family | pairs |", "|---|---|---:|"]
    for key, n in summary["per_family"].items():
        split, family = key.split(":", 1)
        lines.append(f"| {split} | {family} | {n} |")
    return "\n".join(lines) + "\n"
