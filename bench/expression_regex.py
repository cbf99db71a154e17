"""How long derivability's calculator-expression pattern takes on the input that made the old one backtrack for ever.

    PYTHONPATH=$PWD .venv/bin/python bench/expression_regex.py [--repeat 20]

The input is issue 38's: '1', runs of ten spaces and '+ 1' terms, ending in 'x' (so no match), cut or padded to 32,
64, 128 and 10,000 characters. The old pattern took 0.65 s at 64 characters and 11 times more per extra term; the
figures printed here are the best of ``--repeat`` runs of ``EXPRESSION.fullmatch`` (a value that long never reaches
the pattern inside ``derive``: ``MAX_RULE_CHARS`` stops it first), and of ``Sources.source`` on the same text.
"""

from __future__ import annotations

import argparse
import time

from verifiers.derivability import EXPRESSION, MAX_RULE_CHARS, Evidence, Sources

SIZES = (32, 64, 128, 10_000)


def hostile(length: int) -> str:
    """'1' + ten spaces + ('+ 1' + ten spaces) * k + 'x', cut or padded with spaces to ``length`` characters."""
    body = "1" + " " * 10 + ("+ 1" + " " * 10) * (length // 13 + 1)
    return body[:length - 1] + "x"


def best_of(repeat: int, fn: object, text: str) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn(text)  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    known = Sources(Evidence("one bag", "Bags cost 50 EUR each.", "2025-05-20T12:00:00"))
    print(f"{'chars':>7}  {'EXPRESSION.fullmatch':>21}  {'Sources.source':>15}   (cap {MAX_RULE_CHARS} chars)")
    for size in SIZES:
        text = hostile(size)
        assert len(text) == size
        regex = best_of(args.repeat, EXPRESSION.fullmatch, text)
        source = best_of(args.repeat, known.source, text)
        print(f"{size:>7}  {regex * 1e6:>18.1f} us  {source * 1e6:>12.1f} us")


if __name__ == "__main__":
    main()
