"""One attempt: what its steps found so far, and the few ways a step ends it early.

The steps run in the order of the golden loop's diagram (loop/steps.py):

    prepare -> execute -> guard -> judge -> review -> (the subtask run) commit and record

A step that ends the attempt before the commit raises one of the outcomes below, and the
subtask run (loop/subtask.py) does what it says. Everything an attempt learns that a
later attempt needs is kept on the subtask's state (loop/state.py), not here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.checks.convergence import StopReason
from orchestrator.executors import ExecutionRequest
from reflection.meter import Meter

if TYPE_CHECKING:  # the review's modules load only in a project that reviews
    from orchestrator.checks.review import Review


@dataclass
class Attempt:
    number: int  # this run's attempts: "attempt k/N"
    request: ExecutionRequest  # what the executor is asked
    spent: Meter  # the task's meter as the attempt started: its cost is what was added since
    applying: list[str]  # what it was asked to improve (a reflection's suggestion, a review's)
    started: float = 0.0  # time.monotonic() as the executor was called
    # The tree it left, as a binary patch against the subtask's base, once taken. An attempt
    # the executor never answered keeps the one before it: its tree is that one's.
    patch: str | None = None
    same_as: int | None = None  # the failed attempt whose tree it gave back, if any
    diff: str = ""  # its diff, when a step needed it
    agent_run: dict[str, Any] = field(default_factory=dict)  # a coding agent's account of it
    review: Review | None = None  # once a passing attempt was reviewed
    notes: list[str] = field(default_factory=list)  # the executor's corrections, told to the next attempt


class AttemptOver(Exception):
    """The attempt ended before its commit; the subclass says what follows."""


class Retry(AttemptOver):
    """It failed and a retry follows: its record and the next prompt's words are written."""


class Escalate(AttemptOver):
    """No retry can help: the subtask stops for a human (`why` is the stop reason)."""

    def __init__(self, why: StopReason) -> None:
        super().__init__(why.value)
        self.why = why


PutBackEnd = Literal["budget", "model_unavailable", "usage_limit"]


class PutBack(AttemptOver):
    """The subtask stops without blame (budget, model unavailable, a usage limit), to run
    again later; `resume_at` (epoch seconds): when a usage limit resets, if it was said."""

    def __init__(self, end: PutBackEnd, reason: str, resume_at: float | None = None) -> None:
        super().__init__(reason)
        self.end, self.reason, self.resume_at = end, reason, resume_at


class KeepBest(AttemptOver):
    """A revision did no better than a version that passed: that version is committed."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why
