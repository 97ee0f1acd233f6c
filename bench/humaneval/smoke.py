"""The offline smoke run: the scripted model on 5 problems, checking mechanics, not skill.

The script answers from each problem's canonical solution, in the shape small models
write (the file's path, then the code in a fenced block), so the outcomes are known in
advance: the first three problems are solved at the first attempt, the fourth never
(every reply returns None), and the fifth is solved at the second attempt only when
the retry prompt carries a reflection — its right answer is keyed on "Reflections from
Previous Attempts", so with reflexion off the wrong answer is all a retry ever gets.
A retry that gives back the failed code is asked again and then counted without being
tested, so the fourth problem's retries are repeats, each reflected on without a model
call (every failed attempt is). Resampling
(`resample`) asks the first prompt again each time, which the script answers as it did
the first time: it solves the first three problems at once and neither of the others,
every sample tested and costing the same tokens. The control
(`--control`) gets the right function for the first three problems and the wrong one
for the others. `check_mechanics` says what of that did not happen; it never judges a
pass rate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from bench.humaneval.build import SOLUTION, solution_text
from bench.humaneval.modes import CONTROL, MODES, Mode
from bench.humaneval.options import RunOptions
from bench.humaneval.problems import Problem, ProblemError
from bench.humaneval.results import ProblemResult, ResultFile

SMOKE_SIZE = 5
Role = Literal["at_once", "never", "with_reflection"]
ROLES: tuple[Role, ...] = ("at_once", "at_once", "at_once", "never", "with_reflection")
WRONG_BODY = "    return None  # a wrong answer, on purpose\n"
PRICING = {"inputCostPerToken": 0.000001, "outputCostPerToken": 0.000002}
REFLECTION = {
    "category": "root_cause",
    "analysis": "The function returned None instead of the value its docstring describes.",
    "suggestion": "Implement the algorithm the docstring describes and return its result.",
    "actionItems": ["Compute the result from the arguments", "Return it instead of None"],
    "confidence": 0.7,
}

# What a model writes when asked for a task's outcome reflection: every field of a failed
# and a success record, so the one reply serves both.
OUTCOME = {
    "whatHappened": "The function kept returning None, so every check failed.",
    "whatWentWrong": "solution.py returned None instead of computing the value.",
    "whyItWentWrong": "Wrong strategy: the body was never written.",
    "whatToDoDifferently": "Write the algorithm the docstring describes before returning.",
    "tacticalRule": "Never return a placeholder from a function the tests call.",
    "strategy": "Implement the docstring's algorithm directly.",
    "whyItWorked": "It computed the value the checks compare against.",
}


def roles(problems: list[Problem]) -> dict[str, Role]:
    return {p.task_id: role for p, role in zip(problems, ROLES, strict=True)}


def _file_reply(text: str) -> str:
    return f"{SOLUTION}\n```python\n{text}```\n"


def _control_reply(problem: Problem, body: str) -> str:
    return f"```python\n{solution_text(problem, body)}```\n"


def script_replies(problems: list[Problem]) -> list[dict[str, object]]:
    """Scripted replies; `times: null` because every mode asks the same questions."""
    replies: list[dict[str, object]] = [{"match": "## How the task ended", "reply": json.dumps(OUTCOME), "times": None}]
    for problem in problems:
        asked = f"# Task {problem.slug}:"  # the first line of every attempt prompt
        right = _file_reply(solution_text(problem, problem.canonical_solution))
        wrong = _file_reply(solution_text(problem, WRONG_BODY))
        role = roles(problems)[problem.task_id]
        if role == "with_reflection":
            replies.append({"match": asked + r"[\s\S]*Reflections from Previous Attempts", "reply": right, "times": None})
        replies.append({"match": asked, "reply": wrong if role != "at_once" else right, "times": None})
        body = problem.canonical_solution if role == "at_once" else WRONG_BODY
        direct = r"^Implement this Python function[\s\S]*def " + problem.entry_point + r"\("
        replies.append({"match": direct, "reply": _control_reply(problem, body), "times": None})
    replies.append({"match": "Failure digest", "reply": json.dumps(REFLECTION), "times": None})
    return replies


def write_script(problems: list[Problem], path: Path) -> str:
    """Write the script; returns its model name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"pricing": PRICING, "replies": script_replies(problems)}
    path.write_text(json.dumps(body, indent=1) + "\n")
    return f"scripted/{path.resolve()}"


def smoke_options(
    work: Path,
    problems: list[Problem],
    *,
    parallel: int = 2,
    modes: list[Mode] | None = None,
    out: Path | None = None,
) -> RunOptions:
    """The first 5 of `problems` against a script written into `work`."""
    chosen = problems[:SMOKE_SIZE]
    if len(chosen) < SMOKE_SIZE:
        raise ProblemError(f"the smoke run needs {SMOKE_SIZE} problems, {len(chosen)} selected")
    model = write_script(chosen, work / "smoke-script.json")
    return RunOptions(
        model=model,
        work=work,
        problems=chosen,
        modes=modes or list(MODES.values()),
        parallel=parallel,
        out=out,
        verify_timeout_s=30.0,
        model_timeout_s=30.0,
    )


def expected(role: Role, mode: Mode) -> tuple[int | None, int]:
    """(attempt that passes or None, attempts made) for a role in a mode."""
    if role == "at_once":
        return 1, 1
    if mode.name == CONTROL.name:
        return None, 1
    if role == "with_reflection" and mode.reflexion and mode.max_attempts >= 2:
        return 2, 2
    return None, mode.max_attempts


def _counts_broken(mode: Mode, problem_id: str, result: ProblemResult, want: tuple[int | None, int]) -> list[str]:
    """Reflections and repeats as the script dictates; a fresh sample is never a counted repeat."""
    broken = []
    # With reflexion on, every failed attempt is reflected on, a repeat and the last one too.
    failed = want[1] - (0 if want[0] is None else 1)
    wanted_reflections = failed if mode.reflexion else 0
    if result.reflections != wanted_reflections:
        broken.append(f"{mode.name} {problem_id}: {result.reflections} reflection(s), expected {wanted_reflections}")
    wanted_repeats = want[1] - 1 if want[0] is None and not mode.fresh else 0
    if result.repeats_counted != wanted_repeats:
        broken.append(f"{mode.name} {problem_id}: {result.repeats_counted} repeat(s) counted, expected {wanted_repeats}")
    if mode.fresh and len(set(result.attempt_tokens)) > 1:  # every sample is asked the first prompt
        broken.append(f"{mode.name} {problem_id}: samples cost {result.attempt_tokens} tokens, expected all equal")
    return broken


def check_mechanics(results: ResultFile, options: RunOptions) -> list[str]:
    """What did not happen as the script dictates; empty when the harness works."""
    broken = []
    for problem_id, role in roles(options.problems).items():
        for mode in options.modes:
            got = results.modes.get(mode.name)
            result = got.problems.get(problem_id) if got else None
            if result is None:
                broken.append(f"{mode.name} {problem_id}: no result")
                continue
            want = expected(role, mode)
            if (result.passed_at, result.attempts) != want:
                broken.append(
                    f"{mode.name} {problem_id} ({role}): passed at {result.passed_at} after "
                    f"{result.attempts} attempt(s), expected {want[0]} after {want[1]}"
                )
            broken += _counts_broken(mode, problem_id, result, want)
    return broken
