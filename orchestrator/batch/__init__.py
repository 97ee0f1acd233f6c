"""Batch runs: the overnight engine, parallel worktrees, the live board and progress.md."""
