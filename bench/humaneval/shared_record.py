"""One retry-choice record across a mode's problems, as one project's backlog keeps one.

Each problem runs in its own repository, so on its own the record of which retry choice
solved each failure class (orchestrator/loop/retry_choice.py, `retry.strategy:
"adaptive"`) would start empty for every problem and never overrule its rule. The
harness seeds each problem's repository with the mode's record and adds back what that
problem's run counted. A problem kept from a killed run adds nothing: its seed is gone.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from orchestrator.layout import Layout
from orchestrator.loop.retry_choice import RetryChoices
from reflection.fileio import atomic_write

Counts = dict[str, dict[str, dict[str, int]]]


class SharedRecord:
    """The mode's record at `path`: the sum of what its problems' runs counted."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def seed(self) -> str:
        """The record a problem's repository starts with (empty before the first)."""
        return orjson.dumps({"classes": self.counts()}).decode() + "\n"

    def counts(self) -> Counts:
        return RetryChoices(self.path).load()

    def add_back(self, repo: Path, seeded: str) -> None:
        """Add what the run in `repo` counted beyond the record it was seeded with."""
        before = orjson.loads(seeded).get("classes", {})
        after = RetryChoices(Layout(repo).retry_choices).load()
        total = self.counts()
        for klass, choices in after.items():
            for choice, counts in choices.items():
                was = before.get(klass, {}).get(choice, {})
                into = total.setdefault(klass, {}).setdefault(choice, {"tried": 0, "passed": 0})
                for key in ("tried", "passed"):
                    into[key] = into.get(key, 0) + max(counts.get(key, 0) - was.get(key, 0), 0)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, orjson.dumps({"classes": total}, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))


def memory_name() -> str:
    """The record's name in `.openagents/memory/`, where the loop reads it."""
    return Layout(Path(".")).retry_choices.name
