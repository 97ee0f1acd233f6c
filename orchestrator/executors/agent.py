"""A coding agent as an executor: one preset run per attempt, under goldenloop's limits.

goldenloop decides what the agent may not: it runs in the attempt's repository, with the
remaining cost budget (where the agent takes one), a turn limit, a permission mode and a
timeout that kills its whole process group. What the agent reports (tokens, cost,
session id, final message) is counted in the task's and the run's meters, so budgets
hold; a cost the agent does not report is unknown, never $0.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator.budget import Ledger
from orchestrator.checks.verify import run_command
from orchestrator.config import ExecutorConfig
from orchestrator.executors.agent_end import diagnose
from orchestrator.executors.base import ExecutionRequest, ExecutionResult
from orchestrator.executors.confinement import Confinement, confinement
from orchestrator.executors.memory_file import AgentMemory, reflections_block
from orchestrator.executors.presets import DEFAULT_TURNS, PRESETS, Preset, Report, Scratch, Settings
from orchestrator.executors.transcript import agent_transcript
from orchestrator.judging.test_paths import is_test_path
from orchestrator.runlog import RunLog
from orchestrator.tempfiles import temp_prefix
from reflection.meter import Meter
from reflection.redact import redact

log = logging.getLogger("goldenloop.executors.agent")

FINAL_MESSAGE_CHARS = 2000  # of the agent's last message, kept in the run log and history
FILES_GIVEN = 8  # files in play handed to an agent that edits only those (Aider)


@dataclass
class Spend:
    """Where an agent's reported spending is counted: the task's and the run's meters,
    the run log, and the ledgers its budget flag is read from."""

    meters: Sequence[Meter]
    runlog: RunLog | None
    limits: Sequence[Ledger] = ()

    def remaining_usd(self) -> float | None:
        """The smallest cost budget left; None when no cost limit is set (or none can be
        counted: before_attempt already refuses to spend what it cannot count)."""
        known = [left for left in (limit.remaining_cost() for limit in self.limits) if left is not None]
        return max(min(known), 0.0) if known else None

    def count(self, report: Report, agent: str) -> None:
        for meter in self.meters:
            meter.add_call(report.input_tokens, report.output_tokens, report.cost_usd, agent=True,
                           requests=report.requests)
        if self.runlog is not None:
            self.runlog.event("model_call", purpose="execute", model=report.model or agent, agent=agent,
                              requests=report.requests, inputTokens=report.input_tokens,
                              outputTokens=report.output_tokens, costUsd=report.cost_usd,
                              costKnown=report.cost_usd is not None)


class AgentExecutor:
    """Runs one coding agent preset per attempt."""

    def __init__(self, preset: Preset, settings: Settings, spend: Spend, *, timeout_s: float = 900.0,
                 memory_file: bool = False, confined: Confinement | None = None) -> None:
        self.preset = preset
        self.name = preset.kind
        self.settings = settings
        self.spend = spend
        self.timeout_s = timeout_s
        self.memory_file = memory_file
        self.confined = confined or confinement(preset.homes, home_variables=preset.home_variables)

    @property
    def sandboxed(self) -> bool:
        """Whether the kernel keeps its writes in its tree, its homes and the temporary folder."""
        return self.confined.restrict

    def settings_now(self) -> Settings:
        """This attempt's settings: the budget is what is left now."""
        return replace(self.settings, budget_usd=self.spend.remaining_usd(), sandboxed=self.sandboxed)

    async def execute(self, request: ExecutionRequest) -> ExecutionResult:
        scratch = Scratch(Path(tempfile.mkdtemp(prefix=temp_prefix("agent"))))
        prompt = redact(request.prompt)
        try:
            scratch.prompt.write_text(prompt, encoding="utf-8")
            block = reflections_block(prompt) if self.memory_file else ""
            if block and self.preset.memory_file is None:  # no memory file of its own: a conventions file
                scratch.conventions.write_text(block, encoding="utf-8")
            settings = self.settings_now()
            if self.preset.takes_files:
                settings = replace(settings, files=await files_in_play(request))
            argv = self.preset.build(prompt, scratch, settings)
            memory = AgentMemory(request.repo_dir, self.preset.memory_file if block else None)
            caches = self._caches(request.repo_dir)
            with memory.holding(block), self.confined.attempt(request.repo_dir, self._env(), scratch.folder) as (
                    wrap, env):
                done = await run_command(shlex.join(argv), request.repo_dir, timeout_s=self.timeout_s,
                                         kind="agent", env=env, wrap=wrap)
            _remove(self._caches(request.repo_dir) - caches)
            report = self.preset.parse(done.output, scratch)
            transcript = agent_transcript(done.output, scratch)
        finally:
            shutil.rmtree(scratch.folder, ignore_errors=True)
        end = diagnose(self.preset, done, report, self.timeout_s)
        if end.kind != "environment":  # a run that never reached a model made no model call
            self.spend.count(report, self.name)
        usage = self._usage(report)
        if end.kind == "done":
            return ExecutionResult(ok=True, reply=done.output, usage=usage, transcript=transcript)
        if end.kind == "limit":
            return ExecutionResult(ok=False, error=f"{self.name}: {end.sentence}", reply=done.output, usage=usage,
                                   failure_kind="limit", transcript=transcript, resume_at=end.resets_at)
        # The agent's own words, never its command line (which holds the whole prompt).
        return ExecutionResult(ok=False, error=f"{self.name}: {end.sentence}", reply=done.output, usage=usage,
                               failure_kind=end.kind, transcript=transcript, timed_out=done.timed_out)

    def _caches(self, repo_dir: Path) -> set[Path]:
        return {path for pattern in self.preset.caches for path in repo_dir.glob(pattern)}

    def _env(self) -> dict[str, str]:
        env = {**self.preset.env, **os.environ}  # what the user set wins
        if self.settings.model and self.preset.kind == "openhands":
            env["LLM_MODEL"] = self.settings.model
        return env

    def _usage(self, report: Report) -> dict[str, Any]:
        """The ExecutionResult's usage: camelCase, None where the agent did not say."""
        return {"inputTokens": report.input_tokens, "outputTokens": report.output_tokens,
                "costUsd": report.cost_usd, "model": report.model or self.settings.model,
                "agent": self.name, "sessionId": report.session_id, "finalMessage": _cut(report.final_message)}


async def files_in_play(request: ExecutionRequest) -> tuple[str, ...]:
    """The files the task names, the failing tests name and earlier attempts changed (the
    builtin editor's choice, orchestrator/executors/context.py), at most FILES_GIVEN."""
    from orchestrator.executors.context import gather_context

    context = await gather_context(request.repo_dir, request.prompt, request.hint_paths, 0, focus=request.focus)
    in_play = [name for name in context.in_play if (request.repo_dir / name).is_file()]
    imported = [name for test in in_play if is_test_path(test) for name in _imported(request.repo_dir, test)]
    return tuple(dict.fromkeys([*in_play, *imported]))[:FILES_GIVEN]


_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w.]+))", re.M)


def _imported(repo_dir: Path, test: str) -> list[str]:
    """The repository's Python modules a test file imports: the code its failures are about."""
    if not test.endswith(".py"):
        return []
    try:
        source = (repo_dir / test).read_text(errors="replace")
    except OSError:
        return []
    found = []
    for match in _IMPORT.finditer(source):
        module = (match.group(1) or match.group(2)).replace(".", "/")
        for root in ("", "src/", str(Path(test).parent) + "/"):
            for name in (f"{root}{module}.py", f"{root}{module}/__init__.py"):
                if (repo_dir / name).is_file():
                    found.append(name.removeprefix("./"))
    return found


def _remove(paths: set[Path]) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _cut(text: str | None) -> str | None:
    return None if text is None else redact(text)[:FINAL_MESSAGE_CHARS]


def agent_executor(config: ExecutorConfig, meters: Sequence[Meter], runlog: RunLog | None,
                   limits: Sequence[Ledger], keep_out: Sequence[Path] = ()) -> AgentExecutor:
    """The executor for project.json's executor section of an agent kind."""
    preset = PRESETS[config.kind]
    settings = Settings(program=config.program or preset.program, model=config.agent_model,
                        max_turns=config.max_turns or DEFAULT_TURNS, permission_mode=config.permission_mode,
                        extra_args=tuple(config.extra_args))
    return AgentExecutor(preset, settings, Spend(meters, runlog, limits), timeout_s=config.timeout_seconds,
                         memory_file=config.memory_file,
                         confined=confinement(preset.homes, config.writable, sandbox=config.sandbox,
                                              keep_out=keep_out, home_variables=preset.home_variables))
