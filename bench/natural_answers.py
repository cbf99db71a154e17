"""Natural answers against the fidelity check: every task of a snapshot with ``communicate_info`` is solved with its
gold calls and one closing message that states each value the way a careful human agent would (two or more
wordings; ids verbatim), then scored by our verifier (``verify``, as ``train/environment/env.py`` does) and, where tau2 is
installed, by tau2's own ``CommunicateEvaluator`` on the task's tau2 ``communicate_info``. The database always
matches, so every failure is fidelity alone. Also scores mutated wordings (a cent, a day, an hour, a count changed
inside the same wording), which must all be refused. Prints the pass rate per wording, per domain and per kind.

    PYTHONPATH=. python bench/natural_answers.py --warehouse /tmp/w.duckdb
    PYTHONPATH=. python bench/natural_answers.py --warehouse /tmp/w.duckdb --limit 400 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from datetime import date
from typing import Any

from domains.registry import get_engine, get_spec
from interop.tau2_bridge import tau2_python
from verifiers.replay import replay
from verifiers.types import Trajectory
from verifiers.verify import verify
from warehouse.reader import connect_readonly, resolve_snapshot
from train.environment.tasks import load_training_set

WORDINGS = 2
SYMBOL = {"EUR": "€", "GBP": "£", "USD": "$"}
WORD = {"EUR": "euros", "GBP": "pounds", "USD": "dollars"}
NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                "sixteen seventeen eighteen nineteen twenty").split()
TENS = {20: "twenty", 30: "thirty", 40: "forty", 50: "fifty", 60: "sixty", 70: "seventy", 80: "eighty", 90: "ninety"}
MONTHS = ("January February March April May June July August September October November December").split()
WEEKDAYS = ("Monday Tuesday Wednesday Thursday Friday Saturday Sunday").split()
DURATION_WORDS = {"minutes", "minute", "hours", "hour", "days", "day", "weeks", "week", "months", "month", "years",
                  "year"}
MEASURE_WORDS = {"mm": "millimetres", "cm": "centimetres", "km": "kilometres", "kg": "kilograms", "%": "percent",
                 "kph": "kilometres per hour"}


def kind_of(canonical: str) -> str:
    """The kind of a value as the issue's measurement names it (the bench's own reading, so that it runs on code
    from before typed values too)."""
    import re
    text = canonical.strip()
    m = re.fullmatch(r"(-?\d[\d,]*(?:\.\d+)?) (EUR|GBP|USD|dollars|euros|pounds)", text)
    if m:
        value = float(m.group(1).replace(",", ""))
        return ("zero amount" if value == 0 else "negative amount" if value < 0
                else "whole amount" if value.is_integer() else "amount with cents")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return "date"
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2})?", text):
        return "datetime"
    if re.fullmatch(r"\d{1,2}:\d{2}", text):
        return "time"
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?) ?([^\W\d][\w ]*|%)", text)
    if m:
        unit = m.group(2).split()[-1]
        if unit in DURATION_WORDS:
            return "duration"
        if unit in MEASURE_WORDS or unit in ("m", "c", "g"):
            return "measurement"
        return "zero count" if float(m.group(1)) == 0 else "count"
    if re.fullmatch(r"-?\d[\d,]*(?:\.\d+)?", text):
        return "number"
    if re.fullmatch(r"#?(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]+|\d{5,}", text):
        return "id"
    return "name or word"


def spelled(n: int) -> str:
    if 0 <= n <= 20:
        return NUMBER_WORDS[n]
    if 20 < n < 100:
        return TENS[n - n % 10] + (f"-{NUMBER_WORDS[n % 10]}" if n % 10 else "")
    return str(n)


def _money(number: float) -> str:
    return f"{number:,.2f}" if not number.is_integer() else f"{int(number):,}"


def worded(canonical: str, wording: int, clock: date, shift: int = 0) -> str:
    """``canonical`` as a careful agent says it, in wording 0, 1, ... ; ``shift``: the value changed by one unit
    (a cent, a day, an hour, one more of a count) inside the same wording."""
    import re
    from datetime import timedelta
    text = canonical.strip()
    m = re.fullmatch(r"(-?\d[\d,]*(?:\.\d+)?) (EUR|GBP|USD|dollars|euros|pounds)", text)
    if m:
        code = {"dollars": "USD", "euros": "EUR", "pounds": "GBP"}.get(m.group(2), m.group(2))
        value = round(float(m.group(1).replace(",", "")) + 0.01 * shift, 2)
        if value == 0:
            return ("nothing, zero " + WORD[code]) if wording == 0 else f"{SYMBOL[code]}0.00"
        if value < 0:
            return (f"a credit of {SYMBOL[code]}{_money(-value)}" if wording == 0
                    else f"minus {_money(-value)} {WORD[code]}")
        return f"{SYMBOL[code]}{_money(value)}" if wording == 0 else f"{_money(value)} {WORD[code]}"
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}):(\d{2})(?::\d{2})?)?", text)
    if m:
        day = date.fromisoformat(m.group(1)) + timedelta(days=shift if not m.group(2) else 0)
        said = (f"{WEEKDAYS[day.weekday()]} {day.day} {MONTHS[day.month - 1]} {day.year}" if wording == 0
                else f"{MONTHS[day.month - 1]} {day.day}" + ("" if day.year == clock.year else f", {day.year}"))
        if m.group(2):
            said += " at " + worded(f"{m.group(2)}:{m.group(3)}", wording, clock, shift)
        return said
    m = re.fullmatch(r"(\d{1,2}):(\d{2})", text)
    if m:
        hour, minute = (int(m.group(1)) + shift) % 24, int(m.group(2))
        half = "am" if hour < 12 else "pm"
        twelve = hour % 12 or 12
        if wording == 0:
            return f"{twelve}{':' + m.group(2) if minute else ''} {half}"
        return f"{twelve}:{m.group(2)} {half.upper()}"
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?) ?([^\W\d][\w ]*|%)", text)
    if m:
        number, unit = float(m.group(1)), m.group(2)
        last = unit.split()[-1]
        if last in DURATION_WORDS:
            n = int(number) + shift
            if wording == 0:
                return f"{spelled(n)} {last if n != 1 else last.rstrip('s')}"
            return f"a {n}-{last.rstrip('s')} period"
        if last in MEASURE_WORDS or last in ("m", "c", "g"):
            value = round(number + 0.1 * shift, 1)
            shown = f"{value:g}" if "." not in m.group(1) else f"{value:.{len(m.group(1).split('.')[1])}f}"
            return f"{shown} {MEASURE_WORDS.get(last, last)}" if wording == 0 else f"{shown}{last}"
        if number.is_integer():
            n = int(number) + shift
            head = " ".join(unit.split()[:-1])
            noun = last if n != 1 else (last[:-3] + "y" if last.endswith("ies") else last[:-1] if last.endswith("s")
                                        else last)
            words = f"{head} {noun}".strip()
            if n == 0:
                return f"no {words}" if wording == 0 else f"zero {words}"
            if n == 1:
                return f"one {words}" if wording == 0 else f"a single {words}"
            return f"{spelled(n) if n <= 20 else n} {words}" if wording == 0 else f"{n} {words}"
    m = re.fullmatch(r"-?\d[\d,]*(?:\.(\d+))?", text)
    if m:
        value = float(text.replace(",", "")) + (10 ** -len(m.group(1)) if m.group(1) else 1) * shift
        return f"{value:.{len(m.group(1))}f}" if m.group(1) and wording == 0 else f"{value:g}"
    if shift:
        return _altered_word(text)
    return text if wording == 0 else text.replace("_", " ")


def _altered_word(text: str) -> str:
    """Another id or word of the same shape: the last digit or letter changed."""
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch.isdigit():
            return text[:i] + str((int(ch) + 1) % 10) + text[i + 1:]
        if ch.isalpha():
            return text[:i] + ("b" if ch.lower() == "a" else "a") + text[i + 1:]
    return text + "x"


FRAMES = ("Done. Here is what I found: {}.", "All set: {}. Is there anything else I can help with?",
          "I've taken care of that for you. {}.")


def message(values: list[str], wording: int, clock: date, shift_at: int | None = None) -> str:
    parts = [worded(v, wording, clock, 1 if i == shift_at else 0) for i, v in enumerate(values)]
    return FRAMES[wording % len(FRAMES)].format("; ".join(parts))


def tau2_verdicts(batch: list[dict[str, Any]]) -> list[bool] | None:
    """tau2's CommunicateEvaluator on each (communicate_info, text), in tau2's venv; None without tau2."""
    python = tau2_python()
    if python is None:
        return None
    code = ("import json,sys\nfrom tau2.evaluator.evaluator_communicate import CommunicateEvaluator as C\n"
            "from tau2.data_model.message import AssistantMessage\n"
            "out=[all(c.met for c in C.evaluate_communicate_info([AssistantMessage(role='assistant', content=b['text'])],"
            " b['info'])) for b in json.load(sys.stdin)]\nprint(json.dumps(out))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([str(python), "-c", code], input=json.dumps(batch), capture_output=True, text=True,
                          env=env, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", required=True)
    ap.add_argument("--snapshot", default="latest")
    ap.add_argument("--limit", type=int, default=None, help="only the first N tasks with communicate_info")
    ap.add_argument("--no-tau2", action="store_true", help="our verifier only")
    ap.add_argument("--json", default=None, help="also write the per-task verdicts here")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    training = load_training_set(args.warehouse, args.snapshot)
    con = connect_readonly(args.warehouse)
    snapshot = resolve_snapshot(con, args.snapshot)
    tau2_info = {tid: (json.loads(t or "{}").get("evaluation_criteria") or {}).get("communicate_info") or []
                 for tid, t in con.execute("SELECT task_id, tau2_json FROM tasks WHERE snapshot_id = ?",
                                           [snapshot]).fetchall()}
    con.close()
    tasks = [t for t in training.tasks if t.communicate_info][:args.limit or None]
    rows: list[dict[str, Any]] = []
    for t in tasks:
        task = t.verifiable()
        engine = get_engine(task.domain, task.seed)
        clock = date.fromisoformat(get_spec(task.domain).now[:10])
        gold = replay(engine, task.gold_calls, task.setup_calls)
        try:
            values = list(task.communicate_info)
            row: dict[str, Any] = {"task_id": t.task_id, "domain": t.domain, "values": values,
                                   "kinds": sorted({kind_of(v) for v in values}), "texts": [], "ours": [],
                                   "mutated": []}
            for w in range(WORDINGS):
                text = message(values, w, clock)
                row["texts"].append(text)
                row["ours"].append(verify(task, Trajectory(task.gold_calls, text), engine, gold, gold).solved)
            for i in range(len(values)):
                text = message(values, i % WORDINGS, clock, shift_at=i)
                row["mutated"].append({"kind": kind_of(values[i]), "text": text,
                                       "refused": not verify(task, Trajectory(task.gold_calls, text), engine, gold,
                                                             gold).solved})
        finally:
            gold.close()
        rows.append(row)
    tau2 = None if args.no_tau2 else tau2_verdicts([{"info": tau2_info.get(r["task_id"]) or r["values"],
                                                     "text": text} for r in rows for text in r["texts"]])
    if tau2 is not None:
        for i, r in enumerate(rows):
            r["tau2"] = tau2[i * WORDINGS:(i + 1) * WORDINGS]
    report(rows, tau2 is not None)
    print(f"({len(rows)} tasks in {time.perf_counter() - started:.1f}s; snapshot {snapshot})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


def report(rows: list[dict[str, Any]], with_tau2: bool) -> None:
    evaluators = ["ours"] + (["tau2"] if with_tau2 else [])
    print(f"| | tasks | {' | '.join(f'fail, wording {w + 1}' for w in range(WORDINGS))} | fail in all |")
    print("|---|---:|" + "---:|" * (WORDINGS + 1))
    for ev in evaluators:
        fails = [sum(not r[ev][w] for r in rows) for w in range(WORDINGS)]
        every = sum(not any(r[ev]) for r in rows)
        print(f"| {ev} | {len(rows)} | {' | '.join(map(str, fails))} | {every} ({every / max(1, len(rows)):.0%}) |")
    for title, key in (("domain", lambda r: [r["domain"]]), ("kind", lambda r: r["kinds"])):
        print(f"\nper {title}: tasks, pass rate per wording ({', '.join(evaluators)})")
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            for k in key(r):
                groups[k].append(r)
        for k in sorted(groups):
            rs = groups[k]
            rates = "; ".join(f"{ev} " + " / ".join(f"{sum(r[ev][w] for r in rs) / len(rs):.1%}"
                                                    for w in range(WORDINGS)) for ev in evaluators)
            print(f"  {k:<18} {len(rs):>5}  {rates}")
    if with_tau2:
        plain = [r for r in rows if not {"date", "datetime"} & set(r["kinds"])]
        print(f"\ntau2 on tasks without dates: {len(plain)} tasks, pass in at least one wording "
              f"{sum(any(r['tau2']) for r in plain) / max(1, len(plain)):.1%}, in every wording "
              f"{sum(all(r['tau2']) for r in plain) / max(1, len(plain)):.1%}")
    mutated = [m for r in rows for m in r["mutated"]]
    by_kind = Counter(m["kind"] for m in mutated)
    refused = Counter(m["kind"] for m in mutated if m["refused"])
    print(f"\nmutated wordings refused by ours: {sum(refused.values())}/{len(mutated)} "
          f"({sum(refused.values()) / max(1, len(mutated)):.1%}); "
          + ", ".join(f"{k} {refused[k]}/{n}" for k, n in sorted(by_kind.items())))


if __name__ == "__main__":
    sys.exit(main())
