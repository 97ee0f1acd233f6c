"""The secret values a run knows, masked wherever it writes, as CI systems mask theirs.

A rule finds a secret by its form or its place; a value is known whatever its form. A run
learns the values in its reach as it starts (`reflection.secrets_in_reach`: variables with
secret names, the repository's git-ignored config files) and every value a redaction rule
finds while it runs, and `redact` replaces each occurrence of any of them, in any text,
by `[REDACTED:<its name>]`: a key copied from `.env` into a test's output reads
`[REDACTED:ACME_API_KEY]` in the transcript, the run log and the escalation packet alike.

The values live in memory only, for one run (`known_secrets`, a context variable the
session sets), never in a file.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["MIN_LENGTH", "SecretValues", "known_secrets", "placeholder", "secrets_known", "trie_pattern"]

MIN_LENGTH = 8  # a shorter value is as likely a word or a number of any text
MAX_LENGTH = 16384  # a whole file is not one secret


def placeholder(kind: str) -> str:
    """The text that stands in for a secret of this kind (or of this name)."""
    return f"[REDACTED:{kind}]"


class SecretValues:
    """Values and the names they are known by; one compiled pattern finds them all."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        self._lock = threading.Lock()
        self._pattern: re.Pattern[str] | None = None

    def __len__(self) -> int:
        return len(self._names)

    def learn(self, value: str, name: str) -> bool:
        """Know `value` as the secret called `name` (the first name it was learnt by stays)."""
        value = value.strip()
        if not MIN_LENGTH <= len(value) <= MAX_LENGTH or value in self._names:
            return False
        with self._lock:
            self._names.setdefault(value, re.sub(r"\W", "_", name) or "secret")
            self._pattern = None
        return True

    def learn_found(self, found: Mapping[str, str]) -> None:
        """The values redaction rules found in one text, known from now on."""
        for value, kind in found.items():
            if value not in self._names:
                self.learn(value, kind)

    def name_of(self, value: str) -> str | None:
        return self._names.get(value)

    def found_in(self, text: str) -> dict[str, int]:
        """How often each known value occurs in `text`."""
        counts: dict[str, int] = {}
        pattern = self._compiled()
        if pattern is not None:
            for match in pattern.finditer(text):
                counts[match[0]] = counts.get(match[0], 0) + 1
        return counts

    def mask(self, text: str) -> str:
        pattern = self._compiled()
        if pattern is None:
            return text
        return pattern.sub(lambda match: placeholder(self._names[match[0]]), text)

    def _compiled(self) -> re.Pattern[str] | None:
        pattern = self._pattern
        if pattern is None and self._names:
            with self._lock:
                # A trie finds the longest at each position: one value may hold another.
                try:
                    pattern = re.compile(trie_pattern(list(self._names)))
                except RecursionError:  # values each the start of the next: the longest first instead
                    pattern = re.compile("|".join(map(re.escape, sorted(self._names, key=len, reverse=True))))
                self._pattern = pattern
        return pattern


def trie_pattern(words: list[str]) -> str:
    """A regex matching any of `words`, the longest at a position, as a trie: `re` tries
    one branch per next character instead of every word. The prefix all share comes
    first, whole: a level per branching, not per character (a found PEM block is long)."""
    prefix = os.path.commonprefix(words)
    branches: dict[str, list[str]] = {}
    for word in words:
        branches.setdefault(word[len(prefix) : len(prefix) + 1], []).append(word[len(prefix) + 1 :])
    ends = "" in branches
    alternatives = [re.escape(first) + trie_pattern(rest) for first, rest in sorted(branches.items()) if first]
    if not alternatives:
        return re.escape(prefix)
    body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
    return re.escape(prefix) + (f"(?:{body})?" if ends else body)


known_secrets: ContextVar[SecretValues | None] = ContextVar("known_secrets", default=None)


@contextmanager
def secrets_known(values: SecretValues) -> Iterator[SecretValues]:
    """`values` masked by every `redact` in this context (and the tasks and threads it starts)."""
    token = known_secrets.set(values)
    try:
        yield values
    finally:
        try:
            known_secrets.reset(token)
        except ValueError:  # closed in another context than it was opened in
            known_secrets.set(None)
