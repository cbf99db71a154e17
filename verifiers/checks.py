"""The three trajectory checks that define "solved": execution, fidelity, completeness."""

from __future__ import annotations

import re
from typing import Any

from domains.engine import ToolCall
from verifiers.replay import Replay
from verifiers.types import Check
from verifiers.values import judge

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _canonical_number(match: re.Match[str]) -> str:
    value = float(match.group(0))
    return str(int(value)) if value.is_integer() else repr(round(value, 6))


def normalise(text: str) -> str:
    """Text as tau2 compares it (the paraphrase and audit checks use it): tau2's rule (lowercase, commas removed) plus one spelling per number: 1,234.50 -> 1234.5."""
    return _NUMBER.sub(_canonical_number, text.lower().replace(",", ""))


def execution_check(gold: Replay, candidate: Replay) -> Check:
    """Same end state: compare only rows that either run wrote."""
    touched = gold.writes | candidate.writes
    differing = sorted((k for k in touched if gold.db.row(k) != candidate.db.row(k)), key=repr)
    spec = gold.db.engine.spec
    if differing:
        shown = ", ".join(f"{t}:{pk}" for t, pk in differing[:5])
        return Check(False, f"{len(differing)} row(s) differ from the gold end state{_by_side(spec, differing)}: "
                            f"{shown}")
    return Check(True, f"same end state over {len(touched)} written row(s){_by_side(spec, touched)}")


def _by_side(spec: Any, keys: Any) -> str:
    """For a dual-control domain, how many of ``keys`` are the operator's and how many the user's device."""
    if not spec.dual:
        return ""
    user = {t.name for t in spec.side_tables("user")}
    on_device = sum(1 for t, _ in keys if t in user)
    return f" (operator {len(keys) - on_device}, device {on_device})"


def fidelity_check(communicate_info: tuple[str, ...], assistant_text: str, clock: str | None = None) -> Check:
    """Every value of ``communicate_info`` told in ``assistant_text``, judged on meaning (``verifiers.values``):
    "€247.33" tells "247.33 EUR", "2 pm" tells "14:00"; no other value, and not among many candidates. ``clock``:
    the domain's "now", whose year a date may leave out."""
    said = assistant_text if isinstance(assistant_text, str) else ""  # an agent may send no text
    judgement = judge(tuple(communicate_info), said, clock)
    return Check(judgement.passed, judgement.reason(len(communicate_info)))


def completeness_check(gold: Replay, candidate: Replay) -> Check:
    """Every row the gold read was read, every row it wrote was written."""
    missing = sorted({("read", *k) for k in gold.reads - candidate.reads}
                     | {("wrote", *k) for k in gold.writes - candidate.writes}, key=repr)
    if missing:
        shown = ", ".join(f"{op} {t}:{pk}" for op, t, pk in missing[:5])
        return Check(False, f"{len(missing)} operation(s) of the gold were not done: {shown}")
    return Check(True, f"all {len(gold.reads)} read and {len(gold.writes)} written gold row(s) covered")


def identification_check(user: tuple[str, Any] | None, identify_tools: tuple[str, ...], calls: tuple[ToolCall, ...],
                         candidate: Replay, write_tools: set[str]) -> Check:
    """The policy's first rule: the user is identified (an identification tool returned their row) before
    anything is written."""
    if user is None:
        return Check(True, "the task names no user to identify")
    for call, result in zip(calls, candidate.results):
        if call.name in write_tools:
            break
        if call.name in identify_tools and result.ok and user in result.reads:
            return Check(True, f"{user[0]}:{user[1]} identified by {call.name}")
    return Check(False, f"{user[0]}:{user[1]} was not identified (with {', '.join(identify_tools)}) before the first write")
