"""goldenloop's folder of each project outside every repository: `$XDG_STATE_HOME/goldenloop`
(`~/.local/state/goldenloop` by default), one folder per project, readable by you alone.

What must be kept but may hold a secret lives here, where no `git add` can take it and no
push can carry it: the exact bytes of an attempt's patch when its copy in `.openagents/`
had to be masked. Attempts' worktrees and the judge's exports live here too: outside the
repository, and outside the temporary folder an agent may write in.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["private_home", "project_home"]


def private_home() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "goldenloop"


def project_home(project_dir: Path, *, make: bool = True) -> Path:
    """This project's folder (made, mode 0700, unless `make` is False): named after the
    folder and a digest of its path."""
    resolved = Path(project_dir).resolve()
    digest = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:10]
    folder = private_home() / f"{resolved.name}-{digest}"
    if make:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder
