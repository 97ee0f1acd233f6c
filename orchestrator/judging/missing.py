"""A failure in the judge's tree caused by a file the commit does not hold.

The checks run on a clean export of what would be committed. A fix that imports a module
it wrote under an ignored folder, or a test command that runs a script git ignores,
passes in the tree it was written in and fails there: the sentence names the file and
says why the commit lacks it (git ignores it, or it was never added).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from orchestrator.git.repo import NO_HOOKS

_MODULE = re.compile(r"No module named '([A-Za-z_][\w.]*)'")
_NAME_FROM = re.compile(r"cannot import name '\w+' from '([A-Za-z_][\w.]*)'")
_PATH = re.compile(r"""(?:No such file or directory: |can't open file |not found: |sh: \d+: )['"]?([\w./-]+[\w])""")
SOURCE_ROOTS = ("", "src/")


def lacking(output: str, checkout: Path, export: Path) -> list[tuple[str, str]]:
    """(path, why) of each file the failure names that the checkout has and the export
    lacks; why is "ignored" (git ignores it) or "untracked" (never added)."""
    found: list[str] = []
    for group in _named_paths(output):
        for candidate in group:  # the most precise first: one file per name
            relative = _relative(candidate, export)
            if relative is None or relative in found:
                continue
            if (checkout / relative).exists() and not (export / relative).exists():
                found.append(relative)
                break
    return [(path, "ignored" if _ignored(checkout, path) else "untracked") for path in found]


def sentence(missing: list[tuple[str, str]], *, for_attempt: bool) -> str:
    """One sentence naming them: to an attempt (fix it) or about the checks (set them up)."""
    named = ", ".join(f"`{path}`" + (" (git ignores it)" if why == "ignored" else " (untracked)")
                      for path, why in missing[:3])
    if for_attempt:
        return (f"the checks ran on exactly what would be committed, which lacks {named}: the attempt's code "
                "needs a file the commit does not hold; put that code in files git tracks")
    return (f"the checks run on a clean export of the commit, which lacks {named} from your checkout; commit it, "
            "or name it in worktree.copy or worktree.link of project.json")


def _named_paths(output: str) -> list[list[str]]:
    """For each module or path the output names, the files it may be, most precise first."""
    groups = []
    for module in [*_MODULE.findall(output), *_NAME_FROM.findall(output)]:
        parts = module.split(".")
        groups.append([f"{root}{'/'.join(parts[:cut])}{ending}" for cut in range(len(parts), 0, -1)
                       for root in SOURCE_ROOTS for ending in (".py", "/__init__.py", "")])
    return groups + [[path] for path in _PATH.findall(output)]


def _relative(path: str, export: Path) -> str | None:
    text = path.removeprefix(str(export)).lstrip("/").removeprefix("./")
    if not text or text.startswith("..") or Path(text).is_absolute():
        return None
    return text


def _ignored(checkout: Path, path: str) -> bool:
    done = subprocess.run(["git", *NO_HOOKS, "check-ignore", "-q", "--", path], cwd=checkout,
                          capture_output=True, check=False)
    return done.returncode == 0
