"""Where a SEARCH text is: the files of the repository holding it, and at how many places.

For a SEARCH/REPLACE block under a path that does not exist (targets.py): small models
often name a file that is not there (`src/utils.py`) while copying its lines exactly
from the one that is. Only text files that git tracks can be chosen; the others are
read too, so that a text also found in an untracked file makes the edit ambiguous.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

from orchestrator.edits.search import places

MAX_BYTES = 512 * 1024  # larger files are not searched: a model copies from what it was shown


def search_places(root: Path, names: Iterable[str], search: str) -> dict[str, int]:
    """{file: places where `search` matches} for the files holding it at least once."""
    first = next((line.strip() for line in search.splitlines() if line.strip()), "")
    found = {}
    for name in names:
        text = file_text(root / name)
        if text is None or first not in text:  # the cheap test first: most files lack it
            continue
        count = len(places(text, search))
        if count:
            found[name] = count
    return found


def file_text(path: Path) -> str | None:
    """The file as "\\n"-terminated text with "\\n" line ends; None: not a small text file."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_BYTES:
            return None
        data = path.read_bytes()
        text = data.decode("utf-8").replace("\r\n", "\n")
    except (OSError, UnicodeDecodeError):
        return None
    if "\x00" in text:
        return None
    return text if text.endswith("\n") or not text else text + "\n"


def tracked_files(root: Path) -> set[str]:
    """The files git tracks in `root` (empty when git cannot tell: then nothing is chosen)."""
    try:
        done = subprocess.run(["git", "ls-files", "-z", "--cached"], cwd=root, capture_output=True, check=False)
    except OSError:
        return set()
    if done.returncode != 0:
        return set()
    return {name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name}
