"""How requests are worded: greetings fit the domain's clock, names keep their case, connectives and words are never
doubled, numbers agree, every forbidden request kind has at least 5 phrasings, no template says a word twice or leaves
"either" / "as well" dangling, no greeting or filler is said in more than 3% of requests and none contradicts the
speaker or follows a forbidden request, and the audit counts clause skeletons (stored with the snapshot and gated)."""

from __future__ import annotations

import copy
import re
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import yaml

from domains.check import MIN_FORBIDDEN_PHRASINGS, phrasing_shortfalls, slot_values, wording_shortfalls, wording_slips
from domains.engine import ToolCall
from domains.registry import available_domains, get_engine, get_spec, spec_path
from domains.spec import parse_spec
from synthesis.generate import ShardConfig, generate_shard
from synthesis.persona import Persona
from synthesis.realism_audit import TaskFacts, aggregate, task_figures
from synthesis.requests import Request
from synthesis.task import (AFTER_CHANGE_ONLY, CASUAL, CONDITIONAL, CLOSINGS, CLOSINGS_AFTER_STATEMENT, LEAD_INS, MID_CLOSINGS,
                            OPENINGS, Task, is_formal, spoken_clauses)
from synthesis.wording import (agree, agree_articles, agree_numbers, doubled_connectives, doubled_words, greeting_contradicts, lower_first,
                               lowercased_names, part_of_day, plural_slips, skeleton)
from warehouse.audit_models import read_audit, write_audit
from warehouse.quality import realism_gate
from warehouse.schema import ensure_schema

IDENTIFY = Request("identify", "", (ToolCall("find_passenger_by_email", {"email": "ann@example.com"}),),
                   known=("your e-mail address is ann@example.com",), notes=("identify",))


def _task(*clauses: Request, style: int = 0, now: str | None = "2025-03-10T08:00:00", manner: str = "brief") -> Task:
    return Task("railway", 0, [IDENTIFY, *clauses], style, persona=Persona("Ann Lee", "customer", manner),
                user=("passengers", "PA0001"), identify_tools=("find_passenger_by_email",), now=now)


def _goal(clause: str, says: tuple[str, ...] = ()) -> Request:
    return Request("intent", clause, (), says=says)


def test_a_morning_clock_never_gives_an_evening_or_afternoon_greeting() -> None:
    goal = _goal("could you refund booking TK00012?", ("TK00012",))
    texts = [_task(goal, style=s).reason_for_call() for s in range(len(OPENINGS) * 3)]
    assert not any(t.lower().startswith(("evening", "afternoon", "good evening", "good afternoon")) for t in texts)
    assert any(t.startswith(("Morning.", "Good morning.")) for t in texts)  # the clock's part of the day is used
    assert not any(greeting_contradicts(t, "2025-03-10T08:00:00") for t in texts)


def test_a_night_clock_or_no_clock_gives_no_time_of_day_greeting() -> None:
    goal = _goal("could you refund booking TK00012?", ("TK00012",))
    for now in ("2025-03-10T23:30:00", None):
        texts = [_task(goal, style=s, now=now).reason_for_call() for s in range(len(OPENINGS))]
        assert not any(w in t.lower() for t in texts for w in ("morning", "afternoon", "evening"))
    assert part_of_day("2025-03-10T12:00:00") == "afternoon" and part_of_day("2025-03-10T19:00:00") == "evening"
    assert greeting_contradicts("Evening. Cancel it.", "2025-03-10T08:00:00")
    assert not greeting_contradicts("Hello, cancel it.", "2025-03-10T08:00:00")


def test_no_opening_speaks_to_a_group_of_people() -> None:
    """One person writes to one assistant: "Hi all," or "Hey folks," reads as a message to a room (issue 39)."""
    goal = _goal("could you refund booking TK00012?", ("TK00012",))
    texts = [_task(goal, style=s).reason_for_call() for s in range(len(OPENINGS) * 2)]
    group = re.compile(r"^(hi|hello|hey|morning|evening|afternoon)( there)? (all|folks|everyone|guys|people)\b",
                       re.IGNORECASE)
    assert not [t for t in texts if group.match(t)]
    assert not [o for o in OPENINGS if group.match(o)]
    assert sum(bool(o) for o in OPENINGS) >= 40  # the greetings are still many


def test_a_formal_speaker_never_says_a_casual_word_and_others_still_do() -> None:
    """The request's register follows the persona's manner: "formal; writes complete sentences" gets no "Hiya," or
    "Ta.", at any style, clock or number of goals."""
    goals = [_goal("could you refund booking TK00012?", ("TK00012",)), _goal("please move seat D07 to the window"),
             _goal("I also need the receipt for TK00099.", ("TK00099",))]
    formal, plain = set(), set()
    for style in range(len(OPENINGS) * 4):
        for now in ("2025-03-10T08:00:00", None):
            for n in (1, 2, 3):
                for manner, seen in (("formal; writes complete sentences and expects the same", formal),
                                     ("relaxed and chatty", plain)):
                    text = _task(*goals[:n], style=style, now=now, manner=manner).reason_for_call()
                    seen.update(c for c in CASUAL if c.strip() in text)
                    joiners = re.findall(r"(?:^|[.?!] )(Also,|One more thing:|Separately,|While I have you,|"
                                         r"Besides that,|Oh, and|Another thing -)", text)
                    assert len(joiners) == len(set(joiners)), text  # a formal speaker's joiners differ too
    assert formal == set()
    assert not is_formal(Persona("Ann Lee", "customer", "informal and chatty"))
    assert is_formal(Persona("Ann Lee", "customer", "Formal; writes complete sentences"))
    assert len(plain) >= len(CASUAL) // 2  # the casual phrases are still there for everyone else


def test_a_clause_that_starts_with_a_name_keeps_its_case_after_any_greeting_or_joiner() -> None:
    named = Request("forbidden", "Noah Jensen, who is on booking TK00350, wants seat D07 too", (),
                    says=("Noah Jensen", "TK00350", "D07"))
    first = _goal("Could you refund booking TK00012?", ("TK00012",))
    for style in range(len(OPENINGS) * 3):
        alone = _task(named, style=style).reason_for_call()
        after = _task(first, named, style=style).reason_for_call()
        assert "Noah Jensen" in alone and "Noah Jensen" in after and "noah Jensen" not in alone + after
        assert lowercased_names(after, named.says) == 0
    # a common first word is still lowered after a greeting that ends in a comma
    hello = next(t for t in (_task(first, style=s).reason_for_call() for s in range(len(OPENINGS) * 4))
                 if t.startswith("Hello, "))  # the greeting is chosen by the speaker's voice
    assert hello[len("Hello, ")].islower()
    assert lower_first("Edinburgh Waverley is my station", ["Edinburgh Waverley"]) == "Edinburgh Waverley is my station"
    assert lowercased_names("and noah Jensen too", ["Noah Jensen"]) == 1


def test_a_clause_with_its_own_connective_gets_no_second_one() -> None:
    goal = _goal("please refund booking TK00012", ("TK00012",))
    extra = Request("forbidden", "while you're at it, cancel booking TK00099 for my friend", (), says=("TK00099",))
    also = Request("forbidden", "and my sister wants hers refunded too", ())
    for style in range(len(OPENINGS) * 3):
        text = _task(goal, extra, also, style=style).reason_for_call()
        assert doubled_connectives(text) == 0, text
        assert "While you're at it, cancel booking TK00099" in text
        assert "And my sister" in text
    assert doubled_connectives("Sure. While I have you, while you're at it, drop it.") == 1
    echo = Request("forbidden", "could you also unenrol my friend Marco Abara from BIO 395?", (),
                   says=("Marco Abara", "BIO 395"))
    for style in range(len(OPENINGS) * 3):
        text = _task(goal, echo, style=style).reason_for_call()
        assert "Also, could you also" not in text


def test_numbers_agree_and_doubled_words_are_caught() -> None:
    rating = _goal("just saw The Urban Compass - put me down for 1 stars", ("The Urban Compass", "1"))
    for style in range(len(OPENINGS)):
        text = _task(rating, style=style).reason_for_call()
        assert "1 star" in text and "1 stars" not in text
    assert agree_numbers("1 nights, 2 nights, 1 boxes, 1 class") == "1 night, 2 nights, 1 box, 1 class"
    assert agree_numbers("a table for 1 people") == "a table for 1 person"
    assert doubled_words("put 250 EUR on the Anniversary trip trip", ["Anniversary trip"]) == ["trip trip"]
    assert doubled_words("a member member asked") == ["member member"]
    assert doubled_words("Chen Chen, who is on booking TK1", ["Chen Chen"]) == []  # a person's name, not a slip


def test_articles_agree_with_the_sound_of_the_next_word() -> None:
    assert agree("enter a abnormal result on a urgent order") == "enter an abnormal result on an urgent order"
    assert agree("a user, a unit, a one-way fare, a euro refund") == "a user, a unit, a one-way fare, a euro refund"
    assert agree("seat A in row 1 for 1 nights") == "seat A in row 1 for 1 night"  # a seat letter is not an article
    assert plural_slips("a abnormal result") == 1 and plural_slips("an abnormal result") == 0


def test_every_shipped_domain_has_five_phrasings_per_forbidden_kind() -> None:
    for name in available_domains():
        assert phrasing_shortfalls(get_spec(name)) == [], name


def test_a_spec_with_four_phrasings_of_a_forbidden_kind_is_refused() -> None:
    raw = yaml.safe_load(spec_path("railway").read_text())
    short = copy.deepcopy(raw)
    refund = next(i for i in short["intents"] if i["name"] == "refund_trip")
    refund["for_someone_else"] = refund["for_someone_else"][:4]
    role_forbidden = next(i for i in short["intents"] if i["name"] == "ask_to_report_delay")
    role_forbidden["phrasings"] = role_forbidden["phrasings"][:MIN_FORBIDDEN_PHRASINGS - 1]
    problems = phrasing_shortfalls(parse_spec(short, label="railway.yaml"))
    assert problems == ["railway: intent refund_trip has 4 for_someone_else phrasings; needs >= 5",
                        "railway: intent ask_to_report_delay (a request the role may not make) has 4 phrasings; "
                        "needs >= 5"]
    assert phrasing_shortfalls(parse_spec(raw, label="railway.yaml")) == []


def test_a_skeleton_replaces_the_values_a_clause_spells_out() -> None:
    one = Task.clause_skeletons(_task(_goal("please refund booking TK00012", ("TK00012",)), style=9))
    two = Task.clause_skeletons(_task(_goal("please refund booking TK00777", ("TK00777",)), style=9))
    assert skeleton("please refund booking TK00012.", ["TK00012"]) == "please refund booking {}."
    assert "please refund booking {}" in one[0] and "tk00012" not in one[0]
    assert "please refund booking {}" in two[0] and "tk00777" not in two[0]
    clauses = spoken_clauses([IDENTIFY, _goal("refund TK00012", ("TK00012",))], 0)
    assert [c.says for c in clauses] == [("TK00012",)]


def _row(skeletons: list[list[str]]) -> dict[str, Any]:
    engine = get_engine("railway")
    with engine.fresh() as db:
        email, = db.query("SELECT email FROM passengers ORDER BY passenger_id LIMIT 1")[0]
    figures = []
    requests = [f"Hi. Ticket {k}: how much did I pay?" for k in range(len(skeletons))]  # openings all differ
    for clauses, request in zip(skeletons, requests):
        facts = TaskFacts("railway", (ToolCall("find_passenger_by_email", {"email": email}),), ("12.50 EUR",),
                          request, request, ("hinged", "forbidden=role"), "Ana", "customer",
                          clause_skeletons=tuple(clauses))
        figures.append(task_figures(engine, facts))
    return aggregate("railway", figures, requests)


def test_the_audit_counts_clause_skeletons_stores_them_and_gates_the_top_share(tmp_path: Path) -> None:
    small = _row([["refund {}."], ["refund {}.", "cancel {}."], ["refund {}."]])
    assert (small["clause_skeletons"], small["request_clauses"]) == (2, 4)
    assert small["top_skeleton_share"] == 0.75 and small["top_skeleton"] == "refund {}."
    crowded = _row([["refund {}."]] * 10 + [[f"pattern {k} for {{}}."] for k in range(110)])
    assert crowded["request_clauses"] == 120 and crowded["top_skeleton_share"] > 0.02
    varied = _row([[f"pattern {k} for {{}}."] for k in range(120)])
    assert varied["clause_skeletons"] == 120 and varied["top_skeleton_share"] < 0.02
    path = tmp_path / "wh.duckdb"
    ensure_schema(path)
    con = duckdb.connect(str(path))
    write_audit(con, "ts-crowded", [crowded])
    write_audit(con, "ts-varied", [varied])
    write_audit(con, "ts-small", [small])
    assert read_audit(con, "ts-crowded")[0]["clause_skeletons"] == 111

    def skeleton_failures(sid: str) -> list[str]:  # the fixture's other shares (all forbidden) fail on their own
        return [f for f in realism_gate(con, sid)["failures"] if "top_skeleton_share" in f]

    # judged by the Wilson bound over clauses: 10 of 120 alike is too many, 1 of 120 is not; 4 clauses are too few
    # for a top share to say anything
    assert skeleton_failures("ts-crowded") and not skeleton_failures("ts-varied")
    assert not skeleton_failures("ts-small")


def test_generated_tasks_carry_their_skeletons_and_no_wording_slips() -> None:
    shard = generate_shard(ShardConfig("ecommerce", 0, 0, base_candidates=12, evolution_rounds=1))
    accepted = [r for r in shard["records"] if r["accepted"]]
    assert accepted
    for r in accepted:
        figures = r["realism"]
        assert figures["clause_skeletons"] and all("{}" in s or "?" in s or "." in s for s in figures["clause_skeletons"])
        assert all(figures[k] == 0 for k in ("greeting_clock_contradictions", "doubled_words", "doubled_joiners",
                                             "plural_slips", "lowercased_names")), r["request"]


def test_every_request_template_reads_without_doubled_or_dangling_words() -> None:
    """Every phrasing, forbidden phrasing and known fact of every domain: no word said twice (also across a slot,
    as "a {loyalty_tier} member" read "a member member"), no "either" or "as well" leaning on nothing."""
    for domain in available_domains():
        assert wording_shortfalls(get_spec(domain)) == [], domain
    values = slot_values(get_spec("restaurant"))
    assert wording_slips("you are a {loyalty_tier} member", values) == [
        "'{loyalty_tier} member' reads 'member member' when loyalty_tier is 'member'"]
    assert wording_slips("{other_name} can't travel now either - refund {ticket_id} as well", {}) == [
        "dangling 'either'", "dangling 'as well'"]
    assert wording_slips("either the 10:00 or the 11:00 one, as well as a seat", {}) == []
    # a slot opening a sentence mid-template is said in its stored case ("? main stand if possible"); a name, an id
    # and "Dr. {doctor_name}" keep theirs
    assert wording_slips("a ticket for {match_date}? {section} if possible", {}) == [
        "'{section}' starts a sentence but keeps its value's case (a lower-case value opens it in lower case)"]
    assert wording_slips("cancel it? {other_name} asked me. {order_id} is the one, with Dr. {doctor_name}", {}) == []


def test_no_generated_request_opens_a_sentence_in_lower_case() -> None:
    """Seen in a default run (69 of 4,465 requests): "... on Friday 5 December? main stand if possible."."""
    for domain in ("sport", "entertainment", "restaurant"):
        shard = generate_shard(ShardConfig(domain, 0, 0, base_candidates=40, evolution_rounds=1))
        requests = [r["request"] for r in shard["records"] if r["accepted"]]
        assert requests, domain
        assert [t for t in requests if re.search(r"[.?!]\s+[a-z]", t)] == [], domain


def _shares(manner: str, n: int = 3000) -> Counter[str]:
    """How often each greeting and filler is said over ``n`` two-goal requests by speakers of one manner."""
    said: Counter[str] = Counter()
    phrases = {p for p in (*OPENINGS, *LEAD_INS, *MID_CLOSINGS, *CLOSINGS, *CLOSINGS_AFTER_STATEMENT) if p.strip()}
    for k in range(n):
        goals = [_goal(f"could you refund booking TK{k:05d}?", (f"TK{k:05d}",)),
                 _goal(f"please move seat D{k % 90:02d}")]
        text = _task(*goals, style=k % 15, manner=manner).reason_for_call()
        said.update(p for p in phrases if re.search(r"(?:^|\s)" + re.escape(p.strip()) + r"(?:\s|$)", text))
    return said


def test_no_greeting_or_filler_is_said_in_more_than_3_percent_of_requests() -> None:
    for manner in ("polite and a little chatty", "formal; writes complete sentences and expects the same",
                   "in a hurry and slightly impatient; wants it sorted quickly"):
        top = _shares(manner).most_common(3)
        assert top[0][1] / 3000 <= 0.03, (manner, top)


def test_a_title_keeps_its_case_and_a_urinalysis_its_article() -> None:
    """Seen in a default run: "Also, dr. Yara Okafor wants a routine vitamin d" and "you had an urinalysis test"."""
    assert lower_first("Dr. Yara Okafor wants a routine vitamin d for Liam Evans") == (
        "Dr. Yara Okafor wants a routine vitamin d for Liam Evans")
    assert lower_first("Mrs Lee asked me to call") == "Mrs Lee asked me to call"
    assert lower_first("Drop my booking") == "drop my booking"  # a word that starts like a title is still lowered
    assert agree_articles("you had a urinalysis and a abnormal result") == "you had a urinalysis and an abnormal result"


def test_a_request_that_states_its_condition_gets_no_second_one() -> None:
    """Seen in a default run: "Could I go from premium to standard? Do it if you can. If that's possible."."""
    said = 0
    for k in range(600):
        first = _goal(f"please move seat D{k % 90:02d} if one is free", (f"D{k % 90:02d}",))
        plain = _goal(f"please move seat E{k % 90:02d}", (f"E{k % 90:02d}",))
        conditioned = spoken_clauses([IDENTIFY, first, _goal("what is the fare?")], k, "2025-03-10T08:00:00")
        assert not any(c in conditioned[0].text for c in CONDITIONAL), conditioned[0].text
        unconditioned = spoken_clauses([IDENTIFY, plain, _goal("what is the fare?")], k, "2025-03-10T08:00:00")
        said += any(c in unconditioned[0].text for c in CONDITIONAL)
    assert said > 0  # the same clause without its own condition still draws them


def test_fillers_fit_the_speaker_and_the_request_they_follow() -> None:
    """No "No rush" from a speaker in a hurry, no filler on a forbidden request (a "That's the big one." after a
    request the agent must refuse), no "Hope that's okay." after a question."""
    hurried = _shares("in a hurry and slightly impatient; wants it sorted quickly")
    assert hurried["No rush on that one."] == 0 and hurried["Whenever you get a chance."] == 0
    assert _shares("polite and a little chatty")["No rush on that one."] > 0
    forbidden = Request("forbidden", "my friend Noah Jensen wants booking TK00350 refunded", (),
                        says=("Noah Jensen", "TK00350"))
    fillers = {p for p in (*MID_CLOSINGS, *LEAD_INS) if p}
    for k in range(400):
        first = _goal(f"could you tell me the fare of TK{k:05d}?", (f"TK{k:05d}",))
        clauses = spoken_clauses([IDENTIFY, forbidden, first], k, "2025-03-10T08:00:00")
        assert not any(f in clauses[0].text for f in fillers), clauses[0].text
        assert not any(p in clauses[1].text for p in AFTER_CHANGE_ONLY), clauses[1].text
