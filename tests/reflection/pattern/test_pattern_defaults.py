"""The seed's defaults and a pattern shared by concurrent runs: diminishing returns at
0.05, semantic stability that tells a reworded answer from a new one (lexically, or by an
embedding model), and two `execute()` calls on one pattern object at the same time."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from pattern_kit import QUALITY, Outputs, scores

from reflection.pattern import (
    AgentOutput,
    ConvergenceReason,
    ConvergenceSettings,
    ReflectionCallbacks,
    ReflectionDecision,
    ReflectionEvaluation,
    ReflectionPattern,
)
from reflection.pattern.stability import lexical_similarity

ANSWER = "score=0.5 The cache is cleared when the user logs out."
REWORDED = "score=0.5 When the user logs out, the cache gets cleared."
NEW_ANSWER = "score=0.5 The cache is cleared when the user logs in again."
SYNONYM = "score=0.5 When the user logs out, the cache gets removed."


def _pattern(**kw: object) -> ReflectionPattern:
    kw.setdefault("quality_criteria", [QUALITY])
    kw.setdefault("max_iterations", 6)
    return ReflectionPattern(**kw)  # type: ignore[arg-type]


def test_the_defaults_are_the_seeds() -> None:
    settings = ConvergenceSettings()
    assert (settings.improvement_threshold, settings.stability_threshold) == (0.05, 0.9)


@pytest.mark.anyio
async def test_a_small_gain_stops_with_diminishing_returns_by_default() -> None:
    result = await _pattern().execute(Outputs(["score=0.5 a first try", "score=0.52 another way", "score=0.9"]), "q")
    assert result.convergence_reason is ConvergenceReason.DIMINISHING_RETURNS
    assert scores(result) == [0.5, 0.52] and result.best_output == "score=0.52 another way"


@pytest.mark.anyio
async def test_a_reworded_answer_is_stable_and_a_new_answer_is_not() -> None:
    reworded = await _pattern().execute(Outputs([ANSWER, REWORDED, "score=0.9"]), "q")
    assert reworded.convergence_reason is ConvergenceReason.SEMANTIC_STABILITY and reworded.iterations_used == 2
    # Mostly the same characters, but the opposite answer: the run goes on.
    changed = await _pattern().execute(Outputs([ANSWER, NEW_ANSWER, "score=0.9 done"]), "q")
    assert changed.convergence_reason is ConvergenceReason.QUALITY_MET and changed.iterations_used == 3


def test_the_lexical_fallback_reads_code_as_code() -> None:
    assert lexical_similarity("def add(a, b):\n    return a + b\n", "def add(a, b):\n  return a + b") == 1.0
    assert lexical_similarity("def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n") < 0.9
    assert lexical_similarity(ANSWER, SYNONYM) < 0.9  # a synonym takes an embedding


PALINDROME = """def longest_palindrome(s: str) -> str:
    best = ""
    for i in range(len(s)):
        for j in range(i + 1, len(s) + 1):
            if s[i:j] == s[i:j][::-1] and j - i > len(best):
                best = s[i:j]
    return best
"""


def _scored(code: str, score: float) -> str:
    return f"# score={score}\n{code}"


@pytest.mark.anyio
async def test_a_one_token_fix_of_code_is_a_new_answer_and_a_repeat_is_stable() -> None:
    # Shared tokens alone call this fix 98% the same: it stopped the run as "stable"
    # although the next revision would have met the bar.
    fixed = PALINDROME.replace("> len(best)", ">= len(best)")
    done = _scored(fixed.replace('best = ""', 'best = s[:1]'), 0.9)
    result = await _pattern().execute(Outputs([_scored(PALINDROME, 0.5), _scored(fixed, 0.5), done]), "q")
    assert result.convergence_reason is ConvergenceReason.QUALITY_MET and result.iterations_used == 3
    # The same code again, indented otherwise: revising has stopped changing it.
    again = _scored(fixed.replace("    ", "  "), 0.5)
    stable = await _pattern().execute(Outputs([_scored(fixed, 0.5), again, done]), "q")
    assert stable.convergence_reason is ConvergenceReason.SEMANTIC_STABILITY and stable.iterations_used == 2


@pytest.mark.anyio
async def test_an_embedding_model_tells_a_synonym_paraphrase(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"concepts": [["cleared", "removed"]]}))
    pattern = _pattern(embedding_model=f"scripted/{script}")
    result = await pattern.execute(Outputs([ANSWER, SYNONYM, "score=0.9"]), "q")
    assert result.convergence_reason is ConvergenceReason.SEMANTIC_STABILITY
    other = "score=0.5 Keep every cached page and refresh it each hour in the background."
    changed = await pattern.execute(Outputs([ANSWER, other, "score=0.9"]), "q")
    assert changed.convergence_reason is ConvergenceReason.QUALITY_MET


class Slow:
    """An agent that yields between calls, so two runs interleave."""

    def __init__(self, outputs: list[str]) -> None:
        self.agent = Outputs(outputs)

    async def run(self, prompt: str, *, max_tokens: int | None = None) -> AgentOutput:
        await anyio.sleep(0.001)
        return await self.agent.run(prompt, max_tokens=max_tokens)


class Seen(ReflectionCallbacks):
    """Reads the pattern's history from inside each run's callback."""

    def __init__(self) -> None:
        self.pattern: ReflectionPattern | None = None
        self.seen: list[tuple[int, int]] = []

    async def on_reflection(self, evaluation: ReflectionEvaluation, iteration: int) -> ReflectionDecision:
        assert self.pattern is not None
        self.seen.append((iteration, len(self.pattern.get_history().versions)))
        return ReflectionDecision.AUTO


@pytest.mark.anyio
async def test_one_pattern_serves_two_concurrent_runs() -> None:
    seen = Seen()
    pattern = _pattern(callbacks=seen, max_iterations=3)
    seen.pattern = pattern
    results: dict[str, object] = {}

    async def run(name: str, outputs: list[str]) -> None:
        results[name] = await pattern.execute(Slow(outputs), name)

    async with anyio.create_task_group() as group:
        group.start_soon(run, "a", ["score=0.2 alpha one", "score=0.5 alpha two", "score=0.9 alpha done"])
        group.start_soon(run, "b", ["score=0.1 beta one", "score=0.4 beta two", "score=0.7 beta three"])
    a, b = results["a"], results["b"]
    assert scores(a) == [0.2, 0.5, 0.9] and a.convergence_reason is ConvergenceReason.QUALITY_MET  # type: ignore[attr-defined]
    assert scores(b) == [0.1, 0.4, 0.7] and b.convergence_reason is ConvergenceReason.MAX_ITERATIONS  # type: ignore[attr-defined]
    assert all(text.startswith("score=") and "alpha" in text for text in (a.best_output,))  # type: ignore[attr-defined]
    assert sorted(seen.seen) == [(1, 1), (1, 1), (2, 2), (2, 2), (3, 3), (3, 3)]  # each callback saw its own run
