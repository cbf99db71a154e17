"""Typed values judged on meaning: per kind, generated values in every wording a competent agent uses are accepted,
and the same wording with the value changed (a cent, a day, an hour, one more) is refused; many candidates fail."""

from __future__ import annotations

from datetime import date, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from verifiers.checks import fidelity_check
from verifiers.values import agree, judge, parse

CLOCK = "2025-06-08T12:00:00"
CLOCK_YEAR = 2025
SYMBOL = {"EUR": "€", "GBP": "£", "USD": "$"}
WORD = {"EUR": "euros", "GBP": "pounds", "USD": "dollars"}
ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen").split()
TENS = {2: "twenty", 3: "thirty", 4: "forty", 5: "fifty", 6: "sixty", 7: "seventy", 8: "eighty", 9: "ninety"}
MONTHS = "January February March April May June July August September October November December".split()
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
FRAME = ("Done: {}.", "I've checked it for you, {}. Anything else?", "Sure. {}")


def spelled(n: int) -> str:
    return ONES[n] if n < 20 else TENS[n // 10] + (f"-{ONES[n % 10]}" if n % 10 else "")


def told(canonical: str, said: str, frame: int = 0) -> bool:
    return judge((canonical,), FRAME[frame % len(FRAME)].format(said), CLOCK).passed


settings.register_profile("values", max_examples=150, deadline=None)
settings.load_profile("values")


# amounts: symbol, code or word; thousands separators; "nothing" for zero

def amount_wordings(cents: int, code: str) -> list[str]:
    value = cents / 100
    shown, grouped = f"{value:.2f}", f"{value:,.2f}"
    whole = [f"{SYMBOL[code]}{int(value):,}", f"{int(value)} {WORD[code]}"] if cents % 100 == 0 else []
    zero = ["nothing", "no charge", f"zero {WORD[code]}"] if cents == 0 else []
    return [f"{SYMBOL[code]}{grouped}", f"{shown} {WORD[code]}", f"{code} {shown}", f"{grouped} {code}",
            *whole, *zero]


@given(st.integers(0, 5_000_000), st.sampled_from(sorted(SYMBOL)), st.integers(0, 2))
def test_amounts_in_every_form_are_accepted(cents: int, code: str, frame: int) -> None:
    canonical = f"{cents / 100:.2f} {code}"
    assert parse(canonical).kind == "amount"
    for said in amount_wordings(cents, code):
        assert told(canonical, said, frame), said


@given(st.integers(1, 5_000_000), st.sampled_from(sorted(SYMBOL)))
def test_a_cent_more_in_the_same_wording_is_refused(cents: int, code: str) -> None:
    canonical = f"{cents / 100:.2f} {code}"
    for said in amount_wordings(cents + 1, code)[:4]:
        assert not told(canonical, said), said
    other = "GBP" if code != "GBP" else "EUR"
    assert not told(canonical, f"{cents / 100:.2f} {WORD[other]}")


def test_a_negative_amount_is_told_as_money_back_but_a_positive_one_never_as_minus() -> None:
    assert told("-40.00 EUR", "a credit of €40.00") and told("-40.00 EUR", "minus 40 euros")
    assert not told("-40.00 EUR", "a credit of €40.01")
    assert not told("40.00 EUR", "minus 40 euros")



def test_amounts_listed_with_their_codes_after_them_keep_their_own_codes() -> None:
    # the replayed gold's text ("9818.61 EUR 9568.61 EUR 2123.27 GBP") read "EUR 2123.27" as a euro amount and
    # failed its own gold in the Gym agreement test
    values = ("9818.61 EUR", "9568.61 EUR", "2123.27 GBP")
    assert fidelity_check(values, "Done. 9818.61 EUR 9568.61 EUR 2123.27 GBP").passed
    assert fidelity_check(("-115.65 GBP", "1115.58 EUR"), "-115.65 GBP 1115.58 EUR").passed
    assert not fidelity_check(values, "Done. 9818.61 EUR 9568.61 EUR 2123.27 EUR").passed
    assert told("247.33 EUR", "that is EUR 247.33") and told("12.00 GBP", "EUR 247.33 and GBP 12.00")


# dates: weekday or not, day-month or month-day, month in words or a number, year optional in the clock's year

def date_wordings(day: date) -> list[str]:
    year = "" if day.year == CLOCK_YEAR else f" {day.year}"
    month = MONTHS[day.month - 1]
    return [f"{WEEKDAYS[day.weekday()]} {day.day} {month} {day.year}", f"{month} {day.day}, {day.year}",
            f"{day.day} {month}{year}", f"{month} {day.day}{year}", f"the {day.day}th of {month}{year}",
            f"{day.day:02d}/{day.month:02d}/{day.year}", f"{day.month}/{day.day}/{day.year}", day.isoformat(),
            f"{WEEKDAYS[day.weekday()][:3]}, {month[:3]} {day.day}{year}"]


@given(st.dates(date(2023, 1, 1), date(2027, 12, 30)), st.integers(0, 2))
def test_dates_in_every_form_are_accepted(day: date, frame: int) -> None:
    assert parse(day.isoformat()).kind == "date"
    for said in date_wordings(day):
        assert told(day.isoformat(), said, frame), said


@given(st.dates(date(2023, 1, 1), date(2027, 12, 30)))
def test_a_day_later_in_the_same_wording_is_refused(day: date) -> None:
    later = day + timedelta(days=1)
    for said in date_wordings(later):
        assert not told(day.isoformat(), said), said


def test_a_date_without_its_year_is_the_clocks_year_only() -> None:
    assert told("2025-06-26", "26 June") and not told("2024-06-26", "26 June")
    assert not told("2025-06-26", "Friday 26 June 2025")  # 26 June 2025 is a Thursday


# times: 12-hour and 24-hour

def time_wordings(hour: int, minute: int) -> list[str]:
    half, twelve = ("am" if hour < 12 else "pm"), hour % 12 or 12
    short = f"{twelve} {half}" if minute == 0 else f"{twelve}:{minute:02d} {half}"
    return [short, f"{twelve}:{minute:02d} {half.upper()}", f"{hour:02d}:{minute:02d}", f"{hour}:{minute:02d}",
            f"{twelve}:{minute:02d}{half}"]


@given(st.integers(0, 23), st.sampled_from((0, 5, 15, 30, 45, 59)), st.integers(0, 2))
def test_times_in_every_form_are_accepted(hour: int, minute: int, frame: int) -> None:
    canonical = f"{hour:02d}:{minute:02d}"
    assert parse(canonical).kind == "time"
    for said in time_wordings(hour, minute):
        assert told(canonical, said, frame), said


@given(st.integers(0, 23), st.sampled_from((0, 5, 15, 30, 45, 59)))
def test_an_hour_later_in_the_same_wording_is_refused(hour: int, minute: int) -> None:
    for said in time_wordings((hour + 1) % 24, minute):
        assert not told(f"{hour:02d}:{minute:02d}", said), said


# durations, counts, measurements: digits or words, "no" for zero, units abbreviated or spelled out

UNITS = {"days": "day", "hours": "hour", "minutes": "minute", "weeks": "week"}


def duration_wordings(n: int, unit: str) -> list[str]:
    one = UNITS[unit]
    return [f"{spelled(n)} {unit if n != 1 else one}", f"a {n}-{one} period", f"{n} {unit if n != 1 else one}"]


@given(st.integers(1, 99), st.sampled_from(sorted(UNITS)), st.integers(0, 2))
def test_durations_in_every_form_are_accepted(n: int, unit: str, frame: int) -> None:
    canonical = f"{n} {unit}"
    assert parse(canonical).kind == "duration"
    for said in duration_wordings(n, unit):
        assert told(canonical, said, frame), said


@given(st.integers(1, 98), st.sampled_from(sorted(UNITS)))
def test_one_more_day_or_hour_in_the_same_wording_is_refused(n: int, unit: str) -> None:
    for said in duration_wordings(n + 1, unit):
        assert not told(f"{n} {unit}", said), said


def test_a_duration_in_another_unit_means_the_same() -> None:
    assert told("48 hours", "two days") and told("14 days", "two weeks") and not told("48 hours", "three days")


NOUNS = ("seats", "students", "points", "stars", "active subscriptions", "units", "players")


def count_wordings(n: int, noun: str) -> list[str]:
    *head, last = noun.split()
    one = " ".join([*head, last[:-1]])
    if n == 0:
        return [f"no {noun}", f"zero {noun}", f"0 {noun}"]
    if n == 1:
        return [f"one {one}", f"a single {one}", f"1 {one}"]
    return [f"{spelled(n)} {noun}", f"{n} {noun}"]


@given(st.integers(0, 99), st.sampled_from(NOUNS), st.integers(0, 2))
def test_counts_in_every_form_are_accepted(n: int, noun: str, frame: int) -> None:
    canonical = agree(f"{n} {noun}")
    assert parse(canonical).kind == "count"
    for said in count_wordings(n, noun):
        assert told(canonical, said, frame), said


@given(st.integers(0, 98), st.sampled_from(NOUNS))
def test_one_more_of_a_count_in_the_same_wording_is_refused(n: int, noun: str) -> None:
    for said in count_wordings(n + 1, noun):
        assert not told(agree(f"{n} {noun}"), said), said


MEASURES = {"mm": "millimetres", "km": "kilometres", "kg": "kilograms"}


@given(st.integers(1, 9999), st.sampled_from(sorted(MEASURES)), st.integers(0, 2))
def test_measurements_in_every_form_are_accepted_and_a_tenth_more_refused(tenths: int, unit: str,
                                                                          frame: int) -> None:
    canonical = f"{tenths / 10:.1f} {unit}"
    assert parse(canonical).kind == "measurement"
    for said in (f"{tenths / 10:.1f} {MEASURES[unit]}", f"{tenths / 10:.1f}{unit}", f"{tenths / 10:.1f} {unit}"):
        assert told(canonical, said, frame), said
        assert not told(canonical, said.replace(f"{tenths / 10:.1f}", f"{(tenths + 1) / 10:.1f}")), said


# ids, names, enum words: verbatim in any case; another id or word refused

@given(st.from_regex(r"[A-Z]{1,3}[0-9]{3,6}", fullmatch=True), st.integers(0, 2))
def test_ids_are_accepted_verbatim_in_any_case_and_another_id_refused(record: str, frame: int) -> None:
    assert parse(record).kind == "id"
    assert told(record, record, frame) and told(record, record.lower(), frame)
    last = record[-1]
    other = record[:-1] + str((int(last) + 1) % 10)
    assert not told(record, other)


@given(st.sampled_from(("Grand Hall", "Anna Smith", "Riverside Station")), st.integers(0, 2))
def test_names_are_accepted_in_any_case_and_another_name_refused(name: str, frame: int) -> None:
    assert parse(name).kind == "name"
    assert told(name, name, frame) and told(name, name.lower(), frame)
    assert not told(name, name.split()[0] + " Road")


@given(st.sampled_from(("suspended", "non_refundable", "identity verification", "warning")), st.integers(0, 2))
def test_enum_words_are_accepted_as_words_and_another_word_refused(word: str, frame: int) -> None:
    assert parse(word).kind == "enum"
    assert told(word, word.replace("_", " ").title(), frame) and told(word, word.replace("_", "-"), frame)
    assert not told(word, "active")


# many candidates

def test_an_answer_naming_many_candidates_fails() -> None:
    assert not fidelity_check(("47.33 EUR",), "It is €47.33 or €47.34.", CLOCK).passed
    assert not fidelity_check(("47.33 EUR",), "Either €46.00, €47.33 or €48.10.", CLOCK).passed
    assert not fidelity_check(("2025-06-26",), "It is 25 June, 26 June or 27 June.", CLOCK).passed
    assert not fidelity_check(("14:00",), "Around 1 pm, 2 pm or 3 pm.", CLOCK).passed
    assert not fidelity_check(("2 seats",), "2 seats, maybe 3 seats, or 4 seats", CLOCK).passed
    verdict = fidelity_check(("47.33 EUR",), "It is €47.33 or €47.34.", CLOCK)
    assert "many candidates" in verdict.reason


def test_one_figure_of_context_beside_the_answer_passes() -> None:
    assert fidelity_check(("47.33 EUR",), "The fare was €50.00; your refund is €47.33.", CLOCK).passed
    assert fidelity_check(("47.33 EUR", "2.67 EUR"), "Refund €47.33 after a €2.67 fee on €50.00.", CLOCK).passed


def test_two_values_need_two_mentions() -> None:
    assert not fidelity_check(("700.00 EUR", "-700.00 EUR"), "a credit of €700", CLOCK).passed
    assert fidelity_check(("700.00 EUR", "-700.00 EUR"), "you paid €700 and get a credit of €700", CLOCK).passed


def test_one_mention_tells_one_value_whatever_its_kind() -> None:
    # weather: 19.4 mm of rain and a temperature of 19.4; the wrong temperature is not covered by the rain's "19.4mm"
    values = ("19.4 mm", "19.4", "37.9")
    assert not fidelity_check(values, "All set: 19.4mm; 19.5; 37.9.", CLOCK).passed
    assert fidelity_check(values, "All set: 19.4mm of rain; it is 19.4 degrees, wind 37.9.", CLOCK).passed
    # a date and a count that share a number need a mention each
    assert not fidelity_check(("2025-06-26", "26 seats"), "Thursday 26 June 2025", CLOCK).passed
    assert fidelity_check(("2025-06-26", "26 seats"), "Thursday 26 June 2025, with 26 seats", CLOCK).passed


# the plural agrees with the number

def test_the_plural_agrees_with_the_number() -> None:
    assert agree("1 students") == "1 student" and agree("1 stars") == "1 star" and agree("1 seats") == "1 seat"
    assert agree("1 active subscriptions") == "1 active subscription" and agree("1 categories") == "1 category"
    assert agree("2 students") == "2 students" and agree("0 seats") == "0 seats" and agree("1.00 EUR") == "1.00 EUR"
    assert agree("1 days") == "1 day" and agree("1 hours") == "1 hour"
    assert told("1 student", "one student") and told("1 student", "a single student")


def test_an_iso_datetime_said_as_stored_tells_its_date_and_time() -> None:
    assert fidelity_check(("2025-03-10T12:00:00",), "paid at 2025-03-10T12:00:00", "2025-03-10T12:00:00").passed
    assert not fidelity_check(("2025-03-10T11:00:00",), "paid at 2025-03-10T12:00:00", "2025-03-10T12:00:00").passed


def test_no_seats_left_may_be_said_as_fully_booked_or_sold_out_and_nothing_else_is() -> None:
    """A full flight's reason, "0 seats", read as a person says it (seen in the travel tasks: "fully booked")."""
    for text in ("LH421 is fully booked, so I can't add it.", "Sorry, it's sold out.", "The flight is booked up.",
                 "There are no seats left on it."):
        assert judge(("0 seats",), text).passed, text
    assert judge(("0 tickets",), "That match is sold out.").passed
    # only a count of zero, only of what can sell out, and not beside a count that says otherwise
    assert not judge(("1 seats",), "LH421 is fully booked.").passed
    assert not judge(("0 students",), "The class is fully booked.").passed
    assert not judge(("0 seats",), "It is fully booked: 2 seats left.").passed
    assert not judge(("0 seats",), "The flight is full of surprises.").passed
