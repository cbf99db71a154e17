"""Education and medicine keep the facts the tools and policy state: an instructor teaches one section at a time,
a card payment stays within the single-card limit, a course names each prerequisite once, and the refill rule's
example is a controlled drug. Each invariant holds on seed 0 and reports a row broken by hand."""

from __future__ import annotations

import sqlite3

import pytest

from domains.invariants import violations
from domains.registry import get_spec

from tests.domains.seeded import broken_by_hand, seeded

# (invariant, query giving the key of the row to break, statement breaking it with :key bound)
BROKEN_BY_HAND: list[tuple[str, str, str]] = [
    # a second section of the same instructor moved into the slot of their first one
    ("instructor_free_in_slot",
     "SELECT MAX(s.section_id) FROM sections s JOIN sections o ON o.instructor_id = s.instructor_id AND o.term_id = s.term_id "
     "AND o.section_id < s.section_id WHERE s.status != 'cancelled' AND o.status != 'cancelled'",
     "UPDATE sections SET (meeting_days, start_time) = (SELECT o.meeting_days, o.start_time FROM sections o "
     "JOIN sections s ON s.instructor_id = o.instructor_id AND s.term_id = o.term_id WHERE s.section_id = :key "
     "AND o.section_id < s.section_id AND o.status != 'cancelled' ORDER BY o.section_id LIMIT 1) WHERE section_id = :key"),
    ("card_payment_within_limit", "SELECT MIN(payment_id) FROM payments WHERE method = 'card'",
     "UPDATE payments SET amount = 2000.01 WHERE payment_id = :key"),
    ("one_row_per_prerequisite_pair", "SELECT 'PQ999'",
     "INSERT INTO prerequisites (prerequisite_id, course_id, required_course_id, min_grade) "
     "SELECT :key, course_id, required_course_id, 'B' FROM prerequisites ORDER BY prerequisite_id LIMIT 1"),
]


def _seeded(domain: str, seed: int = 0) -> sqlite3.Connection:
    return seeded(domain, seed)[0]


@pytest.mark.parametrize("invariant,key_sql,breaking", BROKEN_BY_HAND, ids=[b[0] for b in BROKEN_BY_HAND])
def test_invariant_holds_on_seed_0_and_reports_a_row_broken_by_hand(invariant: str, key_sql: str, breaking: str) -> None:
    key, found = broken_by_hand("education", invariant, key_sql, breaking)
    assert key in found


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_new_education_invariants_hold_on_seeds_0_to_3(seed: int) -> None:
    spec = get_spec("education")
    conn = _seeded("education", seed)
    found = violations(conn, spec)
    for invariant, _, _ in BROKEN_BY_HAND:
        assert found[invariant] == [], (seed, invariant)


def test_no_seeded_card_payment_is_over_the_card_limit_and_larger_payments_still_exist() -> None:
    """Seed 0 before: 20 of 48 card payments above 2000.00 (PY00018 2335.10)."""
    conn = _seeded("education")
    assert conn.execute("SELECT MAX(amount) FROM payments WHERE method = 'card'").fetchone()[0] <= 2000
    assert conn.execute("SELECT MAX(amount) FROM payments WHERE method != 'card'").fetchone()[0] > 2000


def test_the_full_section_example_stays_full() -> None:
    conn = _seeded("education")
    capacity, enrolled = conn.execute(
        "SELECT s.capacity, (SELECT COUNT(*) FROM enrolments e WHERE e.section_id = s.section_id AND e.status = 'enrolled') "
        "FROM sections s WHERE s.section_id = 'SC0037'").fetchone()
    assert enrolled >= capacity


def test_the_in_person_refill_example_is_an_active_controlled_prescription() -> None:
    spec = get_spec("medicine")
    rule = next(r for r in spec.rules if r.id == "refill_in_person")
    assert rule.example is not None and rule.example.tool == "dispense_prescription"
    prescription = rule.example.arguments["prescription_id"]
    conn = _seeded("medicine")
    row = conn.execute("SELECT d.controlled, r.status, r.fills_remaining FROM prescriptions r JOIN drugs d USING (drug_id) "
                       "WHERE r.prescription_id = ?", (prescription,)).fetchone()
    assert row == (1, "active", row[2]) and row[2] > 0
