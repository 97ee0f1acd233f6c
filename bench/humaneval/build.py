"""One small git repository per problem and mode, ready for `overnight`.

The repository holds `solution.py` (the problem's prompt: imports, helpers, and the
signature and docstring of the function to write, whose body raises
NotImplementedError), `test_solution.py` (runs the problem's own check() against it),
one task in `.openagents/tasks.jsonl` and `.openagents/project.json` for the mode.

check() itself lives outside the repository, in `<work>/checks/`, as a hidden test
suite: the model is shown the failures an attempt causes, not the assertions in
advance, which is how the Reflexion paper and Aider's benchmark keep their tests.

A repository is built in a scratch folder and renamed into place, so it is either
complete or absent. It is always built afresh: a run resumes by problem, and a problem
left unfinished by a killed run starts again from its stub, since its attempts cannot be
continued without exceeding the fixed trials.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import git
import orjson

from bench.humaneval.modes import RESAMPLE_TEMPERATURE, Mode
from bench.humaneval.problems import Problem

SOLUTION = "solution.py"
TEST_FILE = "test_solution.py"
STUB_BODY = '    raise NotImplementedError("not written yet")\n'
CREATED_AT = "2026-01-01T00:00:00Z"  # fixed, so the backlog is the same in every build
AUTHOR = git.Actor("goldenloop bench", "bench@example.invalid")

TEST_TEMPLATE = '''"""{task_id}: the problem's own check() against solution.{entry_point}."""

import runpy

import solution

# Outside the repository on purpose: attempts see the failures, not the assertions.
CHECK = {check_path!r}


def test_{entry_point}():
    # Like HumanEval's own runner: check() runs in the namespace of the solution module.
    namespace = runpy.run_path(CHECK, init_globals=vars(solution))
    namespace["check"](solution.{entry_point})
'''


def solution_stub(problem: Problem) -> str:
    return problem.prompt + STUB_BODY


def solution_text(problem: Problem, body: str) -> str:
    """The whole module with `body` completing the function (e.g. the canonical solution)."""
    return problem.prompt + body


def task_record(problem: Problem) -> dict[str, Any]:
    return {
        "id": problem.slug,
        "title": f"Implement {problem.entry_point} in {SOLUTION}",
        "description": (
            f"Write the body of `{problem.entry_point}` in {SOLUTION} so that it does what its "
            f"docstring says (replace the NotImplementedError). Keep its name and signature. "
            f"{TEST_FILE} checks it with hidden tests; do not edit the tests."
        ),
        "status": "open",
        "priority": 2,
        "type": "task",
        "labels": ["humaneval"],
        "deps": [],
        "createdAt": CREATED_AT,
        "updatedAt": CREATED_AT,
        "commits": [],
    }


def project_config(
    mode: Mode,
    model: str,
    *,
    verify_timeout_s: float,
    model_timeout_s: float,
    reflection_timeout_s: float | None = None,
    edit_format: str = "auto",
    temperature: float | None = None,
    resample_temperature: float = RESAMPLE_TEMPERATURE,
    max_output_tokens: int | None = None,
) -> dict[str, Any]:
    test = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider {TEST_FILE}"
    reflection_ms = round((reflection_timeout_s or model_timeout_s) * 1000)
    return {
        "projectId": "humaneval",
        "defaultBranch": "main",
        "testCommands": [test],
        "defaultModel": model,
        "modelTemperature": mode.temperature(temperature, resample_temperature),
        "decomposeMinChars": 0,  # one function: no planning call
        "reflexion": {
            "enabled": mode.reflexion, "maxRetries": mode.max_retries, "generationTimeoutMs": reflection_ms,
            "oneCall": mode.one_call,
        },
        "executor": {"editFormat": edit_format},
        "timeouts": {"verifySeconds": verify_timeout_s, "modelSeconds": model_timeout_s},
        "retry": mode.retry,
        "maxOutputTokens": max_output_tokens,
    }


def write_check(problem: Problem, checks_dir: Path) -> Path:
    """The hidden check file; written once and shared by every mode."""
    path = checks_dir / f"{problem.slug}.py"
    if not path.exists():
        checks_dir.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(".tmp")
        scratch.write_text(f"# {problem.task_id}: the problem's own tests.\n{problem.test}")
        scratch.replace(path)
    return path


def is_built(repo_dir: Path) -> bool:
    return (repo_dir / ".git").is_dir() and (repo_dir / ".openagents" / "project.json").is_file()


def build_repo(problem: Problem, repo_dir: Path, config: dict[str, Any], checks_dir: Path,
               memory: dict[str, str] | None = None) -> Path:
    """The problem's repository at `repo_dir`, built afresh: whatever was there is replaced.
    `memory`: files of `.openagents/memory/` it starts with, by name."""
    check = write_check(problem, checks_dir)
    scratch = repo_dir.with_name(f".building-{repo_dir.name}")
    shutil.rmtree(scratch, ignore_errors=True)  # left by a run killed while building
    if repo_dir.exists():  # half built, or a problem a killed run left unfinished
        shutil.rmtree(repo_dir)
    files = {
        SOLUTION: solution_stub(problem),
        TEST_FILE: TEST_TEMPLATE.format(
            task_id=problem.task_id, entry_point=problem.entry_point, check_path=str(check.resolve())
        ),
        ".gitignore": "__pycache__/\n.pytest_cache/\n",
        ".openagents/tasks.jsonl": orjson.dumps(task_record(problem)).decode() + "\n",
        ".openagents/project.json": orjson.dumps(config, option=orjson.OPT_INDENT_2).decode() + "\n",
    }
    files.update({f".openagents/memory/{name}": text for name, text in (memory or {}).items()})
    for name, text in files.items():
        path = scratch / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _commit_all(scratch, f"{problem.task_id}: problem under test")
    scratch.rename(repo_dir)
    return repo_dir


def _commit_all(repo_dir: Path, message: str) -> None:
    # Git's own commands with an explicit cwd: GitPython's index API changes the process's
    # working directory, which concurrent builds in threads must not do.
    cmd = git.Git(repo_dir)
    cmd.init("-q", "-b", "main")
    cmd.add("-A")
    identity = {
        f"GIT_{role}_{key}": value
        for role in ("AUTHOR", "COMMITTER")
        for key, value in (("NAME", AUTHOR.name), ("EMAIL", AUTHOR.email))
    }
    cmd.commit("-q", "-m", message, env=identity)
