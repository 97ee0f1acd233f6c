"""Executors turn a subtask prompt into changes in the working tree.

`BuiltinExecutor` asks the model for edit blocks and applies them (see `edits`);
`CommandExecutor` runs an external coding agent's command line.
"""

from orchestrator.executors.base import ExecutionRequest, ExecutionResult, Executor
from orchestrator.executors.builtin import BuiltinExecutor
from orchestrator.executors.command import CommandExecutor
from orchestrator.executors.edits import Edit, EditError, apply_edits, parse_edits, safe_path

__all__ = [
    "BuiltinExecutor",
    "CommandExecutor",
    "Edit",
    "EditError",
    "ExecutionRequest",
    "ExecutionResult",
    "Executor",
    "apply_edits",
    "parse_edits",
    "safe_path",
]
