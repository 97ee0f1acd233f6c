"""A repository opened for a run, by concern: `opening` (config, backlog, keys, lock, dirty
tree), `wiring` (the loop's parts from the config), `housekeeping` (runtime files out of
git, the memory's retention), `errors` (one sentence and an exit code), and `project`,
whose `ProjectSession` puts them together with recovery (orchestrator/recovery/).

Each name is imported when first asked for (PEP 562): a command that only needs
`Overrides` or an exit code does not load the loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from orchestrator.session.errors import (
        EXIT_BLOCKED,
        EXIT_DONE,
        EXIT_INTERRUPTED,
        EXIT_NO_TASK,
        EXIT_REFUSED,
        EXIT_USAGE,
        MemoryUnavailable,
        UserError,
    )
    from orchestrator.session.housekeeping import apply_retention, ensure_runtime_ignored
    from orchestrator.session.opening import Overrides
    from orchestrator.session.project import ProjectSession

_HOMES = {
    **dict.fromkeys(("EXIT_BLOCKED", "EXIT_DONE", "EXIT_INTERRUPTED", "EXIT_NO_TASK", "EXIT_REFUSED", "EXIT_USAGE",
                     "MemoryUnavailable", "UserError"), "orchestrator.session.errors"),
    "apply_retention": "orchestrator.session.housekeeping",
    "ensure_runtime_ignored": "orchestrator.session.housekeeping",
    "Overrides": "orchestrator.session.opening",
    "ProjectSession": "orchestrator.session.project",
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = [
    "EXIT_BLOCKED",
    "EXIT_DONE",
    "EXIT_INTERRUPTED",
    "EXIT_NO_TASK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "MemoryUnavailable",
    "Overrides",
    "ProjectSession",
    "UserError",
    "apply_retention",
    "ensure_runtime_ignored",
]
