"""The tool catalog preference vectors range over, and finding which tools a piece of text names."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from inference.pricing import PricingSchedule

CATALOG_PATH = Path(__file__).resolve().parents[2] / "data" / "pricing" / "tool_catalog.yaml"


@dataclass(frozen=True)
class CatalogTool:
    name: str  # the model name a pricing schedule uses, or a basic tool's name
    label: str  # how a user names it
    kind: str  # model | basic
    runs_locally: bool


@cache
def load_catalog(path: Path = CATALOG_PATH) -> tuple[CatalogTool, ...]:
    tools = tuple(CatalogTool(str(t["name"]), str(t["label"]), str(t["kind"]), bool(t["runs_locally"]))
                  for t in yaml.safe_load(path.read_text())["tools"])
    labels = [t.label.lower() for t in tools]
    if len(set(labels)) != len(labels) or len({t.name for t in tools}) != len(tools):
        raise ValueError(f"{path}: tool names and labels must be unique")
    return tools


def available_tools(schedule: PricingSchedule, catalog: tuple[CatalogTool, ...] | None = None) -> list[CatalogTool]:
    """Catalog tools usable under ``schedule``: basic tools, and models the schedule prices."""
    priced = set(schedule.models)
    return [t for t in catalog or load_catalog() if t.kind == "basic" or t.name in priced]


def mentioned_tools(text: str, catalog: tuple[CatalogTool, ...] | None = None) -> set[str]:
    """Names of the catalog tools ``text`` mentions by label. Longer labels are matched first and blanked out,
    so "GPT-5 mini" does not also count as "GPT-5"."""
    found: set[str] = set()
    for tool in sorted(catalog or load_catalog(), key=lambda t: -len(t.label)):
        pattern = re.compile(rf"(?<![\w-]){re.escape(tool.label)}(?![\w-])", re.IGNORECASE)
        if pattern.search(text):
            found.add(tool.name)
            text = pattern.sub(" ", text)
    return found
