"""The code corpus of `pattern_bench.py`'s stability figures: functions of 8 to 40 lines,
each with one-token fixes (a revision that changed the answer) and repeats (the same
tokens laid out otherwise, which a revision that stopped changing anything gives)."""

from __future__ import annotations

PALINDROME = '''def longest_palindrome(s: str) -> str:
    best = ""
    for i in range(len(s)):
        for j in range(i + 1, len(s) + 1):
            if s[i:j] == s[i:j][::-1] and j - i > len(best):
                best = s[i:j]
    return best
'''

DEBOUNCE = '''function debounce(fn, waitMs) {
  let timer = null;
  return function (...args) {
    if (timer !== null) {
      clearTimeout(timer);
    }
    timer = setTimeout(() => {
      timer = null;
      fn.apply(this, args);
    }, waitMs);
  };
}

function throttle(fn, everyMs) {
  let last = 0;
  return function (...args) {
    const now = Date.now();
    if (now - last >= everyMs) {
      last = now;
      fn.apply(this, args);
    }
  };
}
'''

CACHE = '''import time
from collections import OrderedDict


class TtlCache:
    """A least-recently-used cache whose entries expire."""

    def __init__(self, capacity: int, ttl_s: float) -> None:
        self.capacity = capacity
        self.ttl_s = ttl_s
        self.entries: OrderedDict[str, tuple[float, object]] = OrderedDict()

    def get(self, key: str) -> object | None:
        found = self.entries.get(key)
        if found is None:
            return None
        stamp, value = found
        if time.monotonic() - stamp > self.ttl_s:
            del self.entries[key]
            return None
        self.entries.move_to_end(key)
        return value

    def put(self, key: str, value: object) -> None:
        self.entries[key] = (time.monotonic(), value)
        self.entries.move_to_end(key)
        while len(self.entries) > self.capacity:
            self.entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self.entries)

    def clear(self) -> None:
        self.entries.clear()

    def keys(self) -> list[str]:
        return list(self.entries)
'''

# (name, original, [one-token fixes])
FIXES: list[tuple[str, str, list[str]]] = [
    ("palindrome, 7 lines", PALINDROME, [
        PALINDROME.replace("> len(best)", ">= len(best)"),
        PALINDROME.replace("i + 1", "i + 2"),
        PALINDROME.replace("return best", "return s"),
    ]),
    ("debounce, 23 lines", DEBOUNCE, [
        DEBOUNCE.replace("now - last >= everyMs", "now - last > everyMs"),
        DEBOUNCE.replace("let last = 0;", "let last = 1;"),
        DEBOUNCE.replace("timer !== null", "timer != null"),
    ]),
    ("TTL cache, 40 lines", CACHE, [
        CACHE.replace("> self.ttl_s", ">= self.ttl_s"),
        CACHE.replace("popitem(last=False)", "popitem(last=True)"),
        CACHE.replace("> self.capacity", ">= self.capacity"),
    ]),
]


def repeats(code: str) -> list[str]:
    """The same tokens again: indented by two, blank lines dropped, trailing spaces added."""
    return [
        code.replace("    ", "  "),
        "\n".join(line for line in code.splitlines() if line.strip()) + "\n",
        "\n".join(f"{line}  " for line in code.splitlines()),
    ]
