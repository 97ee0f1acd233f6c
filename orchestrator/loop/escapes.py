"""Writes the sandbox refused an agent in the user's checkout, read from what it printed.

The kernel refuses such a write (EACCES) and tells goldenloop nothing; the agent's tools
print it ("[Errno 13] Permission denied: '/home/you/repo/README.md'", "EACCES:
permission denied, open ..."). An attempt that tried to change the user's checkout from its
worktree is rejected: no task needs it, and its retry is told why. A refused write
elsewhere is only noted: tools try those innocently (a cache in the home folder), and so
does git in a worktree, whose index and refs live in the repository's git folder (an agent
that commits, as many do, is refused there and goldenloop commits instead).
"""

from __future__ import annotations

import re
from pathlib import Path

_REFUSED = re.compile(r"permission denied|EACCES|read-only file system|operation not permitted", re.I)
_ABSOLUTE = re.compile(r"""(?<![\w.~-])(/[^\s'"`:,;()\[\]{}<>]+)""")
LISTED = 5


def refused_writes(output: str, checkout: Path, git_dir: Path) -> tuple[list[str], list[str]]:
    """(paths in `checkout` outside `git_dir`, as the checkout names them; other absolute
    paths) that lines saying a write was refused name, each once, in order."""
    inside: list[str] = []
    outside: list[str] = []
    for line in output.splitlines():
        if not _REFUSED.search(line):
            continue
        for raw in _ABSOLUTE.findall(line):
            path = Path(raw.rstrip("."))
            theirs = path == checkout or checkout in path.parents
            if theirs and not (path == git_dir or git_dir in path.parents):
                named = str(path.relative_to(checkout)) if path != checkout else "."
                if named not in inside:
                    inside.append(named)
            elif str(path) not in outside:
                outside.append(str(path))
    return inside, outside


def escape_sentence(paths: list[str]) -> str:
    more = f" (and {len(paths) - LISTED} more)" if len(paths) > LISTED else ""
    return (f"rejected: the agent tried to change {', '.join(paths[:LISTED])}{more} in your checkout, outside its "
            "worktree, and the sandbox refused it; work only in the current folder, which is the task's own copy")
