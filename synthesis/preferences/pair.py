"""A preference pair: the instruction a user wrote and the vector P it implies over a tool set."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

NEUTRAL = 0.5  # a tool the user said nothing about: allowed, not favoured


@dataclass(frozen=True)
class PreferencePair:
    family: str
    components: tuple[str, ...]
    template_ids: tuple[str, ...]
    split: str  # train | eval
    instruction: str
    template_instruction: str  # the rendered template, before any paraphrase
    tools: tuple[str, ...]  # the tool set, in the vector's order
    tool_prefs: tuple[float, ...]  # p_tool_1..p_tool_n: 0 = must not use, 1 = preferred
    p_accuracy: float
    p_cost: float
    p_latency: float
    avoid: tuple[str, ...]  # tools the instruction names as unwanted
    prefer: tuple[str, ...]  # tools the instruction names as preferred
    schedule_id: str
    schedule_synthetic: bool
    paraphrased: bool = False
    judge_verdict: str | None = None

    @property
    def vector(self) -> list[float]:
        """P = [p_tool_1..p_tool_n, p_accuracy, p_cost, p_latency]."""
        return [*self.tool_prefs, self.p_accuracy, self.p_cost, self.p_latency]

    @property
    def tool_set_id(self) -> str:
        return "tools-" + hashlib.sha256("\n".join(self.tools).encode()).hexdigest()[:12]

    @property
    def pair_id(self) -> str:
        body = json.dumps([self.instruction, self.tools, self.vector, self.schedule_id])
        return "pair-" + hashlib.sha256(body.encode()).hexdigest()[:16]

    def record(self) -> dict[str, Any]:
        """The pair as schemas/preference_pair.schema.json describes it."""
        return {"pair_id": self.pair_id, "split": self.split, "family": self.family,
                "components": list(self.components), "template_ids": list(self.template_ids),
                "instruction": self.instruction, "template_instruction": self.template_instruction,
                "paraphrased": self.paraphrased, "tools": list(self.tools), "vector": self.vector,
                "weights": {"accuracy": self.p_accuracy, "cost": self.p_cost, "latency": self.p_latency},
                "named_tools": {"avoid": list(self.avoid), "prefer": list(self.prefer)},
                "tool_set_id": self.tool_set_id, "schedule_id": self.schedule_id,
                "schedule_synthetic": self.schedule_synthetic, "judge_verdict": self.judge_verdict}
