"""The evidence behind a capability description (solved k of n per task kind and per domain, timeouts) and the
check that refuses a description the trials contradict: a count or rate that no tally shows ("3 out of 5" when 0
of 10 were solved), or a strength claimed in a task kind or domain where nothing was solved.

    >>> ev = evidence_of([{"domain": "weather", "kinds": "identify+intent", "solved": False, "error": None}])
    >>> contradiction("It solved 3 out of 5 tasks.", ev)
    'claims 3 of 5, but the trials show: overall 0/1, identify+intent 0/1, weather 0/1'
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

NUMBER_WORDS = {"zero": 0, "no": 0, "none": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "all": -1}
_NUM = r"(\d+|" + "|".join(w for w in NUMBER_WORDS if w not in ("no", "none", "all")) + r")"
RATIO = re.compile(rf"\b{_NUM}\s*(?:out\s+of|of|/|in)\s*(?:the\s+)?{_NUM}\b", re.I)
PERCENT = re.compile(r"\b(\d{1,3}(?:\.\d+)?)\s*(?:%|percent\b)", re.I)
STRENGTH = re.compile(r"\b(strong|strength|strengths|excel\w*|good|great|well|effective\w*|success\w*|capable|"
                      r"proficien\w*|reliabl\w*|accurate\w*|master\w*|adept|skil\w*|solv(?:es|ed|ing)|handles?|"
                      r"competent)\b", re.I)
WEAKNESS = re.compile(r"\b(not|no|never|cannot|can't|unable|fail\w*|struggl\w*|weak\w*|poor\w*|lack\w*|"
                      r"difficult\w*|none|zero|0|without|limited|unsuccessful\w*|timed?\s*out)\b", re.I)


@dataclass
class Evidence:
    """What the trials showed: totals, timeouts, and [solved, trials] per task kind and per domain."""

    trials: int
    solved: int
    timeouts: int
    per_kind: dict[str, list[int]] = field(default_factory=dict)
    per_domain: dict[str, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def tallies(self) -> dict[str, list[int]]:
        """Every [solved, trials] a claim may cite: overall, per task kind, per domain."""
        return {"overall": [self.solved, self.trials], **self.per_kind, **self.per_domain}

    def summary(self) -> str:
        kinds = "; ".join(f"{k} {s}/{n}" for k, (s, n) in sorted(self.per_kind.items()))
        return f"solved {self.solved} of {self.trials} ({self.timeouts} timed out); per task kind: {kinds or '-'}"


def timed_out(trial: dict[str, Any]) -> bool:
    """A trial whose agent call failed by timing out (the client's error kind, as the episode recorded it)."""
    return "(timeout)" in (trial.get("error") or "")


def evidence_of(trials: list[dict[str, Any]]) -> Evidence:
    per_kind: dict[str, list[int]] = {}
    per_domain: dict[str, list[int]] = {}
    for t in trials:
        for tally, key in ((per_kind, t["kinds"] or "-"), (per_domain, t["domain"])):
            counts = tally.setdefault(key, [0, 0])
            counts[0] += int(bool(t["solved"]))
            counts[1] += 1
    return Evidence(trials=len(trials), solved=sum(int(bool(t["solved"])) for t in trials),
                    timeouts=sum(int(timed_out(t)) for t in trials), per_kind=per_kind, per_domain=per_domain)


def _number(word: str) -> int:
    return int(word) if word.isdigit() else NUMBER_WORDS[word.lower()]


def _shown(ev: Evidence) -> str:
    return ", ".join(f"{k} {s}/{n}" for k, (s, n) in ev.tallies().items())


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?;])\s+|\n+", text) if s.strip()]


def contradiction(text: str, ev: Evidence) -> str | None:
    """Why ``text`` contradicts ``ev`` (one line), or None when every checkable claim in it holds."""
    tallies = ev.tallies()
    rates = {round(100 * s / n) for s, n in tallies.values() if n}
    for m in RATIO.finditer(text):
        k, n = _number(m.group(1)), _number(m.group(2))
        if n and 0 <= k <= n and not any(s * n == k * t for s, t in tallies.values() if t) \
                and [k, n] not in tallies.values():
            return f"claims {k} of {n}, but the trials show: {_shown(ev)}"
    for m in PERCENT.finditer(text):
        claimed = float(m.group(1))
        if claimed <= 100 and not any(abs(claimed - r) <= 1 for r in rates):
            return f"claims {m.group(1)}%, but the trials show: {_shown(ev)}"
    unsolved = {name for name, (s, _) in tallies.items() if s == 0 and name != "overall"}
    for sentence in _sentences(text):
        if not STRENGTH.search(sentence) or WEAKNESS.search(sentence):
            continue
        if ev.solved == 0:
            return f"claims a strength ({sentence.strip()[:80]!r}), but it solved 0 of {ev.trials} trials"
        named = sorted(n for n in unsolved if re.search(rf"\b{re.escape(n)}\b", sentence, re.I))
        if named:
            s, n = tallies[named[0]]
            return f"claims a strength in {named[0]} ({sentence.strip()[:80]!r}), but solved {s} of {n} there"
    return None
