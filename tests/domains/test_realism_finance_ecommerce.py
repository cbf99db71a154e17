"""Finance and ecommerce in the realism format: their policy-only rules are ones the tools let through on the
seeded data, and seeding's repair (not luck) is what keeps the payee invariant."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from domains.engine import DomainEngine
from domains.invariants import violation_counts
from domains.registry import get_engine, spec_path
from domains.spec import parse_spec


def _first(engine: DomainEngine, sql: str) -> tuple[Any, ...]:
    with engine.fresh() as db:
        rows = db.query(sql, {"now": engine.spec.now})
    assert rows, f"seed 0 should hold a row for: {sql}"
    return rows[0]


def test_finance_tools_let_policy_only_breaches_through() -> None:
    engine = get_engine("finance")
    card = _first(engine, "SELECT k.card_id FROM cards k JOIN accounts a USING (account_id) JOIN customers c "
                          "ON c.customer_id = a.customer_id WHERE k.status = 'blocked' AND a.status = 'active' "
                          "AND k.expires_on >= date(:now) AND c.kyc_status != 'verified'")
    frozen = _first(engine, "SELECT account_id FROM accounts a WHERE status = 'frozen' AND balance = 0 AND NOT EXISTS "
                            "(SELECT 1 FROM loans l WHERE l.account_id = a.account_id AND l.status != 'paid_off') "
                            "AND NOT EXISTS (SELECT 1 FROM standing_orders s WHERE s.account_id = a.account_id "
                            "AND s.status IN ('active', 'paused'))")
    soon = _first(engine, "SELECT transfer_id FROM transfers WHERE status = 'scheduled' AND scheduled_for > date(:now) "
                          "AND scheduled_for <= date(:now, '+2 days')")
    with engine.fresh() as db:
        assert db.call("unblock_card", {"card_id": card[0]}).ok  # KYC rule: policy only
        assert db.call("close_account", {"account_id": frozen[0]}).ok  # frozen accounts: policy only
        assert db.call("cancel_scheduled_transfer", {"transfer_id": soon[0]}).ok  # 2-day cut-off: policy only


def test_ecommerce_tools_let_policy_only_breaches_through() -> None:
    engine = get_engine("ecommerce")
    item = _first(engine, "SELECT i.item_id FROM order_items i JOIN orders o USING (order_id) WHERE o.status = 'delivered' "
                          "AND o.delivered_on < date(:now, '-14 days') AND o.delivered_on >= date(:now, '-30 days') "
                          "AND NOT EXISTS (SELECT 1 FROM returns r WHERE r.item_id = i.item_id AND r.status != 'rejected')")
    move = _first(engine, "SELECT o.order_id, n.address_id FROM orders o JOIN addresses cur ON cur.address_id = o.address_id "
                          "JOIN addresses n ON n.customer_id = o.customer_id AND n.country != cur.country "
                          "WHERE o.status = 'paid'")
    with engine.fresh() as db:
        assert db.call("request_return", {"item_id": item[0], "quantity": 1, "reason": "no_longer_needed"}).ok
        assert db.call("change_shipping_address", {"order_id": move[0], "address_id": move[1]}).ok


def test_without_resampling_payments_predate_their_payee() -> None:
    raw: dict[str, Any] = copy.deepcopy(yaml.safe_load(spec_path("finance").read_text()))
    for inv in raw["invariants"]:
        if inv["name"] == "payment_after_payee_added":
            inv.pop("resample")
    engine = DomainEngine(parse_spec(raw, label="finance.yaml"), 0)
    with engine.fresh() as db:
        assert violation_counts(db.conn, engine.spec)["payment_after_payee_added"] > 0
    with get_engine("finance").fresh() as db:
        assert violation_counts(db.conn, get_engine("finance").spec)["payment_after_payee_added"] == 0
