"""Convergence: is iterating still helping, which step is best, when to stop.

One implementation for every loop that retries toward a score: the golden loop's
attempts (`orchestrator.checks.convergence` adapts it) and the Reflection pattern's
versions. `ConvergenceTracker` is fed one `Step` per scored output and answers with a
`Decision`: continue, roll back to the best step first, or stop, with a reason and one
sentence that explains it. The rules:

- **Better / worse.** Steps compare by score first; when the scores are equal within
  `min_improvement`, a strictly smaller set of failing items is better and a strictly
  larger one worse. An empty failing set means "unknown" and never breaks a tie.
- **Best.** The best step so far; on a tie the latest, whose state is the freshest.
- **Quality met** (`satisfied`) stops at once.
- **Environment** stops at once: the step could not even be checked, so no retry helps.
- **Token budget** stops once the tokens of all steps reach `token_budget`.
- **Diminishing returns** (stop): a new best gained less than `improvement_threshold`
  (0.05 by default, the seed's; 0 turns it off) of score over the best before it. The small new best is kept as best. A gain told
  only by fewer failing items has no size, so it is never diminishing.
- **Oscillation** (stop): the last three changes from one step to the next were all
  real and alternated (better, worse, better or worse, better, worse); or the step
  failed exactly as an earlier step did, but not as the one just before (A, B, A).
- **Semantic stability** (stop): the step's output is, within `stability_threshold`
  (0.9 by default), the same answer as the one before it: revising no longer changes
  anything. The caller may measure the likeness itself (`Step.similarity`, from an
  embedding); otherwise it is the lexical comparison, which tells a reworded answer
  from a new one (reflection/pattern/stability.py).
- **Plateau** (stop): each of the last `plateau_iterations` steps was no better than
  the best step before it.
- **Regression** (roll back): the step is worse than the best so far; `rollback_to`
  names the best step, whose state the caller restores before the next try.
- **Repeated signature** (flag only): the step failed with the same signature as the
  one before, so the next reflection must know the last one did not help.
- A step that beats every earlier one is never stopped by oscillation, stability or
  plateau; diminishing returns is the one convergence rule that stops a new best (the
  limits, quality met, environment and token budget, stop whatever the score).

Pure and deterministic: no I/O, no clock.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import pairwise
from typing import Literal

from reflection.pattern.stability import lexical_similarity

log = logging.getLogger("goldenloop.convergence")


class ConvergenceReason(StrEnum):
    """Why iterating ended (or, for `regression`, why the state was rolled back)."""

    QUALITY_MET = "quality_met"
    MAX_ITERATIONS = "max_iterations"  # recorded by the caller when the steps run out
    PLATEAU = "plateau"
    OSCILLATION = "oscillation"
    DIMINISHING_RETURNS = "diminishing"
    USER_ACCEPTED = "user_accepted"  # recorded by the caller: a callback accepted the output
    TOKEN_BUDGET = "token_budget"
    SEMANTIC_STABILITY = "stable"
    REGRESSION = "regression"  # the roll-back decision, not a stop
    ENVIRONMENT = "environment"  # the step could not be checked at all
    USER_STOPPED = "user_stopped"  # recorded by the caller: a callback said stop


@dataclass(frozen=True)
class Step:
    """What the tracker needs to know about one scored output."""

    number: int  # strictly increasing within one tracker
    score: float  # 0..1
    failing: frozenset[str] = frozenset()  # failing items (tests, criteria); empty: none named
    signature: str | None = None  # what identifies the failure, e.g. an error signature
    satisfied: bool = False  # the quality bar was met (a score of 1.0 alone does not say so)
    environment: bool = False  # the output could not be checked at all
    output: str | None = None  # the output's text, for semantic stability; None: not compared
    tokens: int | None = None  # tokens this step spent; None: unknown
    # How alike the output is to the step before's, when the caller measured it (an
    # embedding, reflection/pattern/stability.py); None: compared here with `similarity`.
    similarity: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score must be within 0..1, got {self.score}")


@dataclass(frozen=True)
class ConvergenceSettings:
    """When a tracker stops; see the module's rules."""

    plateau_iterations: int = 2
    min_improvement: float = 1e-9  # a smaller score change is no change
    improvement_threshold: float = 0.05  # a new best gaining less stops (diminishing); 0: off
    detect_oscillation: bool = True
    stop_on_plateau: bool = True
    rollback_regressions: bool = True
    stability_threshold: float | None = 0.9  # output similarity 0..1 that stops; None: off
    token_budget: int | None = None  # total tokens that stop; None: no budget

    def __post_init__(self) -> None:
        if self.plateau_iterations < 1:
            raise ValueError("plateau_iterations must be at least 1")
        if self.min_improvement < 0:
            raise ValueError("min_improvement must not be negative")
        if self.improvement_threshold < 0:
            raise ValueError("improvement_threshold must not be negative")
        if self.stability_threshold is not None and not 0.0 < self.stability_threshold <= 1.0:
            raise ValueError("stability_threshold must be within (0, 1]")
        if self.token_budget is not None and self.token_budget < 1:
            raise ValueError("token_budget must be at least 1")


Action = Literal["continue", "rollback", "stop"]


@dataclass(frozen=True)
class Decision:
    """What to do after a step, and why, in one sentence for logs and the next prompt."""

    action: Action
    reason: ConvergenceReason | None
    explanation: str
    repeated_signature: bool = False  # failed as the step before: the reflection missed
    rollback_to: int | None = None  # the best step, when this one is worse than it


@dataclass(frozen=True)
class Wording:
    """The words of the explanations: the golden loop's by default."""

    noun: str = "attempt"
    satisfied: str = "passed verification"  # after "attempt 3"
    first: str = "failed"  # the first step, when it did not meet the bar


def similarity(a: str, b: str) -> float:
    """How alike two outputs are, 0..1, without a model: the lexical comparison of
    reflection/pattern/stability.py (a paraphrase of prose is alike, a new answer is not)."""
    return lexical_similarity(a, b)


@dataclass
class ConvergenceTracker:
    """Judges each step against the ones before it."""

    settings: ConvergenceSettings = field(default_factory=ConvergenceSettings)
    wording: Wording = field(default_factory=Wording)
    _history: list[Step] = field(default_factory=list, init=False)
    _best: Step | None = field(default=None, init=False)
    _stale: list[bool] = field(default_factory=list, init=False)  # per step: no better than the best before

    @property
    def history(self) -> tuple[Step, ...]:
        return tuple(self._history)

    @property
    def best(self) -> Step | None:
        """The best step so far; of equals, the latest."""
        return self._best

    @property
    def tokens_spent(self) -> int:
        return sum(s.tokens or 0 for s in self._history)

    def compare(self, new: Step, old: Step) -> int:
        """1 when `new` is better than `old`, -1 when worse, 0 when neither."""
        delta = new.score - old.score
        margin = self.settings.min_improvement
        if delta > margin:
            return 1
        if delta < -margin:
            return -1
        if new.failing and old.failing and new.failing != old.failing:
            if new.failing < old.failing:
                return 1
            if new.failing > old.failing:
                return -1
        return 0

    def record(self, step: Step) -> Decision:
        """Add a scored step and decide what the caller does next."""
        noun = self.wording.noun
        if self._history and step.number <= self._history[-1].number:
            raise ValueError(f"{noun} {step.number} recorded after {noun} {self._history[-1].number}")
        previous = self._history[-1] if self._history else None
        best_before = self._best
        trend = self.compare(step, best_before) if best_before else 1
        self._history.append(step)
        self._stale.append(trend <= 0)
        if trend >= 0:
            self._best = step
        decision = self._decide(step, previous, best_before, trend)
        log.debug("%s %d: %s (%s)", noun, step.number, decision.action, decision.explanation)
        return decision

    def _decide(self, step: Step, previous: Step | None, best_before: Step | None, trend: int) -> Decision:
        if step.satisfied:
            return Decision("stop", ConvergenceReason.QUALITY_MET, f"{self._name(step)} {self.wording.satisfied}")
        repeated = bool(step.signature) and step.signature == (previous and previous.signature)
        rollback_to = best_before.number if best_before and trend < 0 else None
        stop = self._stop_reason(step, previous, best_before, trend)
        if stop is not None:
            reason, why = stop
            return Decision("stop", reason, why, repeated, rollback_to)
        why = self._progress(step, previous, best_before, trend)
        if repeated and previous is not None:
            why += f"; it failed exactly as {self._name(previous)} did, so that reflection did not help"
        if rollback_to is not None and self.settings.rollback_regressions:
            why += f"; the next retry starts from {self._name_of(rollback_to)}'s changes"
            return Decision("rollback", ConvergenceReason.REGRESSION, why, repeated, rollback_to)
        return Decision("continue", None, why, repeated, rollback_to)

    def _stop_reason(
        self, step: Step, previous: Step | None, best_before: Step | None, trend: int
    ) -> tuple[ConvergenceReason, str] | None:
        """A reason to stop, or None. Only the limits and diminishing returns stop a new best."""
        limit = self._limit(step)
        if limit is not None:
            return limit
        if trend > 0:
            return self._diminishing(step, best_before)
        if self.settings.detect_oscillation:
            why = self._alternating() or self._circling()
            if why:
                return ConvergenceReason.OSCILLATION, why
        why = self._stable(step, previous)
        if why:
            return ConvergenceReason.SEMANTIC_STABILITY, why
        if self.settings.stop_on_plateau and self._plateaued():
            return ConvergenceReason.PLATEAU, self._plateau_sentence()
        return None

    def _limit(self, step: Step) -> tuple[ConvergenceReason, str] | None:
        """Environment and token budget: they stop whatever the score."""
        if step.environment:
            return ConvergenceReason.ENVIRONMENT, (
                f"{self._name(step)}'s checks could not run (command missing or not "
                "executable); fix the environment, retrying the code cannot help"
            )
        budget = self.settings.token_budget
        if budget is not None and self.tokens_spent >= budget:
            return ConvergenceReason.TOKEN_BUDGET, (
                f"{self.tokens_spent} tokens spent by {self._name(step)} reach the budget of {budget}"
            )
        return None

    def _diminishing(self, step: Step, best_before: Step | None) -> tuple[ConvergenceReason, str] | None:
        """A new best whose score gain is real but smaller than `improvement_threshold`."""
        threshold = self.settings.improvement_threshold
        if best_before is None or threshold <= 0:
            return None
        gain = step.score - best_before.score
        if gain <= self.settings.min_improvement or gain >= threshold:
            return None
        return ConvergenceReason.DIMINISHING_RETURNS, (
            f"{_describe(step, self.wording.noun)} improved on {_describe(best_before, self.wording.noun)} "
            f"by only {gain:.2f}, less than {threshold:.2f}; more retries are unlikely to be worth it"
        )

    def _alternating(self) -> str | None:
        """The last three changes between steps were real and alternated in direction."""
        if len(self._history) < 4:
            return None
        last = self._history[-4:]
        signs = [self.compare(b, a) for a, b in pairwise(last)]
        if 0 in signs or signs[0] == signs[1] or signs[1] == signs[2]:
            return None
        scores = " → ".join(f"{a.score:.2f}" for a in last)
        return f"scores went up and down over {self._span(last)} ({scores}); retries are not converging"

    def _circling(self) -> str | None:
        """The step failed as an earlier one did, but not as the one just before (A, B, A)."""
        if len(self._history) < 3:
            return None
        *earlier, previous, latest = self._history
        key = _failure_key(latest)
        if key is None or key == _failure_key(previous):
            return None
        match = next((a for a in reversed(earlier) if _failure_key(a) == key), None)
        if match is None:
            return None
        return (
            f"{self._name(latest)} failed exactly as {self._name(match)} did, after "
            f"{self._name(previous)} failed differently; the retries are going in circles"
        )

    def _stable(self, step: Step, previous: Step | None) -> str | None:
        """The output is (nearly) the one before it: revising has stopped changing it."""
        threshold = self.settings.stability_threshold
        if threshold is None or previous is None:
            return None
        if step.similarity is not None:
            ratio = step.similarity
        elif step.output is None or previous.output is None:
            return None
        else:
            ratio = similarity(step.output, previous.output)
        if ratio < threshold:
            return None
        return (
            f"{self._name(step)}'s output is {ratio:.0%} the same as {self._name(previous)}'s; "
            "revising no longer changes it"
        )

    def _plateaued(self) -> bool:
        window = self._stale[-self.settings.plateau_iterations :]
        return len(window) == self.settings.plateau_iterations and all(window)

    def _plateau_sentence(self) -> str:
        window = self._history[-self.settings.plateau_iterations :]
        which = self._span(window) if len(window) > 1 else self._name(window[0])
        best = self._best
        assert best is not None  # a stale step always has a best before it
        return (
            f"{which} did not improve on the best score so far ({best.score:.2f}); "
            "more retries are unlikely to help"
        )

    def _progress(self, step: Step, previous: Step | None, best_before: Step | None, trend: int) -> str:
        """One clause on how this step compares, for a decision that does not stop."""
        noun = self.wording.noun
        if best_before is None or previous is None:
            return f"{_describe(step, noun)} {self.wording.first}"
        if trend > 0:
            return f"{_describe(step, noun)} improved on {_describe(best_before, noun)}"
        if trend < 0:
            return f"{_describe(step, noun)} regressed from {_describe(best_before, noun)}"
        return f"{_describe(step, noun)} did not improve on {_describe(best_before, noun)}"

    def _name(self, step: Step) -> str:
        return self._name_of(step.number)

    def _name_of(self, number: int) -> str:
        return f"{self.wording.noun} {number}"

    def _span(self, steps: Sequence[Step]) -> str:
        return f"{self.wording.noun}s {steps[0].number} to {steps[-1].number}"


def _describe(step: Step, noun: str) -> str:
    failing = f", {len(step.failing)} failing" if step.failing else ""
    return f"{noun} {step.number} (score {step.score:.2f}{failing})"


def _failure_key(step: Step) -> str | frozenset[str] | None:
    """What identifies a failure: its signature, else its failing items, else nothing."""
    if step.signature:
        return step.signature
    return step.failing or None
