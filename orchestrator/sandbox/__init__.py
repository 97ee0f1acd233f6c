"""Commands that write only where they are allowed to, and never outlive goldenloop.

`wrap(argv, writable=...)` turns a command line into one that runs it under a small
wrapper (guard.py). Start the result in a session of its own (start_new_session=True);
its stdin, stdout and stderr are the command's. The wrapper

- lets the command and everything it starts change files only beneath `writable` (and a
  few devices such as /dev/null), enforced by the kernel through Linux Landlock
  (landlock.py); reading and executing stay allowed everywhere;
- SIGKILLs the command's whole tree, daemons that left its session included, as soon as
  the process that started it dies, even by SIGKILL, and when the command exits.

Where Landlock cannot be used, `unavailable_reason()` says why in one sentence, and
`wrap(..., restrict=False)` still gives the second guarantee (on Linux).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from orchestrator.sandbox.guard import EXIT_CANNOT_RUN, EXIT_PARENT_GONE, EXIT_SANDBOX_FAILED
from orchestrator.sandbox.landlock import SandboxError, abi, restrict_writes, unavailable_reason

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

__all__ = [
    "EXIT_CANNOT_RUN",
    "EXIT_PARENT_GONE",
    "EXIT_SANDBOX_FAILED",
    "SandboxError",
    "abi",
    "restrict_writes",
    "unavailable_reason",
    "wrap",
]


def wrap(argv: list[str], *, writable: Iterable[Path | str], parent: int | None = None,
         restrict: bool = True) -> list[str]:
    """The command line that runs `argv` under the wrapper, watching `parent` (this process
    by default); with `restrict`, writes are allowed only beneath `writable`."""
    # -P: the command's folder (the user's repository) must not shadow goldenloop's modules.
    command = [sys.executable, "-P", "-m", "orchestrator.sandbox", "--parent", str(parent or os.getpid())]
    if restrict:
        # Each path absolute: the wrapper may start in another folder. With no path at all,
        # /dev/null (always granted) still makes the wrapper restrict: then nothing is writable.
        for path in [*writable] or ["/dev/null"]:
            command += ["--write", os.path.abspath(path)]
    return [*command, "--", *argv]
