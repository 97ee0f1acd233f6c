"""Progress between retries: is the subtask converging, which attempt is best, when to stop.

A retry is worth its cost only while reflection is helping. `ProgressTracker` is fed one
`AttemptScore` per verified attempt and answers with a `Decision`: continue, roll back
to the best attempt's tree first, or stop, with a reason and one sentence that explains
it. The rules (documented in docs/RETRY_INTELLIGENCE.md):

- **Better / worse.** Attempts compare by score first (share of tests passing); when the
  scores are equal within `min_improvement`, a strictly smaller set of failing tests is
  better and a strictly larger one worse. An empty failing set means "unknown" (the run
  crashed, or the runner names no tests) and never breaks a tie.
- **Best.** The best attempt so far; on a tie the latest, whose tree is the freshest.
- **Passed** stops at once.
- **Oscillation** (stop): the last three changes from one attempt to the next were all
  real and alternated (better, worse, better or worse, better, worse); or the attempt
  failed exactly as an earlier attempt did, but not as the one just before (A, B, A).
- **Plateau** (stop): each of the last `plateau_window` attempts was no better than the
  best attempt before it.
- **Regression** (roll back): the attempt is worse than the best so far; `rollback_to`
  names the best attempt, whose tree the loop restores before the next retry.
- **Repeated signature** (flag only): the attempt failed with the same errorSignature
  as the one before, so the next reflection must know the last one did not help.
- An attempt that beats every earlier one is never stopped, whatever the history.

Pure and deterministic: no I/O, no clock.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from orchestrator.checks.verify import Verdict

log = logging.getLogger("goldenloop.convergence")

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


Action = Literal["continue", "rollback", "stop"]


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


def _describe(a: AttemptScore) -> str:
    failing = f", {len(a.failing)} failing" if a.failing else ""
    return f"attempt {a.number} (score {a.score:.2f}{failing})"


def _span(attempts: Sequence[AttemptScore]) -> str:
    return f"attempts {attempts[0].number} to {attempts[-1].number}"


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
    ) -> None:
        if plateau_window < 1:
            raise ValueError("plateau_window must be at least 1")
        if min_improvement < 0:
            raise ValueError("min_improvement must not be negative")
        self.plateau_window = plateau_window
        self.min_improvement = min_improvement
        self.stop_on_plateau = stop_on_plateau
        self.stop_on_oscillation = stop_on_oscillation
        self.rollback_regressions = rollback_regressions
        self._history: list[AttemptScore] = []
        self._best: AttemptScore | None = None
        self._stale: list[bool] = []  # per attempt: no better than the best before it

    @property
    def history(self) -> tuple[AttemptScore, ...]:
        return tuple(self._history)

    @property
    def best(self) -> AttemptScore | None:
        """The best attempt so far; of equals, the latest."""
        return self._best

    def compare(self, new: AttemptScore, old: AttemptScore) -> int:
        """1 when `new` is better than `old`, -1 when worse, 0 when neither."""
        delta = new.score - old.score
        if delta > self.min_improvement:
            return 1
        if delta < -self.min_improvement:
            return -1
        if new.failing and old.failing and new.failing != old.failing:
            if new.failing < old.failing:
                return 1
            if new.failing > old.failing:
                return -1
        return 0

    def record(self, attempt: AttemptScore) -> Decision:
        """Add a verified attempt and decide what the loop does next."""
        if self._history and attempt.number <= self._history[-1].number:
            raise ValueError(
                f"attempt {attempt.number} recorded after attempt {self._history[-1].number}"
            )
        previous = self._history[-1] if self._history else None
        best_before = self._best
        trend = self.compare(attempt, best_before) if best_before else 1
        self._history.append(attempt)
        self._stale.append(trend <= 0)
        if trend >= 0:
            self._best = attempt
        decision = self._decide(attempt, previous, best_before, trend)
        log.debug("attempt %d: %s (%s)", attempt.number, decision.action, decision.explanation)
        return decision

    def _decide(
        self,
        attempt: AttemptScore,
        previous: AttemptScore | None,
        best_before: AttemptScore | None,
        trend: int,
    ) -> Decision:
        if attempt.passed:
            return Decision("stop", StopReason.PASSED, f"attempt {attempt.number} passed verification")
        repeated = bool(attempt.signature) and attempt.signature == (previous and previous.signature)
        rollback_to = best_before.number if best_before and trend < 0 else None
        stop = self._stop_reason(attempt, trend)
        if stop is not None:
            reason, why = stop
            return Decision("stop", reason, why, repeated, rollback_to)
        why = self._progress(attempt, previous, best_before, trend)
        if repeated and previous is not None:
            why += f"; it failed exactly as attempt {previous.number} did, so that reflection did not help"
        if rollback_to is not None and self.rollback_regressions:
            why += f"; the next retry starts from attempt {rollback_to}'s changes"
            return Decision("rollback", StopReason.REGRESSION, why, repeated, rollback_to)
        return Decision("continue", None, why, repeated, rollback_to)

    def _stop_reason(self, attempt: AttemptScore, trend: int) -> tuple[StopReason, str] | None:
        """A reason to stop retrying, or None. A new best attempt is never stopped."""
        if attempt.environment:
            return StopReason.ENVIRONMENT, (
                f"attempt {attempt.number}'s checks could not run (command missing or not "
                "executable); fix the environment, retrying the code cannot help"
            )
        if trend > 0:
            return None
        if self.stop_on_oscillation:
            why = self._alternating() or self._circling()
            if why:
                return StopReason.OSCILLATION, why
        if self.stop_on_plateau and self._plateaued():
            window = self._history[-self.plateau_window :]
            which = _span(window) if len(window) > 1 else f"attempt {window[0].number}"
            best = self._best
            assert best is not None  # a stale attempt always has a best before it
            return StopReason.PLATEAU, (
                f"{which} did not improve on the best score so far ({best.score:.2f}); "
                "more retries are unlikely to help"
            )
        return None

    def _alternating(self) -> str | None:
        """The last three changes between attempts were real and alternated in direction."""
        if len(self._history) < 4:
            return None
        last = self._history[-4:]
        signs = [self.compare(b, a) for a, b in pairwise(last)]
        if 0 in signs or signs[0] == signs[1] or signs[1] == signs[2]:
            return None
        scores = " → ".join(f"{a.score:.2f}" for a in last)
        return f"scores went up and down over {_span(last)} ({scores}); retries are not converging"

    def _circling(self) -> str | None:
        """The attempt failed as an earlier one did, but not as the one just before (A, B, A)."""
        if len(self._history) < 3:
            return None
        *earlier, previous, latest = self._history
        key = self._failure_key(latest)
        if key is None or key == self._failure_key(previous):
            return None
        match = next((a for a in reversed(earlier) if self._failure_key(a) == key), None)
        if match is None:
            return None
        return (
            f"attempt {latest.number} failed exactly as attempt {match.number} did, after "
            f"attempt {previous.number} failed differently; the retries are going in circles"
        )

    @staticmethod
    def _failure_key(a: AttemptScore) -> str | frozenset[str] | None:
        """What identifies a failure: its signature, else its failing tests, else nothing."""
        if a.signature:
            return a.signature
        return a.failing or None

    def _plateaued(self) -> bool:
        window = self._stale[-self.plateau_window :]
        return len(window) == self.plateau_window and all(window)

    def _progress(
        self,
        attempt: AttemptScore,
        previous: AttemptScore | None,
        best_before: AttemptScore | None,
        trend: int,
    ) -> str:
        """One clause on how this attempt compares, for a decision that does not stop."""
        if best_before is None or previous is None:
            return f"{_describe(attempt)} failed"
        if trend > 0:
            return f"{_describe(attempt)} improved on {_describe(best_before)}"
        if trend < 0:
            return f"{_describe(attempt)} regressed from {_describe(best_before)}"
        return f"{_describe(attempt)} did not improve on {_describe(best_before)}"
