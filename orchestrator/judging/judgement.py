"""A judged attempt: its outcome, the one line people read, and what a retry is told."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from orchestrator.judging.verdict import Parts

JudgedOutcome = Literal[
    "passed", "flaky", "waived", "failed", "integrity", "environment", "timeout", "no_change"
]
PASSING_OUTCOMES = ("passed", "flaky", "waived")


@dataclass(frozen=True)
class Judgement:
    outcome: JudgedOutcome
    summary: str  # one line for people and the run log
    failure: str = ""  # what the retry prompt says went wrong
    escalate: bool = False  # no retry can help
    # What a reflection is told about a failed attempt, aimed at what it broke:
    failing_tests: tuple[str, ...] = ()  # the failures the attempt caused first, others' last
    first_error: str | None = None  # "path:line: Kind: message" of the first failure it caused
    waived: tuple[str, ...] = ()  # failing tests the task's rule left out by the user's waiver
    # Set when the only thing wrong is tests the task is about that still fail.
    only_before: tuple[str, ...] = ()
    # False when the attempt was refused for what it did besides its code (the config, git's
    # history): the same code sent again without that is no repeat of a failure.
    tree_judged: bool = True
    parts: Parts | None = None  # pass-to-pass, fail-to-pass and the tests named
    tree: str | None = None  # the tree judged: what is committed when it passed

    @property
    def passed(self) -> bool:
        return self.outcome in PASSING_OUTCOMES
