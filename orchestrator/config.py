"""Project configuration: `.openagents/project.json` plus environment overrides.

Every key is optional; a missing file means all defaults. Types are checked strictly
(`"3"` is not an integer, `1` is not a boolean) because a config file that means
something other than what it says is worse than one that fails to load. A wrong value
is a `ConfigError` naming the key path; an unknown key is a warning naming it, with the
nearest known key suggested, and is otherwise ignored. When the key it was nearest to is
the one an error is about (a required key that is missing, say), the error says so too:
a typo is the likeliest cause.

Environment overrides, for batch runs that must flip a switch without editing the file:
`GOLDENLOOP_REFLEXION` (on/off, 1/0, true/false, yes/no) -> `reflexion.enabled`,
`GOLDENLOOP_MODEL` -> the model in effect (over `model.name` and `defaultModel`),
`GOLDENLOOP_REFLECTION_MODEL` -> `reflexion.model`, `GOLDENLOOP_MEMORY_STORE` -> `memory.store`
(where a PostgreSQL URL with its password belongs: never in the committed file).
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self
from urllib.parse import urlsplit

import orjson
from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from orchestrator.checks.settings import CheckSettings
from orchestrator.layout import Layout
from orchestrator.task_archive import ARCHIVE_OVER
from reflection.postgres.connection import safe_url
from reflection.redaction_policy import RedactionPolicy
from reflection.schema import CamelModel
from reflection.task_prompts import template_problem as task_template_problem
from reflection.text import template_fields

log = logging.getLogger("goldenloop.config")

CONFIG_NAME = "project.json"
ENV_REFLEXION = "GOLDENLOOP_REFLEXION"
ENV_MODEL = "GOLDENLOOP_MODEL"
ENV_REFLECTION_MODEL = "GOLDENLOOP_REFLECTION_MODEL"
ENV_MEMORY_STORE = "GOLDENLOOP_MEMORY_STORE"
STORE_FROM_ENV = "env:"  # memory.store "env:NAME": the URL is in variable NAME

_TRUE_WORDS = frozenset({"1", "on", "true", "yes"})
_FALSE_WORDS = frozenset({"0", "off", "false", "no"})
# What the command executor fills into `executor.command`: the prompt's file, the repository.
TEMPLATE_PLACEHOLDERS = ("prompt_file", "repo")


class ConfigError(Exception):
    """The configuration cannot be used; the message is one sentence for the user."""


class _ConfigModel(CamelModel):
    # Unknown keys are dropped by the loader before validation (and reported), so
    # "ignore" here only matters for code that builds these models directly.
    model_config = ConfigDict(extra="ignore")


class ReflexionConfig(_ConfigModel):
    """The Reflexion switch and its limits."""

    enabled: bool = True
    max_reflections_per_retry: int = Field(default=3, ge=1)
    max_retries: int = Field(default=3, ge=0)  # 0: one attempt, no retry
    use_llm: bool = Field(default=True, alias="useLLM")  # False: heuristic reflections only
    model: str | None = Field(default=None, min_length=1)  # None: use defaultModel
    # None: the same limit as any model call (timeouts.modelSeconds), so one setting
    # covers a slow local server.
    generation_timeout_ms: int | None = Field(default=None, ge=1)
    retention_days: int = Field(default=90, ge=1)
    # A template file (relative to the project) replacing the reflection question;
    # placeholders in reflection/prompts.py (PLACEHOLDERS), {failure} required.
    prompt_file: str | None = Field(default=None, min_length=1)
    # One call per retry: the retry's reply begins with the reflection on the last failure,
    # then the edit (the builtin executor; an agent's retries keep a separate call). False:
    # a reflection call of its own before each retry.
    one_call: bool = False


EditFormatSetting = Literal["auto", "whole", "search-replace", "diff"]
# Coding agents with a preset (orchestrator/executors/presets.py): their headless
# invocation, their output read for cost, tokens, session id and final message.
AGENT_PRESETS = ("claude-code", "codex", "aider", "mini-swe-agent", "openhands")
# The presets that call their model through litellm, by a name goldenloop can call too
# (Claude Code and Codex sign in their own way, with their own model names).
LITELLM_AGENTS = ("aider", "mini-swe-agent", "openhands")
ExecutorKind = Literal["builtin", "command", "claude-code", "codex", "aider", "mini-swe-agent", "openhands"]


class ExecutorConfig(_ConfigModel):
    """Who edits the code: the builtin LLM editor or an external agent command."""

    kind: ExecutorKind = "builtin"
    # A shell template; `{prompt_file}` and `{repo}` are filled in by the executor.
    command: str | None = Field(default=None, min_length=1)
    timeout_seconds: float = Field(default=900, gt=0)
    # For an agent preset: the program (None: the preset's usual name on PATH), the model
    # it should use (None: its own default), its turn limit and permission mode (None: the
    # preset's default), and arguments added after the preset's own.
    program: str | None = Field(default=None, min_length=1)
    agent_model: str | None = Field(default=None, min_length=1)
    max_turns: int | None = Field(default=None, ge=1)
    permission_mode: str | None = Field(default=None, min_length=1)
    extra_args: list[str] = Field(default_factory=list)
    # Reflections reach an agent in its prompt file; with this on, also in the agent's own
    # memory file (CLAUDE.md, AGENTS.md, ...) for the attempt, put back afterwards.
    memory_file: bool = False
    # An agent (a preset or a command) runs in a sandbox: it may change files only in the
    # attempt's tree, the system's temporary folder, its own configuration folders and
    # `writable` (docs/AGENTS.md "The sandbox"). false lets it write wherever you can.
    sandbox: bool = True
    writable: list[str] = Field(default_factory=list)
    max_context_bytes: int = Field(default=60_000, ge=1)
    # How the builtin executor asks the model to write its edits (docs/EDIT_FORMAT.md):
    # auto chooses by file size and by what the model managed before.
    edit_format: EditFormatSetting = "auto"
    # Per-model choices, by fnmatch pattern of the model name: {"ollama/*": "whole"}.
    edit_format_by_model: dict[str, EditFormatSetting] = Field(default_factory=dict)

    @field_validator("command")
    @classmethod
    def _usable_template(cls, command: str | None) -> str | None:
        # Checked here, not when the executor is built: a bad template is a config error.
        problem = None if command is None else template_problem(command)
        if problem:
            raise ValueError(f"the template {problem} (got {_show(command)})")
        return command

    @property
    def named_model(self) -> str | None:
        """The model the agent is told to use: agentModel, else a --model in extraArgs."""
        if self.agent_model:
            return self.agent_model
        args = self.extra_args
        for i, arg in enumerate(args[:-1]):
            if arg == "--model":
                return args[i + 1]
        return next((arg.split("=", 1)[1] for arg in args if arg.startswith("--model=")), None) or None

    @model_validator(mode="after")
    def _command_when_kind_is_command(self) -> Self:
        if self.kind == "command" and self.command is None:
            raise ValueError('command must be set when kind is "command"')
        return self


def template_problem(template: str) -> str | None:
    """What makes an executor command template unusable, as a phrase; None if nothing."""
    try:
        names = template_fields(template)
    except ValueError as exc:
        return str(exc)
    unknown = sorted(names - set(TEMPLATE_PLACEHOLDERS))
    if unknown:
        nearest = _nearest(unknown[0], list(TEMPLATE_PLACEHOLDERS))
        meant = f" (did you mean {{{nearest}}}?)" if nearest else ""
        return (
            f"has an unknown placeholder {{{unknown[0]}}}{meant}; the placeholders are "
            "{prompt_file} and {repo}, and a literal brace is written twice"
        )
    if "prompt_file" not in names:
        return "must contain {prompt_file}, the file the agent reads its prompt from"
    return None


class TimeoutsConfig(_ConfigModel):
    """Wall-clock limits for verification commands and single model calls."""

    verify_seconds: float = Field(default=600, gt=0)
    model_seconds: float = Field(default=120, gt=0)


def url_problem(url: str) -> str | None:
    """What makes `url` unusable as a model endpoint, as a phrase; None if nothing."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"must be an http:// or https:// URL, e.g. http://localhost:8000/v1 (got {_show(url)})"
    return None


class ModelConfig(_ConfigModel):
    """The model every call uses and where it is served: any litellm name, and for a local
    server or a gateway (vLLM, llama.cpp, Ollama, LM Studio) its base URL.

    `name`, when set, wins over the top-level `defaultModel` (kept for older files);
    GOLDENLOOP_MODEL and --model win over both. `apiBase` is passed to every model call
    (chat and embeddings); `apiKeyEnv` names the environment variable holding the key,
    read at call time. A local endpoint needs no key.
    """

    name: str | None = Field(default=None, min_length=1)
    api_base: str | None = Field(default=None, min_length=1)
    # The name of a variable, never the key: project.json is committed.
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")

    @field_validator("api_base")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        problem = None if url is None else url_problem(url)
        if problem:
            raise ValueError(problem)
        return url


class RetryConfig(_ConfigModel):
    """Retry intelligence: spend retries only where reflection can help."""

    preflight: bool = True  # run the checks once before any model call for a task
    # Reruns of the old tests when only tests that passed before the task fail: the attempt
    # is flaky, not wrong, when every rerun passes (one pass could be the attempt's own chance).
    flaky_reruns: int = Field(default=2, ge=0)
    # pytest's tests that failed before (at the base, in the last attempt) and those in the
    # test files an attempt changed run first; when they decide the verdict the rest does not run.
    failing_first: bool = True
    route_by_failure: bool = True  # environment: escalate; timeout: the time limit named
    stop_on_plateau: bool = True
    stop_on_oscillation: bool = True
    rollback_regressions: bool = True  # a worse attempt goes back to the best tree
    # The old tests run with the base's copies of the tests and the runner's configuration,
    # whatever an attempt did to them (orchestrator/judging/); false: with the attempt's own.
    test_integrity: bool = True
    # A retry that returns an earlier failed attempt's code is asked once more, at a higher
    # temperature, before it counts; it is never verified again.
    reask_repeats: bool = True
    # Each retry a fresh sample: from the subtask's base tree, with the first attempt's
    # prompt and nothing of the failed attempts (no diff, no failure output, no reflection);
    # the first that passes the checks is kept. Needs modelTemperature above 0.
    fresh: bool = False
    test_globs: list[str] | None = None  # None: the usual test paths of Python, JS/TS, Go, Rust
    # Convergence (reflection/pattern/convergence.py, shared with the Reflection pattern):
    # attempts in a row no better than the best before them that stop the retries.
    plateau_window: int = Field(default=2, ge=1)
    # A new best attempt that gains less than this (share of tests) over the best before it
    # stops as diminishing returns; 0: any gain is worth another retry.
    improvement_threshold: float = Field(default=0.0, ge=0, le=1)
    stop_on_diminishing_returns: bool = True
    # "linear": each retry continues from the last attempt's tree (or the best, after a
    # regression). "tree": a small search (orchestrator/loop/search.py): `tree_width`
    # candidate attempts from one starting tree, then the best-scoring one expanded, at
    # most `tree_depth` levels deep; the attempts are bounded by reflexion.maxRetries alike.
    # "adaptive": after each failure, repair it or start afresh from the base (told how it
    # failed and the reflections, not shown its code), chosen by the failure's class and the
    # project's record of which choice solved that class (orchestrator/loop/retry_choice.py).
    strategy: Literal["linear", "tree", "adaptive"] = "linear"
    tree_width: int = Field(default=2, ge=2, le=4)
    tree_depth: int = Field(default=2, ge=1, le=4)

    @model_validator(mode="after")
    def _one_way_to_retry(self) -> Self:
        if self.strategy == "tree" and self.fresh:  # one would silently override the other
            raise ValueError('retry.strategy "tree" and retry.fresh cannot both be set: the tree search builds '
                             "on failed candidates, fresh samples start over each time; choose one")
        if self.strategy == "adaptive" and self.fresh:
            raise ValueError('retry.strategy "adaptive" and retry.fresh cannot both be set: "adaptive" chooses '
                             "between a repair and a fresh start after each failure, retry.fresh always starts "
                             "fresh; choose one")
        return self


class KnownFailure(_ConfigModel):
    """A failing test the user accepts: it never keeps a task from closing (see checks/waivers.py)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key here would waive something else

    test: str = Field(min_length=1)  # a test id as the runner names it, a file, or a glob over ids
    reason: str | None = Field(default=None, min_length=1)


class ChecksConfig(_ConfigModel):
    """What the user says about the checks beyond their commands."""

    # Failing tests the user waived. goldenloop waives nothing on its own: a test that
    # fails after an attempt keeps the task open unless it is listed here.
    known_failures: list[KnownFailure] = Field(default_factory=list)
    # Commands run in the judge's tree (a clean export of the commit) after each checkout,
    # before the checks: what a project needs there that worktree.link and worktree.copy
    # cannot give (a build step, generated files). Each runs under timeouts.verifySeconds.
    setup: list[str] = Field(default_factory=list)
    # Whole runs of the checks recorded per tree, so that a task starting on a tree already
    # judged takes the record (judging/recorded.py). Off for a suite whose outcome depends
    # on what the record's key cannot see: files outside the repository that change between
    # tasks, a service's data, the clock.
    record_runs: bool = True

    @field_validator("known_failures", mode="before")
    @classmethod
    def _plain_ids(cls, entries: Any) -> Any:
        # "tests/test_x.py::test_y" is short for {"test": "tests/test_x.py::test_y"}.
        if isinstance(entries, list):
            return [{"test": e} if isinstance(e, str) else e for e in entries]
        return entries


class ReviewCriterionConfig(_ConfigModel):
    """One weighted criterion of the review: judged by a model, or by a command's result."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key here would change a score silently

    name: str
    weight: float = Field(default=1.0, ge=0)
    description: str | None = Field(default=None, min_length=1)
    threshold: float = Field(default=0.0, ge=0, le=1)
    # A command run in the repository: its exit code scores it (0 -> 1.0), or the first
    # number `scorePattern` captures from its output (a percentage or 0..1).
    command: str | None = Field(default=None, min_length=1)
    score_pattern: str | None = Field(default=None, min_length=1)

    @field_validator("name")
    @classmethod
    def _snake_case(cls, name: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):  # the judge reads names; so does REFLECT_DEFAULT_CRITERIA
            raise ValueError(f"a criterion's name is snake_case: lowercase letters, digits and _ (got {_show(name)})")
        return name

    @field_validator("score_pattern")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                groups = re.compile(pattern).groups
            except re.error as exc:
                raise ValueError(f"scorePattern is not a regular expression: {exc}") from None
            if groups < 1:  # the whole match would be read, a line number as readily as a score
                raise ValueError(f"scorePattern needs a group around the number, e.g. \"TOTAL.* (\\d+)%\" "
                                 f"(got {_show(pattern)})")
        return pattern


def _seed_criteria() -> list[ReviewCriterionConfig]:
    return [ReviewCriterionConfig(name=n, weight=w) for n, w in
            (("task_completion", 0.4), ("code_quality", 0.3), ("error_handling", 0.15), ("test_coverage", 0.15))]


class ReviewConfig(_ConfigModel):
    """The review gate: a passing attempt scored on weighted criteria before it is committed."""

    enabled: bool = False
    success_threshold: float = Field(default=0.8, ge=0, le=1)
    criteria: list[ReviewCriterionConfig] = Field(default_factory=_seed_criteria, min_length=1)
    model: str | None = Field(default=None, min_length=1)  # None: the reflection model
    use_llm: bool = Field(default=True, alias="useLLM")  # False: the heuristic judges alone
    # Revision attempts a review below the threshold may ask for (each counts as a retry).
    revisions: int = Field(default=1, ge=0, le=3)
    # A template file (relative to the project) replacing the judge's question;
    # placeholders {task}, {criteria}, {output} (reflection/pattern/judge.py).
    prompt_file: str | None = Field(default=None, min_length=1)

    @field_validator("criteria")
    @classmethod
    def _distinct_and_weighed(cls, criteria: list[ReviewCriterionConfig]) -> list[ReviewCriterionConfig]:
        names = [c.name for c in criteria]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"criterion {twice[0]} is listed twice")
        if not any(c.weight > 0 for c in criteria):
            raise ValueError("at least one criterion needs a weight above 0, or every review scores 0")
        return criteria


def store_problem(value: str, *, in_file: bool = True) -> str | None:
    """What makes `value` unusable as memory.store, as a phrase; None if nothing."""
    if value == "jsonl" or (value.startswith(STORE_FROM_ENV) and value[len(STORE_FROM_ENV):].strip()):
        return None
    if not value.startswith(("postgresql://", "postgres://")):
        return f'must be "jsonl", a postgresql:// URL or "env:VARIABLE" (got {_show(safe_url(value))})'
    parts = urlsplit(value)
    if in_file and (parts.password or "password=" in parts.query):
        return ("holds a password, and project.json is committed with the repository: name the variable "
                f'holding the URL ("env:VARIABLE"), set {ENV_MEMORY_STORE}, or use PGPASSWORD or ~/.pgpass')
    return None


class MemoryConfig(_ConfigModel):
    """What a project learns across runs beyond one subtask's retries."""

    # Where reflections and lessons are kept: "jsonl" (None: the default, files under
    # .openagents/memory/, one machine), a postgresql:// URL (a team's shared memory,
    # reflection/postgres/), or "env:NAME" to read the URL from variable NAME.
    store: str | None = Field(default=None, min_length=1)

    # Notes an accepted task leaves for the next run of a task with the same description:
    # one more model call per closed task, so it is asked for, not assumed.
    task_reflection: bool = False
    # The question asked after a task is accepted; None: the built-in one. Placeholders:
    # {description}, {expected_output}, {output}, {prior}.
    task_reflection_prompt: str | None = Field(default=None, min_length=1)
    # Where the notes live: None follows `store` (the file memory/task-reflections.json, or
    # the shared database); "file", "memory" (this process only), or "module:attribute"
    # (your own TaskReflectionStore). How they are made: "llm", or "module:attribute" (your
    # own ReflectionStrategy, made with model=). See docs/REFLEXION.md.
    task_reflection_store: str | None = Field(default=None, min_length=1)
    task_reflection_strategy: str = "llm"
    # Lessons of other tasks (reflection/lesson_index.py), ranked by relevance and by how
    # often they helped, in each subtask's first prompt; off for measurements.
    cross_task_lessons: bool = True
    lessons_per_task: int = Field(default=3, ge=1, le=10)
    # Any litellm embedding model: lessons ranked by meaning rather than shared words (one
    # call per new lesson and per task). None: offline lexical ranking.
    embedding_model: str | None = Field(default=None, min_length=1)
    # The success procedure a closed task leaves: after a failed attempt (what finally
    # worked), always, or never. Failed and partial tasks always leave their reflection.
    success_procedures: Literal["after_failure", "always", "never"] = "after_failure"
    # The name a task's reflections are filed under (memory/reflections/<agent>/); None:
    # the model for the builtin executor, the agent a command executor runs (its script or
    # program, not its interpreter: `python agent.py` is "agent"), or the preset's name.
    agent_name: str | None = Field(default=None, min_length=1)
    live_per_agent: int = Field(default=30, ge=1)  # older outcome reflections are archived
    # A lesson's rule seen by this many passing attempts joins memory/rules.md, which every
    # prompt of the project carries.
    rule_min_passes: int = Field(default=3, ge=1)
    # Also append promoted rules to this file of the repository (AGENTS.md, CLAUDE.md), in a
    # commit of its own for a human to review; None: never.
    promote_rules_to: str | None = Field(default=None, min_length=1)

    @field_validator("store")
    @classmethod
    def _usable_store(cls, value: str | None) -> str | None:
        problem = None if value is None else store_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("task_reflection_store", "task_reflection_strategy")
    @classmethod
    def _usable_choice(cls, value: str | None, info: ValidationInfo) -> str | None:
        from reflection.task_choice import STORES, STRATEGIES, choice_problem

        builtins = STORES if info.field_name == "task_reflection_store" else STRATEGIES
        problem = None if value is None else choice_problem(value, builtins)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("task_reflection_prompt")
    @classmethod
    def _usable_prompt(cls, template: str | None) -> str | None:
        problem = None if template is None else task_template_problem(template)
        if problem:
            raise ValueError(f"the template {problem} (got {_show(template)})")
        return template


class RedactionConfig(_ConfigModel):
    """What redaction must know of this project (reflection/redaction_policy.py): applied to
    everything goldenloop writes or sends, the memory's records, pages and lessons, task
    notes and prompts among them."""

    # Domains of the company's own hosts: every host under one is masked as internal.
    own_domains: list[str] = Field(default_factory=list)
    # kind -> regular expression of identifiers of your own; a match (its group "secret",
    # if it names one) becomes [REDACTED:<kind>].
    extra_patterns: dict[str, str] = Field(default_factory=dict)
    # Names of people (or bots) that may stand where a name would be masked.
    keep_names: list[str] = Field(default_factory=list)

    @field_validator("own_domains")
    @classmethod
    def _domains(cls, domains: list[str]) -> list[str]:
        from reflection.redaction_policy import domain_problem

        for domain in domains:
            if problem := domain_problem(domain):
                raise ValueError(problem)
        return domains

    @field_validator("extra_patterns")
    @classmethod
    def _patterns(cls, patterns: dict[str, str]) -> dict[str, str]:
        from reflection.redaction_policy import pattern_problem

        for kind, pattern in patterns.items():
            if problem := pattern_problem(kind, pattern):
                raise ValueError(problem)
        return patterns

    def policy(self) -> RedactionPolicy:
        return RedactionPolicy.of(self.own_domains, self.extra_patterns, self.keep_names)


class WorktreeConfig(_ConfigModel):
    """What a parallel worker's worktree gets that git does not carry: globs relative to the
    repository, of untracked or ignored paths. Linked ones are shared with your checkout
    (an agent installing into a linked .venv changes yours); copied ones are the worker's."""

    link: list[str] = Field(default_factory=lambda: [".venv", "node_modules"])
    copy_: list[str] = Field(default_factory=lambda: [".env*"], alias="copy")

    @field_validator("link", "copy_")
    @classmethod
    def _inside(cls, globs: list[str]) -> list[str]:
        for glob in globs:
            if not glob.strip() or glob.startswith("/") or ".." in Path(glob).parts:
                raise ValueError(f"{_show(glob)} must be a path or glob inside the repository")
        return globs


class ProjectConfig(_ConfigModel):
    """The whole of `.openagents/project.json`, every key with its default."""

    # The name a shared memory files this project's records under; None: its origin
    # remote's address, else its folder's name (orchestrator/loop/project_memory.py).
    project_id: str | None = Field(default=None, min_length=1)
    default_branch: str = Field(default="main", min_length=1)
    test_commands: list[str] = Field(default_factory=list)
    typecheck_commands: list[str] = Field(default_factory=list)
    # Any litellm model name; model.name wins when set (see ModelConfig). After loading,
    # this holds the model in effect: model.name folded in, then the overrides.
    default_model: str = Field(default="gpt-4o-mini", min_length=1)
    model: ModelConfig = Field(default_factory=ModelConfig)
    # Sampling temperature of every model call; None: the provider's default (a local
    # server's default is often 0.8, which is noisy for code; 0 is greedy).
    model_temperature: float | None = Field(default=None, ge=0, le=2)
    reflexion: ReflexionConfig = Field(default_factory=ReflexionConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    timeouts: TimeoutsConfig = Field(default_factory=TimeoutsConfig)
    digest_tokens: int = Field(default=1500, ge=1)
    # Tasks whose title + description is shorter run as one subtask, with no planning
    # call; 0 turns decomposition off altogether.
    decompose_min_chars: int = Field(default=400, ge=0)
    max_tasks_per_run: int | None = Field(default=None, ge=1)
    max_runtime_minutes: float | None = Field(default=None, gt=0)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_cost_usd_per_task: float | None = Field(default=None, gt=0)
    max_tokens_per_task: int | None = Field(default=None, ge=1)
    # The most tokens any model reply may use (asked as max_tokens). None: the model's own
    # limit; a spending limit reserves this much for every call's reply before it is made.
    max_output_tokens: int | None = Field(default=None, ge=1)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    checks_config: ChecksConfig = Field(default_factory=ChecksConfig, alias="checks")
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    review: ReviewConfig = Field(default_factory=ReviewConfig)
    worktree: WorktreeConfig = Field(default_factory=WorktreeConfig)
    redaction: RedactionConfig = Field(default_factory=RedactionConfig)
    parallel_execution: int = Field(default=1, ge=1)  # overnight workers
    # On escalation: put the subtask's base tree back, or leave the last attempt's edits.
    failure_cleanup: Literal["restore", "keep"] = "restore"
    commit_bookkeeping: bool = True  # commit .openagents/ changes when a task ends
    # Once tasks.jsonl holds more closed tasks than this, all but the most recently closed
    # fifth of it move to .openagents/archive/tasks-<year>.jsonl; 0: never.
    archive_closed_over: int = Field(default=ARCHIVE_OVER, ge=0)
    # Why the agent's model cannot serve goldenloop's own calls here (its key is not in
    # goldenloop's environment), set when a run opens; None: nothing stands in the way.
    _agent_model_unusable: str | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _fresh_retries_sample(self) -> Self:
        # only the builtin executor samples at modelTemperature; an agent command has its own
        if self.retry.fresh and self.model_temperature == 0 and self.executor.kind == "builtin":
            raise ValueError("retry.fresh draws every retry anew, and with the builtin executor at modelTemperature "
                             "0 (greedy) each one repeats the first attempt; set modelTemperature above 0, e.g. 0.8")
        return self

    @model_validator(mode="after")
    def _model_name_wins(self) -> Self:
        # Folded here so that every reader of default_model (the loop, agent names) agrees.
        if self.model.name is not None:
            self.default_model = self.model.name
        return self

    @property
    def checks(self) -> CheckSettings:
        """The checks every attempt must pass, with their limits."""
        return CheckSettings(
            typecheck=tuple(self.typecheck_commands),
            tests=tuple(self.test_commands),
            timeout_s=self.timeouts.verify_seconds,
            digest_tokens=self.digest_tokens,
        )

    @property
    def own_model(self) -> str | None:
        """The model of goldenloop's own calls (planning; reflections, task notes and review
        unless their settings name one). With the builtin editor, the model that works.
        With an agent, only a model you named: defaultModel (or model.name, GOLDENLOOP_MODEL,
        --model), else the agent's own if litellm calls it; None: no such call, reflections
        are heuristic."""
        if self.executor.kind == "builtin" or "default_model" in self.model_fields_set:
            return self.default_model
        return self.agent_model_lent

    @property
    def agent_model_lent(self) -> str | None:
        """The agent's model, when it can serve goldenloop's own calls too (see own_model)."""
        if self.executor.kind not in LITELLM_AGENTS or self._agent_model_unusable:
            return None
        return self.executor.named_model

    def agent_model_refused(self, why: str) -> ProjectConfig:
        """This config, with the agent's model serving none of goldenloop's calls, for `why`."""
        copy = self.model_copy()
        copy._agent_model_unusable = why
        return copy

    @property
    def agent_model_unusable(self) -> str | None:
        return self._agent_model_unusable

    @property
    def reflection_model(self) -> str | None:
        """The model that writes reflections: reflexion.model, else the own model."""
        return self.reflexion.model or self.own_model

    @property
    def review_model(self) -> str | None:
        """The model that judges a passing attempt: review.model, else the reflection model."""
        return self.review.model or self.reflection_model

    @property
    def reflections_by_model(self) -> bool:
        """Whether a model writes the reflections (reflexion on, useLLM, and a model to call)."""
        return self.reflexion.enabled and self.reflexion.use_llm and self.reflection_model is not None

    @property
    def task_reflection_on(self) -> bool:
        """memory.taskReflection, when a model writes reflections at all."""
        return self.memory.task_reflection and self.reflections_by_model

    @property
    def reflection_timeout_s(self) -> float:
        """reflexion.generationTimeoutMs, else the limit of every model call."""
        ms = self.reflexion.generation_timeout_ms
        return ms / 1000 if ms is not None else self.timeouts.model_seconds


# Keys older versions read, and what took their place.
RETIRED_KEYS = {
    "retry.ignorePreexistingFailures": "goldenloop no longer waives a failing test on its own; "
    "list the failures you accept in checks.knownFailures (`goldenloop checks baseline` shows them)",
}


@dataclass(frozen=True)
class UnknownKey:
    """A key of the file that no setting reads, and the known key it is nearest to."""

    path: str  # as written, e.g. "executor.comand"
    meant: str | None = None  # the full path of the nearest known key, e.g. "executor.command"

    def warning(self) -> str:
        if self.path in RETIRED_KEYS:
            return f"{CONFIG_NAME}: {self.path} is no longer read: {RETIRED_KEYS[self.path]}"
        message = f"{CONFIG_NAME}: unknown key {self.path} (ignored)"
        return f"{message}; did you mean {self.meant.rpartition('.')[2]}?" if self.meant else message


def _typo_hint(unknown: list[UnknownKey], about: Callable[[str], bool]) -> str:
    """' (testCommand is not a known key; did you mean testCommands?)' when an unknown key
    was nearest to a key `about` accepts, else ''."""
    for key in unknown:
        if key.meant and about(key.meant):
            return f" ({key.path} is not a known key; did you mean {key.meant}?)"
    return ""


@dataclass(frozen=True)
class LoadedConfig:
    """A validated config and what the user should hear about how it was read."""

    config: ProjectConfig
    warnings: list[str] = field(default_factory=list)
    path: Path | None = None  # None: no file, defaults were used
    # Environment overrides that took effect, e.g. "reflexion.enabled=false (GOLDENLOOP_REFLEXION)".
    overrides: list[str] = field(default_factory=list)
    unknown: list[UnknownKey] = field(default_factory=list)

    def hint_for(self, *keys: str) -> str:
        """The typo hint for an error about `keys` (full key paths), or ''."""
        return _typo_hint(self.unknown, lambda meant: meant in keys)


def config_path(project_dir: Path) -> Path:
    return Layout(Path(project_dir)).config


def load_config(project_dir: Path, env: Mapping[str, str] = os.environ) -> LoadedConfig:
    """Read, check and complete the project's config; raise ConfigError when unusable."""
    project_dir = Path(project_dir)
    path = config_path(project_dir)
    raw = _read_json(path)
    notices: list[str] = []
    if raw is None:
        notices.append(f"no .openagents/{CONFIG_NAME}: using defaults")
        log.info("%s", notices[0])  # normal for a new project: not a logged warning
    unknown: list[UnknownKey] = []
    known = _drop_unknown_keys(raw or {}, ProjectConfig, "", unknown)
    for key in unknown:
        log.info("%s", key.warning())  # returned as warnings: the caller shows them
    config, overrides = _apply_env(_validate(known, unknown), env)
    for line in overrides:
        log.info("override: %s", line)
    prompt_templates(config, project_dir)  # a missing or broken template is a config error now
    return LoadedConfig(
        config=config,
        warnings=notices + [key.warning() for key in unknown],
        path=None if raw is None else path,
        overrides=overrides,
        unknown=unknown,
    )


def check_config(data: dict[str, Any]) -> ProjectConfig:
    """The config `data` (project.json's object) stands for; ConfigError if it would not load."""
    unknown: list[UnknownKey] = []
    return _validate(_drop_unknown_keys(data, ProjectConfig, "", unknown), unknown)


@dataclass(frozen=True)
class PromptTemplates:
    """The project's own prompt templates; None: the built-in wording."""

    reflection: str | None = None
    review: str | None = None


def prompt_templates(config: ProjectConfig, project_dir: Path) -> PromptTemplates:
    """Read and check `reflexion.promptFile` and `review.promptFile`; ConfigError if unusable."""
    if config.reflexion.prompt_file is None and config.review.prompt_file is None:
        return PromptTemplates()  # the usual case: no prompt module imported
    from reflection.pattern.judge import template_problem as review_problem
    from reflection.prompts import template_problem as reflection_problem

    return PromptTemplates(
        reflection=_template(project_dir, "reflexion.promptFile", config.reflexion.prompt_file, reflection_problem),
        review=_template(project_dir, "review.promptFile", config.review.prompt_file, review_problem),
    )


def _template(project_dir: Path, key: str, name: str | None, problem_of: Callable[[str], str | None]) -> str | None:
    if name is None:
        return None
    path = (project_dir / name).resolve()
    if not path.is_relative_to(project_dir.resolve()):
        raise ConfigError(f"{CONFIG_NAME}: {key} must name a file inside the project (got {_show(name)})")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not readable as UTF-8 text"
        raise ConfigError(f"{CONFIG_NAME}: {key}: cannot read {name}: {why}") from None
    problem = problem_of(text)
    if problem:
        raise ConfigError(f"{CONFIG_NAME}: {key}: the template in {name} {problem}")
    return text


# --- reading ---------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    # Editors on some systems prepend a byte order mark; it carries no meaning in JSON.
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(
            f"{CONFIG_NAME} is not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(f"{CONFIG_NAME} must be a JSON object (got {_json_kind(value)})")
    return value


def _drop_unknown_keys(
    data: dict[str, Any], model: type[CamelModel], prefix: str, unknown: list[UnknownKey]
) -> dict[str, Any]:
    """A copy of `data` with only the keys `model` knows (by alias), recursively.

    Snake_case spellings of known keys count as unknown: the file format is camelCase,
    and accepting both would make two spellings of one key silently disagree.
    """
    fields = {info.alias or name: info for name, info in model.model_fields.items()}
    kept: dict[str, Any] = {}
    for key, value in data.items():
        info = fields.get(key)
        if info is None:
            nearest = _nearest(key, list(fields))
            unknown.append(UnknownKey(prefix + key, prefix + nearest if nearest else None))
            continue
        nested = info.annotation
        if isinstance(value, dict) and isinstance(nested, type) and issubclass(nested, CamelModel):
            value = _drop_unknown_keys(value, nested, f"{prefix}{key}.", unknown)
        kept[key] = value
    return kept


def _nearest(key: str, known: list[str]) -> str | None:
    # Compare case- and separator-blind, so useLlm -> useLLM and max_retries -> maxRetries.
    def fold(text: str) -> str:
        return text.lower().replace("_", "").replace("-", "")

    by_fold = {fold(name): name for name in known}
    match = difflib.get_close_matches(fold(key), list(by_fold), n=1, cutoff=0.75)
    return by_fold[match[0]] if match else None


# --- validation ------------------------------------------------------------------------


def _validate(data: dict[str, Any], unknown: list[UnknownKey]) -> ProjectConfig:
    try:
        return ProjectConfig.model_validate(data, strict=True)
    except ValidationError as exc:
        errors = exc.errors()
        message = _describe(errors[0])
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        raise ConfigError(message + _typo_hint(unknown, _about(errors[0], message))) from None


def _about(error: ErrorDetails, message: str) -> Callable[[str], bool]:
    """Which key paths an error is about: its own, or one inside it that its message names
    (`executor: command must be set` is about executor.command)."""
    path = _key_path(error["loc"])

    def about(key: str) -> bool:
        inside = key.startswith(path + ".") and key.rpartition(".")[2] in message
        return key == path or inside

    return about


_TYPE_PHRASES = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "dict_type": "must be an object",
    "finite_number": "must be a finite number",
}


def _describe(error: ErrorDetails) -> str:
    """One sentence for one pydantic error: `project.json: <key path> <problem> (got ...)`."""
    path = _key_path(error["loc"])
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "value_error":  # our own model validators; the message names the key
        reason = str(ctx.get("error", error["msg"]))
        return f"{CONFIG_NAME}: {path}: {reason}" if path else f"{CONFIG_NAME}: {reason}"
    phrase = _TYPE_PHRASES.get(kind) or _constraint_phrase(kind, ctx) or _fallback(error)
    if kind == "string_pattern_mismatch":  # model.apiKeyEnv: what was written may be a key, never shown
        return f"{CONFIG_NAME}: {path} {phrase}"
    return f"{CONFIG_NAME}: {path} {phrase} (got {_show(error['input'])})"


def _constraint_phrase(kind: str, ctx: dict[str, Any]) -> str | None:
    if kind == "greater_than_equal":
        return f"must be at least {ctx['ge']:g}"
    if kind == "greater_than":
        return f"must be greater than {ctx['gt']:g}"
    if kind == "less_than_equal":
        return f"must be at most {ctx['le']:g}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "too_short":
        return f"must have at least {ctx['min_length']} item{'s' if ctx['min_length'] != 1 else ''}"
    if kind == "literal_error":
        return f"must be one of {ctx['expected']}"
    if kind == "string_pattern_mismatch":  # model.apiKeyEnv is the only patterned key
        return "must be the name of an environment variable (letters, digits and _), not the key itself"
    return None


def _fallback(error: ErrorDetails) -> str:
    msg = error["msg"]
    return "is invalid: " + msg[:1].lower() + msg[1:]


def _key_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(f".{part}" if parts else part)
    return "".join(parts)


def _show(value: Any) -> str:
    text = orjson.dumps(value, default=repr).decode()
    return text if len(text) <= 60 else text[:57] + "..."


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a " + ("boolean" if isinstance(value, bool) else "number")


# --- environment -----------------------------------------------------------------------


def _apply_env(config: ProjectConfig, env: Mapping[str, str]) -> tuple[ProjectConfig, list[str]]:
    """Apply the GOLDENLOOP_* overrides; an empty variable counts as unset."""
    overrides: list[str] = []
    reflexion_update: dict[str, Any] = {}
    top_update: dict[str, Any] = {}

    switch = env.get(ENV_REFLEXION, "").strip()
    if switch:
        enabled = _parse_switch(switch)
        reflexion_update["enabled"] = enabled
        overrides.append(f"reflexion.enabled={str(enabled).lower()} ({ENV_REFLEXION})")
    model = env.get(ENV_MODEL, "").strip()
    if model:
        top_update["default_model"] = model
        overrides.append(f"defaultModel={model} ({ENV_MODEL})")
    reflection_model = env.get(ENV_REFLECTION_MODEL, "").strip()
    if reflection_model:
        reflexion_update["model"] = reflection_model
        overrides.append(f"reflexion.model={reflection_model} ({ENV_REFLECTION_MODEL})")

    store = env.get(ENV_MEMORY_STORE, "").strip()
    if store:
        problem = store_problem(store, in_file=False)
        if problem:
            raise ConfigError(f"{ENV_MEMORY_STORE} {problem}")
        top_update["memory"] = config.memory.model_copy(update={"store": store})
        overrides.append(f"memory.store ({ENV_MEMORY_STORE})")  # the value may hold a password: not shown

    if reflexion_update:
        top_update["reflexion"] = config.reflexion.model_copy(update=reflexion_update)
    return (config.model_copy(update=top_update) if top_update else config), overrides


def memory_store_url(setting: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The PostgreSQL URL memory.store names (read from its variable for "env:NAME"); None
    for the JSONL files. ConfigError (one sentence) when the variable is unset or wrong."""
    if setting is None or setting == "jsonl":
        return None
    if not setting.startswith(STORE_FROM_ENV):
        return setting
    name = setting[len(STORE_FROM_ENV):].strip()
    value = (os.environ if env is None else env).get(name, "").strip()
    if not value:
        raise ConfigError(f"memory.store reads the URL from {name}, which is not set")
    problem = store_problem(value, in_file=False)
    if problem or value.startswith(STORE_FROM_ENV):
        raise ConfigError(f"{name} (memory.store) {problem or 'must hold a URL, not another env: reference'}")
    return None if value == "jsonl" else value


def _parse_switch(value: str) -> bool:
    word = value.lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise ConfigError(
        f"{ENV_REFLEXION} must be one of on/off, 1/0, true/false, yes/no (got {value!r})"
    )
