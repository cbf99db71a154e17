"""Derivability: where every value a gold uses comes from, and which values come from nowhere.

A careful agent knows the user's words (the request and the facts the user can tell when asked), the written
policy (its clock included), the tool schemas, and what earlier calls returned. Every argument of every gold call
and every ``communicate_info`` value must come from one of these, directly or by one named rule; a value that
does not (an id the user never said and no call returned) teaches guessing, and the task is not admitted.

A source is a short string: ``user``, ``policy``, ``schema`` or ``call[i].<path>`` (a field of call i's output,
e.g. ``call[1][0].trip_id``), wrapped in the rule that read it when the match is not exact:
``date_in_words(user)``, ``number_words(user)``, ``case(call[0].city)``, ``amount(call[2].total_price)``,
``sum(call[3][*].amount)``, ``count(call[3])``, ``abs(call[2].payment_history[3].amount)`` (a refund told as
money back), ``expression(call[1][0].prices.economy, policy, policy)`` (an arithmetic expression handed to a
calculator, each of whose numbers has a source). Lists and objects are derived element by element, so their
source is a list or object of sources.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import cached_property, lru_cache
from typing import Any

from domains.engine import ToolCall, json_text
from verifiers.values import parse

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty")
RELATIVE_DAYS = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1}
_MONTH = "(" + "|".join(MONTHS) + ")"
_WEEKDAY = "(?:(" + "|".join(WEEKDAYS) + r"),?\s+(?:the\s+)?)?"
_ORDINAL = r"(\d{1,2})(?:st|nd|rd|th)?"
DAY_MONTH = re.compile(_WEEKDAY + _ORDINAL + r"(?:\s+of)?\s+" + _MONTH + r"(?:,?\s+(\d{4}))?\b", re.IGNORECASE)
MONTH_DAY = re.compile(_WEEKDAY + _MONTH + r"\s+" + _ORDINAL + r"\b(?:,?\s+(\d{4}))?", re.IGNORECASE)
ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
NUMERIC_DAY = re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b")
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
ISO_DATETIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}):(\d{2})(?::\d{2})?$")
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?![\w])")
# '121 + 50 * 1', '(121 + 50) / 2': each run of spaces sits before a token that only it can reach (an opening bracket
# or a digit, a closing bracket, an operator), so a failed match backtracks a bounded amount: linear time
_OPERAND = r"(?:\(\s*)*-?\d[\d.]*(?:\s*\))*"
EXPRESSION = re.compile(_OPERAND + r"(?:\s*[-+*/]\s*" + _OPERAND + r")+")
MAX_RULE_CHARS = 256  # a value longer than this is matched only as itself: no rule's pattern reads it
MAX_DEPTH = 32  # a value nested deeper has no source (a gold's arguments are flat; 32 leaves room)
AMOUNT = re.compile(r"^(-?\d[\d,]*(?:\.\d+)?)\s*(%|[^\W\d][\w ]*)$")


@dataclass(frozen=True)
class Evidence:
    """What the agent may know besides call outputs: the user's words, the policy text with its clock, and each
    tool's parameter schemas (``{tool: {parameter: schema}}``)."""

    words: str
    policy: str
    now: str
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Derivation:
    """Each value's source (``argument_sources``) and the values without one."""

    sources: dict[str, Any]
    missing: tuple[str, ...]  # "call 2 (reserve_hotel) argument trip_id = 'TP0108'"

    @property
    def derivable(self) -> bool:
        return not self.missing

    def reason(self) -> str:
        """The rejection reason, with the first values that have no source."""
        more = f" (and {len(self.missing) - 3} more)" if len(self.missing) > 3 else ""
        return f"underivable_argument: {'; '.join(self.missing[:3])}{more} has no source"


class _Text:
    """A text with what the rules read from it, computed once: its words, numbers and dates."""

    name: str

    def __init__(self, name: str, text: str, clock: date):
        self.name = name
        self.raw = text
        self.lower = text.lower()
        self.clock = clock

    @cached_property
    def numbers(self) -> set[float]:
        return {n for n in (_number(m.group(0)) for m in NUMBER.finditer(self.raw)) if n is not None}

    @cached_property
    def words(self) -> set[str]:
        return set(re.findall(r"[a-z]+", self.lower))

    @cached_property
    def dates(self) -> set[str]:
        return dates_in_words(self.raw, self.clock)

    def has(self, phrase: str, lower: bool = False) -> bool:
        """Whether ``phrase`` appears as a whole word or words (not inside a longer word or number)."""
        hay, needle = (self.lower, phrase.lower()) if lower else (self.raw, phrase)
        start = hay.find(needle)
        while start >= 0:
            end = start + len(needle)
            if (start == 0 or not _word(hay[start - 1])) and (end == len(hay) or not _word(hay[end])):
                return True
            start = hay.find(needle, start + 1)
        return False


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


EXAMPLE = re.compile(r"\b(?:e\.g\.|i\.e\.|for example|for instance|such as|example|written (?:like|as))", re.IGNORECASE)
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
CLOCK_LINE = re.compile(r"^The current date and time is .*$", re.MULTILINE)
DATE_OR_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b|\b\d{1,2}:\d{2}(?::\d{2})?\b")
class _Policy(_Text):
    """The policy as a source: only what it states as a fact (a fee, a limit, a period: its rules' figures). Its
    example sentences ('e.g. order #W0000000', 'written like 12.99 EUR') are left out of what it says, the
    clock's figures (its day, its hour) are no source of a number, and no number word counts (weather's 'at most
    two' made 2 a source in every weather task)."""

    def __init__(self, text: str, clock: date):
        super().__init__("policy", _stated(text), clock)
        self.full = text

    @cached_property
    def numbers(self) -> set[float]:
        # the clock's figures (its day, its hour: 'It is now 2024-05-15 15:00:00') are no fee, limit or period
        facts = DATE_OR_TIME.sub(" ", CLOCK_LINE.sub("", self.raw))
        return {n for n in (_number(m.group(0)) for m in NUMBER.finditer(facts)) if n is not None}

    @cached_property
    def words(self) -> set[str]:
        return set()  # number words are never a source in the policy

    @cached_property
    def dates(self) -> set[str]:
        return dates_in_words(self.full, self.clock)

    def has(self, phrase: str, lower: bool = False) -> bool:
        if NUMBER.fullmatch(phrase.strip()):  # a bare figure: one of the rules' figures, never the clock's
            number = _number(phrase.strip())
            return number is not None and number in self.numbers
        return super().has(phrase, lower)


def _stated(policy: str) -> str:
    """The policy without its example sentences."""
    shielded = re.sub(r"\b(e)\.(g)\.|\b(i)\.(e)\.", lambda m: "".join(g for g in m.groups() if g) + "_x", policy,
                      flags=re.IGNORECASE)  # 'e.g.' ends no sentence
    kept = [s for s in SENTENCE_END.split(shielded) if not re.search(r"\b(?:eg|ie)_x|" + EXAMPLE.pattern, s, re.I)]
    return "\n".join(kept)


@lru_cache(maxsize=64)
def _policy_text(policy: str, clock: date) -> _Text:
    """A domain's policy read once: every task of the domain shares it."""
    return _Policy(policy, clock)


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _clock_date(now: str) -> date:
    try:
        return datetime.fromisoformat(now).date()
    except ValueError:
        return date.today()


def dates_in_words(text: str, clock: date) -> set[str]:
    """Every calendar day ``text`` names, as ISO dates: '16 September', 'Tuesday 16 September', 'September 16th,
    2026', '2025-09-16', '16/09/2025' (day first), and 'today' / 'tomorrow' / 'yesterday' read against the clock. A day without a year is in
    the clock's year; when a weekday is named that does not fit that year, the year before or after where it fits.

    >>> sorted(dates_in_words("Tuesday 16 September or tomorrow", date(2025, 5, 20)))
    ['2025-05-21', '2025-09-16']
    """
    found: set[str] = set()
    for pattern, day_first in ((DAY_MONTH, True), (MONTH_DAY, False)):
        for m in pattern.finditer(text):
            weekday, a, b, year = m.groups()
            day, month = (a, b) if day_first else (b, a)
            read = _read_day(int(day), MONTHS.index(month.lower()) + 1, int(year) if year else None, weekday, clock)
            if read:
                found.add(read.isoformat())
    for m in ISO_DAY.finditer(text):
        found.add(m.group(0))
    for m in NUMERIC_DAY.finditer(text):  # '24/01/2006': day first, as the domains write dates of birth
        try:
            found.add(date(int(m.group(3)), int(m.group(2)), int(m.group(1))).isoformat())
        except ValueError:
            pass
    lower = text.lower()
    for word, offset in RELATIVE_DAYS.items():
        if re.search(rf"\b{word}\b", lower):
            found.add((clock + timedelta(days=offset)).isoformat())
    return found


def _read_day(day: int, month: int, year: int | None, weekday: str | None, clock: date) -> date | None:
    years = [year] if year else [clock.year, clock.year + 1, clock.year - 1]
    for y in years:
        try:
            d = date(y, month, day)
        except ValueError:
            continue
        if year or not weekday or WEEKDAYS[d.weekday()] == weekday.lower():
            return d
    return None


def _nodes(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every value inside a call's output with its path, in document order, parents first, JSON text read as what
    it holds; a loop over a stack, not recursion (a 5,000-deep output is walked like a flat one), and nothing
    deeper than ``MAX_DEPTH`` levels (an agent reads no field that deep)."""
    pending: list[tuple[str, Any, int]] = [(path, value, 0)]
    while pending:
        where, item, depth = pending.pop()
        nested = json_text(item)
        if nested is not None:
            item = nested
        yield where, item
        if depth >= MAX_DEPTH:
            continue
        if isinstance(item, dict):
            pending += [(f"{where}.{k}", v, depth + 1) for k, v in reversed(item.items())]
        elif isinstance(item, list):
            pending += [(f"{where}[{i}]", v, depth + 1) for i, v in reversed(list(enumerate(item)))]


def _walk(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every scalar inside a call's output with its path: ``[0].trip_id``, ``.total_price``, and inside a column
    of JSON text (``.payment_methods[1].payment_method_id``), which the agent reads like any other field."""
    for where, item in _nodes(value, path):
        if item is not None and not isinstance(item, (dict, list)):
            yield where, item


def _key(value: Any) -> tuple[str, Any] | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return ("n", round(float(value), 6))  # 3.2999999999998 (a sum in floating point) is the 3.30 it means
    if isinstance(value, str) and value.strip():
        return ("s", value.strip().lower())
    return None


AGGREGATES = ("avg", "average", "mean", "max", "min")


# fields that mean a count of a noun without naming it (a section's enrolled_count is its students, a squad's
# max_squad_size the players a full squad holds)
COUNT_SYNONYMS = {"student": ("enrolled", "enrolment", "enrollment", "head_count", "headcount"),
                  "seat": ("capacity",), "unit": ("stock", "quantity"), "player": ("squad_size",)}
FIELD = re.compile(r"\.([A-Za-z_]\w*)")
WHERE = re.compile(r"count\(call[^()]*\[\*\]\.(\w+) = (\w+)\)")


def names_noun(field: str, noun: str) -> bool:
    """Whether a field (``my_stars``, ``enrolled_count``) means a count of ``noun`` (its singular): it names the noun
    or a documented synonym, and does not aggregate it (``avg_stars`` is no count of stars)."""
    field = field.lower()
    if noun in field:
        return not field.startswith(AGGREGATES)  # avg_stars aggregates stars; a synonym's max_ is a cap it holds
    return any(s in field for s in COUNT_SYNONYMS.get(noun, ()))


def coincidental(value: str, source: Any) -> bool:
    """Whether a count's recorded source (``amount(call[1][5].goals)`` for "1 injured") is a field or text that does
    not mean it: a field not named for its noun, a figure the user or policy says without the noun, or a count of
    rows that are not the noun. Any other kind of value: False (their sources are exact matches)."""
    told = parse(value)
    if told.kind != "count" or not isinstance(source, str) or len(told.unit) < 3:
        return False
    if source in ("user", "policy", "case(user)", "case(policy)") or source.startswith("count_words("):
        return False  # the text says the value itself, noun and all
    where = WHERE.search(source)
    if where:  # rows whose field is a word of the value ("injured" rows for "2 injured", "active" flags set)
        key, word = where.group(1).lower(), where.group(2).lower()
        said = set(re.findall(r"[a-z]+", value.lower()))
        return not (word in said or word == "true" and key in said)
    if "call[" not in source:
        return True  # a bare figure of the user's or the policy's words: nothing says what it counts
    fields = FIELD.findall(source)
    return not fields or not names_noun(fields[-1], told.unit)


class _Outputs:
    """What earlier calls returned, indexed by value, plus the figures computed from their lists."""

    def __init__(self) -> None:
        self.exact: dict[Any, str] = {}  # (kind, value) -> first path
        self.cased: dict[str, str] = {}  # the exact string -> path
        self.day: dict[str, str] = {}  # date part of a returned date-time -> path
        self.time: dict[str, str] = {}  # its time of day, 'HH:MM' -> path
        self.computed: dict[float, str] = {}  # sum of a list's field / count of a list -> rule(path)
        self.fields: dict[float, list[str]] = {}  # a number -> every path holding it (a count's noun picks one)
        self.counted: dict[tuple[float, str], str] = {}  # (rows, the word they are: a noun or a status) -> rule(path)

    def add(self, name: str, output: Any) -> None:
        for path, value in _walk(output, name):
            key = _key(value)
            if key is not None:
                self.exact.setdefault(key, path)
                if key[0] == "n":
                    self.fields.setdefault(key[1], []).append(path)
            if key is not None and key[0] == "n" and key[1] < 0:  # a refund of -170 is told as 170 back
                self.exact.setdefault(("n", -key[1]), f"abs({path})")
            if isinstance(value, str):
                self.cased.setdefault(value, path)
                m = ISO_DATETIME.match(value)
                if m:
                    self.day.setdefault(m.group(1), path)
                    self.time.setdefault(f"{m.group(2)}:{m.group(3)}", path)
        for path, rows in _lists(output, name):
            self.computed.setdefault(float(len(rows)), f"count({path})")
            self._tally(path, rows)
            numeric = {k for r in rows if isinstance(r, dict) for k, v in r.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)}
            for k in sorted(numeric):
                total = round(sum(r.get(k) or 0 for r in rows if isinstance(r, dict)), 2)
                self.computed.setdefault(total, f"sum({path}[*].{k})")

    def _tally(self, path: str, rows: list[Any]) -> None:
        """The counts a list means: its rows (``count(path[*].subscription_id)``, a list of subscriptions) and its
        rows whose text field holds one word (``count(path[*].status = injured)``)."""
        dicts = [r for r in rows if isinstance(r, dict)]
        if not dicts:
            return
        for key in dicts[0]:
            if key.endswith("_id"):
                self.counted.setdefault((float(len(dicts)), key[:-3].lower()), f"count({path}[*].{key})")
        tally: dict[tuple[str, str], int] = {}
        for row in dicts:
            for key, item in row.items():
                if isinstance(item, str) and re.fullmatch(r"[A-Za-z]+", item):
                    tally[(key, item.lower())] = tally.get((key, item.lower()), 0) + 1
                elif item is True or (item == 1 and not isinstance(item, float)):  # a flag: 'active' rows
                    tally[(key, "true")] = tally.get((key, "true"), 0) + 1
        for (key, word), n in sorted(tally.items()):
            # a flag's rows are known by the flag's name ("active" for "3 active subscriptions")
            self.counted.setdefault((float(n), key.lower() if word == "true" else word),
                                    f"count({path}[*].{key} = {word})")

    def find(self, value: Any) -> str | None:
        key = _key(value)
        if key is None:
            return None
        if isinstance(value, str) and value in self.cased:
            return self.cased[value]
        if key in self.exact:
            return self.exact[key] if not isinstance(value, str) else f"case({self.exact[key]})"
        if isinstance(value, str) and len(value) > MAX_RULE_CHARS:
            return None
        if isinstance(value, str) and NUMBER.fullmatch(value) and ("n", _number(value)) in self.exact:
            return f"number({self.exact[('n', _number(value))]})"
        if isinstance(value, str) and ISO_DATE.match(value) and value in self.day:
            return f"date_part({self.day[value]})"
        if isinstance(value, str) and value in self.time:
            return f"time_part({self.time[value]})"
        return None


def _lists(value: Any, path: str) -> Iterator[tuple[str, list[Any]]]:
    for where, item in _nodes(value, path):
        if isinstance(item, list):
            yield where, item


class Sources:
    """The sources an agent has at one point of a gold: texts, schemas, and the outputs of calls so far."""

    def __init__(self, evidence: Evidence):
        clock = _clock_date(evidence.now)
        self.texts = (_Text("user", evidence.words, clock), _policy_text(evidence.policy, clock))
        self.parameters = evidence.parameters
        self.outputs = _Outputs()

    def returned(self, name: str, output: Any) -> None:
        """Make ``output`` (of the call named ``name``, e.g. ``call[2]``) available to later values."""
        self.outputs.add(name, output)

    def source(self, value: Any, schema: dict[str, Any] | None = None) -> Any:
        """The source of ``value`` (a string, or a list / object of sources for a list / object); None when it has
        none. ``schema``: the parameter's JSON schema, for enum values, defaults and booleans."""
        if not isinstance(value, (list, dict)):
            return self._scalar(value, schema or {})
        # lists and objects element by element, with a stack (no recursion), and no deeper than MAX_DEPTH
        root: list[Any] = [None]
        pending: list[tuple[Any, dict[str, Any], Any, Any, int]] = [(value, schema or {}, root, 0, 0)]
        while pending:
            item, item_schema, holder, key, depth = pending.pop()
            if not isinstance(item, (list, dict)):
                holder[key] = self._scalar(item, item_schema)
            elif depth >= MAX_DEPTH:
                holder[key] = None  # nested deeper than any gold's arguments: no source
            elif isinstance(item, list):
                holder[key] = [None] * len(item)
                items = item_schema.get("items") if isinstance(item_schema.get("items"), dict) else {}
                pending += [(v, items, holder[key], i, depth + 1) for i, v in enumerate(item)]
            else:
                holder[key] = dict.fromkeys(item)
                props = item_schema.get("properties") if isinstance(item_schema.get("properties"), dict) else {}
                pending += [(v, props.get(k) or {}, holder[key], k, depth + 1) for k, v in item.items()]
        return root[0]

    def _scalar(self, value: Any, schema: dict[str, Any]) -> Any:
        if value is None or isinstance(value, bool):
            return "schema"
        found = self._said(value) or self.outputs.find(value)
        if found:
            return found
        if value in (schema.get("enum") or ()) or ("default" in schema and schema["default"] == value):
            return "schema"
        return self._computed(value)

    def _said(self, value: Any) -> str | None:
        """A value read from the user's words or the policy, by the first text rule that matches."""
        text = value if isinstance(value, str) else _shown(value)
        for t in self.texts:
            if t.has(text):
                return t.name
        if len(text) > MAX_RULE_CHARS:  # the length cap comes before any rule's pattern
            return None
        for t in self.texts:
            if isinstance(value, str) and t.has(value, lower=True):
                return f"case({t.name})"
            if isinstance(value, str) and "_" in value and t.has(value.replace("_", " "), lower=True):
                return f"spaced({t.name})"
            if isinstance(value, str) and ISO_DATE.match(value) and value in t.dates:
                return f"date_in_words({t.name})"
            number = value if isinstance(value, (int, float)) else _number(value) if NUMBER.fullmatch(value) else None
            if number is not None and float(number) in t.numbers:
                return f"number({t.name})"
            if number is not None and float(number).is_integer() and 0 <= number < len(NUMBER_WORDS) \
                    and NUMBER_WORDS[int(number)] in t.words:
                return f"number_words({t.name})"
        return None

    def _named(self, value: str, number: float | None) -> str | None:
        """For a count ("4 stars"), the returned field named for its noun that holds the number (``my_stars``), before
        any field or text that only happens to hold it (a title's average, the policy's "1 to 5 stars")."""
        told = parse(value)
        if told.kind != "count" or number is None or len(told.unit) < 3:
            return None
        for path in self.outputs.fields.get(round(float(number), 6), ()):
            if names_noun(path.rsplit(".", 1)[-1], told.unit):
                return path
        words = re.findall(r"[a-z]+", value.lower())
        for word in [told.unit, *words]:  # rows of the noun, then rows whose status is a word of the value
            counted = self.outputs.counted.get((float(number), word))
            if counted:
                return counted
        return None

    def _count_words(self, value: str, number: float | None) -> str | None:
        """A count the user or policy says in words with its noun ("two players" for "2 players")."""
        if number is None or not number.is_integer() or not 0 <= number < len(NUMBER_WORDS):
            return None
        said = f"{NUMBER_WORDS[int(number)]} {value.split(' ', 1)[-1]}"
        # _Text.has, not the policy's own: its "two active subscriptions" names the noun, so it is no bare figure
        return next((f"count_words({t.name})" for t in self.texts if _Text.has(t, said, lower=True)), None)

    def _computed(self, value: Any) -> str | None:
        """A date-time read as a day and a time, a number with its unit, or a sum or count of a returned list."""
        if isinstance(value, str) and len(value) > MAX_RULE_CHARS:  # the length cap comes before any pattern
            return None
        if isinstance(value, str):
            m = ISO_DATETIME.match(value)
            if m:
                day = self.source(m.group(1))
                clock = f"{m.group(2)}:{m.group(3)}"
                if day and any(t.has(clock) or t.has(clock.lstrip("0")) for t in self.texts):
                    return f"date_time({day})"
            if EXPRESSION.fullmatch(value) and not ISO_DATE.match(value):  # '2006-01-24' is a day, not a sum
                parts = [self.source(_number(n.group(0))) for n in NUMBER.finditer(value)]
                return f"expression({', '.join(parts)})" if all(parts) else None
            m = AMOUNT.match(value.strip())
            if m and _number(m.group(1)) is not None:
                number = self._named(value, _number(m.group(1))) or self.source(_number(m.group(1)))
                if number and coincidental(value, f"amount({number})"):
                    # "3 injured" off a shirt number, "4 stars" off a title's average: only words that say the count
                    return self._count_words(value, _number(m.group(1)))
                return f"amount({number})" if number else None
            return None
        if isinstance(value, (int, float)):
            return self.outputs.computed.get(round(float(value), 2))
        return None


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _missing(source: Any, where: str, value: Any) -> list[str]:
    """Each value without a source, named by where it sits (a loop over a stack, in order)."""
    found: list[str] = []
    pending = [(source, where, value)]
    while pending:
        src, at, item = pending.pop()
        if src is None:
            found.append(f"{at} = {_clipped(item)}")
        elif isinstance(src, list):
            pending += [(src[i], f"{at}[{i}]", item[i]) for i in reversed(range(len(src)))]
        elif isinstance(src, dict):
            pending += [(src[k], f"{at}.{k}", item[k]) for k in reversed(list(src))]
    return found


def _clipped(value: Any) -> str:
    """``repr`` of a value, at most 120 characters; a list or object is not walked (it may be deeply nested)."""
    if isinstance(value, (list, dict)):
        return f"<{type(value).__name__} of {len(value)} nested deeper than {MAX_DEPTH} levels>"
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def derive(calls: Sequence[ToolCall], outputs: Sequence[Any], communicate: Sequence[str], evidence: Evidence,
           sources: Sources | None = None) -> Derivation:
    """The source of every argument of ``calls`` (call i may use what calls before it returned: ``outputs[j]``,
    j < i) and of every ``communicate`` value (which may use every output). ``sources``: a starting point that
    already holds what the agent knew before these calls (planning a request within a task)."""
    known = sources or Sources(evidence)
    per_call: list[dict[str, Any]] = []
    missing: list[str] = []
    for i, call in enumerate(calls):
        schemas = evidence.parameters.get(call.name) or {}
        args = {name: known.source(value, schemas.get(name)) for name, value in call.arguments.items()}
        per_call.append({"name": call.name, "arguments": args})
        for name, value in call.arguments.items():
            missing += _missing(args[name], f"call {i} ({call.name}) argument {name}", value)
        known.returned(f"call[{i}]", outputs[i] if i < len(outputs) else None)
    said = {value: known.source(value) for value in communicate}
    missing += [m for value, s in said.items() for m in _missing(s, "communicate_info", value)]
    return Derivation({"calls": per_call, "communicate_info": said}, tuple(missing))


CALL_REF = re.compile(r"call\[(\d+)\]")


def referenced_calls(sources: Any) -> set[int]:
    """The positions of the calls whose outputs some value in ``sources`` (a ``Derivation.sources``) is read from."""
    found: set[int] = set()
    pending = [sources]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            found.update(int(i) for i in CALL_REF.findall(item))
        elif isinstance(item, dict):
            pending += [*item.keys(), *item.values()]
        elif isinstance(item, (list, tuple)):
            pending += item
    return found


def evidence_for(spec: Any, words: str) -> Evidence:
    """The evidence of a task in ``spec``'s domain: ``words`` (what the user says and knows) with the spec's
    policy text, clock and tool parameter schemas."""
    return Evidence(words, spec.policy, spec.now, _parameters(spec))


_PARAMETERS: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}


def _parameters(spec: Any) -> dict[str, dict[str, Any]]:
    key = (spec.name, spec.spec_hash)
    if key not in _PARAMETERS:
        _PARAMETERS[key] = {t.name: dict(t.parameters.get("properties") or {}) for t in spec.tools}
    return _PARAMETERS[key]
