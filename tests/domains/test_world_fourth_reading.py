"""The facts of a fourth expert reading of seed 0: payees added after their account opened and entries pending
only for days (finance); lab tests ordered by a doctor who had seen the patient and prescriptions within the
prescriber's field (medicine); registrations that hold their prerequisites (education); stays that do not overlap
(travel); a booked party's bill with a main course for each guest (restaurant); and a coach's transfer to a side the
player fits (sport). Each invariant holds on seeds 0-3 and reports a row broken by hand."""

from __future__ import annotations

import pytest

from domains.invariants import violations

from tests.domains.seeded import broken_by_hand, seeded

# (domain, invariant, query giving the key of the row to break, statement breaking it with :key bound)
BROKEN_BY_HAND: list[tuple[str, str, str, str]] = [
    ("finance", "payee_added_after_account_opened", "SELECT payee_id FROM payees ORDER BY 1 LIMIT 1",
     "UPDATE payees SET added_on = date((SELECT a.opened_on FROM accounts a WHERE a.account_id = payees.account_id), "
     "'-1 day') WHERE payee_id = :key"),
    ("finance", "pending_entry_is_recent",
     "SELECT txn_id FROM transactions WHERE status = 'posted' AND posted_at < '2025-09-01' ORDER BY 1 LIMIT 1",
     "UPDATE transactions SET status = 'pending' WHERE txn_id = :key"),
    ("medicine", "tests_ordered_by_a_doctor_who_saw_the_patient", "SELECT lab_order_id FROM lab_orders ORDER BY 1 LIMIT 1",
     "UPDATE lab_orders SET doctor_id = (SELECT d.doctor_id FROM doctors d WHERE NOT EXISTS (SELECT 1 FROM appointments a "
     "WHERE a.doctor_id = d.doctor_id AND a.patient_id = lab_orders.patient_id) ORDER BY 1 LIMIT 1) WHERE lab_order_id = :key"),
    ("medicine", "prescription_in_the_prescribers_field",
     "SELECT r.prescription_id FROM prescriptions r JOIN doctors d USING (doctor_id) WHERE d.specialty = 'cardiology' "
     "ORDER BY 1 LIMIT 1",
     "UPDATE prescriptions SET drug_id = (SELECT drug_id FROM drugs WHERE drug_class = 'ssri' ORDER BY 1 LIMIT 1) "
     "WHERE prescription_id = :key"),
    ("education", "registration_holds_its_prerequisites",
     "SELECT enrolment_id FROM enrolments WHERE status = 'enrolled' ORDER BY 1 LIMIT 1",
     "INSERT INTO prerequisites (prerequisite_id, course_id, required_course_id, min_grade) "
     "SELECT 'PQ999', s.course_id, (SELECT c.course_id FROM courses c WHERE c.course_id != s.course_id AND c.course_id NOT IN "
     "(SELECT o.course_id FROM enrolments d JOIN sections o USING (section_id) WHERE d.student_id = e.student_id "
     "AND d.status = 'completed') ORDER BY 1 LIMIT 1), 'C' FROM enrolments e JOIN sections s USING (section_id) "
     "WHERE e.enrolment_id = :key"),
    ("travel", "stays_do_not_overlap", "SELECT 'HR99999'",
     "INSERT INTO hotel_reservations SELECT :key, trip_id, hotel_id, check_in, nights, check_out, rooms, rate_type, "
     "nightly_rate, total_price, status, cancellation_fee FROM hotel_reservations WHERE status != 'cancelled' "
     "ORDER BY reservation_id LIMIT 1"),
    ("restaurant", "booked_party_fed",
     "SELECT order_id FROM orders WHERE reservation_id IS NOT NULL AND status = 'paid' ORDER BY 1 LIMIT 1",
     "UPDATE order_lines SET voided = 1 WHERE order_id = :key"),
]
NEW = {"finance": ["payee_added_after_account_opened", "pending_entry_is_recent"],
       "medicine": ["tests_ordered_by_a_doctor_who_saw_the_patient", "prescription_in_the_prescribers_field"],
       "education": ["registration_holds_its_prerequisites"], "travel": ["stays_do_not_overlap"],
       "restaurant": ["booked_party_fed"]}


@pytest.mark.parametrize(("domain", "invariant", "key_sql", "breaking"), BROKEN_BY_HAND,
                         ids=[f"{d}-{i}" for d, i, _, _ in BROKEN_BY_HAND])
def test_invariant_holds_on_seed_0_and_reports_a_row_broken_by_hand(domain: str, invariant: str, key_sql: str,
                                                                    breaking: str) -> None:
    key, found = broken_by_hand(domain, invariant, key_sql, breaking)
    assert key in found


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("domain", sorted(NEW))
def test_the_new_invariants_hold_on_other_seeds(domain: str, seed: int) -> None:
    conn, spec = seeded(domain, seed)
    found = violations(conn, spec)
    assert {name: found[name] for name in NEW[domain] if found[name]} == {}


def test_payees_are_added_across_the_accounts_life_and_some_today() -> None:
    """Seed 0 before: 21 of 90 payees added before their account opened; all 90 within 900 days of 14 September."""
    conn, _ = seeded("finance")
    rows = conn.execute("SELECT p.added_on, a.opened_on FROM payees p JOIN accounts a USING (account_id)").fetchall()
    assert all(opened <= added <= "2025-09-15" for added, opened in rows)
    today = sum(added == "2025-09-15" for added, _ in rows)
    assert 1 <= today <= len(rows) * 0.15  # a few in their cooling-off day, not a pile on the bound
    assert min(added for added, _ in rows) < "2023-01-01"  # long-standing accounts have long-standing payees


def test_pending_entries_are_days_old_and_some_card_payments_are_pending() -> None:
    """Seed 0 before: 21 pending entries, the oldest from 12 May (four months)."""
    conn, _ = seeded("finance")
    pending = conn.execute("SELECT posted_at, txn_type FROM transactions WHERE status = 'pending'").fetchall()
    assert pending and min(p for p, _ in pending) >= "2025-09-11T10:00:00"
    assert any(t == "card_payment" for _, t in pending)  # the dispute intent's "pending" refusal keeps its rows


def test_every_lab_order_rests_on_a_visit_with_its_doctor() -> None:
    """Seed 0 before: 147 of 150 lab orders by a doctor the patient had never seen by then."""
    conn, _ = seeded("medicine")
    assert conn.execute("SELECT COUNT(*) FROM lab_orders l WHERE NOT EXISTS (SELECT 1 FROM appointments a "
                        "WHERE a.patient_id = l.patient_id AND a.doctor_id = l.doctor_id AND a.status = 'completed' "
                        "AND a.scheduled_at <= l.ordered_at)").fetchone()[0] == 0
    # open orders and results are still there to ask about
    assert dict(conn.execute("SELECT status, COUNT(*) FROM lab_orders GROUP BY 1").fetchall()).keys() >= {
        "ordered", "collected", "resulted"}


def test_a_booked_partys_bill_feeds_the_party() -> None:
    conn, _ = seeded("restaurant")
    rows = conn.execute(
        "SELECT r.party_size, (SELECT SUM(l.quantity) FROM order_lines l JOIN menu_items m USING (item_id) "
        "WHERE l.order_id = o.order_id AND l.voided = 0 AND m.category = 'main') FROM orders o "
        "JOIN reservations r USING (reservation_id)").fetchall()
    assert rows and all(mains >= party for party, mains in rows)


def test_a_coach_moves_a_player_only_to_a_side_of_their_age() -> None:
    """The transfer intent offered a 50-year-old walking footballer to the first team; its targets now keep the bands
    squads are formed by (an age group at most four years under its limit, an open-age side 16-35)."""
    conn, spec = seeded("sport")
    intent = next(i for i in spec.intents if i.name == "move_player_to_another_team")
    coaches = [r[0] for r in conn.execute("SELECT DISTINCT coach_id FROM teams WHERE coach_id IS NOT NULL")]
    offered = 0
    for coach in coaches:
        cur = conn.execute(intent.candidates, {"user": coach, "now": spec.now})
        names = [d[0] for d in cur.description]
        for row in cur.fetchall():
            c = dict(zip(names, row))
            born, limit, min_age = conn.execute(
                "SELECT m.date_of_birth, t.age_limit, t.min_age FROM players p JOIN members m USING (member_id) "
                "JOIN teams t ON t.team_id = :target WHERE p.player_id = :player",
                {"target": c["target_team_id"], "player": c["player_id"]}).fetchone()
            age = int(spec.now[:4]) - int(born[:4]) - ((spec.now[5:10]) < born[5:10])
            if limit is not None:
                assert limit - 4 <= age < limit, c
            elif min_age is None:
                assert 16 <= age <= 35, c
            offered += 1
    assert offered >= 10
