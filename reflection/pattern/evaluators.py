"""Scoring an output on its criteria, each by the evaluator it names.

- `llm`: one `judge_with_model` call scores every llm criterion (`judgements` calls,
  averaged, with their spread: consistency.py). A judge that fails scores them 0.0
  ("not scored") with confidence 0: a broken judge never passes work.
- `regex`: `evaluator_config` `pattern`, `must_match` (default True), `flags` (an int,
  or letters of `re` flags such as "IM"). 1.0 when the search agrees with `must_match`.
- `function`: `evaluator_config["function"]`, a callable (sync or async) of the output
  returning a float, a bool, or a `(bool | float, reason)` pair. An exception scores 0.
- `command`: `command` (a str for the shell, or a list of arguments), `cwd`, `timeout_s`
  (default 60) and an optional `score_pattern`, a regex whose first group is a number
  (0..1, or a percentage above 1, e.g. coverage); without one, exit code 0 scores 1.0
  and any other 0.0. The output is written to a temporary file named by the placeholder
  `{output_file}` (and the environment variable `REFLECTION_OUTPUT_FILE`). The command
  runs in its own process group, killed whole when it ends or times out; a timeout
  scores 0 with the reason.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import re
import shlex
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from reflection.llm import ChatModel
from reflection.pattern.consistency import Repeated, judge_repeatedly
from reflection.pattern.criteria import QualityCriterion
from reflection.pattern.evaluation import CriterionScore, ReflectionEvaluation, evaluation_of
from reflection.schema import Usage
from reflection.text import one_line

log = logging.getLogger("goldenloop.evaluators")

DEFAULT_TIMEOUT_S = 60.0
OUTPUT_CAP = 64 * 1024  # bytes of a command's output kept (the tail): enough for a score line
LINGER_S = 1.0  # after the command exits, how long a background child may hold the pipe
REASON_CHARS = 200


@dataclass(frozen=True)
class Evaluated:
    """An evaluation and the tokens its judge spent (unknown when no model was asked)."""

    evaluation: ReflectionEvaluation
    usage: Usage = field(default_factory=Usage)


def criteria_problem(criteria: Sequence[QualityCriterion], model: ChatModel | None) -> str | None:
    """Why these criteria cannot be evaluated as configured, as a sentence; None if they can."""
    for c in criteria:
        config = c.evaluator_config
        if c.evaluator == "llm" and model is None:
            return f"criterion {c.name!r} is judged by a model (evaluator 'llm') but no reflection_model was given"
        if c.evaluator == "regex":
            if not config.get("pattern"):
                return f"criterion {c.name!r}: a regex evaluator needs evaluator_config['pattern']"
            try:
                re.compile(config["pattern"], _flags(config.get("flags")))
            except (re.error, ValueError) as exc:
                return f"criterion {c.name!r}: the regex does not compile ({exc})"
        if c.evaluator == "function" and not callable(config.get("function")):
            return f"criterion {c.name!r}: a function evaluator needs a callable evaluator_config['function']"
        if c.evaluator == "command" and not config.get("command"):
            return f"criterion {c.name!r}: a command evaluator needs evaluator_config['command']"
    return None


async def evaluate(
    output: str,
    criteria: Sequence[QualityCriterion],
    threshold: float,
    *,
    model: ChatModel | None = None,
    task: str = "",
    template: str | None = None,
    judge_timeout_s: float = 60.0,
    judgements: int = 1,
) -> Evaluated:
    """Score `output` on every criterion and weigh the scores into an evaluation; the model
    judge is asked `judgements` times (reflection/pattern/consistency.py)."""
    problem = criteria_problem(criteria, model)
    if problem:
        raise ValueError(problem)
    llm = [c for c in criteria if c.evaluator == "llm"]
    scores: dict[str, CriterionScore] = {}
    issues: list[str] = []
    suggestions: list[str] = []
    strengths: list[str] = []
    confidence, repeated = 1.0, Repeated(None, 0)
    if llm:
        assert model is not None  # criteria_problem refused it otherwise
        repeated = await judge_repeatedly(model, llm, output, times=judgements, task=task, template=template,
                                          timeout_s=judge_timeout_s)
        judged = repeated.judged
        if judged is None:
            confidence = 0.0
            scores.update({c.name: CriterionScore(c.name, 0.0, "not scored: the judge failed") for c in llm})
        else:
            confidence = judged.confidence
            scores.update({s.name: s for s in judged.scores})
            scores.update({c.name: CriterionScore(c.name, 0.0, "the judge left it out") for c in llm
                           if c.name not in scores})
            issues, suggestions, strengths = list(judged.issues), list(judged.suggestions), list(judged.strengths)
    for c in criteria:
        if c.evaluator != "llm":
            scores[c.name] = await _score_one(c, output)
    ordered = [scores[c.name] for c in criteria]
    if issues:  # the judge's words, plus what the other evaluators found below threshold
        issues += [f"{s.name}: {s.reasoning}" for c, s in zip(criteria, ordered, strict=True)
                   if c.evaluator != "llm" and s.score < c.threshold]
    evaluation = evaluation_of(ordered, criteria, threshold, issues=issues, suggestions=suggestions,
                               strengths=strengths, confidence=confidence)
    if judgements > 1 and llm:
        evaluation = dataclasses.replace(evaluation, judgements=repeated.answered, judge_spread=repeated.spread)
    if not evaluation.satisfactory and not evaluation.issues:  # every criterion passed, the whole did not
        low = f"the weighted score {evaluation.overall_score:.2f} is below the quality threshold {threshold:.2f}"
        evaluation = dataclasses.replace(evaluation, issues=[low])
    return Evaluated(evaluation, repeated.usage)


async def _score_one(criterion: QualityCriterion, output: str) -> CriterionScore:
    kind = criterion.evaluator
    if kind == "regex":
        score, why = _regex(criterion.evaluator_config, output)
    elif kind == "function":
        score, why = await _function(criterion.evaluator_config, output)
    elif kind == "command":
        score, why = await _command(criterion.evaluator_config, output)
    else:
        raise ValueError(f"criterion {criterion.name!r}: unknown evaluator {kind!r}")
    return CriterionScore(criterion.name, score, one_line(why, REASON_CHARS), kind)


# --- regex ---------------------------------------------------------------------------------------


def _flags(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    flags = 0
    for letter in str(value).upper():
        flags |= int(getattr(re, letter))  # AttributeError for an unknown letter
    return flags


def _regex(config: Any, output: str) -> tuple[float, str]:
    pattern = config["pattern"]
    must_match = bool(config.get("must_match", True))
    found = re.search(pattern, output, _flags(config.get("flags"))) is not None
    if found == must_match:
        return 1.0, f"{'matches' if found else 'does not match'} /{pattern}/ as required"
    return 0.0, f"{'matches' if found else 'does not match'} /{pattern}/, which it must{'' if must_match else ' not'}"


# --- function ------------------------------------------------------------------------------------


async def _function(config: Any, output: str) -> tuple[float, str]:
    function = config["function"]
    try:
        result = function(output)
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:  # noqa: BLE001 - a validator that breaks scores the output 0, with why
        return 0.0, f"the validator raised {type(exc).__name__}: {exc}"
    reason = ""
    if isinstance(result, tuple) and len(result) == 2:
        result, reason = result[0], str(result[1])
    if isinstance(result, bool):
        return (1.0 if result else 0.0), reason or ("passed" if result else "failed")
    if isinstance(result, int | float):
        return min(1.0, max(0.0, float(result))), reason or f"scored {float(result):.2f}"
    return 0.0, f"the validator returned {type(result).__name__}; expected a float, a bool or a pair"


# --- command -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandRun:
    """What a command did: exit code (None: killed or never started) and the output's tail."""

    exit_code: int | None
    output: str
    timed_out: bool = False


async def _command(config: Any, output: str) -> tuple[float, str]:
    timeout_s = float(config.get("timeout_s", DEFAULT_TIMEOUT_S))
    with tempfile.TemporaryDirectory(prefix="reflection-") as folder:
        path = Path(folder) / "output.txt"
        path.write_text(output, encoding="utf-8")
        argv = _argv(config["command"], str(path))
        cwd = config.get("cwd")
        run = await run_command(argv, cwd=Path(cwd) if cwd else None, timeout_s=timeout_s,
                                env={**os.environ, "REFLECTION_OUTPUT_FILE": str(path)})
    return _command_score(config, run, timeout_s)


def _argv(command: str | Sequence[str], output_file: str) -> list[str]:
    if isinstance(command, str):
        return ["/bin/sh", "-c", command.replace("{output_file}", shlex.quote(output_file))]
    return [str(arg).replace("{output_file}", output_file) for arg in command]


def _command_score(config: Any, run: CommandRun, timeout_s: float) -> tuple[float, str]:
    last = one_line(run.output.strip().splitlines()[-1], 120) if run.output.strip() else ""
    if run.timed_out:
        return 0.0, f"timed out after {timeout_s:g} s; its process group was killed"
    if run.exit_code is None:
        return 0.0, f"could not run: {last or 'no output'}"
    pattern = config.get("score_pattern")
    if pattern:
        match = re.search(pattern, run.output, re.M)
        if match is None:
            return 0.0, f"exit {run.exit_code}; printed no score matching /{pattern}/"
        number = float(match.group(1))
        return (number / 100.0 if number > 1.0 else number), f"printed {match.group(0).strip()}"
    if run.exit_code == 0:
        return 1.0, "exit 0"
    return 0.0, f"exit {run.exit_code}" + (f": {last}" if last else "")


async def run_command(argv: list[str], *, cwd: Path | None, timeout_s: float,
                      env: dict[str, str] | None = None) -> CommandRun:
    """Run `argv` in its own process group; the whole group is killed when it ends or times out."""
    try:
        process = await anyio.open_process(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, cwd=cwd, env=env, start_new_session=True)
    except OSError as exc:
        return CommandRun(None, f"could not start {argv[0]}: {exc}")
    tail = bytearray()
    exit_code: int | None = None
    try:
        with anyio.move_on_after(timeout_s):
            exit_code = await _collect(process, tail)
    finally:
        with anyio.CancelScope(shield=True):  # also when the caller is cancelled
            _kill_group(process.pid)
            with anyio.move_on_after(2.0):
                await process.aclose()
    text = tail.decode("utf-8", errors="replace")
    return CommandRun(exit_code, text, timed_out=exit_code is None)


async def _collect(process: Any, tail: bytearray) -> int:
    done = anyio.Event()

    async def pump() -> None:
        try:
            async for chunk in process.stdout:
                tail.extend(chunk)
                del tail[: max(0, len(tail) - OUTPUT_CAP)]
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        exit_code = await process.wait()
        with anyio.move_on_after(LINGER_S):  # a background child may keep the pipe open
            await done.wait()
        tg.cancel_scope.cancel()
    return int(exit_code)


def _kill_group(pgid: int) -> None:
    """SIGKILL what is left of the group (the command leads its own session)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
