"""Opening a repository for a run: each check that can refuse it, as one sentence.

`ProjectSession.open` calls these in the order a user would fix what they find: the
config with the command line's overrides, the backlog, the models' API keys and the
agent's program, the lock; the dirty tree last, once recovery has said which changes a
killed run left (those are not the user's).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.config import ConfigError, ProjectConfig, load_config, memory_store_url, url_problem
from orchestrator.executors.program import missing_agent_program
from orchestrator.git.bookkeeping import Pending
from orchestrator.git.repo import Repo
from orchestrator.layout import Layout
from orchestrator.lock import AgentLock, LockHeld, describe_holder
from orchestrator.session.errors import EXIT_REFUSED, UserError
from orchestrator.task_archive import archive_closed_tasks
from orchestrator.tasks import TaskBoard
from reflection.llm import missing_api_key

SHOWN = 5  # paths named in a sentence before " ..."


@dataclass
class Overrides:
    """Command-line switches that win over project.json and the environment."""

    model: str | None = None
    reflexion: bool | None = None
    max_retries: int | None = None
    allow_dirty: bool = False
    api_base: str | None = None  # --api-base: wins over model.apiBase
    # The fleet worker's --memory: a postgresql:// URL that wins over memory.store; None
    # or "project": what the project's config (and GOLDENLOOP_MEMORY_STORE) says.
    memory_store: str | None = None


def load_project_config(project_dir: Path, overrides: Overrides, notices: list[str]) -> ProjectConfig:
    """project.json with the overrides applied; refused when no check could judge an attempt."""
    try:
        loaded = load_config(project_dir)
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    notices.extend(loaded.warnings)
    config = lend_agent_model(_overridden(loaded.config, overrides))
    if not (config.test_commands or config.typecheck_commands):
        where = "project.json sets no" if loaded.path else "there is no .openagents/project.json to set"
        raise UserError(
            f"{where} testCommands or typecheckCommands, and without them no attempt could be "
            "checked before it is committed; add at least one command (see project.json.example)"
            + loaded.hint_for("testCommands", "typecheckCommands")
        )
    return config


def _overridden(config: ProjectConfig, o: Overrides) -> ProjectConfig:
    reflexion = config.reflexion
    if o.reflexion is not None:
        reflexion = reflexion.model_copy(update={"enabled": o.reflexion})
    if o.max_retries is not None:
        reflexion = reflexion.model_copy(update={"max_retries": o.max_retries})
    update: dict = {"reflexion": reflexion}
    if o.model:
        update["default_model"] = o.model
    if o.api_base:
        problem = url_problem(o.api_base)
        if problem:
            raise UserError(f"--api-base {problem}")
        update["model"] = config.model.model_copy(update={"api_base": o.api_base})
    return config.model_copy(update=update)


def memory_url_of(config: ProjectConfig, overrides: Overrides) -> str | None:
    """The PostgreSQL memory the run uses: the worker's --memory, else memory.store; None:
    the JSONL files."""
    override = overrides.memory_store
    if override and override != "project":
        return override
    try:
        return memory_store_url(config.memory.store)
    except ConfigError as exc:
        raise UserError(str(exc)) from None


def open_board(project_dir: Path, config: ProjectConfig, notices: list[str]) -> TaskBoard:
    """The backlog, its oldest closed tasks first moved to the archive (see task_archive)."""
    layout = Layout(project_dir)
    try:
        moved = archive_closed_tasks(layout.tasks, layout.task_archive, over=config.archive_closed_over)
    except OSError as exc:  # the backlog works as well unarchived: say so and go on
        notices.append(f"closed tasks were not moved to {layout.task_archive}: {exc.strerror or exc}")
        moved = 0
    if moved:
        notices.append(f"moved {moved} closed task(s) from tasks.jsonl to .openagents/archive/")
    return TaskBoard(layout.tasks, archive=layout.task_archive)


def check_api_keys(config: ProjectConfig, models: list[str]) -> None:
    """Refuse, before any work, a run whose model calls would all fail for want of a key.

    Only `models`, the ones the run can call, are checked, from the environment alone: a
    run that calls none neither needs a key nor imports litellm to find that out.
    """
    m = config.model
    for name in models:
        problem = missing_api_key(name, api_base=m.api_base, api_key_env=m.api_key_env)
        if problem:
            hint = ("export it (model.apiKeyEnv names it)" if m.api_key_env
                    else "export it, or name the variable that holds the key in model.apiKeyEnv")
            raise UserError(f"{problem.removesuffix('.')}: {hint}.")


def lend_agent_model(config: ProjectConfig) -> ProjectConfig:
    """The agent's model serves goldenloop's own calls only with a key goldenloop can see:
    an agent may read its key from a .env file, which goldenloop leaves to it."""
    lent = config.agent_model_lent
    if lent is None or "default_model" in config.model_fields_set:
        return config
    m = config.model
    problem = missing_api_key(lent, api_base=m.api_base, api_key_env=m.api_key_env)
    return config.agent_model_refused(problem.removesuffix(".") + " in goldenloop's environment") if problem else config


def own_model_notice(config: ProjectConfig) -> str | None:
    """With an agent at work, which model goldenloop's own calls use, said once a run when
    no setting of the project named it; None when one did, or no call would be made."""
    if not (config.reflexion.enabled and config.reflexion.use_llm) or config.reflexion.model:
        return None
    if "default_model" in config.model_fields_set:
        return None
    heuristic = "goldenloop's own reflections are heuristic, with no model call"
    if config.agent_model_unusable:
        return (f"{heuristic}: the agent's {config.agent_model_unusable} (goldenloop reads no .env file; "
                "export the key for model-written reflections)")
    if config.own_model is None:
        return (f"{heuristic}: with an agent at work it calls only a model you name (reflexion.model, defaultModel "
                "or executor.agentModel)")
    return f"goldenloop's own reflections use the agent's model, {config.own_model}"


def check_agent_program(config: ProjectConfig, project_dir: Path) -> None:
    """Before any attempt: a missing program is the config's fault, not the task's."""
    if problem := missing_agent_program(config.executor, project_dir):
        raise UserError(problem)


def take_lock(project_dir: Path, notices: list[str]) -> AgentLock:
    lock = AgentLock(project_dir)
    try:
        lock.acquire()
    except LockHeld as exc:
        raise UserError(str(exc), EXIT_REFUSED) from None
    if lock.stale_holder:
        notices.append(f"took over a stale lock left by a run that died ({describe_holder(lock.stale_holder)})")
    return lock


def refuse_dirty_tree(repo: Repo, pending: Pending, *, allow_dirty: bool, notices: list[str]) -> None:
    """Refuse uncommitted changes of the user's (unless --allow-dirty). Attempts never run
    in the checkout, so whatever is uncommitted there is the user's."""
    if yours := pending.yours():  # never refused: a waiver in project.json is meant for this run
        notices.append(f"your uncommitted changes to {_some(yours)} "
                       "are used as they are and never committed by goldenloop: commit them yourself")
    dirty = repo.dirty_paths()
    if not dirty:
        return
    if allow_dirty:
        notices.append(f"working tree has {len(dirty)} uncommitted change(s); they are left alone "
                       "and never committed (--allow-dirty)")
        return
    raise UserError(
        f"the working tree has uncommitted changes of yours ({_some(dirty)}); commit or stash them, "
        "or pass --allow-dirty",
        EXIT_REFUSED,
    )


def _some(paths: list[str]) -> str:
    return ", ".join(paths[:SHOWN]) + (" ..." if len(paths) > SHOWN else "")
