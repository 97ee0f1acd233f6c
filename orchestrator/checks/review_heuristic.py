"""The review without a model: the seed's four criteria scored from the diff's own signs.

It is deliberately modest (confidence 0.3): it cannot read intent, only what a reviewer
notices at a glance. A passing attempt gets full marks for completion; tests added or
changed count for coverage; a bare or silent `except`, a debugging `print`, a TODO, very
long lines count against quality and error handling. A criterion it has no sign for
scores a neutral 0.7 and says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from reflection.pattern.criteria import QualityCriterion
from reflection.pattern.evaluation import CriterionScore

NEUTRAL = 0.7
LONG_LINE = 120

_SILENT_EXCEPT = re.compile(r"^\s*except(\s+(Exception|BaseException))?\s*(as \w+)?\s*:\s*(pass)?\s*$")
_DEBUG_PRINT = re.compile(r"^\s*(print\(|console\.log\(|breakpoint\(\)|import pdb)")
_TODO = re.compile(r"\b(TODO|FIXME|XXX|HACK)\b")
_RAISES = re.compile(r"\b(raise \w+(Error|Exception)\(.+\)|throw new \w*Error\(.+\))")


@dataclass(frozen=True)
class DiffSigns:
    """What the heuristic counts in the lines an attempt added."""

    added: int
    tests_touched: bool
    silent_excepts: int
    debug_prints: int
    todos: int
    long_lines: int
    raises: int

    @classmethod
    def of(cls, diff: str, *, tests_touched: bool) -> DiffSigns:
        added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
        return cls(
            added=len(added),
            tests_touched=tests_touched,
            silent_excepts=sum(bool(_SILENT_EXCEPT.match(line)) for line in added),
            debug_prints=sum(bool(_DEBUG_PRINT.match(line)) for line in added),
            todos=sum(bool(_TODO.search(line)) for line in added),
            long_lines=sum(len(line) > LONG_LINE for line in added),
            raises=sum(bool(_RAISES.search(line)) for line in added),
        )


def heuristic_scores(criteria: Sequence[QualityCriterion], signs: DiffSigns, *, waived: bool) -> list[CriterionScore]:
    """A score with a reason for each criterion, from the diff's signs."""
    return [_score(c.name, signs, waived) for c in criteria]


def _score(name: str, s: DiffSigns, waived: bool) -> CriterionScore:
    if name == "task_completion":
        if waived:
            return _h(name, 0.85, "the checks pass apart from failures that were there before the task")
        return _h(name, 1.0, "the checks pass")
    if name == "test_coverage":
        if s.tests_touched:
            return _h(name, 0.9, "tests were added or changed with the code")
        return _h(name, 0.4, "no test was added or changed")
    if name == "error_handling":
        if s.silent_excepts:
            return _h(name, 0.3, f"{s.silent_excepts} bare or silent except clause(s) hide errors")
        if s.raises:
            return _h(name, 0.9, "errors are raised with a message")
        return _h(name, NEUTRAL, "no error handling to judge in the diff")
    if name == "code_quality":
        return _quality(s)
    return _h(name, NEUTRAL, "no heuristic for this criterion; a review model would judge it")


def _quality(s: DiffSigns) -> CriterionScore:
    faults = [(s.debug_prints, "debugging output"), (s.todos, "TODO/FIXME note"), (s.long_lines, "overlong line")]
    found = [f"{n} {what}{'s' if n > 1 else ''}" for n, what in faults if n]
    if not found:
        return _h("code_quality", 0.85, "nothing in the added lines a reviewer would flag at a glance")
    score = max(0.2, 0.85 - 0.2 * len(found))
    return _h("code_quality", score, "the added lines leave " + ", ".join(found))


def _h(name: str, score: float, reasoning: str) -> CriterionScore:
    return CriterionScore(name, score, reasoning, evaluator="heuristic")


def improvements_of(scores: Sequence[CriterionScore], criteria: Sequence[QualityCriterion]) -> list[str]:
    """What a revision should address: the weakest criteria first, heaviest first on ties."""
    weight = {c.name: c.weight for c in criteria}
    # A neutral heuristic score found nothing to fix: asking for it would only invite
    # needless code (a try/except around a one-line sum).
    found = [s for s in scores if s.score < 0.8 and not (s.evaluator == "heuristic" and s.score == NEUTRAL)]
    weak = sorted(found, key=lambda s: (s.score, -weight.get(s.name, 1.0)))
    return [f"{s.name.replace('_', ' ')}: {s.reasoning}" for s in weak]
