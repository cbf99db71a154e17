"""How spoken requests are worded, and the text checks that catch slips: greetings that fit the domain's clock,
connectives ("Also,", "while you're at it") that are never doubled, number and article agreement ("1 star",
"an abnormal result"), doubled words,
names that keep their case, and a clause's skeleton (its wording with the record values taken out).

Used by ``synthesis/task.py`` to write a request and by ``synthesis/realism_audit.py`` to measure one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

# part of the day for an hour of the clock; outside these hours no time-of-day greeting fits
PARTS_OF_DAY = (("morning", 5, 12), ("afternoon", 12, 18), ("evening", 18, 23))
TIME_GREETING = re.compile(r"^\W*(?:good\s+)?(morning|afternoon|evening)\b", re.IGNORECASE)
# words and phrases that join a clause to the one before it; a clause that already opens with one gets no other
CONNECTIVES = ("and", "also", "oh, and", "oh and", "plus", "besides", "besides that", "separately", "another thing",
               "one more thing", "while i have you", "while you're at it", "while you are at it", "by the way",
               "on top of that", "and also", "as well as that")
_CONNECTIVE = re.compile(r"^\s*(?:" + "|".join(re.escape(c) for c in sorted(CONNECTIVES, key=len, reverse=True))
                         + r")\b\s*(?:[,:;-]+|\s-\s)?\s*", re.IGNORECASE)
DOUBLED_CONNECTIVE = re.compile(r"(?:^|[.!?]\s+)(?:" + "|".join(re.escape(c) for c in CONNECTIVES)
                                + r")\b[\s,:;-]+(?:" + "|".join(re.escape(c) for c in CONNECTIVES) + r")\b",
                                re.IGNORECASE)
DOUBLED_WORD = re.compile(r"\b([A-Za-z]+)\s+\1\b", re.IGNORECASE)
# "1 stars": the number 1 before a plural in -s (not -ss, -us, -is: "1 class", "1 bus", "1 analysis"; not a verb)
ONE_PLURAL = re.compile(r"(?<![\w.,])(1) (?!(?:was|has|does|goes|this|yes|its)\b)([a-z]+?[^sui\W])s\b")
_ES_PLURAL = re.compile(r"(?:sh|ch|x|ss|zz)es$")
IRREGULAR_PLURALS = {"people": "person", "children": "child", "adults": "adult", "men": "man", "women": "woman"}
ONE_IRREGULAR = re.compile(r"(?<![\w.,])(1) (" + "|".join(IRREGULAR_PLURALS) + r")\b")
# "a abnormal result": the article before a word said with a vowel sound (not "a user", "a one-way", "a euro",
# "a urinalysis")
_YOU_OR_WON = r"(?!(?:uni|use|usu|uti|ure|uri|uro|eu|one\b|one-|once)\w*)"
A_BEFORE_VOWEL = re.compile(r"\b(a) " + _YOU_OR_WON + r"(?=[aeiou]\w)")


def part_of_day(now: str | None) -> str | None:
    """'morning', 'afternoon' or 'evening' for an ISO clock time; None at night or without a clock.

    >>> part_of_day("2025-03-10T08:00:00"), part_of_day("2025-03-10T12:00:00"), part_of_day("2025-03-10T23:30:00")
    ('morning', 'afternoon', None)
    """
    if not now:
        return None
    try:
        hour = datetime.fromisoformat(now).hour
    except ValueError:
        return None
    return next((name for name, start, end in PARTS_OF_DAY if start <= hour < end), None)


def greeting_contradicts(text: str, now: str | None) -> bool:
    """Whether ``text`` opens with a time-of-day greeting the clock does not allow ("Evening." at 08:00)."""
    said = TIME_GREETING.match(text)
    return bool(said) and said.group(1).lower() != part_of_day(now)  # type: ignore[union-attr]


def opening_connective(clause: str) -> str:
    """The connective a clause opens with ("While you're at it, "), or ''."""
    found = _CONNECTIVE.match(clause)
    if not found or not found.group(0).strip():
        return ""
    rest = clause[found.end():]
    return found.group(0) if rest[:1].isalnum() or rest[:1] in "'{\"(" else ""


def doubled_connectives(text: str) -> int:
    """Sentences that open with two connectives in a row ("While I have you, while you're at it, ...")."""
    return len(DOUBLED_CONNECTIVE.findall(text))


def agree_numbers(text: str) -> str:
    """'1 stars' -> '1 star', '1 boxes' -> '1 box', '1 copies' -> '1 copy' (lower-case nouns only).

    >>> agree_numbers("put me down for 1 stars, 1 boxes and 1 copies; 1 class, 21 seats, a table for 1 people")
    'put me down for 1 star, 1 box and 1 copy; 1 class, 21 seats, a table for 1 person'
    """
    def singular(match: re.Match[str]) -> str:
        number, stem = match.group(1), match.group(2)
        word = stem + "s"
        if word.endswith("ies"):
            return f"{number} {word[:-3]}y"
        if _ES_PLURAL.search(word):
            return f"{number} {word[:-2]}"
        return f"{number} {stem}"
    text = ONE_IRREGULAR.sub(lambda m: f"{m.group(1)} {IRREGULAR_PLURALS[m.group(2)]}", text)
    return ONE_PLURAL.sub(singular, text)


def agree_articles(text: str) -> str:
    """'a abnormal result' -> 'an abnormal result' (lower-case 'a' only: 'seat A in row 3' stays).

    >>> agree_articles("enter a abnormal result, a urgent one, a user, a one-way ticket, a euro refund and a urinalysis")
    'enter an abnormal result, an urgent one, a user, a one-way ticket, a euro refund and a urinalysis'
    """
    return A_BEFORE_VOWEL.sub("an ", text)


def agree(text: str) -> str:
    """Number and article agreement: '1 stars' -> '1 star', 'a abnormal' -> 'an abnormal'."""
    return agree_articles(agree_numbers(text))


def plural_slips(text: str) -> int:
    """How many agreement slips ``text`` holds: '1 <plural>' ("1 stars", "1 people") and 'a' before a vowel
    sound ("a abnormal")."""
    return len(ONE_PLURAL.findall(text)) + len(ONE_IRREGULAR.findall(text)) + len(A_BEFORE_VOWEL.findall(text))


def _spans(text: str, values: Iterable[str]) -> list[tuple[int, int]]:
    out = []
    for value in values:
        if value:
            out += [(m.start(), m.end()) for m in re.finditer(re.escape(value), text)]
    return out


def doubled_words(text: str, names: Iterable[str] = ()) -> list[str]:
    """Words said twice in a row ("a member member", "the Anniversary trip trip"), except inside one of ``names``
    (record values such as a person called "Chen Chen").

    >>> doubled_words("the Anniversary trip trip; Chen Chen called", names=["Chen Chen"])
    ['trip trip']
    """
    spans = _spans(text, names)
    return [m.group(0) for m in DOUBLED_WORD.finditer(text)
            if not any(a <= m.start() and m.end() <= b for a, b in spans)]


def lowercased_names(text: str, values: Iterable[str]) -> int:
    """Record values written with a capital (names, places) that appear in ``text`` only with it lowered."""
    out = 0
    for value in set(values):
        if value[:1].isupper() and value not in text and (value[:1].lower() + value[1:]) in text:
            out += 1
    return out


TITLES = frozenset({"Dr", "Mr", "Mrs", "Ms", "Miss", "Prof", "Professor", "Sir", "Dame"})


def lower_first(clause: str, names: Iterable[str] = ()) -> str:
    """The clause with its first letter lowered so it can follow a greeting or a connective: only when its first
    word is a common word, never a name or another record value (``names``), 'I', or an abbreviation.

    >>> lower_first("Noah Jensen asked me", names=["Noah Jensen"]), lower_first("Could you help"), lower_first("I'm late")
    ('Noah Jensen asked me', 'could you help', "I'm late")
    >>> lower_first("Dr. Yara Okafor wants a test"), lower_first("Mrs Lee called")
    ('Dr. Yara Okafor wants a test', 'Mrs Lee called')
    """
    if not clause or not clause[:1].isupper():
        return clause
    if any(value and clause.startswith(value) and value[:1].isupper() for value in names):
        return clause
    first = re.match(r"[A-Za-z']+", clause)
    word = first.group(0) if first else ""
    if word in ("I", "I'm", "I'd", "I've", "I'll") or word.startswith("I'") or re.match(r"^[A-Z]{2}", word):
        return clause
    if re.match(r"^[A-Z][a-z]*[A-Z]", word):  # "McKenzie", "iPhone"-like words keep their case
        return clause
    if word in TITLES:  # "Also, Dr. Yara Okafor wants ..." (a title opens a name)
        return clause
    return clause[:1].lower() + clause[1:]


def skeleton(clause: str, values: Iterable[str]) -> str:
    """The clause with each record value it spells out replaced by '{}', lower-cased and with spacing folded:
    two clauses with the same skeleton were worded from the same pattern.

    >>> skeleton("Cancel order OR0012 from Monday 3 March, please.", ["OR0012", "Monday 3 March"])
    'cancel order {} from {}, please.'
    """
    text = clause
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        text = re.sub(r"(?<![\w.])" + re.escape(value) + r"(?![\w])", "{}", text)
    return re.sub(r"\s+", " ", text).strip().lower()


__all__ = ["CONNECTIVES", "agree_numbers", "doubled_connectives", "doubled_words", "greeting_contradicts",
           "lower_first", "lowercased_names", "opening_connective", "part_of_day", "plural_slips", "skeleton"]
