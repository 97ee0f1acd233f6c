"""The judge's reply reader, on replies a small local model (Qwen2.5-Coder-0.5B-Instruct,
llama.cpp, greedy) really wrote to the review prompt, and on the looser shapes others use."""

from __future__ import annotations

import orjson
import pytest

from reflection.pattern.criteria import REVIEW_CRITERIA
from reflection.pattern.judge import judge_messages, judged_from_reply

# Verbatim but for whitespace: the model scored only the criterion the shape's single example named.
FIRST_ONLY = ('{"scores": [{"name": "task_completion", "score": 1.0, "reasoning": "The primary task was completed '
              'successfully."}], "issues": ["no issues"], "suggestions": ["Add a docstring for the add function."], '
              '"strengths": ["No issues"], "confidence": 0.5}')
# Verbatim: every score left as the shape's placeholder reason.
PLACEHOLDERS = ('{"issues": ["each problem you found, one sentence each"], "suggestions": ["add a docstring"], '
                '"strengths": ["code_quality"], "scores": [{"name": "task_completion", "reasoning": "one sentence", '
                '"score": 0.5}, {"name": "code_quality", "reasoning": "one sentence", "score": 0.5}], '
                '"confidence": 0.7}')


def test_a_reply_naming_one_criterion_scores_that_one_and_drops_placeholder_findings() -> None:
    judged = judged_from_reply(orjson.loads(FIRST_ONLY), REVIEW_CRITERIA, None)
    assert [s.name for s in judged.scores] == ["task_completion"]  # the others go to the heuristic
    assert judged.issues == [] and judged.strengths == []  # "no issues" is not a finding


def test_scores_without_a_reason_of_their_own_are_no_judgement() -> None:
    with pytest.raises(ValueError, match="scored none"):
        judged_from_reply(orjson.loads(PLACEHOLDERS), REVIEW_CRITERIA, None)


def test_flat_maps_marks_out_of_ten_and_percentages_are_read() -> None:
    reply = {"task_completion": {"score": "8/10", "reasoning": "works"},
             "code_quality": {"score": 70, "reason": "long function"}, "error_handling": {"score": "85%", "reasoning": "ok"}}
    judged = judged_from_reply(reply, REVIEW_CRITERIA, None)
    assert {s.name: s.score for s in judged.scores} == pytest.approx(
        {"task_completion": 0.8, "code_quality": 0.7, "error_handling": 0.85})


def test_the_prompt_names_every_criterion_in_the_reply_shape_and_shows_no_weights() -> None:
    prompt = judge_messages(REVIEW_CRITERIA, "diff --git a/x b/x", task="fix x")[1]["content"]
    for criterion in REVIEW_CRITERIA:
        assert f'{{"name": "{criterion.name}", "score": 0.0, "reasoning": "one sentence"}}' in prompt
    assert "weight" not in prompt and "0.4" not in prompt
