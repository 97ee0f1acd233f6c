"""goldenloop's temporary files, named after the process that made them.

What an agent reads or writes (its prompt file, its scratch folder) lives in the system's
temporary folder, which its sandbox lets it write. What only goldenloop uses (a private
index, a patch being applied, the judge's exports) lives in `private_temp()`, in
goldenloop's own folder outside it, where no agent can change it while goldenloop reads
it. Each lives while its step runs and is removed when the step ends. A run killed with SIGKILL removes nothing, so
each name carries its maker's pid and start time (`goldenloop-<kind>-<pid>.<start>-...`)
and every run, as it opens, removes those whose maker is gone (`sweep_dead`): a pid
used again since has another start time.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from orchestrator.private_home import private_home

_NAME = re.compile(r"^goldenloop-[a-z]+-(\d+)\.(\d+)-")
PROC = Path("/proc")


def temp_prefix(kind: str) -> str:
    """The start of a temporary name for `kind` (prompt, agent, index, patch) made by this process."""
    return f"goldenloop-{kind}-{os.getpid()}.{_started(os.getpid()) or 0}-"


def private_temp() -> Path:
    """goldenloop's own temporary folder (made, mode 0700), outside what an agent may write."""
    folder = private_home() / "tmp"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


def sweep_dead(folder: Path | None = None) -> int:
    """Remove the temporary files and folders of goldenloop processes that are gone, from
    `folder` (the system's and goldenloop's own temporary folders by default); how many."""
    if folder is None:
        return sweep_dead(Path(tempfile.gettempdir())) + sweep_dead(private_temp())
    removed = 0
    for entry in folder.glob("goldenloop-*"):
        found = _NAME.match(entry.name)
        if found is None or _alive(int(found[1]), int(found[2])) or not _mine(entry):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
        removed += 1
    return removed


def _alive(pid: int, started: int) -> bool:
    if PROC.is_dir():  # Linux: the same pid with another start time is another process
        return _started(pid) == started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _started(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (Linux); None when it is gone or unknown."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rfind(")") + 2:].split()[19])


def _mine(entry: Path) -> bool:
    try:
        return entry.lstat().st_uid == os.getuid()
    except FileNotFoundError:
        return False
