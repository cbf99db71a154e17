"""A per-run spending limit in USD, shared by every client of the run: once reached, no new call starts."""

from __future__ import annotations

import threading


class BudgetExceeded(RuntimeError):
    """Raised instead of starting a call once the run has spent its budget."""


class Budget:
    def __init__(self, limit_usd: float | None) -> None:
        if limit_usd is not None and limit_usd < 0:
            raise ValueError(f"a budget must be >= 0 USD, got {limit_usd}")
        self.limit_usd = limit_usd
        self.spent_usd = 0.0
        self.paid_calls = 0
        self.refused_calls = 0
        self._lock = threading.Lock()

    @property
    def exhausted(self) -> bool:
        return self.limit_usd is not None and self.spent_usd >= self.limit_usd

    def check(self) -> None:
        """Raise BudgetExceeded when the limit is reached. Calls already in flight finish and are charged, so the
        run can overshoot by at most what its concurrent calls cost."""
        with self._lock:
            if self.limit_usd is not None and self.spent_usd >= self.limit_usd:
                self.refused_calls += 1
                raise BudgetExceeded(f"budget of ${self.limit_usd:.6f} reached: ${self.spent_usd:.6f} spent on "
                                     f"{self.paid_calls} calls; no new LLM calls start in this run")

    def charge(self, usd: float | None) -> None:
        with self._lock:
            self.paid_calls += 1
            self.spent_usd += usd or 0.0
