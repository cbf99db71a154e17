"""find_word is the whole-word regular expression it replaced, on any text and value (hypothesis), and a few
cases a reader can check by eye."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from verifiers.words import find_word

ALPHABET = st.sampled_from(list("ab1_. -,é٣²") + ["3.5", "ab", "a.1"])  # word chars, '.', digits of other scripts
TEXT = st.lists(ALPHABET, max_size=14).map("".join)


def _regex(text: str, needle: str, decimal_guard: bool) -> int:
    tail = r"(?![\w]|\.\d)" if decimal_guard else r"(?![\w])"
    m = re.search(r"(?<![\w.])" + re.escape(needle) + tail, text)
    return m.start() if m else -1


@settings(max_examples=1500, deadline=None)
@given(TEXT, TEXT, st.booleans())
def test_find_word_is_the_regex_it_replaced(text: str, needle: str, decimal_guard: bool) -> None:
    assert find_word(text, needle, decimal_guard) == _regex(text, needle, decimal_guard)


def test_whole_words_only() -> None:
    assert find_word("refund 12.50 EUR", "12.50") == 7
    assert find_word("order 1234", "123") == -1          # inside a number
    assert find_word("v1.2 and 2", "2") == 9             # right after a '.': not a value of its own
    assert find_word("it was 3.5 degrees", "3", decimal_guard=True) == -1
    assert find_word("it was 3. Then", "3", decimal_guard=True) == 7
    assert find_word("Noah_Jensen", "Noah") == -1        # '_' is a word character
