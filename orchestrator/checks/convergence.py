"""Progress between retries: is the subtask converging, which attempt is best, when to stop.

A retry is worth its cost only while reflection is helping. `ProgressTracker` is fed one
`AttemptScore` per verified attempt and answers with a `Decision`: continue, roll back
to the best attempt's tree first, or stop, with a reason and one sentence that explains
it. The rules are `reflection.pattern.convergence`'s, the one implementation shared with
the Reflection pattern (documented there and in docs/RETRY_INTELLIGENCE.md): better and
worse by score then failing tests, the best attempt (ties: the latest), passed, plateau,
oscillation, regression (roll back), repeated signature, environment, and diminishing
returns when `improvement_threshold` is set. This module only translates: an attempt
into a `Step`, a `ConvergenceReason` into a `StopReason`.

Pure and deterministic: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from reflection.pattern.convergence import Action, ConvergenceReason, ConvergenceSettings, ConvergenceTracker, Step

if TYPE_CHECKING:
    from orchestrator.checks.verify import Verdict

_ENVIRONMENT_EXITS = (126, 127)  # POSIX shells: command not executable / not found


class StopReason(StrEnum):
    """Why retrying a subtask ended (or, for `regression`, why its tree was rolled back)."""

    PASSED = "passed"
    MAX_RETRIES = "max_retries"  # recorded by the loop when the attempts run out
    PLATEAU = "plateau"
    OSCILLATION = "oscillation"
    REGRESSION = "regression"
    BUDGET = "budget"  # recorded by the loop when a cost or time budget stops it
    ENVIRONMENT = "environment"  # the checks could not run: no retry can fix that
    DIMINISHING = "diminishing"  # a new best gained less than `improvement_threshold`


@dataclass(frozen=True)
class AttemptScore:
    """What the tracker needs to know about one verified attempt."""

    number: int  # the attempt's number; strictly increasing within one tracker
    score: float  # share of tests passing when counted, else 1.0 passed / 0.0 failed
    failing: frozenset[str] = frozenset()  # failing test ids; empty: none named
    signature: str | None = None  # the failure digest's errorSignature
    passed: bool = False  # verification passed (a score of 1.0 alone does not say so)
    environment: bool = False  # the check command could not run at all

    def __post_init__(self) -> None:
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score must be within 0..1, got {self.score}")

    @classmethod
    def from_verdict(cls, number: int, verdict: Verdict) -> AttemptScore:
        """The score of a verification verdict (see `Verdict.score`)."""
        digest = verdict.digest
        last = verdict.steps[-1] if verdict.steps else None
        cannot_run = last is not None and (not last.started or last.exit_code in _ENVIRONMENT_EXITS)
        return cls(
            number=number,
            score=verdict.score,
            failing=frozenset(digest.failing_tests) if digest else frozenset(),
            signature=digest.signature if digest else None,
            passed=verdict.passed,
            environment=not verdict.passed and cannot_run,
        )

    def as_step(self) -> Step:
        return Step(self.number, self.score, self.failing, self.signature, satisfied=self.passed,
                    environment=self.environment)


@dataclass(frozen=True)
class Decision:
    """What to do after an attempt, and why, in one sentence for logs and the next prompt."""

    action: Action
    reason: StopReason | None
    explanation: str
    repeated_signature: bool = False  # failed as the attempt before: the reflection missed
    rollback_to: int | None = None  # the best attempt, when this one is worse than it

    def as_event(self) -> dict[str, Any]:
        """camelCase fields for a run-log event."""
        return {
            "action": self.action,
            "reason": self.reason.value if self.reason else None,
            "explanation": self.explanation,
            "repeatedSignature": self.repeated_signature,
            "rollbackTo": self.rollback_to,
        }


_REASONS: dict[ConvergenceReason, StopReason] = {
    ConvergenceReason.QUALITY_MET: StopReason.PASSED,
    ConvergenceReason.MAX_ITERATIONS: StopReason.MAX_RETRIES,
    ConvergenceReason.PLATEAU: StopReason.PLATEAU,
    ConvergenceReason.OSCILLATION: StopReason.OSCILLATION,
    ConvergenceReason.REGRESSION: StopReason.REGRESSION,
    ConvergenceReason.TOKEN_BUDGET: StopReason.BUDGET,
    ConvergenceReason.ENVIRONMENT: StopReason.ENVIRONMENT,
    ConvergenceReason.DIMINISHING_RETURNS: StopReason.DIMINISHING,
    # Not produced here (the loop sets no stability threshold); an unchanged tree is a plateau.
    ConvergenceReason.SEMANTIC_STABILITY: StopReason.PLATEAU,
}


class ProgressTracker:
    """Judges each verified attempt of one subtask against the ones before it."""

    def __init__(
        self,
        *,
        plateau_window: int = 2,
        min_improvement: float = 1e-9,
        stop_on_plateau: bool = True,
        stop_on_oscillation: bool = True,
        rollback_regressions: bool = True,
        improvement_threshold: float = 0.0,
    ) -> None:
        self.settings = ConvergenceSettings(
            plateau_iterations=plateau_window,
            min_improvement=min_improvement,
            improvement_threshold=improvement_threshold,
            detect_oscillation=stop_on_oscillation,
            stop_on_plateau=stop_on_plateau,
            rollback_regressions=rollback_regressions,
            stability_threshold=None,  # an attempt's tree unchanged is a plateau, not this rule
        )
        self._tracker = ConvergenceTracker(self.settings)
        self._attempts: dict[int, AttemptScore] = {}  # number -> as recorded, for `history` and `best`

    @property
    def plateau_window(self) -> int:
        return self.settings.plateau_iterations

    @property
    def min_improvement(self) -> float:
        return self.settings.min_improvement

    @property
    def history(self) -> tuple[AttemptScore, ...]:
        return tuple(self._attempts[s.number] for s in self._tracker.history)

    @property
    def best(self) -> AttemptScore | None:
        """The best attempt so far; of equals, the latest."""
        best = self._tracker.best
        return self._attempts[best.number] if best else None

    def compare(self, new: AttemptScore, old: AttemptScore) -> int:
        """1 when `new` is better than `old`, -1 when worse, 0 when neither."""
        return self._tracker.compare(new.as_step(), old.as_step())

    def record(self, attempt: AttemptScore) -> Decision:
        """Add a verified attempt and decide what the loop does next."""
        d = self._tracker.record(attempt.as_step())
        self._attempts[attempt.number] = attempt
        reason = _REASONS[d.reason] if d.reason else None
        return Decision(d.action, reason, d.explanation, d.repeated_signature, d.rollback_to)
