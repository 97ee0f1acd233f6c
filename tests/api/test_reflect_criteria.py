"""The default criteria without a model judge what they claim to: code_quality reads the
code the conversation changed, test_coverage counts tests added or changed (not a test
path in a FAILED line), "Modified N files" counts writes (not reads), and a criterion that
cannot be judged without a model is unknown (null), saying why, instead of a number."""

from __future__ import annotations

import anyio
import pytest
from apikit import REFLECT, Serve, history_file, reflect_body

from reflection.pattern.criteria import REVIEW_CRITERIA
from reflection.pattern.evaluation import CriterionScore, weighted_score
from reflection.reflect_skill import ReflectRequest, ReflectResult, reflect_on_conversation

FAILING_RUN = {"role": "tool", "name": "Bash",
               "content": "pytest -q\nFAILED tests/test_parse.py::test_dates - AssertionError\n1 failed, 4 passed"}
PASSING_RUN = {"role": "tool", "name": "Bash", "content": "pytest -q\n5 passed in 0.1s"}
SWALLOWING = "def parse(s):\n    try:\n        return int(s)\n    except:\n        pass\n"
CAREFUL = ('def parse(s: str) -> int:\n    try:\n        return int(s)\n    except ValueError as exc:\n'
           '        raise ValueError(f"not a number: {s!r}") from exc\n')
TEST_DIFF = ("diff --git a/tests/test_parse.py b/tests/test_parse.py\n--- a/tests/test_parse.py\n"
             "+++ b/tests/test_parse.py\n@@ -1,2 +1,6 @@\n from parse import parse\n+\n+\n"
             "+def test_dates():\n+    assert parse('7') == 7\n")


def _reflect(turns: list[dict[str, str]]) -> ReflectResult:
    request = ReflectRequest(project_path="/p", session_id="s", conversation=[
        {"role": "user", "content": "Fix the failing test"}, *turns])
    return anyio.run(lambda: reflect_on_conversation(request, criteria=REVIEW_CRITERIA, threshold=0.8))


def _scores(result: ReflectResult) -> dict[str, tuple[float | None, str]]:
    return {c.name: (c.score, c.reasoning) for c in result.criterion_scores}


def _wrote(code: str, path: str = "src/parse.py") -> dict[str, str]:
    return {"role": "assistant", "content": f"I changed {path}:\n\n{path}\n```python\n{code}```"}


def test_reads_and_a_failed_test_path_are_not_writes_or_tests() -> None:
    result = _reflect([
        {"role": "tool", "name": "Read", "content": "src/parse.py\nsrc/util.py\nsrc/models.py"},
        FAILING_RUN, _wrote(CAREFUL), PASSING_RUN,
        {"role": "assistant", "content": "I read src/util.py again; all tests pass now, done."},
    ])
    assert result.insights[0] == "Modified 1 file"  # three read, one test named in a failure
    score, why = _scores(result)["test_coverage"]
    assert (score, why) == (0.5, "Existing tests pass, but no test was added or changed for the change.")


def test_a_to_do_list_and_a_view_through_an_editing_tool_are_not_writes() -> None:
    result = _reflect([
        {"role": "tool", "name": "TodoWrite", "content": "1. fix src/parse.py\n2. add tests/test_parse.py"},
        {"role": "tool", "name": "str_replace_based_edit_tool",
         "content": "Here's the result of running `cat -n` on src/util.py:\n     1\tdef helper():\n"
                    "     2\t    return 1"},
        {"role": "tool", "name": "Write", "content": "File created successfully at: src/parse.py"},
        {"role": "assistant", "content": "Done."},
    ])
    assert result.insights[0] == "Modified 1 file"


def test_tests_added_in_a_diff_are_counted_by_name() -> None:
    result = _reflect([FAILING_RUN, {"role": "tool", "name": "apply_patch", "content": TEST_DIFF},
                       _wrote(CAREFUL), PASSING_RUN, {"role": "assistant", "content": "Done, tests pass."}])
    assert _scores(result)["test_coverage"] == (
        0.9, "1 test added or changed (test_dates), and the last test run passes.")
    assert "Added or changed 1 test" in result.insights
    assert result.insights[0] == "Modified 2 files"


def test_code_quality_and_error_handling_read_the_changed_code() -> None:
    swallowing = _scores(_reflect([_wrote(SWALLOWING), PASSING_RUN, {"role": "assistant", "content": "Done."}]))
    careful = _scores(_reflect([_wrote(CAREFUL), PASSING_RUN, {"role": "assistant", "content": "Done."}]))
    assert swallowing["code_quality"] == (
        0.75, "Read 5 changed lines of src/parse.py: 1 error handler swallowing errors (a bare except or pass).")
    assert swallowing["error_handling"] == (0.3, "The changed code drops errors without a word (1 handler).")
    assert careful["code_quality"] == (0.9, "Read 5 changed lines of src/parse.py: it parses, with no swallowed "
                                             "errors, long functions, deep nesting or leftovers.")
    assert careful["error_handling"] == (0.85, "The changed code raises errors with a message.")
    broken = _scores(_reflect([_wrote("def parse(s)\n    return int(s)\n")]))
    assert broken["code_quality"][0] == pytest.approx(0.55)
    assert "src/parse.py (line 1: expected ':') does not parse" in broken["code_quality"][1]


def test_what_cannot_be_judged_without_a_model_is_unknown_and_left_out_of_the_score() -> None:
    result = _reflect([{"role": "assistant", "content": "I changed src/parse.py to strip spaces. Done."}])
    scores = _scores(result)
    assert scores["code_quality"] == (None, "None of the code the conversation changed can be read here (no diff, "
                                            "code block or written file content), so code quality cannot be judged "
                                            "without a model.")
    assert scores["error_handling"][0] is None and "cannot be judged without a model" in scores["error_handling"][1]
    known = [CriterionScore(c.name, c.score) for c in result.criterion_scores if c.score is not None]
    assert [s.name for s in known] == ["task_completion", "test_coverage"]
    assert result.success_score == round(weighted_score(known, REVIEW_CRITERIA), 4)
    assert not any("code" in s.lower() for s in result.strengths)  # an unknown is neither strong nor weak


@pytest.mark.anyio
async def test_the_api_answers_and_stores_an_unknown_score_as_null(serve: Serve, project) -> None:  # noqa: ANN001
    talk = [{"role": "user", "content": "tidy the parser"},
            {"role": "assistant", "content": "I changed src/parse.py to strip spaces. Done."}]
    async with serve() as client:
        result = (await client.post(REFLECT, json=reflect_body(project, conversation=talk))).json()["result"]
    assert {c["name"]: c["score"] for c in result["criterionScores"]}["code_quality"] is None
    stored = history_file(project).read_text()
    assert '"name":"code_quality","score":null' in stored
