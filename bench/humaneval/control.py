"""The control: the same model asked for the function directly, with no goldenloop between.

Each problem is one model call: the problem's code (signature and docstring) and a
request for the complete function in one fenced block. The first fenced block of the
reply (the whole reply when there is none) is run after the problem's own code, for its
imports and helpers, then the problem's check(), in a child process with a timeout.
The row it adds to the table shows what goldenloop gains or costs against the model
alone, on the same problems and the same endpoint.
"""

from __future__ import annotations

import re
import shlex
import sys
import tempfile
from pathlib import Path

from bench.humaneval.problems import Problem
from bench.humaneval.results import ProblemResult
from orchestrator.checks.verify import run_command
from reflection.llm import ChatModel

PROMPT = (
    "Implement this Python function as its docstring describes. Answer with one ```python "
    "code block holding the complete function and any imports it uses.\n\n```python\n{code}```"
)
_FENCED = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


def control_prompt(problem: Problem) -> str:
    return PROMPT.format(code=problem.prompt)


def code_of(reply: str) -> str:
    """The first fenced block of the reply, or the reply itself."""
    match = _FENCED.search(reply)
    return match.group(1) if match else reply


def program(problem: Problem, code: str) -> str:
    return f"{problem.prompt}\n{code}\n\n{problem.test}\n\ncheck({problem.entry_point})\n"


async def run_control(
    problem: Problem, model: ChatModel, *, model_timeout_s: float, check_timeout_s: float,
    max_tokens: int | None = None,
) -> ProblemResult:
    """One problem asked directly; a model error is left to the caller (no verdict)."""
    reply = await model.complete([{"role": "user", "content": control_prompt(problem)}], timeout=model_timeout_s,
                                 max_tokens=max_tokens)
    passed, why = await _check(problem, code_of(reply.text), check_timeout_s)
    return ProblemResult(
        outcome="passed" if passed else "failed",
        passed_at=1 if passed else None,
        attempts=1,
        calls=1,
        input_tokens=reply.input_tokens or 0,
        output_tokens=reply.output_tokens or 0,
        cost_usd=reply.cost_usd,
        wall_s=round(reply.latency_s, 3),
        reason=why,
    )


async def _check(problem: Problem, code: str, timeout_s: float) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="goldenloop-control-") as tmp:
        path = Path(tmp) / "program.py"
        path.write_text(program(problem, code))
        done = await run_command(
            f"{shlex.quote(sys.executable)} program.py", Path(tmp), timeout_s=timeout_s, kind="test"
        )
    if done.ok:
        return True, "passed"
    if done.timed_out:
        return False, f"timed out after {timeout_s:g} s"
    last = done.output.strip().splitlines()[-1:] or [f"exit code {done.exit_code}"]
    return False, last[0][:300]
