"""A model judges a reflection: the scripted model, through litellm's real call path."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from apikit import REFLECT, Serve, conversation, history_file, reflect_body

from reflection.llm import LiteLLMModel
from reflection.scripted import scripted_script

pytestmark = pytest.mark.anyio

OPENAI_KEY = "sk-proj-4fGh8JkLmN2pQrStUvWxYz01AbCdEf"
VERDICT = {
    "scores": [
        {"name": "task_completion", "score": 0.9, "reasoning": "The tail field is kept and the tests pass."},
        {"name": "code_quality", "score": 0.7, "reasoning": "The fix is small but duplicates the flush."},
        {"name": "error_handling", "score": 0.6, "reasoning": "A malformed line still raises a bare IndexError."},
    ],  # test_coverage left out: the heuristic scores it
    "issues": ["parse_row raises IndexError on a malformed line"],
    "suggestions": ["Raise a ValueError naming the line number"],
    "strengths": ["A regression test pins the fix"],
    "confidence": 0.8,
}


async def test_a_model_judges_and_never_sees_a_secret(serve: Serve, project: Path, tmp_path: Path) -> None:
    # The secret, if it reached the prompt, would be answered first with a reply that is no
    # verdict, and the heuristic would speak instead; the redacted prompt gets the verdict.
    name = scripted_script([
        {"match": "sk-proj-|Hunter2", "reply": "not a verdict", "times": None},
        {"match": r"\[REDACTED:openai_key\]", "reply": json.dumps(VERDICT)},
    ], dir=tmp_path)
    talk = conversation(secret=f"Logged in with {OPENAI_KEY} and password=Hunter2-correct-horse.")
    async with serve(model=LiteLLMModel(name, backoff_s=0.001)) as client:
        response = await client.post(REFLECT, json=reflect_body(project, conversation=talk))
    result = response.json()["result"]
    assert response.status_code == 200 and result["source"] == "llm"
    scores = {c["name"]: (c["score"], c["reasoning"]) for c in result["criterionScores"]}
    assert scores["task_completion"] == (0.9, "The tail field is kept and the tests pass.")
    assert scores["error_handling"][0] == 0.6
    assert scores["test_coverage"] == (  # the heuristic's
        0.9, "1 test file written (tests/test_parser.py), and the last test run passes.")
    assert result["successScore"] == pytest.approx((0.4 * 0.9 + 0.3 * 0.7 + 0.15 * 0.6 + 0.15 * 0.9), abs=1e-4)
    assert result["improvements"] == ["Raise a ValueError naming the line number"]
    assert result["suggestedActions"] == ["Address: Raise a ValueError naming the line number"]
    assert result["strengths"] == ["A regression test pins the fix"]
    assert "parse_row raises IndexError on a malformed line" in result["insights"]
    stored = history_file(project).read_text()
    assert OPENAI_KEY not in stored and "Hunter2" not in stored
    assert orjson.loads(stored) == result


async def test_a_model_that_fails_leaves_the_heuristic_to_answer(serve: Serve, project: Path, tmp_path: Path) -> None:
    name = scripted_script([{"error": "auth"}], dir=tmp_path)
    async with serve(model=LiteLLMModel(name, backoff_s=0.001)) as client:
        response = await client.post(REFLECT, json=reflect_body(project))
    assert response.status_code == 200 and response.json()["result"]["source"] == "heuristic"
