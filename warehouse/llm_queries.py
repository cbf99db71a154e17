"""Example queries over the LLM tables (llm_calls, llm_stage_runs), quoted in docs/warehouse.md and docs/llm.md."""

from __future__ import annotations

# What each stage's accepted outputs cost: calls are joined to the stage run they belong to. Unpriced calls (cost
# NULL: no price known, never invented) are counted apart rather than read as free.
COST_PER_VERIFIED_TASK_BY_STAGE = """
WITH spend AS (
    SELECT run_id, stage, COUNT(*) AS calls, SUM(cost_usd) AS usd, COUNT(*) - COUNT(cost_usd) AS unpriced_calls
    FROM llm_calls GROUP BY run_id, stage)
SELECT r.stage, SUM(r.attempted) AS attempted, SUM(r.accepted) AS verified,
       COALESCE(SUM(s.calls), 0) AS calls, COALESCE(SUM(s.unpriced_calls), 0) AS unpriced_calls,
       COALESCE(SUM(s.usd), 0) AS usd, COALESCE(SUM(s.usd), 0) / NULLIF(SUM(r.accepted), 0) AS usd_per_verified
FROM llm_stage_runs r LEFT JOIN spend s USING (run_id, stage)
GROUP BY r.stage
ORDER BY usd_per_verified NULLS LAST, r.stage
"""

# Models ranked by accepted outputs per dollar across every stage run; a model that cost nothing (a local one)
# ranks first with an infinite figure, and models tie-break on their acceptance rate.
MODELS_BY_SUCCESS_PER_DOLLAR = """
WITH spend AS (
    SELECT run_id, stage, model, SUM(cost_usd) AS usd FROM llm_calls GROUP BY run_id, stage, model)
SELECT s.model, SUM(r.attempted) AS attempted, SUM(r.accepted) AS accepted,
       ROUND(SUM(r.accepted) / NULLIF(SUM(r.attempted), 0), 4) AS acceptance_rate,
       COALESCE(SUM(s.usd), 0) AS usd,
       CASE WHEN COALESCE(SUM(s.usd), 0) = 0 THEN 'inf'::DOUBLE
            ELSE SUM(r.accepted) / SUM(s.usd) END AS accepted_per_usd
FROM llm_stage_runs r JOIN spend s USING (run_id, stage)
GROUP BY s.model
ORDER BY accepted_per_usd DESC, acceptance_rate DESC, s.model
"""

__all__ = ["COST_PER_VERIFIED_TASK_BY_STAGE", "MODELS_BY_SUCCESS_PER_DOLLAR"]
