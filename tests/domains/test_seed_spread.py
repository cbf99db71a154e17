"""A filtered reference that fills its parents by size (``spread``), draws by a second condition when its first
admits no parent left (``fallback``), and moves a row to another group when the group it was spread to has no
parent left for a later column: how sport's club fills its squads from its members."""

from __future__ import annotations

import copy
import sqlite3
from typing import Any

import pytest

from domains.spec import SpecError, parse_spec

from tests.domains.seeded import seeded_raw

# Three teams with room for 4, 8 and 12; 60 members: six in their twenties, four in their thirties, the rest 50. A
# young team takes members under 30 (its band) and, where none is left, anyone under 40 (its fallback); the others
# take members of 45 and over. Players up to PL06 are former ones (released), who take no place.
FITS = ("member_id IN (SELECT m.member_id FROM members m JOIN teams t ON t.team_id = :team_id "
        "WHERE (t.young = 1 AND m.age < {young}) OR (t.young = 0 AND m.age >= 45))")
CLUB: dict[str, Any] = {
    "domain": "club", "description": "A club whose squads fill from its members.", "now": "2025-06-10T12:00:00",
    "tables": [
        {"name": "teams", "noun": "team", "rows": 3, "primary_key": "team_id", "columns": [
            {"name": "team_id", "type": "text", "seed": {"kind": "sequence", "prefix": "TM", "width": 1}},
            {"name": "size", "type": "integer", "seed": {"kind": "formula", "expr":
                "4 if team_id == 'TM1' else (8 if team_id == 'TM2' else 12)"}},
            {"name": "young", "type": "integer", "seed": {"kind": "formula", "expr": "1 if team_id == 'TM1' else 0"}}]},
        {"name": "members", "noun": "member", "rows": 60, "primary_key": "member_id", "columns": [
            {"name": "member_id", "type": "text", "seed": {"kind": "sequence", "prefix": "MB", "width": 2}},
            {"name": "age", "type": "integer", "seed": {"kind": "formula", "expr":
                "20 + randint(0, 9) if member_id <= 'MB06' else (30 + randint(0, 9) if member_id <= 'MB10' else 50)"}}]},
        {"name": "players", "noun": "player", "rows": 30, "primary_key": "player_id", "columns": [
            {"name": "player_id", "type": "text", "seed": {"kind": "sequence", "prefix": "PL", "width": 2}},
            {"name": "status", "type": "text", "seed": {"kind": "formula", "expr":
                "'released' if player_id <= 'PL06' else 'active'"}},
            {"name": "team_id", "type": "text", "references": "teams.team_id",
             "seed": {"kind": "reference", "spread": "size", "counts_if": "status != 'released'"}},
            {"name": "member_id", "type": "text", "references": "members.member_id",
             "seed": {"kind": "reference", "at_most": 1, "where": FITS.format(young=30),
                      "fallback": FITS.format(young=40)}}]},
    ],
    "tools": [{"name": "get_player", "description": "Return one player with their team and member.", "kind": "read",
               "entity": "players", "parameters": {"type": "object", "properties": {"player_id": {"type": "string"}},
                                                   "required": ["player_id"]},
               "returns": {"sql": "SELECT * FROM players WHERE player_id = :player_id"}}],
    "utterances": {"get_player": ["look up {player_id}"]},
}
SIZES = {"TM1": 4, "TM2": 8, "TM3": 12}


def _club(raw: dict[str, Any] | None = None, seed: int = 0) -> sqlite3.Connection:
    return seeded_raw(copy.deepcopy(raw or CLUB), "club.yaml", seed)[0]


def _squads(conn: sqlite3.Connection, status: str = "active") -> dict[str, int]:
    """Players per team with this status ('any': all of them)."""
    return dict(conn.execute("SELECT t.team_id, (SELECT COUNT(*) FROM players p WHERE p.team_id = t.team_id "
                             "AND ? IN (p.status, 'any')) FROM teams t ORDER BY t.team_id", (status,)).fetchall())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spread_fills_each_parent_to_its_column_and_rows_that_take_no_room_fall_anywhere(seed: int) -> None:
    raw = copy.deepcopy(CLUB)
    raw["tables"][2]["columns"][3]["seed"] = {"kind": "reference", "at_most": 1}  # any member: only the spread counts
    conn = _club(raw, seed)
    # 24 active players over room for 24: each team holds its size exactly; the 6 released ones take no room
    assert _squads(conn) == SIZES
    assert sum(_squads(conn, "released").values()) == 6
    raw["tables"][2]["rows"] = 32  # two more than there is room for: the overflow goes to the least full
    assert all(SIZES[t] <= n <= SIZES[t] + 1 for t, n in _squads(_club(raw, seed)).items())


def test_a_row_draws_by_the_fallback_only_once_the_where_admits_no_parent_left() -> None:
    raw = copy.deepcopy(CLUB)
    raw["tables"][0]["columns"][1]["seed"]["expr"] = "10 if team_id == 'TM1' else (8 if team_id == 'TM2' else 6)"
    conn = _club(raw)
    young = conn.execute("SELECT p.player_id, m.age FROM players p JOIN members m USING (member_id) "
                         "WHERE p.team_id = 'TM1' ORDER BY p.player_id").fetchall()
    # ten places, six members in the band and four more under 40: the band first, then the fallback
    assert sorted(a < 30 for _, a in young) == [False] * 4 + [True] * 6
    assert all(a < 40 for _, a in young)
    last_in_band = max(p for p, a in young if a < 30)
    assert all(p > last_in_band for p, a in young if a >= 30)


def test_a_row_whose_group_has_no_parent_left_moves_to_a_group_that_has_one() -> None:
    raw = copy.deepcopy(CLUB)
    raw["tables"][0]["columns"][1]["seed"]["expr"] = "12 if team_id == 'TM1' else (8 if team_id == 'TM2' else 4)"
    raw["tables"][2]["columns"][3]["seed"].pop("fallback")
    conn = _club(raw)
    # the young team has room for 12 but six members fit it: the rows spread to it beyond six move elsewhere
    squads = _squads(conn, "any")
    assert squads["TM1"] == 6 and sum(squads.values()) == 30
    assert conn.execute("SELECT COUNT(*) FROM players p JOIN members m USING (member_id) JOIN teams t USING (team_id) "
                        "WHERE (t.young = 1) != (m.age < 30)").fetchone()[0] == 0


def test_a_spread_column_that_is_not_an_integer_column_of_the_parent_is_refused() -> None:
    raw = copy.deepcopy(CLUB)
    raw["tables"][2]["columns"][2]["seed"]["spread"] = "name"
    with pytest.raises(SpecError, match=r"seed.spread: 'name' is not an integer column of teams"):
        parse_spec(raw, label="club.yaml")
    raw["tables"][2]["columns"][2]["seed"]["spread"] = "size"
    raw["tables"][2]["columns"][2]["seed"]["counts_if"] = "member_id != ''"
    with pytest.raises(SpecError, match=r"seed.counts_if: unknown column member_id"):
        parse_spec(raw, label="club.yaml")
    raw["tables"][2]["columns"][2]["seed"]["counts_if"] = "status != 'released'"
    raw["tables"][2]["columns"][3]["seed"]["fallback"] = "age < :nothing"
    with pytest.raises(SpecError, match=r"seed.fallback: parameter :nothing is not a column of this row"):
        parse_spec(raw, label="club.yaml")
