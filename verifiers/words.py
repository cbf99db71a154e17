"""Finding a value in text as a whole word, without compiling a regular expression per value.

``find_word(text, needle)`` is ``re.search(r"(?<![\\w.])" + re.escape(needle) + r"(?![\\w])", text)``'s start (or
-1), and ``find_word(text, needle, decimal_guard=True)`` adds ``(?!\\.\\d)`` after the needle (so "3" is not found in
"3.5"). Synthesis and the fidelity check look up thousands of distinct values per shard; each new pattern missed
``re``'s cache and was compiled, about a tenth of a shard's time.
``\\w`` in Python's ``re`` on str is exactly ``str.isalnum()`` or ``_``, which is what is tested here.
"""

from __future__ import annotations


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def find_word(text: str, needle: str, decimal_guard: bool = False) -> int:
    """The start of the first occurrence of ``needle`` in ``text`` that is not inside a word (nor right after a
    '.'), or -1; an empty needle is found at the first position that is not right after a word character."""
    n, size = len(needle), len(text)
    start = text.find(needle)
    while start != -1:
        end = start + n
        before_ok = start == 0 or not (_word(text[start - 1]) or text[start - 1] == ".")
        after_ok = end >= size or not _word(text[end])
        if after_ok and decimal_guard and end + 1 < size and text[end] == "." and text[end + 1].isdecimal():
            after_ok = False
        if before_ok and after_ok:
            return start
        start = text.find(needle, start + 1)
    return -1
