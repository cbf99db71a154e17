"""Create the warehouse tables (from the SQLModel models) and the views data scientists query."""

from __future__ import annotations

from pathlib import Path

import duckdb
from sqlalchemy.engine import URL
from sqlmodel import SQLModel, create_engine

from warehouse import (audit_models, cost_models, eval_models, llm_models, models, pricing_models,  # noqa: F401
                       train_models)

VIEWS = {
    "latest_tasks": """
        SELECT t.* FROM tasks t
        WHERE t.snapshot_id = (SELECT snapshot_id FROM snapshots WHERE status = 'published'
                               ORDER BY created_at DESC, snapshot_id DESC LIMIT 1)""",
    "domain_summary": """
        SELECT s.snapshot_id, s.status, s.created_at, t.domain, COUNT(*) AS tasks,
               COUNT(t.evolved_from) AS evolved, ROUND(COUNT(t.evolved_from) / COUNT(*), 3) AS evolved_fraction,
               MEDIAN(v.kill_rate) AS median_kill_rate, ROUND(AVG(t.calls), 2) AS mean_calls,
               MAX(t.depth) AS max_depth
        FROM tasks t JOIN snapshots s USING (snapshot_id) JOIN verdicts v USING (snapshot_id, task_id)
        GROUP BY ALL""",
    "pipeline_costs": """
        SELECT snapshot_id, stage, 'cpu' AS resource, cpu_s, NULL::BIGINT AS llm_calls,
               NULL::BIGINT AS prompt_tokens, NULL::BIGINT AS completion_tokens,
               cpu_s * cpu_usd_per_hour / 3600 AS usd, price_note
        FROM stage_costs
        UNION ALL
        SELECT snapshot_id, stage, 'llm' AS resource, NULL AS cpu_s, COUNT(*) AS llm_calls,
               SUM(prompt_tokens)::BIGINT AS prompt_tokens, SUM(completion_tokens)::BIGINT AS completion_tokens,
               COALESCE(SUM(cost_usd), 0) AS usd,
               CASE WHEN COUNT(cost_usd) < COUNT(*) THEN (COUNT(*) - COUNT(cost_usd)) || ' calls unpriced' END
        FROM llm_calls WHERE snapshot_id IS NOT NULL GROUP BY snapshot_id, stage""",
    "cost_per_verified_task": """
        WITH cpu AS (
            SELECT snapshot_id, SUM(cpu_s) AS cpu_s, SUM(cpu_s * cpu_usd_per_hour / 3600) AS cpu_usd,
                   MAX(cpu_usd_per_hour) AS cpu_usd_per_hour, MAX(price_note) AS cpu_price_note
            FROM stage_costs GROUP BY snapshot_id),
        llm AS (
            SELECT snapshot_id, COUNT(*) AS llm_calls, SUM(prompt_tokens)::BIGINT AS prompt_tokens,
                   SUM(completion_tokens)::BIGINT AS completion_tokens, COALESCE(SUM(cost_usd), 0) AS llm_usd,
                   COUNT(*) - COUNT(cost_usd) AS unpriced_llm_calls
            FROM llm_calls WHERE snapshot_id IS NOT NULL GROUP BY snapshot_id)
        SELECT s.snapshot_id, s.status, s.tasks AS verified_tasks, c.cpu_s, c.cpu_usd_per_hour, c.cpu_price_note,
               c.cpu_usd, COALESCE(l.llm_calls, 0) AS llm_calls, COALESCE(l.prompt_tokens, 0) AS prompt_tokens,
               COALESCE(l.completion_tokens, 0) AS completion_tokens, COALESCE(l.llm_usd, 0) AS llm_usd,
               COALESCE(l.unpriced_llm_calls, 0) AS unpriced_llm_calls,
               c.cpu_usd + COALESCE(l.llm_usd, 0) AS total_usd,
               (c.cpu_usd + COALESCE(l.llm_usd, 0)) / NULLIF(s.tasks, 0) AS usd_per_verified_task
        FROM snapshots s JOIN cpu c USING (snapshot_id) LEFT JOIN llm l USING (snapshot_id)""",
    "rejection_reasons": """
        SELECT snapshot_id, domain, reason, COUNT(*) AS candidates
        FROM rejections GROUP BY ALL""",
    "evolution_lineage": """
        WITH RECURSIVE lineage(snapshot_id, task_id, ancestor_id, operator, depth, hops) AS (
            SELECT snapshot_id, task_id, evolved_from, operator, depth, 1 FROM tasks WHERE evolved_from IS NOT NULL
            UNION ALL
            SELECT l.snapshot_id, l.task_id, p.evolved_from, l.operator, l.depth, l.hops + 1
            FROM lineage l JOIN tasks p ON p.snapshot_id = l.snapshot_id AND p.task_id = l.ancestor_id
            WHERE p.evolved_from IS NOT NULL)
        SELECT t.snapshot_id, t.task_id, t.evolved_from AS parent_id, t.operator, t.depth,
               COALESCE((SELECT l.ancestor_id FROM lineage l WHERE l.snapshot_id = t.snapshot_id
                         AND l.task_id = t.task_id ORDER BY l.hops DESC LIMIT 1), t.task_id) AS root_id
        FROM tasks t""",
}


# snapshot_audit figures added after the table first shipped (issue 15: wording)
def ensure_schema(path: Path) -> None:
    """Create missing tables through SQLModel, then (re)create the views with DuckDB."""
    # URL.create, not an f-string URL: a path holding '?', '#' or '%' would be parsed as a query or escape
    engine = create_engine(URL.create("duckdb", database=str(path)))
    try:
        SQLModel.metadata.create_all(engine)
    finally:
        engine.dispose()
    con = duckdb.connect(str(path))
    try:
        # a column added after a warehouse was created (create_all adds tables, never columns)
        con.execute("ALTER TABLE tasks ADD COLUMN IF NOT EXISTS source VARCHAR DEFAULT 'synthesised'")
        con.execute("ALTER TABLE tasks ADD COLUMN IF NOT EXISTS verification_json VARCHAR")
        audit_models.add_missing_columns(con)
        train_models.add_missing_columns(con)
        con.execute("ALTER TABLE tasks ADD COLUMN IF NOT EXISTS argument_sources_json VARCHAR")
        con.execute("ALTER TABLE tasks ADD COLUMN IF NOT EXISTS communicate_values_json VARCHAR")
        con.execute("ALTER TABLE gold_calls ADD COLUMN IF NOT EXISTS side VARCHAR")
        for name, sql in VIEWS.items():
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
    finally:
        con.close()
