"""tau2's telecom (dual control) inside our engine, checked against tau2 itself: the same scenarios of agent and
user calls end in the same operator records and the same phone (and surroundings) in both implementations.
All scenarios run in one tau2 subprocess (its start costs seconds)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from domains import external
from domains.engine import ToolCall
from domains.registry import get_engine, get_spec
from interop.tau2_bridge import missing_reason, normalise, our_records, tau2_python

pytestmark = pytest.mark.skipif(
    tau2_python() is None or not all(external.available(s) for s in get_spec("telecom").sources.values()),
    reason=missing_reason())

SCRIPT = Path(__file__).resolve().parent / "tau2_telecom_states.py"
JOHN = ToolCall("set_user_info", {"name": "John Smith", "phone_number": "555-123-2001"}, "setup")
L1001 = {"customer_id": "C1001", "line_id": "L1001"}


def _u(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, arguments, "user")


def _a(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, arguments, "agent")


SCENARIOS: dict[str, list[ToolCall]] = {
    "airplane on, then a data check": [JOHN, _u("toggle_airplane_mode"), _u("check_network_status")],
    "airplane on and off, data and roaming toggled": [JOHN, _u("toggle_airplane_mode"), _u("toggle_airplane_mode"),
                                                      _u("toggle_data"), _u("toggle_roaming")],
    "agent suspends the line, the user reboots": [JOHN, _a("suspend_line", **L1001, reason="travel"),
                                                  _u("reboot_device")],
    "suspended, resumed, rebooted": [JOHN, _a("suspend_line", **L1001, reason="lost phone"),
                                     _a("resume_line", **L1001), _u("reboot_device")],
    "roaming on both sides": [JOHN, _a("enable_roaming", **L1001), _u("toggle_roaming"),
                              _a("disable_roaming", **L1001)],
    "payment request paid by the user": [JOHN, _a("send_payment_request", customer_id="C1001", bill_id="B1002"),
                                         _u("check_payment_request"), _u("make_payment")],
    "network modes, one refused": [JOHN, _u("set_network_mode_preference", mode="3g_only"),
                                   _u("set_network_mode_preference", mode="2g_only"),
                                   _u("set_network_mode_preference", mode="6g_dreams")],
    "wifi, calling, vpn, airplane": [JOHN, _u("toggle_wifi"), _u("toggle_wifi_calling"), _u("connect_vpn"),
                                     _u("toggle_airplane_mode"), _u("toggle_wifi"), _u("toggle_airplane_mode")],
    "apn reset at reboot, app permissions": [JOHN, _u("reset_apn_settings"), _u("reboot_device"),
                                            _u("grant_app_permission", app_name="messaging", permission="network"),
                                            _u("grant_app_permission", app_name="messaging", permission="camera")],
    "data refuelled onto the draft bill": [JOHN, _a("refuel_data", **L1001, gb_amount=2.0),
                                           _a("get_data_usage", **L1001)],
    "wrong side and wrong owner fail": [JOHN, _a("toggle_data"), _u("enable_roaming", **L1001),
                                        _a("suspend_line", customer_id="C1002", line_id="L1001", reason="x")],
    "apn set broken, then a bad apn, then reset": [JOHN, _u("set_apn_settings", apn_settings={"apn_name": "broken",
                                                                                            "mmsc_url": None}),
                                                  _u("set_apn_settings", apn_settings={"apn_name": "nonsense"}),
                                                  _u("run_speed_test"), _u("can_send_mms"), _u("reset_apn_settings"),
                                                  _u("reboot_device"), _u("check_status_bar")],
    "data saver, sim reseat, vpn off, no user set up": [_u("toggle_data_saver_mode"), _u("reseat_sim_card"),
                                                        _u("connect_vpn"), _u("disconnect_vpn"),
                                                        _a("suspend_line", **L1001, reason="no user")],
}


def _ours(calls: list[ToolCall]) -> dict[str, Any]:
    with get_engine("telecom").fresh() as db:
        failed = [not db.call(c.name, c.arguments, c.side).ok for c in calls]
        records = our_records(db)
        (s,) = db.table_rows("surroundings")
    request = (None if s["payment_bill_id"] is None else
               {"bill_id": s["payment_bill_id"], "amount_due": s["payment_amount_due"], "paid": bool(s["payment_paid"])})
    surroundings = {"name": s["user_name"], "phone_number": s["user_phone_number"], "is_abroad": bool(s["is_abroad"]),
                    "roaming_allowed": bool(s["roaming_allowed"]),
                    "signal_strength": {"2G": s["signal_2g"], "3G": s["signal_3g"], "4G": s["signal_4g"],
                                        "5G": s["signal_5g"]},
                    "mobile_data_usage_exceeded": bool(s["mobile_data_usage_exceeded"]),
                    "line_active": bool(s["line_active"]), "payment_request": request}
    user = {"device": records.pop("device"), "surroundings": surroundings}
    return {"operator": records, "user": user, "failed": failed}


def _by_id(operator: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """tau2's lists of records keyed by their id, as ``to_records`` rebuilds a table keyed by its primary key."""
    keys = {"plans": "plan_id", "customers": "customer_id", "lines": "line_id", "bills": "bill_id",
            "devices": "device_id"}
    return {name: {r[keys[name]]: r for r in rows} for name, rows in operator.items()}


def _tau2(scenarios: list[list[ToolCall]], envs: list[list[str]] | None = None) -> list[dict[str, Any]]:
    envs = envs or [["user"] * len(calls) for calls in scenarios]
    payload = json.dumps([[c.to_dict() | {"side": c.side, "env": e} for c, e in zip(calls, es)]
                          for calls, es in zip(scenarios, envs)])
    done = subprocess.run([str(tau2_python()), str(SCRIPT)], input=payload, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_seeded_telecom_is_tau2s_db_toml_and_user_db_toml() -> None:
    spec = get_spec("telecom")
    operator, user = (external.load(spec.sources[n]) for n in ("tau2_telecom", "tau2_telecom_user"))
    with get_engine("telecom").fresh() as db:
        ours = our_records(db)
    extra: set[str] = set()
    assert _within(normalise(ours.pop("device")), normalise(user["device"]), "device", extra)
    assert _within(normalise(ours), normalise(_by_id(operator)), "", extra)
    # where the file leaves a field out, ours holds tau2's model default (its loaded state has it too)
    assert {e.rsplit(".", 1)[-1] for e in extra} <= {"reset_at_reboot", "data_refueling_gb", "roaming_enabled",
                                                      "activated", "account_status", "created_at"}, extra


def _within(ours: Any, raw: Any, path: str, extra: set[str]) -> bool:
    """Whether every value of ``raw`` is ours; the paths we hold beyond it go to ``extra``."""
    if isinstance(ours, dict) and isinstance(raw, dict):
        extra.update(f"{path}.{k}" for k in ours.keys() - raw.keys())
        return raw.keys() <= ours.keys() and all(_within(ours[k], raw[k], f"{path}.{k}", extra) for k in raw)
    return ours == raw


def test_the_policy_is_read_from_the_package_at_export_time() -> None:
    text = external.policy_text(get_spec("telecom"))
    assert text.startswith(get_spec("telecom").policy) and "airplane mode" in text.lower()
    assert len(text) > 10 * len(get_spec("telecom").policy)
    from warehouse.exports import policy_markdown

    exported = policy_markdown(get_spec("telecom"))
    manual = external.load(get_spec("telecom").sources["tau2_telecom_manual"]).strip()
    assert manual in exported and "## The user's own tools (on their device)" in exported
    assert "### toggle_airplane_mode" not in exported and "- `toggle_airplane_mode` (write)" in exported


def _assert_same(names: list[str], scenarios: list[list[ToolCall]], theirs: list[dict[str, Any]]) -> None:
    for name, calls, tau2 in zip(names, scenarios, theirs):
        ours = _ours(calls)
        assert ours["failed"] == tau2["failed"], name
        assert normalise(ours["operator"]) == normalise(_by_id(tau2["operator"])), name
        assert normalise(ours["user"]["device"]) == normalise(tau2["user"]["device"]), name
        assert normalise(ours["user"]["surroundings"]) == normalise(tau2["user"]["surroundings"]), name


def test_scenarios_end_in_tau2s_operator_and_device_states() -> None:
    names = list(SCENARIOS)
    _assert_same(names, [SCENARIOS[n] for n in names], _tau2([SCENARIOS[n] for n in names]))


def test_tau2_tasks_initial_states_and_golds_replay_to_tau2s_states() -> None:
    """A spread of tau2's own telecom tasks (every kind of initialization action and of gold, the ACTION ones
    too): the initialization actions, then the gold's agent and user calls, in both implementations."""
    from interop.tau2_tasks import dual_control_calls

    tasks = external.load(external.Source("tasks", "tau2", "data/tau2/domains/telecom/tasks.json"))
    picked = [t for i, t in enumerate(tasks) if i % 61 == 0 or "ACTION" in t["evaluation_criteria"]["reward_basis"]]
    kinds = {a["func_name"] for t in picked for a in t["initial_state"]["initialization_actions"]}
    assert len(kinds) == 20  # every initialization function tau2's tasks use
    scenarios, envs = [], []
    for task in picked:
        setup, gold = dual_control_calls(task)
        scenarios.append([*setup, *gold])
        envs.append([a["env_type"] for a in task["initial_state"]["initialization_actions"]] + ["user"] * len(gold))
    _assert_same([t["id"] for t in picked], scenarios, _tau2(scenarios, envs))


def test_imported_tasks_are_judged_by_their_assertions_and_actions() -> None:
    """tau2's ENV_ASSERTION and ACTION criteria as our checks: the gold (agent and user calls) solves a spread of
    tasks, the empty trajectory fails their assertions, and a gold missing one action fails an ACTION task."""
    from interop.tau2_tasks import convert
    from verifiers.types import Trajectory
    from verifiers.verify import verify

    tasks = external.load(external.Source("tasks", "tau2", "data/tau2/domains/telecom/tasks.json"))
    engine = get_engine("telecom")
    picked = [convert("telecom", t) for i, t in enumerate(tasks) if i % 97 == 0]
    picked += [convert("telecom", t) for t in tasks if "ACTION" in t["evaluation_criteria"]["reward_basis"]][:4]
    for imported in picked:
        task = imported.task
        assert imported.unsupported == () and "assertions" in task.criteria and task.setup_calls
        gold = verify(task, Trajectory(task.gold_calls), engine)
        assert gold.solved, (imported.tau2_id, gold.assertions.reason, gold.actions.reason)
        empty = verify(task, Trajectory(), engine)
        assert not empty.solved, imported.tau2_id  # its assertions fail, or (a transfer task) its action
        if task.actions:
            dropped = verify(task, Trajectory(task.gold_calls[1:]), engine)
            assert not dropped.actions.passed, imported.tau2_id


def test_verdicts_agree_with_tau2s_evaluator_on_gold_and_empty() -> None:
    """tau2's evaluate_simulation (its own ENV_ASSERTION and ACTION evaluation, in one subprocess) and our
    verifier give the same verdict on the gold and the empty trajectory of a few tasks, an ACTION one among them."""
    from interop.tau2_tasks import convert
    from verifiers.types import Trajectory
    from verifiers.verify import verify

    raw = external.load(external.Source("tasks", "tau2", "data/tau2/domains/telecom/tasks.json"))
    picked = [convert("telecom", t) for t in raw[::400]]
    picked.append(next(convert("telecom", t) for t in raw if "ACTION" in t["evaluation_criteria"]["reward_basis"]))
    runs, ours = [], []
    for imported in picked:
        for calls in (imported.task.gold_calls, ()):
            runs.append({"task_id": imported.tau2_id, "calls": [c.to_dict() | {"side": c.side} for c in calls]})
            ours.append(verify(imported.task, Trajectory(calls), get_engine("telecom")).solved)
    done = subprocess.run([str(tau2_python()), str(SCRIPT.with_name("tau2_telecom_verdicts.py"))],
                          input=json.dumps(runs), capture_output=True, text=True, timeout=300,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = [reward == 1.0 for reward in json.loads(done.stdout)]
    assert theirs == ours and ours == [True, False] * len(picked)
