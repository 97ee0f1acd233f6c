"""goldenloop's files in the system's temporary folder, named after the process that made them.

A prompt file, an agent's scratch folder or a private index lives there while its step
runs and is removed when the step ends. A run killed with SIGKILL removes nothing, so
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

_NAME = re.compile(r"^goldenloop-[a-z]+-(\d+)\.(\d+)-")
PROC = Path("/proc")


def temp_prefix(kind: str) -> str:
    """The start of a temporary name for `kind` (prompt, agent, index, patch) made by this process."""
    return f"goldenloop-{kind}-{os.getpid()}.{_started(os.getpid()) or 0}-"


def sweep_dead(folder: Path | None = None) -> int:
    """Remove the temporary files and folders of goldenloop processes that are gone; how many."""
    folder = Path(tempfile.gettempdir()) if folder is None else folder
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
