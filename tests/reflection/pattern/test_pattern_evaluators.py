"""Evaluators: regex, function, a real command, and a scripted model as the judge."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import orjson
import pytest

from reflection.llm import LiteLLMModel
from reflection.pattern import QualityCriterion, ReflectionPattern, evaluate
from reflection.scripted import scripted_script


def _c(name: str, evaluator: str, **config: object) -> QualityCriterion:
    return QualityCriterion(name, threshold=0.5, evaluator=evaluator, evaluator_config=config)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_regex_criteria_must_or_must_not_match() -> None:
    criteria = [_c("typed", "regex", pattern=r"def \w+\(.*\) ->"),
                _c("no_todo", "regex", pattern="todo", must_match=False, flags="I")]
    good = (await evaluate("def f(x) -> int:\n    return x", criteria, 0.8)).evaluation
    assert good.criteria_scores == {"typed": 1.0, "no_todo": 1.0} and good.satisfactory
    bad = (await evaluate("def f(x):\n    # TODO", criteria, 0.8)).evaluation
    assert bad.criteria_scores == {"typed": 0.0, "no_todo": 0.0} and not bad.satisfactory
    assert bad.issues[1] == "no_todo: matches /todo/, which it must not"


def _syntax(code: str) -> tuple[bool, str]:
    try:
        compile(code, "<output>", "exec")
    except SyntaxError as exc:
        return False, f"Syntax error: {exc.msg}"
    return True, "Valid syntax"


async def _half(output: str) -> float:
    await anyio.sleep(0)
    return 0.5


def _broken(output: str) -> float:
    raise RuntimeError("validator bug")


@pytest.mark.anyio
async def test_function_criteria_take_pairs_bools_floats_and_async_functions() -> None:
    criteria = [_c("syntax", "function", function=_syntax), _c("half", "function", function=_half),
                _c("short", "function", function=lambda out: len(out) < 100), _c("bug", "function", function=_broken)]
    evaluation = (await evaluate("def f(:\n", criteria, 0.8)).evaluation
    assert evaluation.criteria_scores == {"syntax": 0.0, "half": 0.5, "short": 1.0, "bug": 0.0}
    reasons = {d.name: d.reasoning for d in evaluation.details}
    assert reasons["syntax"].startswith("Syntax error") and reasons["bug"] == "the validator raised RuntimeError: validator bug"
    assert {d.evaluator for d in evaluation.details} == {"function"}


@pytest.mark.anyio
async def test_a_command_scores_by_exit_code_and_sees_the_output_file(tmp_path: Path) -> None:
    check = [sys.executable, "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read())", "{output_file}"]
    criteria = [_c("parses", "command", command=check, cwd=str(tmp_path), timeout_s=60)]
    assert (await evaluate("x = 1\n", criteria, 0.8)).evaluation.criteria_scores == {"parses": 1.0}
    failed = (await evaluate("x = (\n", criteria, 0.8)).evaluation
    assert failed.criteria_scores == {"parses": 0.0} and failed.details[0].reasoning.startswith("exit 1: SyntaxError")


@pytest.mark.anyio
async def test_a_command_can_print_its_score_as_a_percentage(tmp_path: Path) -> None:
    shell = 'wc -c < {output_file} > /dev/null && echo "TOTAL coverage: 87%"'
    criteria = [_c("coverage", "command", command=shell, score_pattern=r"coverage: (\d+)%")]
    evaluation = (await evaluate("anything", criteria, 0.8)).evaluation
    assert evaluation.criteria_scores == {"coverage": 0.87}


@pytest.mark.anyio
async def test_a_command_that_times_out_scores_zero_and_its_whole_group_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    shell = f"sleep 300 & echo $! > {pid_file}; wait"
    criteria = [_c("slow", "command", command=shell, timeout_s=0.5)]
    evaluation = (await evaluate("x", criteria, 0.8)).evaluation
    assert evaluation.criteria_scores == {"slow": 0.0}
    assert evaluation.details[0].reasoning == "timed out after 0.5 s; its process group was killed"
    child = int(pid_file.read_text())
    with anyio.fail_after(30):  # the kill is immediate; only a loaded machine makes reaping slow
        while _alive(child):
            await anyio.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its reaper counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_an_llm_criterion_without_a_model_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="criterion 'correctness' is judged by a model .* no reflection_model"):
        ReflectionPattern(quality_criteria=[QualityCriterion("correctness")])
    with pytest.raises(ValueError, match="'correctness'"):
        ReflectionPattern()  # the code_generation defaults are judged by a model


def test_misconfigured_evaluators_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="needs evaluator_config\\['pattern'\\]"):
        ReflectionPattern(quality_criteria=[_c("r", "regex")])
    with pytest.raises(ValueError, match="callable"):
        ReflectionPattern(quality_criteria=[_c("f", "function", function="nope")])
    with pytest.raises(ValueError, match="needs evaluator_config\\['command'\\]"):
        ReflectionPattern(quality_criteria=[_c("c", "command")])


def _judge_reply(score: float, issue: str) -> str:
    return orjson.dumps({"scores": [{"name": "correctness", "score": score, "reasoning": issue}],
                         "issues": [issue], "suggestions": ["handle the empty string"],
                         "strengths": ["clear names"], "confidence": 0.8}).decode()


@pytest.mark.anyio
async def test_a_scripted_model_judges_the_llm_criteria_beside_a_function(tmp_path: Path) -> None:
    name = scripted_script([
        {"match": "def longest", "reply": _judge_reply(0.9, "fine"), "usage": {"inputTokens": 100, "outputTokens": 20}},
    ], dir=tmp_path)
    criteria = [QualityCriterion("correctness", weight=2.0), _c("syntax", "function", function=_syntax)]
    evaluated = await evaluate("def longest(s):\n    return s\n", criteria, 0.8,
                               model=LiteLLMModel(name, backoff_s=0.001), task="longest palindrome")
    evaluation = evaluated.evaluation
    assert evaluation.criteria_scores == {"correctness": 0.9, "syntax": 1.0}
    assert evaluation.overall_score == pytest.approx((2 * 0.9 + 1.0) / 3)
    assert evaluation.suggestions == ["handle the empty string"] and evaluation.confidence == 0.8
    assert (evaluated.usage.input_tokens, evaluated.usage.output_tokens) == (100, 20)


@pytest.mark.anyio
async def test_a_pattern_with_a_scripted_judge_revises_until_the_judge_is_satisfied(tmp_path: Path) -> None:
    name = scripted_script([
        {"match": "draft one", "reply": _judge_reply(0.4, "misses the empty string")},
        {"match": "draft two", "reply": _judge_reply(0.9, "fine")},
    ], dir=tmp_path)
    prompts: list[str] = []

    def agent(prompt: str) -> str:
        prompts.append(prompt)
        return "draft one" if len(prompts) == 1 else "draft two"

    result = await ReflectionPattern(quality_criteria=[QualityCriterion("correctness")],
                                     reflection_model=LiteLLMModel(name, backoff_s=0.001)).execute(agent, "task")
    assert [v.evaluation.overall_score for v in result.history.versions] == [0.4, 0.9]
    assert result.success and "- misses the empty string" in prompts[1]
    assert result.token_usage.input_tokens is not None


@pytest.mark.anyio
async def test_a_failing_judge_scores_its_criteria_zero_never_passing_the_work(tmp_path: Path) -> None:
    name = scripted_script([{"reply": "no json here"}], dir=tmp_path)
    pattern = ReflectionPattern(quality_criteria=[QualityCriterion("correctness")], reflection_model=name)
    evaluation = await pattern.reflect("anything")
    assert evaluation.criteria_scores == {"correctness": 0.0} and evaluation.confidence == 0.0
    assert not evaluation.satisfactory
