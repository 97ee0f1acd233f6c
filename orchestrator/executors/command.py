"""The command executor: hand the subtask to an external coding agent's command line.

The prompt goes into a temporary file outside the repository (so it never shows up as
a change) and the user's template is run through the shell in the repository, e.g.
`claude -p "$(cat {prompt_file})"` or `aider --yes --message-file {prompt_file}`. The
agent edits the tree itself; the loop finds its changes through git.
"""

from __future__ import annotations

import logging
import os
import shlex
import tempfile
from pathlib import Path

from orchestrator.checks.verify import CommandResult, run_command
from orchestrator.config import template_problem
from orchestrator.executors.base import ExecutionRequest, ExecutionResult
from orchestrator.executors.confinement import Confinement, confinement
from orchestrator.executors.transcript import agent_transcript
from orchestrator.tempfiles import temp_prefix
from reflection.redact import redact

log = logging.getLogger("goldenloop.executors.command")

_TAIL_LINES = 40
COMMAND_NOT_FOUND = 127  # the shell's exit code when the program does not exist
SANDBOX_FAILED = "goldenloop sandbox: "  # how the sandbox's wrapper starts the line saying why it ran nothing
_TAIL_CHARS = 4000


class CommandExecutor:
    """Runs an agent command per attempt; ok when it exits 0."""

    name = "command"

    def __init__(self, template: str, *, timeout_s: float = 900.0, confined: Confinement | None = None) -> None:
        _check_template(template)
        self.template = template
        self.timeout_s = timeout_s
        self.confined = confined or confinement()

    @property
    def sandboxed(self) -> bool:
        """Whether the kernel keeps its writes in its tree and the temporary folder."""
        return self.confined.restrict

    def command_for(self, prompt_file: Path, repo_dir: Path) -> str:
        """The shell command for one attempt, with both placeholders shell-quoted."""
        return self.template.format(
            prompt_file=shlex.quote(str(prompt_file)), repo=shlex.quote(str(repo_dir))
        )

    async def execute(self, request: ExecutionRequest) -> ExecutionResult:
        prompt_file = _write_prompt(request.prompt)
        try:
            command = self.command_for(prompt_file, request.repo_dir)
            log.info("attempt %d: running %s", request.attempt, command)
            with self.confined.attempt(request.repo_dir, os.environ) as (wrap, env):
                done = await run_command(command, request.repo_dir, timeout_s=self.timeout_s, kind="agent",
                                         env=env, wrap=wrap)
        finally:
            prompt_file.unlink(missing_ok=True)
        executed = execution_result(done, self.timeout_s)
        return executed.model_copy(update={"transcript": agent_transcript(done.output)})


def _check_template(template: str) -> None:
    """ValueError unless the template is usable: project.json's rules, for code too."""
    problem = template_problem(template)
    if problem:
        raise ValueError(f"executor command template {problem}: {template!r}")


def _write_prompt(prompt: str) -> Path:
    """The redacted prompt in a private temporary file outside the repository."""
    fd, name = tempfile.mkstemp(prefix=temp_prefix("prompt"), suffix=".md")  # a killed run's: swept by the next
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(redact(prompt))
    return Path(name)


def execution_result(done: CommandResult, timeout_s: float) -> ExecutionResult:
    """What a finished agent process means for the loop (the agent presets share it)."""
    if done.ok:
        return ExecutionResult(ok=True, reply=done.output)
    missing = not done.started or done.exit_code == COMMAND_NOT_FOUND
    unsandboxed = SANDBOX_FAILED in done.output and not done.timed_out
    if done.timed_out:
        reason = f"agent command timed out after {timeout_s:g}s"
    elif unsandboxed:
        reason = "the agent was not started: its sandbox could not be set up"
    elif missing:
        reason = "the agent program could not be started (is it installed and on PATH?)"
    else:
        reason = f"agent command exited with code {done.exit_code}"
    tail = _tail(redact(done.output))  # redacted whole: a secret the cut halves is no longer recognised
    error = f"{reason}: {done.command}"
    if tail:
        error += f"\n--- last output ---\n{tail}"
    kind = "environment" if (missing or unsandboxed) and not done.timed_out else "agent"
    return ExecutionResult(ok=False, error=error, reply=done.output, failure_kind=kind, timed_out=done.timed_out)


def _tail(output: str) -> str:
    lines = output.rstrip().splitlines()[-_TAIL_LINES:]
    return "\n".join(lines)[-_TAIL_CHARS:]
