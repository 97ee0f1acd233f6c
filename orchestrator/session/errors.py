"""What a user can fix: one sentence and an exit code (docs/ARCHITECTURE.md lists them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from orchestrator.git.repo import RepoError
from orchestrator.tasks import TaskFileError
from reflection.fileio import LockTimeout

EXIT_DONE, EXIT_BLOCKED, EXIT_USAGE, EXIT_NO_TASK, EXIT_REFUSED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130

T = TypeVar("T")


class UserError(Exception):
    """A problem the user can fix; `str()` is one sentence, `exit_code` as docs/ARCHITECTURE.md lists them."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class MemoryUnavailable(UserError):
    """The shared memory's database cannot be reached now: a fleet worker tries again later,
    where a wrong config (a plain UserError) would fail the same way every time."""


def as_user_error(make: Callable[[], T], exit_code: int) -> T:
    """Run `make`, turning the errors a user can cause into a UserError."""
    try:
        return make()
    except (RepoError, TaskFileError, LockTimeout) as exc:
        raise UserError(str(exc), exit_code) from None
