"""The failing tests the user accepts, and nothing else.

goldenloop never decides on its own that a failing test does not matter: a test that
fails after an attempt keeps the task open unless the user listed it in
`checks.knownFailures` of project.json (by hand, or with `goldenloop checks waive`).
An entry is a test id as the runner prints it (`tests/test_x.py::test_y`), a file or
class (`tests/test_legacy.py` waives every test in it), or a glob over ids
(`tests/slow/*`).

A waiver covers a *known* failure: when the run has a baseline (the checks on the
untouched tree), a waived test that passed there and fails after the attempt was broken
by the attempt, and counts against it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from orchestrator.config import KnownFailure

_PARAMS = re.compile(r"\[.*\]$")  # pytest's parametrisation: test_y[1-2]


@dataclass(frozen=True)
class Waivers:
    entries: tuple[KnownFailure, ...] = ()

    @classmethod
    def of(cls, entries: Iterable[KnownFailure]) -> Waivers:
        return cls(tuple(entries))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def entry_for(self, test_id: str) -> KnownFailure | None:
        """The entry that waives `test_id`, or None."""
        return next((e for e in self.entries if matches(e.test, test_id)), None)

    def waived(self, tests: Iterable[str]) -> list[str]:
        return [t for t in tests if self.entry_for(t) is not None]


def matches(pattern: str, test_id: str) -> bool:
    """An id waived by `pattern`: the id itself, its file or class, or a glob over it."""
    if pattern == test_id or test_id.startswith(pattern + "::"):
        return True
    if _PARAMS.sub("", test_id) == pattern:  # test_y waives test_y[1] and test_y[2]
        return True
    # A pattern copied from a parametrised id has [..], which fnmatch reads as a set.
    return "[" not in pattern and fnmatchcase(test_id, pattern)


def waive_command(tests: Sequence[str]) -> str:
    """The command that waives these tests, ready to paste."""
    return "goldenloop checks waive " + " ".join(_quoted(t) for t in tests) + ' --reason "why"'


def _quoted(test_id: str) -> str:
    return test_id if re.fullmatch(r"[\w./:@+=,-]+", test_id) else "'" + test_id.replace("'", "'\\''") + "'"
