"""Executors turn a subtask prompt into changes in the working tree.

`BuiltinExecutor` asks the model for edits and applies them (see `orchestrator.edits`);
`CommandExecutor` runs an external coding agent's command line.

Each name is imported when first asked for (PEP 562): a run with the command executor
never loads the edit parsers, and one with the builtin executor never the other.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.executors.base import ExecutionRequest, ExecutionResult, Executor
    from orchestrator.executors.builtin import BuiltinExecutor
    from orchestrator.executors.command import CommandExecutor

_HOMES = {
    "BuiltinExecutor": "orchestrator.executors.builtin",
    "CommandExecutor": "orchestrator.executors.command",
    "ExecutionRequest": "orchestrator.executors.base",
    "ExecutionResult": "orchestrator.executors.base",
    "Executor": "orchestrator.executors.base",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


__all__ = [
    "BuiltinExecutor",
    "CommandExecutor",
    "ExecutionRequest",
    "ExecutionResult",
    "Executor",
]
