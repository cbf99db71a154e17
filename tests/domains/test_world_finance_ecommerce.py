"""Finance and ecommerce keep the facts their tools and policy keep: the new invariants hold on seeds 0-3 and
report a row broken by hand; the seeded data has none of the rows the audit of seed 0 found (live standing orders
to removed payees, standing orders above the daily limit, active accounts of rejected customers, orders with no
items, store-credit payments no balance covers, activity before an account was opened)."""

from __future__ import annotations

import sqlite3

import pytest

from domains.invariants import violations
from domains.registry import get_spec
from domains.spec import DomainSpec

from tests.domains.seeded import broken_by_hand, seeded

# (domain, invariant, query giving the key of the row to break, statement breaking it with :key bound)
BROKEN_BY_HAND: list[tuple[str, str, str, str]] = [
    ("finance", "removed_payee_has_nothing_live",
     "SELECT payee_id FROM standing_orders WHERE status = 'active' ORDER BY standing_order_id LIMIT 1",
     "UPDATE payees SET status = 'removed' WHERE payee_id = :key"),
    ("finance", "removed_payee_has_nothing_live",
     "SELECT payee_id FROM transfers WHERE status = 'scheduled' ORDER BY transfer_id LIMIT 1",
     "UPDATE payees SET status = 'removed' WHERE payee_id = :key"),
    ("finance", "standing_order_within_daily_limit", "SELECT standing_order_id FROM standing_orders ORDER BY 1 LIMIT 1",
     "UPDATE standing_orders SET amount = (SELECT a.daily_transfer_limit + 1 FROM accounts a "
     "WHERE a.account_id = standing_orders.account_id) WHERE standing_order_id = :key"),
    ("finance", "rejected_customer_holds_nothing_live",
     "SELECT customer_id FROM accounts WHERE status = 'active' ORDER BY account_id LIMIT 1",
     "UPDATE customers SET kyc_status = 'rejected' WHERE customer_id = :key"),
    ("finance", "rejected_customer_holds_nothing_live",
     "SELECT c.customer_id FROM customers c WHERE c.kyc_status = 'rejected' AND NOT EXISTS (SELECT 1 FROM accounts a "
     "WHERE a.customer_id = c.customer_id AND a.status = 'active') ORDER BY c.customer_id LIMIT 1",
     "INSERT INTO loans SELECT 'LN9999', account_id, :key, loan_type, principal, interest_rate, term_months, "
     "monthly_payment, start_date, 'active', outstanding_balance FROM loans ORDER BY loan_id LIMIT 1"),
    ("finance", "payment_after_account_opened", "SELECT transfer_id FROM transfers ORDER BY 1 LIMIT 1",
     "UPDATE transfers SET created_at = '2009-12-31T08:15:00' WHERE transfer_id = :key"),
    ("finance", "transaction_after_account_opened", "SELECT txn_id FROM transactions ORDER BY 1 LIMIT 1",
     "UPDATE accounts SET opened_on = '2025-09-14' WHERE account_id = (SELECT account_id FROM transactions WHERE txn_id = :key)"),
    ("finance", "loan_after_account_opened", "SELECT loan_id FROM loans ORDER BY 1 LIMIT 1",
     "UPDATE loans SET start_date = '2009-01-01' WHERE loan_id = :key"),
    ("ecommerce", "order_has_a_line", "SELECT order_id FROM orders ORDER BY 1 LIMIT 1",
     "DELETE FROM order_items WHERE order_id = :key"),
    ("ecommerce", "store_credit_payment_fits",
     "SELECT payment_id FROM payments WHERE method != 'store_credit' AND amount > 250 ORDER BY 1 LIMIT 1",
     "UPDATE payments SET method = 'store_credit' WHERE payment_id = :key"),
    ("ecommerce", "store_credit_payment_fits",
     "SELECT payment_id FROM payments WHERE method = 'store_credit' ORDER BY 1 LIMIT 1",
     "UPDATE payments SET status = 'authorized' WHERE payment_id = :key"),
]

NEW = {"finance": ["removed_payee_has_nothing_live", "standing_order_within_daily_limit",
                   "rejected_customer_holds_nothing_live", "payment_after_account_opened",
                   "transaction_after_account_opened", "loan_after_account_opened"],
       "ecommerce": ["order_has_a_line", "store_credit_payment_fits"]}


def _seeded(domain: str, seed: int = 0) -> tuple[sqlite3.Connection, DomainSpec]:
    return seeded(domain, seed)


@pytest.mark.parametrize(("domain", "invariant", "key_sql", "breaking"), BROKEN_BY_HAND,
                         ids=[f"{d}-{i}-{n}" for n, (d, i, _, _) in enumerate(BROKEN_BY_HAND)])
def test_invariant_holds_on_seed_0_and_reports_a_row_broken_by_hand(domain: str, invariant: str, key_sql: str,
                                                                    breaking: str) -> None:
    key, found = broken_by_hand(domain, invariant, key_sql, breaking)
    table = next(i.table for i in get_spec(domain).invariants if i.name == invariant)
    assert table in {"payees", "standing_orders", "customers", "transfers", "transactions", "loans", "orders", "payments"}
    assert key in found


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("domain", ["finance", "ecommerce"])
def test_new_invariants_hold_on_other_seeds(domain: str, seed: int) -> None:
    conn, spec = _seeded(domain, seed)
    found = violations(conn, spec)
    assert {name: found[name] for name in NEW[domain] if found[name]} == {}


def test_finance_seed_0_keeps_what_the_tools_keep() -> None:
    conn, _ = _seeded("finance")
    assert conn.execute("SELECT COUNT(*) FROM standing_orders s JOIN payees p USING (payee_id) "
                        "WHERE p.status = 'removed' AND s.status IN ('active', 'paused')").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM standing_orders s JOIN accounts a USING (account_id) "
                        "WHERE s.amount > a.daily_transfer_limit").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM accounts a JOIN customers c USING (customer_id) "
                        "WHERE c.kyc_status = 'rejected' AND a.status = 'active'").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM loans l JOIN accounts a USING (account_id) "
                        "WHERE l.start_date < a.opened_on").fetchone()[0] == 0
    # the removed payees and the rejected customer are still there to ask about
    assert conn.execute("SELECT COUNT(*) FROM payees WHERE status = 'removed'").fetchone()[0] > 0
    assert conn.execute("SELECT COUNT(*) FROM customers WHERE kyc_status = 'rejected'").fetchone()[0] > 0


def test_ecommerce_seed_0_has_no_empty_order_and_no_impossible_store_credit() -> None:
    conn, _ = _seeded("ecommerce")
    assert conn.execute("SELECT COUNT(*) FROM orders o WHERE NOT EXISTS "
                        "(SELECT 1 FROM order_items i WHERE i.order_id = o.order_id)").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM payments WHERE amount <= 0").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM payments WHERE method = 'store_credit' "
                        "AND (amount > (SELECT MAX(store_credit) FROM customers) OR status = 'authorized')").fetchone()[0] == 0
