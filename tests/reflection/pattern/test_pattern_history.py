"""Reflection history: versions as JSON and back, and each best-version rule."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reflection.pattern import ReflectionEvaluation, ReflectionHistory, ReflectionVersion, select_best
from reflection.pattern.evaluation import CriterionScore
from reflection.schema import Usage


def _v(iteration: int, score: float, satisfactory: bool = False) -> ReflectionVersion:
    evaluation = ReflectionEvaluation(score, {"quality": score}, satisfactory, issues=[f"issue {iteration}"],
                                      details=[CriterionScore("quality", score, "why", "function")])
    return ReflectionVersion(iteration, f"output {iteration}", evaluation, ["fix it"],
                             datetime(2025, 1, iteration, tzinfo=UTC), Usage(input_tokens=10, output_tokens=2))


def _rule(versions: list[ReflectionVersion], rule: str) -> int:
    best = select_best(versions, rule)
    assert best is not None
    return best.iteration


def test_highest_score_prefers_the_latest_of_equals() -> None:
    assert _rule([_v(1, 0.6), _v(2, 0.8), _v(3, 0.8), _v(4, 0.5)], "highest_score") == 3


def test_latest_is_the_last_version() -> None:
    assert _rule([_v(1, 0.9), _v(2, 0.1)], "latest") == 2


def test_first_satisfactory_and_its_fallback() -> None:
    assert _rule([_v(1, 0.5), _v(2, 0.85, True), _v(3, 0.95, True)], "first_satisfactory") == 2
    assert _rule([_v(1, 0.5), _v(2, 0.7), _v(3, 0.6)], "first_satisfactory") == 2


def test_weighted_recency_trades_a_little_score_for_recency() -> None:
    # position weights 0, 0.05, 0.1: 0.80+0.1 beats 0.85+0, but not 0.95+0
    assert _rule([_v(1, 0.85), _v(2, 0.7), _v(3, 0.80)], "weighted_recency") == 3
    assert _rule([_v(1, 0.95), _v(2, 0.7), _v(3, 0.80)], "weighted_recency") == 1


def test_no_versions_and_unknown_rules() -> None:
    assert select_best([], "latest") is None
    with pytest.raises(ValueError, match="unknown best-version rule"):
        select_best([_v(1, 0.5)], "best")


def test_a_history_round_trips_through_json_keeping_unknown_keys() -> None:
    versions = [_v(1, 0.5), _v(2, 0.9, True)]
    history = ReflectionHistory(versions, versions[1], versions[1], "quality_met", 2)
    data = history.as_dict()
    assert data["bestVersion"] == 2 and data["versions"][0]["improvementsApplied"] == ["fix it"]
    assert data["versions"][0]["tokenUsage"] == {"inputTokens": 10, "outputTokens": 2, "costUsd": None}
    data["versions"][0]["subtaskId"] = "T-1.1"  # a caller's own field
    data["futureKey"] = 1
    back = ReflectionHistory.from_dict(data)
    assert back.versions[1] == versions[1]
    assert back.versions[0].extra == {"subtaskId": "T-1.1"}
    assert back.best_version == versions[1] and back.convergence_reason == "quality_met"
    assert back.as_dict() == data
