"""What one run of an LLM stage produced: the accepted items, the refusals with reasons, and the figures stored."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, ClassVar

from inference.records import StageOutcome

if TYPE_CHECKING:
    from inference.client import LLMClient


class StageTally:
    """Mixin for a stage's result dataclass with ``accepted`` and ``rejections`` lists. Each rejection has
    ``reason``, ``detail``, ``subject_id`` (what the output was for) and ``output`` (the refused text)."""

    stage: ClassVar[str] = ""
    accepted: list[Any]
    rejections: list[Any]

    @property
    def attempted(self) -> int:
        return len(self.accepted) + len(self.rejections)

    @property
    def acceptance_rate(self) -> float:
        return len(self.accepted) / self.attempted if self.attempted else 0.0

    def outcome(self, llm: LLMClient) -> StageOutcome:
        """The run's outcome for the warehouse: ``llm.flush_records(warehouse, [result.outcome(llm)])``."""
        return StageOutcome(run_id=llm.run_id, stage=self.stage, endpoint=llm.endpoint.name,
                            attempted=self.attempted, accepted=len(self.accepted), snapshot_id=llm.snapshot_id,
                            rejections=[{"subject_id": r.subject_id, "reason": r.reason, "detail": r.detail,
                                         "output": r.output} for r in self.rejections])

    def summary(self) -> dict[str, Any]:
        return {"stage": self.stage, "attempted": self.attempted, "accepted": len(self.accepted),
                "acceptance_rate": round(self.acceptance_rate, 4),
                "rejection_reasons": dict(Counter(r.reason for r in self.rejections))}
