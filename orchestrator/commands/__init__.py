"""The commands, each imported only when it runs: `do-one-task` and `overnight`."""

# Nothing is exported: each command is reached through orchestrator.cli, which imports
# it only when it runs.
__all__: list[str] = []
