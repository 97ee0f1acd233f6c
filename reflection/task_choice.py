"""A project's choice of where task notes live and how they are made (seed 000's SPI).

`memory.taskReflectionStore` and `memory.taskReflectionStrategy` in project.json name a
built-in ("file", "memory", "llm") or the project's own class or factory as
`module:attribute` (the module importable where goldenloop runs: installed, or on
PYTHONPATH). A store factory is called with no argument; a strategy factory with
`model=` (the reflection model, metered like every call) and must give an object with an
async `reflect(TaskReflectionInput)`. Any problem is a `TaskChoiceError`: one sentence.
"""

from __future__ import annotations

import importlib
import logging
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # checking a name in project.json imports neither
    from reflection.llm import ChatModel
    from reflection.task_store import TaskReflectionStore

log = logging.getLogger("goldenloop.task_store")

NAMED = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")  # module:attribute
STORES = ("file", "memory")
STRATEGIES = ("llm",)


class TaskChoiceError(ValueError):
    """A store or strategy that cannot be used; `str()` is one sentence."""


def choice_problem(value: str, builtins: tuple[str, ...]) -> str | None:
    """What makes `value` unusable as a store or strategy name, as a phrase; None if nothing."""
    if value in builtins or NAMED.match(value):
        return None
    words = " or ".join(f'"{b}"' for b in builtins)
    return f'must be {words}, or your own as "module:attribute" (got {value!r})'


def load_named(spec: str) -> Any:
    """The object `module:attribute` names."""
    module, _, attribute = spec.partition(":")
    try:
        found: Any = importlib.import_module(module)
        for part in attribute.split("."):
            found = getattr(found, part)
    except ImportError as exc:
        raise TaskChoiceError(f"cannot import {module} for {spec!r}: {exc}") from None
    except AttributeError:
        raise TaskChoiceError(f"{module} has no {attribute} (named by {spec!r})") from None
    return found


def check_named(spec: str | None) -> None:
    """That a `module:attribute` name imports and names a class or function, without making
    it (a run whose task reflection cannot run checks the names all the same)."""
    if spec is not None and NAMED.match(spec):
        found = load_named(spec)
        if not callable(found):
            raise TaskChoiceError(f"{spec!r} names {type(found).__name__}, not a class or function")


def custom_store(spec: str) -> TaskReflectionStore:
    """The project's own store: `spec`'s class or factory called with no argument."""
    from reflection.task_store import TaskReflectionStore

    store = _made(spec, load_named(spec))
    if not isinstance(store, TaskReflectionStore):
        raise TaskChoiceError(f"{spec!r} gave {type(store).__name__}, which has no store() and retrieve()")
    return store


def memory_store() -> TaskReflectionStore:
    from reflection.task_store import InMemoryTaskReflectionStore

    log.warning("task notes are kept in memory only (memory.taskReflectionStore: \"memory\"): "
                "they will not outlive this process")
    return InMemoryTaskReflectionStore()


def open_task_strategy(choice: str, model: ChatModel, *, timeout_s: float, template: str | None) -> Any:
    """The `ReflectionStrategy` `choice` names: "llm" (the model's, with the project's
    question), or the project's own, made with `model=`."""
    from reflection.task_strategy import LlmReflectionStrategy, ReflectionStrategy  # only a run that reflects

    if choice == "llm":
        return LlmReflectionStrategy(model, timeout_s=timeout_s, template=template)
    strategy = _made(choice, load_named(choice), model=model)
    if not isinstance(strategy, ReflectionStrategy):
        raise TaskChoiceError(f"{choice!r} gave {type(strategy).__name__}, which has no reflect()")
    return strategy


def _made(spec: str, factory: Any, **given: Any) -> Any:
    if not callable(factory):
        raise TaskChoiceError(f"{spec!r} names {type(factory).__name__}, not a class or function")
    try:
        return factory(**given)
    except Exception as exc:  # noqa: BLE001 - the project's own code: its trouble in one sentence
        raise TaskChoiceError(f"{spec!r} could not be made: {type(exc).__name__}: {exc}") from None
