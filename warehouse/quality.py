"""The quality suite a snapshot must pass to be published (great-expectations, ephemeral context).

Runs on DataFrames read back from the snapshot being built: unique task ids, at least one gold call per
task, every verdict passing, kill rates within [0, 1] and at or above the threshold, required fields
present, and every domain at or above its requested count. Realism (``realism_expectations``): the
``snapshot_audit`` rows of converted domains (specs with users and intents); other domains' rows are stored
and reported but not gated, so a snapshot of unconverted domains publishes as before.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

import duckdb
import pandas as pd


@cache
def _gx() -> Any:
    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    import great_expectations as gx

    return gx


def _suites(kill_threshold: float) -> dict[str, list[Any]]:
    e = _gx().expectations
    return {
        "tasks": [
            e.ExpectColumnValuesToBeUnique(column="task_id"),
            *[e.ExpectColumnValuesToNotBeNull(column=c) for c in
              ("task_id", "domain", "instruction", "tau2_json", "content_hash", "kinds")],
            e.ExpectColumnValuesToBeBetween(column="gold_calls", min_value=1),
            e.ExpectColumnValuesToBeBetween(column="depth", min_value=0),
        ],
        "verdicts": [
            e.ExpectColumnValuesToBeInSet(column="gold_valid", value_set=[True]),
            e.ExpectColumnValuesToBeInSet(column="noop_fails", value_set=[True]),
            e.ExpectColumnValuesToBeBetween(column="kill_rate", min_value=0.0, max_value=1.0),
            e.ExpectColumnValuesToBeBetween(column="kill_rate", min_value=kill_threshold),
            e.ExpectColumnValuesToBeUnique(column="task_id"),
        ],
        "domain_counts": [
            e.ExpectColumnPairValuesAToBeGreaterThanB(column_A="published", column_B="requested", or_equal=True),
        ],
        "realism": realism_expectations(),
    }


MIN_TASKS_FOR_OPENING_SHARE = 100  # below this one task is already >1%: the share says nothing


def realism_expectations() -> list[Any]:
    """Issue 7's gate, on one ``snapshot_audit`` row per converted domain."""
    e = _gx().expectations
    zero = ("staff_only_calls", "requests_naming_internal_ids", "invariant_violations", "noop_writes",
            "empty_passes", "parrot_passes", "short_communicate", "communicate_in_request", "underivable_arguments")
    return [
        *[e.ExpectColumnValuesToBeBetween(column=c, min_value=0, max_value=0) for c in zero],
        e.ExpectColumnValuesToBeBetween(column="identified_share", min_value=1.0),
        e.ExpectColumnValuesToBeBetween(column="policy_hinged_share", min_value=0.2),
        e.ExpectColumnValuesToBeBetween(column="forbidden_share", min_value=0.1),
        e.ExpectColumnValuesToBeBetween(column="gated_opening_share", max_value=0.03),
    ]


def realism_frame(con: duckdb.DuckDBPyConnection, snapshot_id: str) -> pd.DataFrame:
    """The audit rows the gate judges: converted domains only."""
    frame = con.execute("SELECT * FROM snapshot_audit WHERE snapshot_id = ? AND converted", [snapshot_id]).df()
    frame["gated_opening_share"] = [share if n >= MIN_TASKS_FOR_OPENING_SHARE else 0.0
                                    for share, n in zip(frame["top_opening_share"], frame["tasks"])]
    return frame


def frames(con: duckdb.DuckDBPyConnection, snapshot_id: str, requested: dict[str, int]) -> dict[str, pd.DataFrame]:
    tasks = con.execute(
        "SELECT t.*, (SELECT COUNT(*) FROM gold_calls g WHERE g.snapshot_id = t.snapshot_id AND g.task_id = t.task_id)"
        " AS gold_calls FROM tasks t WHERE t.snapshot_id = ?", [snapshot_id]).df()
    verdicts = con.execute("SELECT * FROM verdicts WHERE snapshot_id = ?", [snapshot_id]).df()
    published = tasks.groupby("domain").size().to_dict() if len(tasks) else {}
    counts = pd.DataFrame([{"domain": d, "requested": n, "published": int(published.get(d, 0))}
                           for d, n in sorted(requested.items())])
    return {"tasks": tasks, "verdicts": verdicts, "domain_counts": counts, "realism": realism_frame(con, snapshot_id)}


def run_quality_suite(con: duckdb.DuckDBPyConnection, snapshot_id: str, requested: dict[str, int],
                      kill_threshold: float = 0.9) -> dict[str, Any]:
    """Validate the snapshot; returns {'success': bool, 'failures': [...], 'evaluated': n}."""
    return _validate(frames(con, snapshot_id, requested), _suites(kill_threshold))


def realism_gate(con: duckdb.DuckDBPyConnection, snapshot_id: str) -> dict[str, Any]:
    """The realism part of the suite alone (same result shape)."""
    return _validate({"realism": realism_frame(con, snapshot_id)}, {"realism": realism_expectations()})


def _validate(data: dict[str, pd.DataFrame], suites: dict[str, list[Any]]) -> dict[str, Any]:
    gx = _gx()
    context = gx.get_context(mode="ephemeral")
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    source = context.data_sources.add_pandas("snapshot")
    failures: list[str] = []
    evaluated = 0
    for name, expectations in suites.items():
        frame = data[name]
        if frame.empty and name == "realism":
            continue  # no converted domain in this snapshot: nothing to gate
        if frame.empty:
            failures.append(f"{name}: no rows")
            continue
        batch = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("all").get_batch(
            batch_parameters={"dataframe": frame})
        suite = context.suites.add(gx.ExpectationSuite(name=f"{name}_suite", expectations=expectations))
        result = batch.validate(suite)
        for r in result.results:
            evaluated += 1
            if not r.success:
                cfg = r.expectation_config
                failures.append(f"{name}: {cfg.type} {dict(cfg.kwargs)} unexpected={r.result.get('unexpected_count')}")
    return {"success": not failures, "failures": failures, "evaluated": evaluated}
