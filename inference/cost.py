"""What a call costs: a price per million tokens, and the lookup callable the client asks for it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from inference.endpoints import Endpoint

if TYPE_CHECKING:
    from inference.pricing import PricingSchedule


@dataclass(frozen=True)
class Price:
    """USD per 1M input (prompt) and output (completion) tokens, and where the figures come from."""

    input_per_m: float
    output_per_m: float
    source: str = ""

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_m + completion_tokens * self.output_per_m) / 1_000_000


# Takes an endpoint's pricing_key, returns its price or None when the key is not priced.
PricingLookup = Callable[[str], Price | None]

LOCAL_PRICE = Price(0.0, 0.0, "local model on this machine: no per-token charge")


def price_for(endpoint: Endpoint, lookup: PricingLookup | None) -> Price | None:
    """The lookup's price when it has one; else 0 for a local endpoint; else None (unknown, never invented)."""
    found = lookup(endpoint.pricing_key) if lookup is not None else None
    if found is not None:
        return found
    return LOCAL_PRICE if endpoint.provider == "local" else None


def format_usd(cost: float | None) -> str:
    """A cost as printed: "unknown" when a call had no price, never $0.000000 for what nobody priced."""
    return "unknown" if cost is None else f"${cost:.6f}"


def table_lookup(prices: Mapping[str, Price]) -> PricingLookup:
    """A lookup over a plain mapping (tests, or a pricing table read from the warehouse)."""
    return lambda key: prices.get(key)


def run_lookup(*schedules: PricingSchedule) -> PricingLookup:
    """The lookup a run of the factory uses: each schedule's models by full name and, where it is unambiguous, by
    the name after the last "/" (``qwen3-8b`` finds ``Qwen/Qwen3-8B``), case-insensitively; an earlier schedule
    wins. Unknown keys stay unknown (None)."""
    prices: dict[str, Price] = {}
    tails: dict[str, list[Price]] = {}
    for schedule in schedules:
        for p in schedule.prices:
            price = Price(p.input_usd_per_1m, p.output_usd_per_1m, f"{schedule.name}: {p.source}")
            prices.setdefault(p.model.lower(), price)
            tails.setdefault(p.model.lower().rsplit("/", 1)[-1], []).append(price)
    for tail, found in tails.items():
        if len(found) == 1:
            prices.setdefault(tail, found[0])
    return lambda key: prices.get(key.lower())


def schedule_lookup(schedule: PricingSchedule) -> PricingLookup:
    """A lookup over one pricing schedule (nominal, provider or synthetic), keyed by model name."""
    prices = {p.model: Price(p.input_usd_per_1m, p.output_usd_per_1m, f"{schedule.name}: {p.source}")
              for p in schedule.prices}
    return table_lookup(prices)
