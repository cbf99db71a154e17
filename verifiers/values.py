"""Typed values: what an agent must tell the user, read from its canonical string and found in a message on meaning.

A ``communicate_info`` string ("247.33 EUR", "2025-06-26", "14:00", "30 days", "2 seats", "46.7 mm", "TP0108",
"Grand Hall", "suspended") is read once into a ``Value``: its kind (amount, date, time, datetime, duration, count,
measurement, number, id, name, enum, text), its canonical string, its number and unit where it has them, and its
source (the derivability rule that found it, when known). ``said(value, message)`` accepts every form a competent
agent uses for the same value, and refuses any other value:

- amounts: "€247.33", "247.33 euros", "EUR 247.33", "1,247.33", "nothing" / "no charge" / "free" for zero;
- dates: with or without the weekday, day-month or month-day, month as a word (or its abbreviation) or a number,
  the year optional when it is the domain clock's year;
- times: "14:00", "2 pm", "2:00 PM", "noon";
- durations, counts, measurements: the number in digits or in words (up to ninety-nine), "no" / "none" for zero,
  "a" / "one" for one, the unit abbreviated or spelled out, singular or plural ("a 30-day period"); no seats,
  tickets, rooms, places or tables as "fully booked" / "booked up" / "sold out" (unless another count of them is said);
- ids verbatim (any case); names, enum words and free text as words (any case, "_" read as a space).

``fidelity(values, message)`` also refuses a message that names many candidates: several values of one kind where
the others would be wrong as the answer (more than one spare value of the kind, or a right value offered as an
alternative: "€47.33 or €47.34"). ``verifiers.checks.fidelity_check`` is the one caller the reward, the gate,
evaluation and the exports share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from typing import Any

from verifiers.words import find_word

KINDS = ("amount", "date", "time", "datetime", "duration", "count", "measurement", "number", "id", "name", "enum",
         "text")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
        "ninety": 90}
# the currency a code, a symbol or a word names
CURRENCIES = {"eur": "EUR", "euro": "EUR", "euros": "EUR", "€": "EUR", "gbp": "GBP", "pound": "GBP",
              "pounds": "GBP", "£": "GBP", "usd": "USD", "dollar": "USD", "dollars": "USD", "$": "USD"}
# a duration's unit in minutes (meaning: "two weeks" is 14 days, "48 hours" is two days)
DURATION_UNITS = {"minute": 1, "minutes": 1, "min": 1, "mins": 1, "hour": 60, "hours": 60, "hr": 60, "hrs": 60,
                  "h": 60, "day": 1440, "days": 1440, "week": 10080, "weeks": 10080, "fortnight": 20160,
                  "month": -1, "months": -1, "year": -12, "years": -12}  # months and years: counted in months
# a measurement's unit, by every spelling of it
MEASURES = {"mm": "mm", "millimetre": "mm", "millimetres": "mm", "millimeter": "mm", "millimeters": "mm",
            "cm": "cm", "centimetre": "cm", "centimetres": "cm", "centimeter": "cm", "centimeters": "cm",
            "km": "km", "kilometre": "km", "kilometres": "km", "kilometer": "km", "kilometers": "km",
            "m": "m", "metre": "m", "metres": "m", "meter": "m", "meters": "m",
            "kg": "kg", "kilogram": "kg", "kilograms": "kg", "kilo": "kg", "kilos": "kg",
            "g": "g", "gram": "g", "grams": "g", "l": "l", "litre": "l", "litres": "l", "liter": "l", "liters": "l",
            "kph": "kph", "km/h": "kph", "kmh": "kph", "kilometres per hour": "kph", "kilometers per hour": "kph",
            "mph": "mph", "miles per hour": "mph", "%": "%", "percent": "%", "per cent": "%",
            "°c": "°C", "c": "°C", "degrees": "°C", "degrees celsius": "°C", "celsius": "°C"}
SPARE = 1  # values of a kind a message may name besides the required ones (context: "the fare was €50")

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_CANON_AMOUNT = re.compile(r"^(-?(?:" + _NUM + r"))\s*(eur|euros?|gbp|pounds?|usd|dollars?)$", re.IGNORECASE)
_CANON_QTY = re.compile(r"^(-?(?:" + _NUM + r"))\s*([^\W\d][\w /%]*|%|°c)$", re.IGNORECASE)
_CANON_NUMBER = re.compile(r"^-?(?:" + _NUM + r")$")
_CANON_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_CANON_TIME = re.compile(r"^(\d{1,2}):(\d{2})(?::\d{2})?$")
_CANON_DATETIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{1,2}:\d{2})(?::\d{2})?$")
_CANON_ID = re.compile(r"^#?(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]+$|^\d{5,}$")


@dataclass(frozen=True)
class Value:
    """One value the agent must tell: its kind, canonical string, number and unit (a currency code, a duration in
    minutes or months, a measure, a count's noun) where it has them, and its source (``verifiers.derivability``)."""

    kind: str
    canonical: str
    number: float | None = None
    unit: str = ""
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "canonical": self.canonical, "source": self.source}


@lru_cache(maxsize=65536)
def parse(canonical: str, source: str | None = None) -> Value:
    """The typed value a canonical ``communicate_info`` string holds.

    >>> parse("247.33 EUR").kind, parse("30 days").kind, parse("2 seats").unit, parse("2025-06-26").kind
    ('amount', 'duration', 'seat', 'date')
    """
    text = " ".join(canonical.split())
    m = _CANON_AMOUNT.match(text)
    if m:
        return Value("amount", canonical, _float(m.group(1)), CURRENCIES[m.group(2).lower()], source)
    if _CANON_DATE.match(text):
        return Value("date", canonical, None, "", source)
    if _CANON_TIME.match(text):
        return Value("time", canonical, None, "", source)
    if _CANON_DATETIME.match(text):
        return Value("datetime", canonical, None, "", source)
    m = _CANON_QTY.match(text)
    if m:
        number, unit = _float(m.group(1)), m.group(2).lower()
        if unit in DURATION_UNITS and unit not in ("h", "min"):
            return Value("duration", canonical, number, unit, source)
        if unit in MEASURES:
            return Value("measurement", canonical, number, MEASURES[unit], source)
        if number is not None and number.is_integer() and " " not in unit.strip() or _noun(unit):
            return Value("count", canonical, number, singular(unit.split()[-1]), source)
    if _CANON_NUMBER.match(text) and not re.fullmatch(r"\d{5,}", text):
        return Value("number", canonical, _float(text), "", source)
    if _CANON_ID.match(text):
        return Value("id", canonical, None, "", source)
    words = text.split()
    if words and len(words) <= 5 and all(w[:1].isupper() or not w[:1].isalpha() for w in words):
        return Value("name", canonical, None, "", source)
    if words and len(words) <= 3 and re.fullmatch(r"[a-z][a-z_ -]*", text):
        return Value("enum", canonical, None, "", source)
    return Value("text", canonical, None, "", source)


def _noun(unit: str) -> bool:
    return bool(re.fullmatch(r"[a-z]+(?: [a-z]+){0,2}", unit))


def _float(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def singular(noun: str) -> str:
    """A noun's singular ("students" -> "student", "categories" -> "category"); the noun itself when not plural."""
    if noun.endswith("ies") and len(noun) > 4:
        return noun[:-3] + "y"
    if noun.endswith(("ches", "shes", "sses", "xes")):
        return noun[:-2]
    if noun.endswith("s") and not noun.endswith(("ss", "us", "is")):
        return noun[:-1]
    return noun


def agree(text: str) -> str:
    """A count's noun in the number it is for: "1 students" -> "1 student", "1 stars" -> "1 star".

    >>> agree("1 seats"), agree("2 seats"), agree("1.00 EUR")
    ('1 seat', '2 seats', '1.00 EUR')
    """
    m = re.fullmatch(r"(-?1)(\s+)([a-z]+(?:\s+[a-z]+){0,2})", text)
    if not m:
        return text
    *head, last = m.group(3).split(" ")
    if last in DURATION_UNITS or last in MEASURES or last in CURRENCIES:
        return f"{m.group(1)}{m.group(2)}{' '.join([*head, singular(last)])}" if last.endswith("s") else text
    return f"{m.group(1)}{m.group(2)}{' '.join([*head, singular(last)])}"


# ---- reading a message: every number, amount, date and time it names, computed once per message

_NUMBER_WORD = re.compile(r"\b(" + "|".join(TENS) + r")(?:[- ](one|two|three|four|five|six|seven|eight|nine))?\b|\b("
                          + "|".join(ONES) + r")\b")
_DIGITS = re.compile(r"(?<![\w.,/:-])(-|−|minus\s+)?(" + _NUM + r")(?![\d])")
_SYMBOL_BEFORE = re.compile(r"(€|£|\$|\beur|\bgbp|\busd)\s*(-|−)?\s*$")
_CURRENCY_AFTER = re.compile(r"^\s*(eur|euros?|gbp|pounds?(?: sterling)?|usd|us dollars|dollars?|cents?)\b")
_ENDS_IN_NUMBER = re.compile(r"\d\s*$")
_ZERO_AMOUNT = re.compile(r"\b(nothing|no charge|free of charge|free|no fee|not charged|no cost)\b")
# what has no seat, ticket or room left is "fully booked" / "sold out"; said of a count of 0 of these only, so a
# squad that "is full" tells no seat count
CAPACITY_NOUNS = frozenset({"seat", "ticket", "room", "place", "table"})
_FULL_UP = re.compile(r"\b(fully booked|booked up|sold out)\b")
_MONTH = (r"(" + "|".join(MONTHS) + r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\b\.?")
_WEEKDAY = (r"(?:(" + "|".join(WEEKDAYS) + r"|mon|tues|tue|wed|thurs|thur|thu|fri|sat|sun)\b\.?,?\s+"
            r"(?:the\s+)?)?")
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DAY_MONTH = re.compile(r"\b" + _WEEKDAY + _DAY + r"(?:\s+of)?\s+" + _MONTH + r"(?:,?\s+(\d{4}))?\b")
_MONTH_DAY = re.compile(r"\b" + _WEEKDAY + _MONTH + r"\s+(?:the\s+)?" + _DAY + r"\b(?:,?\s+(\d{4}))?")
_ISO_T = re.compile(r"(\d{4}-\d{2}-\d{2})t(\d)")
_ISO = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})(?:\b|(?=t\d))")  # lower-cased "2025-03-10t12:00:00" tells its date too
_NUMERIC = re.compile(r"\b" + _WEEKDAY + r"(\d{1,2})([/.])(\d{1,2})(?:[/.](\d{4}|\d{2}))?\b(?![.:/]\d)")
_TIME_12 = re.compile(r"\b(\d{1,2})(?:[:.](\d{2}))?\s*([ap])\.?\s?m\b\.?")
_TIME_24 = re.compile(r"(?<![\d.,])(\d{1,2})[:h](\d{2})\b(?!\s*[ap]\.?\s?m\b)")
_NOON = re.compile(r"\b(noon|midday|midnight)\b")
_ALTERNATIVE = re.compile(r"^\s*(?:,|\bor\b|/|\beither\b|\bmaybe\b|\bperhaps\b|\bpossibly\b)")
_FOLLOWING = re.compile(r"\s*-?\s*[a-z][a-z'-]*(?: [a-z][a-z'-]*){0,2}")
_ARTICLE = re.compile(r"(?:\b(a|an|one|single|no|zero|none of the|not any)|n't any)\s+")


@dataclass(frozen=True)
class _Mention:
    number: float
    start: int
    end: int
    negative: bool


class Message:
    """An assistant's text read once: lower-cased, number words as digits, and what each kind finds in it."""

    def __init__(self, text: str, clock: date | None = None):
        self.raw = text
        lowered = _ISO_T.sub(r"\1 \2", " ".join(text.lower().replace("’", "'").split()))  # 2025-03-10T12:00
        self.text = _digits_for_words(lowered)
        self.clock = clock
        self._cache: dict[str, Any] = {}

    def _memo(self, name: str, build: Any) -> Any:
        if name not in self._cache:
            self._cache[name] = build()
        return self._cache[name]

    @property
    def numbers(self) -> list[_Mention]:
        def build() -> list[_Mention]:
            out = []
            taken = [(s, e) for *_, s, e in self.dates()] + [(s, e) for *_, s, e in self.times()]
            for m in _DIGITS.finditer(self.text):
                number = _float(m.group(2))
                if any(s <= m.start(2) < e for s, e in taken):
                    continue  # a day, a month, a year or an hour is no quantity
                if number is not None:
                    out.append(_Mention(number, m.start(2), m.end(2), bool(m.group(1))))
            return out
        return self._memo("numbers", build)  # type: ignore[no-any-return]

    def amounts(self) -> list[tuple[float, str, int, int]]:
        """(amount, currency or "", start, end) for every number marked as money, and "nothing" / "free" as 0."""
        def build() -> list[tuple[float, str, int, int]]:
            out = []
            for n in self.numbers:
                before = _SYMBOL_BEFORE.search(self.text[max(0, n.start - 6):n.start])
                after = _CURRENCY_AFTER.match(self.text[n.end:n.end + 16])
                if before and before.group(1).isalpha():
                    # "9818.61 EUR 2123.27 GBP": a code right after a number is that number's, not the next one's
                    at = max(0, n.start - 6) + before.start(1)
                    if _ENDS_IN_NUMBER.search(self.text[max(0, at - 4):at]):
                        before = None
                if not before and not after:
                    continue
                mark = (before.group(1).strip() if before else after.group(1).split()[0] if after else "")  # type: ignore[union-attr]
                currency = CURRENCIES.get(mark.rstrip("s") if mark.startswith("pound") else mark, "")
                if mark.startswith("cent"):
                    out.append((n.number / 100, "", n.start, n.end))
                    continue
                negative = n.negative or bool(before and before.group(2))
                out.append((-n.number if negative else n.number, currency, n.start, n.end))
            out += [(0.0, "words", m.start(), m.end()) for m in _ZERO_AMOUNT.finditer(self.text)]
            return out
        return self._memo("amounts", build)  # type: ignore[no-any-return]

    def dates(self) -> list[tuple[int, int, int | None, int | None, int, int]]:
        """(day, month, year or None, weekday or None, start, end) for every calendar day named; a numeric day whose
        order is ambiguous (03/04) is read both ways."""
        def build() -> list[tuple[int, int, int | None, int | None, int, int]]:
            out: list[tuple[int, int, int | None, int | None, int, int]] = []
            for pattern, day_first in ((_DAY_MONTH, True), (_MONTH_DAY, False)):
                for m in pattern.finditer(self.text):
                    weekday, a, b, year = m.groups()
                    day, month = (a, b) if day_first else (b, a)
                    out.append((int(day), _month(month), int(year) if year else None, _weekday(weekday),
                                m.start(), m.end()))
            for m in _ISO.finditer(self.text):
                out.append((int(m.group(3)), int(m.group(2)), int(m.group(1)), None, m.start(), m.end()))
            for m in _NUMERIC.finditer(self.text):
                weekday, a, separator, b, year = m.groups()
                if year is None and separator == "." and not weekday:
                    continue  # "3.4" is a number
                y = None if year is None else int(year) + (2000 if len(year) == 2 else 0)
                for day, month in {(int(a), int(b)), (int(b), int(a))}:
                    out.append((day, month, y, _weekday(weekday), m.start(), m.end()))
            return out
        return self._memo("dates", build)  # type: ignore[no-any-return]

    def times(self) -> list[tuple[int, int, int, int]]:
        """(hour, minute, start, end) on the 24-hour clock for every time of day named."""
        def build() -> list[tuple[int, int, int, int]]:
            out = []
            for m in _TIME_12.finditer(self.text):
                hour, minute = int(m.group(1)), int(m.group(2) or 0)
                if 1 <= hour <= 12 and minute < 60:
                    out.append((hour % 12 + (12 if m.group(3) == "p" else 0), minute, m.start(), m.end()))
            for m in _TIME_24.finditer(self.text):
                hour, minute = int(m.group(1)), int(m.group(2))
                if hour < 24 and minute < 60:
                    out.append((hour, minute, m.start(), m.end()))
            for m in _NOON.finditer(self.text):
                out.append((0 if m.group(1) == "midnight" else 12, 0, m.start(), m.end()))
            return out
        return self._memo("times", build)  # type: ignore[no-any-return]

    def quantities(self) -> list[tuple[float, str, int, int]]:
        """(number, the words after it up to four, start, end) for every number; "a"/"an" and "no"/"none" too."""
        def build() -> list[tuple[float, str, int, int]]:
            out = [(n.number, self.text[n.end:n.end + 48], n.start, n.end) for n in self.numbers]
            for m in _ARTICLE.finditer(self.text):
                number = 1.0 if m.group(1) in ("a", "an", "one", "single") else 0.0
                out.append((number, self.text[m.end() - 1:m.end() + 48], m.start(), m.end()))
            return out
        return self._memo("quantities", build)  # type: ignore[no-any-return]


def _month(word: str) -> int:
    return next(i + 1 for i, name in enumerate(MONTHS) if name.startswith(word.rstrip(".")[:3]))


def _weekday(word: str | None) -> int | None:
    return None if not word else next(i for i, name in enumerate(WEEKDAYS) if name.startswith(word.rstrip(".")[:3]))


def _digits_for_words(text: str) -> str:
    """Number words as digits ("thirty days" -> "30 days", "forty-eight" -> "48"); "one" stays where it is no number
    ("the one in Cork")."""
    def spell(m: re.Match[str]) -> str:
        if m.group(3):
            if m.group(3) == "one" and not re.match(r"\s+[a-z]", text[m.end():m.end() + 2]):
                return m.group(0)
            return str(ONES.index(m.group(3)))
        return str(TENS[m.group(1)] + (ONES.index(m.group(2)) if m.group(2) else 0))
    return _NUMBER_WORD.sub(spell, text) if any(w in text for w in ("one", "two", "thr", "four", "five", "six",
                                                                     "seven", "eigh", "nine", "ten", "eleven",
                                                                     "twel", "teen", "zero", "ty")) else text


# ---- matching one value

def _unit_follows(words: str, unit: str) -> bool:
    """Whether ``words`` (what follows a number) start with ``unit``'s noun, after at most two other words
    ("2 seats", "2 free seats", "no active subscriptions", "a 30-day period" -> "30-day")."""
    m = _FOLLOWING.match(words)
    if not m:
        return False
    nouns = {unit, unit + "s", unit + "es", unit[:-1] + "ies" if unit.endswith("y") else unit}
    return any(t in nouns for t in m.group(0).replace("-", " ").split()[:3])


def _duration_minutes(number: float, unit: str) -> float:
    scale = DURATION_UNITS[unit]
    return number * scale if scale > 0 else -number * -scale * 1e9  # months apart from minutes


def _close(a: float, b: float) -> bool:
    return abs(a - b) < 0.005


@dataclass(frozen=True)
class Found:
    """Where a value was found in a message (spans), and the other values of its kind the message names."""

    spans: tuple[tuple[int, int], ...]
    others: tuple[Any, ...]


def find(value: Value, message: Message) -> Found:
    """Where ``message`` names ``value`` (empty spans: nowhere), and the other values of the same kind it names."""
    kind = value.kind
    if kind == "amount":
        assert value.number is not None
        hits, others = [], []
        for number, currency, start, end in message.amounts():
            same_currency = currency in ("", "words", value.unit)
            right = same_currency and (_close(number, value.number)
                                       or (value.number < 0 and _close(number, -value.number)))
            if right:
                hits.append((start, end))
            elif currency in ("", value.unit):  # "nothing else" or another currency: no competing answer
                others.append((number, currency))
        if not hits and not any(c for _, c, _, _ in message.amounts() if c not in ("", "words", value.unit)):
            # the bare number ("247.33") where the message names no other currency
            for n in message.numbers:
                if (_close(n.number, abs(value.number)) and not (n.negative and value.number > 0)
                        and not _CURRENCY_AFTER.match(message.text[n.end:n.end + 16])):
                    hits.append((n.start, n.end))
        return Found(tuple(hits), tuple(dict.fromkeys(others)))
    if kind in ("date", "datetime"):
        day = date.fromisoformat(value.canonical.strip()[:10])
        hits, others = [], []
        for d, month, year, weekday, start, end in message.dates():
            right = (d == day.day and month == day.month and (weekday is None or weekday == day.weekday())
                     and (year == day.year or year is None and (
                         weekday is not None or message.clock is None or message.clock.year == day.year)))
            if right:
                hits.append((start, end))
            else:
                others.append((d, month, year))
        if kind == "datetime":
            hour, minute = (int(x) for x in value.canonical.strip()[11:16].split(":"))
            if not any(h == hour and mi == minute for h, mi, _, _ in message.times()):
                hits = []
        return Found(tuple(hits), tuple(dict.fromkeys(o for o in others
                                                        if (o[0], o[1]) != (day.day, day.month))))
    if kind == "time":
        hour, minute = (int(x) for x in value.canonical.strip()[:5].rstrip(":").split(":"))
        hits, others = [], []
        for h, mi, start, end in message.times():
            (hits if (h, mi) == (hour, minute) else others).append((start, end) if (h, mi) == (hour, minute)
                                                                   else (h, mi))
        return Found(tuple(hits), tuple(dict.fromkeys(others)))
    if kind == "duration":
        assert value.number is not None
        want = _duration_minutes(value.number, value.unit)
        hits, others = [], []
        for number, after, start, end in message.quantities():
            unit = _leading_unit(after, DURATION_UNITS)
            if unit is None:
                continue
            if _close(_duration_minutes(number, unit), want):
                hits.append((start, end))
            else:
                others.append((number, unit))
        return Found(tuple(hits), tuple(dict.fromkeys(others)))
    if kind == "measurement":
        assert value.number is not None
        hits, others = [], []
        for number, after, start, end in message.quantities():
            unit = _leading_unit(after, MEASURES)
            if unit is None or MEASURES[unit] != value.unit:
                continue
            (hits if _close(number, value.number) else others).append((start, end) if _close(number, value.number)
                                                                      else number)
        if not hits and value.unit in ("°C", "%"):  # "21.5" for a temperature said without its unit
            hits = [(n.start, n.end) for n in message.numbers if _close(n.number, value.number)]
        return Found(tuple(hits), tuple(dict.fromkeys(others)))
    if kind == "count":
        assert value.number is not None
        hits, others = [], []
        for number, after, start, end in message.quantities():
            if not _unit_follows(after, value.unit):
                continue
            (hits if _close(number, value.number) else others).append((start, end) if _close(number, value.number)
                                                                      else number)
        if value.number == 0 and re.search(r"\bnone\b", message.text) and re.search(
                rf"\b{re.escape(value.unit)}", message.text):
            hits.append((0, 0))  # "active subscriptions: none"
        if value.number == 0 and value.unit in CAPACITY_NOUNS and not others:  # "2 seats left" says it is not
            hits += [m.span() for m in _FULL_UP.finditer(message.text)]  # "0 seats": "the flight is fully booked"
        return Found(tuple(hits), tuple(dict.fromkeys(others)))
    if kind == "number":
        assert value.number is not None
        hits = [(n.start, n.end) for n in message.numbers
                if _close(n.number, value.number) or (n.negative and _close(-n.number, value.number))]
        return Found(tuple(hits), ())
    needle = _words(value.canonical)
    if not needle:
        return Found(((0, 0),), ())
    at = find_word(_words(message.raw), needle, decimal_guard=True)
    return Found(((at, at + len(needle)),) if at >= 0 else (), ())


def _leading_unit(after: str, units: dict[str, Any]) -> str | None:
    """The unit word right after a number ("30 days", "30-day", "46.7mm", "48h"), if ``units`` knows it."""
    m = re.match(r"\s*-?\s*((?:km/h|°c|%|per cent|[a-z]+)(?: per hour| celsius)?)", after)
    if not m:
        return None
    word = m.group(1)
    for candidate in (word, word.split()[0]):
        if candidate in units:
            return candidate
    return None


@lru_cache(maxsize=8192)
def _words(text: str) -> str:
    """Text for word matching: lower case, "_" and "-" as spaces, one spelling per number (1,234.50 -> 1234.5)."""
    lowered = re.sub(r"[_\s]+|(?<=[a-z])-(?=[a-z])", " ", text.lower().replace(",", "")).strip()
    return re.sub(r"-?\d+(?:\.\d+)?", lambda m: _number_text(float(m.group(0))), lowered)


def _number_text(number: float) -> str:
    return str(int(number)) if number.is_integer() else repr(round(number, 6))


# ---- judging a message against every value of a task

@dataclass(frozen=True)
class Judgement:
    passed: bool
    missing: tuple[str, ...] = ()
    hedged: tuple[str, ...] = ()  # values named among many candidates

    def reason(self, total: int) -> str:
        if self.missing:
            return f"not communicated: {', '.join(repr(m) for m in self.missing)}"
        if self.hedged:
            return f"named among many candidates: {', '.join(repr(m) for m in self.hedged)}"
        return f"all {total} item(s) communicated"


def _group(value: Value) -> tuple[str, str]:
    """Values that compete as answers: one kind, one currency or noun (a date and a datetime compete)."""
    kind = "date" if value.kind == "datetime" else value.kind
    return kind, value.unit if kind in ("amount", "count", "measurement") else ""


CANDIDATE_KINDS = ("amount", "date", "time", "duration", "count", "measurement")


@lru_cache(maxsize=4096)
def judge(canonicals: tuple[str, ...], text: str, clock: str | None = None) -> Judgement:
    """Whether ``text`` tells every value of ``canonicals``, on meaning, without naming many candidates.
    ``clock``: the domain's "now" (ISO), whose year a date may leave out."""
    values = [parse(c) for c in canonicals]
    message = Message(text, _clock(clock))
    found = {v.canonical: find(v, message) for v in values}
    missing = [v.canonical for v in values if not found[v.canonical].spans]
    groups: dict[tuple[str, str], list[Value]] = {}
    for v in values:
        if v.kind in CANDIDATE_KINDS or v.kind in ("datetime", "number"):
            groups.setdefault(_group(v), []).append(v)
    # two values need two mentions: "a credit of €700" is not also "€700 paid", and "19.4mm" of rain is not also
    # a temperature of 19.4; mentions that overlap are one mention, whatever kind each value reads it as
    told = [v.canonical for members in groups.values() for v in members]
    if len(told) > 1 and not missing:
        missing += _unmatched(told, _by_mention(told, found))
    if missing:
        return Judgement(False, tuple(missing))
    hedged: list[str] = []
    for members in groups.values():
        others = set.intersection(*(set(found[v.canonical].others) for v in members))
        if len(others) > SPARE:
            hedged += [v.canonical for v in members]
            continue
        if others and any(_offered_as_alternative(message.text, found[v.canonical].spans) for v in members):
            hedged += [v.canonical for v in members]
    return Judgement(not hedged, (), tuple(hedged))


def _by_mention(canonicals: list[str], found: dict[str, Found]) -> dict[str, Found]:
    """Each value's spans widened to the whole mention they fall in: overlapping spans of any of the values merge
    into one, so one stretch of the message can tell one value only."""
    spans = sorted({s for v in canonicals for s in found[v].spans})
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])

    def widen(span: tuple[int, int]) -> tuple[int, int]:
        return next((m[0], m[1]) for m in merged if m[0] <= span[0] < m[1])

    return {v: Found(tuple(dict.fromkeys(widen(s) for s in found[v].spans)), found[v].others) for v in canonicals}


def _unmatched(canonicals: list[str], found: dict[str, Found]) -> list[str]:
    """The values left without a mention of their own when each mention tells one value (augmenting paths)."""
    owner: dict[tuple[int, int], str] = {}

    def place(value: str, seen: set[tuple[int, int]]) -> bool:
        for span in found[value].spans:
            if span in seen:
                continue
            seen.add(span)
            if span not in owner or place(owner[span], seen):
                owner[span] = value
                return True
        return False

    return [v for v in canonicals if not place(v, set())]


def _offered_as_alternative(text: str, spans: tuple[tuple[int, int], ...]) -> bool:
    """Whether a value is followed or preceded by "or" and another candidate ("€47.33 or €47.34", "either ... or")."""
    for start, end in spans:
        after = text[end:end + 12]
        before = text[max(0, start - 12):start]
        if re.match(r"^\s*(?:€|£|\$)?\s*(?:or|/)\s", after) or re.match(r"^/", after) \
                or re.search(r"\b(?:or|either|maybe|perhaps|possibly)\s+(?:€|£|\$)?$", before):
            return True
    return False


@lru_cache(maxsize=64)
def _clock(now: str | None) -> date | None:
    if not now:
        return None
    try:
        return date.fromisoformat(now[:10])
    except ValueError:
        return None


# ---- what is stored and exported

def typed_values(canonicals: Any, sources: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Each value as stored with a task (warehouse ``tasks.communicate_values_json``, the HF and tau2 exports): its
    kind, canonical string and source (``verifiers.derivability``; None where none was recorded)."""
    sources = sources or {}
    return [parse(str(c), _source_text(sources.get(c))).to_dict() for c in canonicals]


def _source_text(source: Any) -> str | None:
    return source if isinstance(source, str) or source is None else repr(source)


# the kinds tau2's substring match grades strictly: one wording passes, most others fail (docs/tau2.md)
TAU2_STRICT = ("date", "datetime", "time", "text")


def tau2_form(canonical: str) -> str:
    """The substring most correct answers contain, for tau2's communicate check (lower-cased, commas dropped):
    an amount as its number without the code ("247.33", "40"), a duration or count as digits and its singular noun
    ("30 day" is in "30 days"), "no <noun>" for a zero count, a measurement as its number, a date as "26 june",
    a time on the 12-hour clock ("2 pm", "8:30 am"), an enum word with spaces; ids and names as they are.

    >>> tau2_form("1247.33 EUR"), tau2_form("40.00 EUR"), tau2_form("2025-06-26"), tau2_form("14:00")
    ('1247.33', '40', '26 june', '2 pm')
    """
    value = parse(canonical)
    kind, number = value.kind, value.number
    if kind == "amount" and number is not None:
        shown = abs(number)
        return f"{shown:.0f}" if shown.is_integer() else f"{shown:.2f}"
    if kind in ("duration", "count") and number is not None:
        noun = " ".join(canonical.split()[1:-1] + [singular(canonical.split()[-1])])
        if kind == "count" and number == 0:
            return f"no {noun}"
        return f"{number:g} {noun}"
    if kind == "measurement" and number is not None:
        return f"{number:g}"
    if kind in ("date", "datetime"):
        day = date.fromisoformat(canonical.strip()[:10])
        return f"{day.day} {MONTHS[day.month - 1]}"
    if kind == "time":
        hour, minute = (int(x) for x in canonical.strip()[:5].rstrip(":").split(":"))
        half, twelve = ("am" if hour < 12 else "pm"), hour % 12 or 12
        return f"{twelve} {half}" if minute == 0 else f"{twelve}:{minute:02d} {half}"
    if kind == "enum":
        return canonical.replace("_", " ")
    return canonical


def nl_assertion(canonical: str) -> str | None:
    """For a value no single substring can grade (a date), the statement tau2's LLM judge can check; None for the
    others."""
    value = parse(canonical)
    if value.kind not in ("date", "datetime"):
        return None
    day = date.fromisoformat(canonical.strip()[:10])
    told = f"{WEEKDAYS[day.weekday()].title()} {day.day} {MONTHS[day.month - 1].title()} {day.year}"
    if value.kind == "datetime":
        told += f" at {canonical.strip()[11:16]}"
    return f"The agent tells the user the date {told} (in any wording)."
