"""Executors turn a subtask prompt into changes in the working tree.

`BuiltinExecutor` asks the model for edits and applies them (see `orchestrator.edits`);
`CommandExecutor` runs an external coding agent's command line.
"""

from orchestrator.executors.base import ExecutionRequest, ExecutionResult, Executor
from orchestrator.executors.builtin import BuiltinExecutor
from orchestrator.executors.command import CommandExecutor

__all__ = [
    "BuiltinExecutor",
    "CommandExecutor",
    "ExecutionRequest",
    "ExecutionResult",
    "Executor",
]
