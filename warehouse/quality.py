"""The quality suite a snapshot must pass to be published (great-expectations, ephemeral context).

Runs on DataFrames read back from the snapshot being built: unique task ids, at least one gold call per
task, every verdict passing, kill rates within [0, 1] and at or above the threshold, required fields
present, and every domain at or above its requested count. Realism (``realism_expectations``): the
``snapshot_audit`` rows of converted domains (specs with users and intents); other domains' rows are stored
and reported but not gated, so a snapshot of unconverted domains publishes as before. Share figures
(``SHARE_GATES``) are judged with a one-sided Wilson bound that allows for each domain's sample size.
"""

from __future__ import annotations

import logging
import math
from functools import cache
from typing import Any

import duckdb
import pandas as pd

from synthesis.realism_audit import LANGUAGE_SLIPS


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


# One-sided 95% confidence (z of the standard normal). A share threshold fails only when the Wilson bound on the
# domain's sample lies beyond it: 4 of 90 tasks (4.4%) pass a 3% ceiling (lower bound 2.0%); 450 tasks at 5% fail
# it (lower bound 3.6%).
CONFIDENCE_Z = 1.645
# share column -> (least, most): the realism and outcome-balance targets, each judged with the bound above
SHARE_GATES: dict[str, tuple[float | None, float | None]] = {
    "policy_hinged_share": (0.20, None),
    "forbidden_share": (0.15, 0.30),
    "write_share": (0.70, None),
    "refuse_all_share": (None, 0.10),
    "top_opening_share": (None, 0.03),
    "top_skeleton_share": (None, 0.02),  # judged over request clauses, not tasks
}
# the sample a share is counted over, where it is not the domain's tasks
SHARE_SAMPLE = {"top_skeleton_share": "request_clauses"}
# Shares are judged, with the bound, only from this sample size on: a "top" share is the largest of many
# categories' shares, which a small sample biases upwards (in 12 clauses one repeat is already 17%), and a handful of
# tasks whose evolved children keep their parent's forbidden request says little about a domain's mix.
MIN_SAMPLE_FOR_SHARE = 100


def wilson_bounds(share: float, tasks: int, z: float = CONFIDENCE_Z) -> tuple[float, float]:
    """The Wilson score interval (lower, upper) for a share observed in ``tasks`` tasks; each end is a one-sided
    bound at the confidence ``z`` stands for. No tasks: (0, 1), nothing is known.

    >>> [round(b, 3) for b in wilson_bounds(0.04, 100)]
    [0.018, 0.086]
    """
    if tasks <= 0:
        return 0.0, 1.0
    p = min(max(share, 0.0), 1.0)
    denominator = 1 + z * z / tasks
    centre = (p + z * z / (2 * tasks)) / denominator
    spread = z * math.sqrt(p * (1 - p) / tasks + z * z / (4 * tasks * tasks)) / denominator
    return max(0.0, centre - spread), min(1.0, centre + spread)


def realism_expectations() -> list[Any]:
    """Issue 7's gate, on one ``snapshot_audit`` row per converted domain; shares through their Wilson bounds
    (``realism_frame`` adds the ``<share>_upper`` / ``<share>_lower`` columns these read)."""
    e = _gx().expectations
    zero = ("staff_only_calls", "requests_naming_internal_ids", "invariant_violations", "noop_writes",
            "empty_passes", "parrot_passes", "short_communicate", "communicate_in_request", "underivable_arguments",
            *LANGUAGE_SLIPS, "unwritten_rule_decisions")  # every decision cites a rule the policy writes
    shares = []
    for column, (least, most) in SHARE_GATES.items():
        if least is not None:  # fails when even the upper bound is below the least share
            shares.append(e.ExpectColumnValuesToBeBetween(column=f"{column}_upper", min_value=least))
        if most is not None:  # fails when even the lower bound is above the most
            shares.append(e.ExpectColumnValuesToBeBetween(column=f"{column}_lower", max_value=most))
    return [
        *[e.ExpectColumnValuesToBeBetween(column=c, min_value=0, max_value=0) for c in zero],
        e.ExpectColumnValuesToBeBetween(column="identified_share", min_value=1.0),
        *shares,
    ]


def realism_frame(con: duckdb.DuckDBPyConnection, snapshot_id: str) -> pd.DataFrame:
    """The audit rows the gate judges (converted domains only), with the Wilson bounds of each gated share."""
    frame = con.execute("SELECT * FROM snapshot_audit WHERE snapshot_id = ? AND converted", [snapshot_id]).df()
    for column in SHARE_GATES:
        sample = frame[SHARE_SAMPLE.get(column, "tasks")].fillna(0)
        bounds = [(0.0, 1.0) if n < MIN_SAMPLE_FOR_SHARE
                  else wilson_bounds(float(share), int(n)) for share, n in zip(frame[column].fillna(0.0), sample)]
        frame[f"{column}_lower"] = [lower for lower, _ in bounds]
        frame[f"{column}_upper"] = [upper for _, upper in bounds]
    return frame


def frames(con: duckdb.DuckDBPyConnection, snapshot_id: str, requested: dict[str, int]) -> dict[str, pd.DataFrame]:
    # only the columns the suite checks; the large JSON texts are checked for presence only, so they are
    # read as a marker that keeps NULL (100,000 tasks' tau2 texts are gigabytes in pandas)
    tasks = con.execute(
        "SELECT t.task_id, t.domain, t.instruction, t.content_hash, t.kinds, t.depth,"
        " CASE WHEN t.tau2_json IS NULL THEN NULL ELSE 1 END AS tau2_json, COALESCE(g.calls, 0) AS gold_calls"
        " FROM tasks t LEFT JOIN (SELECT task_id, COUNT(*) AS calls FROM gold_calls WHERE snapshot_id = ?"
        " GROUP BY task_id) g USING (task_id) WHERE t.snapshot_id = ?", [snapshot_id, snapshot_id]).df()
    verdicts = con.execute("SELECT task_id, gold_valid, noop_fails, kill_rate FROM verdicts WHERE snapshot_id = ?",
                           [snapshot_id]).df()
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
                failures.append(f"{name}: {cfg.type} {dict(cfg.kwargs)} unexpected={r.result.get('unexpected_count')}"
                                + _offending_domains(frame, dict(cfg.kwargs)))
    return {"success": not failures, "failures": failures, "evaluated": evaluated}


def _offending_domains(frame: pd.DataFrame, kwargs: dict[str, Any]) -> str:
    """' (domains: a=0.61, b=0.64)' for a failed range on a per-domain frame; '' where that does not apply."""
    column = kwargs.get("column")
    if "domain" not in frame or column not in frame or not ({"min_value", "max_value"} & set(kwargs)):
        return ""
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    bad = [f"{d}={v:.4g}" for d, v in zip(frame["domain"], frame[column])
           if pd.notna(v) and ((low is not None and v < low) or (high is not None and v > high))]
    return f" (domains: {', '.join(bad)})" if bad else ""
