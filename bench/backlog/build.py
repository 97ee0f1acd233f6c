"""One copy of the bookshop per mode, ready for `overnight`.

The copy is the template (bench/backlog/template/) with the first N tasks of its backlog
and a project.json for the mode; the acceptance tests are copied once to
`<work>/acceptance/`, outside every repository, and the test command runs them with the
repository's own tests. A copy is built in a scratch folder and renamed into place, so
it is either complete or absent; an existing one is reused, which lets a run resume.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.backlog.spec import ACCEPTANCE, TEMPLATE

MODES = {"memory-on": True, "memory-off": False}  # mode: memory.crossTaskLessons
MAX_RETRIES = 3  # 4 attempts a task, as the HumanEval harness gives
IDENTITY = {f"GIT_{role}_{key}": value for role in ("AUTHOR", "COMMITTER")
            for key, value in (("NAME", "goldenloop bench"), ("EMAIL", "bench@example.invalid"))}


def project_config(model: str, memory: bool, acceptance: Path, *, temperature: float | None,
                   verify_timeout_s: float, model_timeout_s: float, repo: Path,
                   max_output_tokens: int | None = None) -> dict[str, Any]:
    board = shlex.quote(str(repo / ".openagents" / "tasks.jsonl"))  # the live backlog: the checks run in an export
    tests = (f"BOOKSHOP_BOARD={board} {shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider tests "
             f"{shlex.quote(str(acceptance))}")
    return {
        "projectId": "bookshop",
        "defaultBranch": "main",
        "testCommands": [tests],
        "defaultModel": model,
        "modelTemperature": temperature,
        "decomposeMinChars": 0,  # backlog items are small: one subtask each, no planning call
        "reflexion": {"enabled": True, "maxRetries": MAX_RETRIES},
        "timeouts": {"verifySeconds": verify_timeout_s, "modelSeconds": model_timeout_s},
        "memory": {"crossTaskLessons": memory},
        "maxOutputTokens": max_output_tokens,
        # Each task's hidden tests run once the board says it started: the same tree gives
        # other outcomes task by task, which a run recorded per tree cannot know.
        "checks": {"recordRuns": False},
    }


def backlog_lines(limit: int | None) -> list[str]:
    lines = [line for line in (TEMPLATE / ".openagents" / "tasks.jsonl").read_text().splitlines() if line.strip()]
    return lines[:limit] if limit else lines


def copy_acceptance(work: Path) -> Path:
    """The hidden tests, once per work folder (the same for every mode)."""
    target = work / "acceptance"
    if not target.is_dir():
        scratch = work / ".acceptance-building"
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(ACCEPTANCE, scratch, ignore=shutil.ignore_patterns("__pycache__"))
        scratch.rename(target)
    return target


def build_repo(repo: Path, config: dict[str, Any], limit: int | None) -> Path:
    """The mode's copy at `repo`; an existing one is left as it is."""
    if (repo / ".git").is_dir() and (repo / ".openagents" / "project.json").is_file():
        return repo
    scratch = repo.with_name(f".building-{repo.name}")
    shutil.rmtree(scratch, ignore_errors=True)  # left by a run killed while building
    shutil.rmtree(repo, ignore_errors=True)  # a half-built copy cannot be trusted
    shutil.copytree(TEMPLATE, scratch, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    meta = scratch / ".openagents"
    (meta / "tasks.jsonl").write_text("\n".join(backlog_lines(limit)) + "\n")
    (meta / "project.json").write_text(_json(config))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "bookshop and its backlog"]):
        subprocess.run(["git", *args], cwd=scratch, check=True, capture_output=True, env={**os.environ, **IDENTITY})
    scratch.rename(repo)
    return repo


def _json(body: dict[str, Any]) -> str:
    import json

    return json.dumps(body, indent=2) + "\n"
