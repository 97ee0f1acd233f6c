"""The agent's program, looked for before a run starts.

An agent that is not installed is a configuration error: found at the start of a run, it
costs no attempt, no model call and no blocked task. Only what can be told for sure is
checked: a preset's program, or the first program of a simple command line. A command the
shell would have to interpret first (expansions, subshells, `{repo}/...`) is not judged.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from orchestrator.config import ExecutorConfig

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_INTERPRETED = re.compile(r"[\s$`\\\"'(){}\[\]<>|&;*?~!#=]")  # the shell acts on these first


def missing_agent_program(executor: ExecutorConfig, repo_dir: Path) -> str | None:
    """One sentence when the agent's program cannot be found, as the shell running it in
    `repo_dir` would look for it (PATH, or a path relative to the repository); else None."""
    if executor.kind == "builtin":
        return None
    if executor.kind == "command":
        program, key = first_program(executor.command or ""), "executor.command"
    else:
        from orchestrator.executors.presets import PRESETS  # a command agent never needs the table

        program, key = executor.program or PRESETS[executor.kind].program, "executor.program"
    if program is None or _shell_finds(program, repo_dir):
        return None
    return (f"the agent program {program!r} is not installed here (neither on PATH nor relative to the "
            f"repository): install it, or fix {key} in .openagents/project.json")


def first_program(command: str) -> str | None:
    """The program a simple command line starts, after any `NAME=value` assignments; None
    when that takes the shell to tell (quoting, expansions, a subshell) or PATH is set."""
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: the shell's business
        return None
    for word in words:
        if word.startswith("PATH="):
            return None
        if not _ASSIGNMENT.match(word):
            return None if _INTERPRETED.search(word) or word.startswith("-") else word
    return None


def _shell_finds(program: str, cwd: Path) -> bool:
    """Whether /bin/sh, which runs the agent, finds `program` (builtins and keywords included)."""
    try:
        done = subprocess.run(["/bin/sh", "-c", 'command -v "$1"', "sh", program], cwd=cwd,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return True  # not known to be missing: the attempt will tell
    return done.returncode == 0
