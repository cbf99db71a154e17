"""Is a preference pair consistent? Rule checks that read the pair as a stranger would, plus an optional LLM judge.

The rules do not trust how the pair was made: they re-derive, from the family, the named tools and the text,
what P must look like, and list every disagreement in words a person can read.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from inference.pricing import PricingSchedule
from synthesis.preferences.catalog import CatalogTool, load_catalog, mentioned_tools
from synthesis.preferences.families import COMPONENTS
from synthesis.preferences.pair import PreferencePair

Chat = Callable[[list[dict[str, str]]], str]
HIGH, LOW = 0.8, 0.2  # "a priority" and "barely matters" on the weight scale
UNSTATED_MAX = 0.5  # a weight the instruction says nothing about must not look like a priority


def check_pair(pair: PreferencePair, schedule: PricingSchedule | None = None,
               catalog: tuple[CatalogTool, ...] | None = None) -> list[str]:
    """Every way ``pair`` contradicts itself; empty when it is consistent."""
    catalog = catalog or load_catalog()
    by_name = {t.name: t for t in catalog}
    parts = set(pair.components)
    problems: list[str] = []
    if not parts or not parts <= set(COMPONENTS):
        return [f"unknown components {sorted(parts - set(COMPONENTS))}"]
    if len(pair.vector) != len(pair.tools) + 3:
        problems.append(f"P has {len(pair.vector)} entries for {len(pair.tools)} tools (needs tools + 3)")
    if any(not 0.0 <= v <= 1.0 for v in pair.vector):
        problems.append("an entry of P is outside [0, 1]")
    if len(set(pair.tools)) != len(pair.tools):
        problems.append("the tool set lists a tool twice")
    unknown = [t for t in pair.tools if t not in by_name]
    if unknown:
        return problems + [f"tools not in the catalog: {unknown}"]
    if schedule is not None:
        unpriced = [t for t in pair.tools if by_name[t].kind == "model" and t not in schedule.models]
        if unpriced:
            problems.append(f"models not priced by schedule {schedule.name}: {unpriced}")
        if schedule.schedule_id != pair.schedule_id or schedule.synthetic != pair.schedule_synthetic:
            problems.append("the pair's schedule id or synthetic flag does not match its schedule")

    avoid, prefer = set(pair.avoid), set(pair.prefer)
    if bool(avoid) != ("avoid_tools" in parts) or bool(prefer) != ("prefer_tools" in parts):
        problems.append("named tools do not match the family (avoid/prefer lists vs components)")
    if avoid & prefer:
        problems.append(f"tools both avoided and preferred: {sorted(avoid & prefer)}")
    if not (avoid | prefer) <= set(pair.tools):
        problems.append(f"named tools outside the tool set: {sorted((avoid | prefer) - set(pair.tools))}")
    said = mentioned_tools(pair.instruction, catalog)
    if said != avoid | prefer:
        problems.append(f"the instruction names {sorted(said)} but the pair names {sorted(avoid | prefer)}")

    local_only = "local_only" in parts
    for tool, p in zip(pair.tools, pair.tool_prefs):
        off_site = local_only and not by_name[tool].runs_locally
        if tool in avoid and p != 0.0:
            problems.append(f"asked to avoid {tool} but p={p}")
        elif off_site and p != 0.0:
            problems.append(f"local only, but {tool} does not run locally and p={p}")
        elif tool in prefer and p != 1.0:
            problems.append(f"asked to prefer {tool} but p={p}")
        elif tool not in avoid and not off_site and tool not in prefer and not 0.0 < p < 1.0:
            problems.append(f"nothing was said about {tool} yet p={p}")
    if prefer and local_only and any(not by_name[t].runs_locally for t in prefer):
        problems.append("prefers a tool that local-only forbids")
    if pair.tool_prefs and max(pair.tool_prefs) == 0.0:
        problems.append("every tool is ruled out: the request cannot be served")

    if "tight_budget" in parts and not (pair.p_cost >= HIGH and pair.p_cost > pair.p_accuracy):
        problems.append(f"tight budget needs p_cost >= {HIGH} and above p_accuracy, got {pair.p_cost}")
    if "fast_answers" in parts and not (pair.p_latency >= HIGH and pair.p_latency > pair.p_accuracy):
        problems.append(f"fast answers need p_latency >= {HIGH} and above p_accuracy, got {pair.p_latency}")
    if "accuracy_first" in parts and not (pair.p_accuracy == 1.0 and pair.p_cost <= LOW and pair.p_latency <= LOW):
        problems.append(f"accuracy first needs p_accuracy = 1 and p_cost, p_latency <= {LOW}")
    if "tight_budget" not in parts and pair.p_cost > UNSTATED_MAX:
        problems.append(f"cost was not mentioned but p_cost={pair.p_cost}")
    if "fast_answers" not in parts and pair.p_latency > UNSTATED_MAX:
        problems.append(f"speed was not mentioned but p_latency={pair.p_latency}")
    return problems


def describe(pair: PreferencePair, catalog: tuple[CatalogTool, ...] | None = None) -> str:
    """P in words, for a judge to compare with the instruction."""
    labels = {t.name: t.label for t in catalog or load_catalog()}
    tools = ", ".join(f"{labels[t]}={p:g}" for t, p in zip(pair.tools, pair.tool_prefs))
    return (f"tool weights (0 = must not be used, 0.5 = no preference, 1 = preferred): {tools}; "
            f"importance (0 = does not matter, 1 = top priority) of accuracy {pair.p_accuracy:g}, "
            f"of low cost {pair.p_cost:g}, of speed {pair.p_latency:g}")


def judge_pair(pair: PreferencePair, chat: Chat, catalog: tuple[CatalogTool, ...] | None = None) -> str:
    """``consistent``, ``inconsistent`` or ``unclear`` (an answer that is neither yes nor no)."""
    answer = chat([
        {"role": "system", "content": "You check whether a preference vector matches what a user asked for. "
                                      "Answer with one word: YES or NO."},
        {"role": "user", "content": f"User's instruction: {pair.instruction}\n\nVector: {describe(pair, catalog)}"
                                    "\n\nDoes the vector match the instruction?"},
    ])
    word = re.match(r"\W*(\w+)", answer or "")
    verdict = word.group(1).lower() if word else ""
    return {"yes": "consistent", "no": "inconsistent"}.get(verdict, "unclear")
