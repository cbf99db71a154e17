"""Preference families: what users ask for, the sentences they say it with, and the weights each implies.

A family is one component (``avoid_tools``) or a mixture of two (``mix:local_only+tight_budget``). Each component
has six templates; the last two of every component are kept for evaluation only, and the evaluation families
are mixtures never seen in training, so the eval split tests unseen preferences in unseen words.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

COMPONENTS = ("local_only", "tight_budget", "fast_answers", "avoid_tools", "prefer_tools", "accuracy_first")
NAMED = {"avoid_tools": "avoid", "prefer_tools": "prefer"}  # components whose sentences name tools
EVAL_TEMPLATES_PER_COMPONENT = 2

# {tools_or} / {tools_and}: the named tools' labels joined with "or" / "and".
TEMPLATES: dict[str, tuple[str, ...]] = {
    "local_only": (
        "This is about patient records, so nothing may leave our own servers: use only models we run locally.",
        "Privacy matters more than anything here. Stick to tools that run on our own hardware and don't send my "
        "data to any outside API.",
        "Our legal team won't let this data go to third-party services, so please keep everything in-house.",
        "Only use local models for this one; I don't want the contents going to the cloud.",
        "I'm under an NDA on this project. Whatever you do, keep it on machines we control.",
        "Please handle this without any external services. It's confidential client data and it stays local.",
    ),
    "tight_budget": (
        "I'm paying for this out of my own pocket, so keep the cost as low as you can.",
        "Money is tight this month. Go for the cheapest way to get a decent answer.",
        "Please don't run up a big bill on this; a good-enough answer at a low price is what I want.",
        "We're on a shoestring budget, so spend as little as possible on tool calls.",
        "Cost is my main worry here. Be frugal with the expensive models.",
        "Our API credits are almost gone, so make every call count and keep spending minimal.",
    ),
    "fast_answers": (
        "I need this quickly, I'm about to walk into a meeting.",
        "Speed matters most to me right now; a fast answer beats a perfect one.",
        "Please be quick about it. I don't want to sit here waiting for slow models.",
        "I'm in a hurry, so pick whatever gets me an answer fastest.",
        "Time is short, so give me something as soon as you can.",
        "Don't keep me waiting on this one; I need the answer right away.",
    ),
    "avoid_tools": (
        "Please don't use {tools_or} for this.",
        "I'd rather you stayed away from {tools_and} on this question.",
        "Keep {tools_and} out of this, please.",
        "Whatever you do, don't call {tools_or}.",
        "My company doesn't allow {tools_and}, so please find another way.",
        "Skip {tools_and} entirely for this request.",
    ),
    "prefer_tools": (
        "If you can, use {tools_and} for this; that's what I trust.",
        "I'd like you to lean on {tools_and} for this one.",
        "Please go with {tools_and} wherever possible.",
        "My team has standardised on {tools_and}, so please favour that.",
        "I've had the best results with {tools_and}, so reach for that first.",
        "Prefer {tools_and} over the alternatives, please.",
    ),
    "accuracy_first": (
        "Getting this exactly right is what matters; don't cut corners to save time or money.",
        "Accuracy is everything here. Use the strongest tools you have, whatever the cost.",
        "This goes into a report for the board, so I need the most reliable answer possible. Cost and time are "
        "secondary.",
        "Take your time and spend what you need; I just need the answer to be correct.",
        "I can't afford a wrong answer on this one, so use the best models available.",
        "Quality first, please: double-check with strong models even if it's slow or pricey.",
    ),
}

# Mixtures that make sense together (accuracy first contradicts a tight budget and fast answers).
TRAIN_FAMILIES: tuple[str, ...] = (
    *COMPONENTS,
    "mix:local_only+tight_budget", "mix:local_only+avoid_tools", "mix:local_only+accuracy_first",
    "mix:tight_budget+avoid_tools", "mix:tight_budget+prefer_tools", "mix:fast_answers+prefer_tools",
    "mix:tight_budget+fast_answers", "mix:accuracy_first+avoid_tools", "mix:avoid_tools+prefer_tools",
)
EVAL_FAMILIES: tuple[str, ...] = (
    "mix:local_only+fast_answers", "mix:fast_answers+avoid_tools", "mix:accuracy_first+prefer_tools",
    "mix:local_only+prefer_tools",
)


def components_of(family: str) -> tuple[str, ...]:
    return tuple(family.removeprefix("mix:").split("+"))


def template_ids(component: str, split: str) -> list[str]:
    """Template ids (``component/k``) a split may use; train and eval never share one."""
    n = len(TEMPLATES[component])
    ks = range(n - EVAL_TEMPLATES_PER_COMPONENT) if split == "train" else range(n - EVAL_TEMPLATES_PER_COMPONENT, n)
    return [f"{component}/{k}" for k in ks]


def template_text(template_id: str) -> str:
    component, k = template_id.split("/")
    return TEMPLATES[component][int(k)]


def join_labels(labels: list[str], word: str) -> str:
    return labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} {word} {labels[-1]}"


def render(template_id: str, labels: list[str]) -> str:
    return template_text(template_id).format(tools_or=join_labels(labels, "or") if labels else "",
                                             tools_and=join_labels(labels, "and") if labels else "")


@dataclass(frozen=True)
class Weights:
    p_accuracy: float
    p_cost: float
    p_latency: float


def _step(rng: random.Random, low: float, high: float) -> float:
    """A weight on a 0.05 grid in [low, high], so vectors are readable."""
    return round(rng.randint(round(low * 20), round(high * 20)) / 20, 2)


def draw_weights(components: tuple[str, ...], rng: random.Random) -> Weights:
    """What the components say about accuracy, cost and latency; what they leave unsaid stays low-key."""
    parts = set(components)
    if "accuracy_first" in parts:
        return Weights(1.0, _step(rng, 0.0, 0.2), _step(rng, 0.0, 0.2))
    accuracy = _step(rng, 0.3, 0.7) if parts & {"tight_budget", "fast_answers"} else _step(rng, 0.6, 1.0)
    cost = _step(rng, 0.8, 1.0) if "tight_budget" in parts else _step(rng, 0.1, 0.5)
    latency = _step(rng, 0.8, 1.0) if "fast_answers" in parts else _step(rng, 0.1, 0.5)
    return Weights(accuracy, cost, latency)
