"""tau2's ENV_ASSERTION and ACTION criteria as checks of the verifier, with tau2's meaning.

An assertion names one of the spec's ``assertions:`` (a read returning the value of tau2's assertion function) with
its arguments and the value expected of it (``assert_value``, true unless said); it passes when the final state gives
that value. An action check passes when every gold action was called by someone (agent or user) with the same name
and the same values of the arguments compared: ``compare_args`` when the task gives them, else every argument the
call made (tau2's ``compare_with_tool_call``)."""

from __future__ import annotations

from typing import Any

from domains.engine import ArgumentValidator, Database, ToolCall
from verifiers.types import Check


def assertion_value(db: Database, name: str, arguments: dict[str, Any]) -> tuple[Any, str | None]:
    """(value, None), or (None, why it could not be evaluated): an unknown name, bad arguments, no row."""
    assertion = db.engine.spec.assertions.get(name)
    if assertion is None:
        return None, f"unknown assertion {name!r}"
    schema = {"type": "object", "properties": assertion.parameters, "additionalProperties": False}
    problem = next(iter(ArgumentValidator(schema).iter_errors(arguments)), None)
    if problem is not None:
        return None, f"{name}: invalid arguments: {problem.message}"
    params = {p: arguments.get(p, s.get("default")) for p, s in assertion.parameters.items()}
    rows = db.query(assertion.sql, params)
    if not rows:
        return None, f"{name}: no row to judge (a record it names does not exist)"
    return rows[0][0], None


def assertions_check(db: Database, assertions: tuple[dict[str, Any], ...]) -> Check:
    failed = []
    for a in assertions:
        value, error = assertion_value(db, a["func_name"], dict(a.get("arguments") or {}))
        if error is not None or bool(value) != bool(a.get("assert_value", True)):
            failed.append(error or f"{a['func_name']}({_args(a.get('arguments'))}) is {bool(value)}")
    if failed:
        return Check(False, f"{len(failed)} assertion(s) fail on the final state: {'; '.join(failed[:3])}")
    return Check(True, f"all {len(assertions)} assertion(s) hold on the final state")


def actions_check(actions: tuple[dict[str, Any], ...], calls: tuple[ToolCall, ...]) -> Check:
    missing = [a["name"] for a in actions if not any(_matches(a, c) for c in calls if isinstance(c, ToolCall))]
    if missing:
        return Check(False, f"{len(missing)} gold action(s) never called: {', '.join(missing[:5])}")
    return Check(True, f"all {len(actions)} gold action(s) called")


def _matches(action: dict[str, Any], call: ToolCall) -> bool:
    if action["name"] != call.name or not isinstance(call.arguments, dict):
        return False
    compared = action.get("compare_args")
    keys = call.arguments.keys() if compared is None else compared
    gold = action.get("arguments") or {}
    return {k: v for k, v in call.arguments.items() if k in keys} == {k: v for k, v in gold.items() if k in keys}


def _args(arguments: Any) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in (arguments or {}).items())
