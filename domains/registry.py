"""The shipped domains and ToolScale's published per-domain figures (paper, Table 5)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from domains.engine import DomainEngine
from domains.spec import DomainSpec, load_spec

DOMAINS_DIR = Path(__file__).resolve().parent
DOMAIN_NAMES = ("finance", "sport", "ecommerce", "medicine", "entertainment", "railway", "restaurant",
                "education", "travel", "weather")
# ToolScale Table 5: (tools, database rows, tasks) per domain; our domains must meet or exceed each figure.
TABLE5 = {
    "finance": (22, 686, 396), "sport": (19, 423, 247), "ecommerce": (15, 577, 343),
    "medicine": (19, 920, 622), "entertainment": (24, 852, 561), "railway": (25, 790, 414),
    "restaurant": (23, 683, 348), "education": (21, 816, 426), "travel": (15, 752, 331),
    "weather": (14, 549, 375),
}


def spec_path(name: str) -> Path:
    return DOMAINS_DIR / name / f"{name}.yaml"


def available_domains() -> list[str]:
    return [n for n in DOMAIN_NAMES if spec_path(n).exists()]


@cache
def get_spec(name: str) -> DomainSpec:
    if name not in DOMAIN_NAMES:
        raise KeyError(f"unknown domain {name!r}; known: {', '.join(DOMAIN_NAMES)}")
    return load_spec(spec_path(name))


@cache
def get_engine(name: str, seed: int = 0) -> DomainEngine:
    """The materialised domain for (name, seed), built once per process."""
    return DomainEngine(get_spec(name), seed)
