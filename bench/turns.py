"""How long the turn reader takes on pathological turns: 40,000 ``<tool_call>`` tags in 440 KB and friends, beside
the regex reader it replaced (``<tool_call>(.*?)</tool_call>``, quadratic on unclosed tags) at smaller sizes.

Run: PYTHONPATH=. python bench/turns.py
"""

from __future__ import annotations

import re
import time

from train.environment.turns import parse_turn

TOOLS = {"get_station"}
OLD = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
CALL = '<tool_call>{"name": "get_station", "arguments": {"station_id": "WS0001"}}</tool_call>'


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def old_reader(text: str) -> None:
    """The part of the old reader that was quadratic: every match attempt from every unclosed tag."""
    list(OLD.finditer(text))


cases = {
    "40,000 unclosed <tool_call> (440 KB)": "<tool_call>" * 40_000,
    "40,000 closed empty calls": "<tool_call>{}</tool_call>" * 40_000,
    "40,000 </tool_call>": "</tool_call>" * 40_000,
    "40,000 unclosed <think>": "<think>" * 40_000 + "hi",
    "16 real calls": CALL * 16,
}
for name, text in cases.items():
    print(f"{name:<40} {len(text) / 1000:>7.0f} KB  parse_turn {1000 * timed(parse_turn, text, TOOLS):8.2f} ms")
for n in (2_000, 4_000, 8_000):
    text = "<tool_call>" * n
    print(f"old regex reader, {n:>6,} unclosed tags ({len(text) / 1000:.0f} KB): {timed(old_reader, text):.2f} s; "
          f"parse_turn {1000 * timed(parse_turn, text, TOOLS):.2f} ms")
