"""Environment failures: a check that cannot run at all, as opposed to code that fails it.

A missing program (exit 126/127), a missing third-party Python module, or a command
line the runner rejects (a usage error) is the environment's fault: no edit to the
repository will fix it, so retrying the task with a model only burns money. Everything
else, a failing assertion above all, is left to the loop.

An import error is not always the environment's: a test written before the code it
tests imports a module (or a name) the task is meant to create. So a module whose name
matches a file or package in the repository, or that the task text mentions, is taken
to belong to the task, never to the environment.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

from orchestrator.checks.verify import NOT_EXECUTABLE_EXIT, NOT_FOUND_EXIT, CommandResult
from reflection.text import shorten

log = logging.getLogger("goldenloop.envcheck")

PYTEST_USAGE_EXIT = 4  # pytest: usage error, or a path or node id that does not exist
USAGE_EXITS = frozenset({2, 64})  # argparse/getopt convention, and sysexits EX_USAGE
_WALK_LIMIT = 50_000  # most files looked at when listing the repository's modules
_SKIPPED_DIRS = frozenset(
    {"node_modules", "__pycache__", "site-packages", "dist-packages"}
    | {"venv", "env", "build", "dist"}
)

_NOT_FOUND = re.compile(
    r"^(?:\S*sh: (?:\d+: |line \d+: )?)?([^\s:]+): (?:command not found|not found|"
    r"No such file or directory)\s*$",
    re.M,
)
_CANT_OPEN = re.compile(r"can't open file '([^'\n]+)': \[Errno 2\] No such file or directory")
_NO_MODULE = re.compile(r"No module named '?([A-Za-z_][\w.]*)'?")
_NO_NAME = re.compile(r"cannot import name '(\w+)' from '([A-Za-z_][\w.]*)'")
_USAGE = re.compile(
    r"^(?:ERROR: )?usage: |error: unrecognized arguments|unrecognized option|unknown option|"
    r"invalid option|no such option",
    re.M | re.I,
)
_PYTEST_MISSING_PATH = re.compile(r"^ERROR: (?:file or directory )?not found: (\S+)", re.M)
_PYTEST = re.compile(r"\bpytest\b|\bpy\.test\b")


def mentions(text: str, name: str) -> bool:
    """`name` occurs in `text` as a whole word or path (so `test_add` is not `test_add_x`)."""
    if not name or not text:
        return False
    pattern = rf"(?<![\w]){re.escape(name)}(?![\w])"
    return re.search(pattern, text, re.I) is not None


def environment_error(step: CommandResult, *, root: Path, task_text: str = "") -> str | None:
    """One sentence when `step` failed because it could not run at all, else None.

    `root` is the repository (to tell its own modules from third-party ones) and
    `task_text` the task's title and description (names it mentions are the task's).
    """
    if step.ok or step.timed_out:
        return None
    label = f"The {step.kind} command `{step.command}`"
    if not step.started:
        return f"{label} could not be started: {_first_line(step.output)}."
    for check in (_missing_program, _missing_module, _usage_error):
        reason = check(step, root, task_text)
        if reason:
            log.info("environment failure in %r: %s", step.command, reason)
            return f"{label} cannot run: {reason}."
    return None


def _missing_program(step: CommandResult, root: Path, task_text: str) -> str | None:
    if step.exit_code == NOT_EXECUTABLE_EXIT:
        return f"`{_program(step)}` is not executable (exit code {NOT_EXECUTABLE_EXIT})"
    script = _CANT_OPEN.search(step.output)
    if script and not _is_task_path(script.group(1), root, task_text):
        return f"the script `{script.group(1)}` does not exist"
    if step.exit_code != NOT_FOUND_EXIT:
        return None
    found = _NOT_FOUND.search(step.output)
    program = found.group(1) if found else _program(step)
    if _looks_like_path(program) and _is_task_path(program, root, task_text):
        return None  # a script the task is meant to write
    return (
        f"the program `{program}` was not found (exit code {NOT_FOUND_EXIT}); "
        "install it or correct the command"
    )


def _missing_module(step: CommandResult, root: Path, task_text: str) -> str | None:
    """The first import failure of a module that is neither the repository's nor the task's."""
    candidates: list[tuple[int, str, str | None]] = [
        (m.start(), m.group(1), None) for m in _NO_MODULE.finditer(step.output)
    ]
    candidates += [(m.start(), m.group(2), m.group(1)) for m in _NO_NAME.finditer(step.output)]
    if not candidates:
        return None
    own = repository_modules(root)
    for _, module, name in sorted(candidates):
        top = module.split(".", 1)[0]
        if top in own or mentions(task_text, module) or mentions(task_text, top):
            continue
        if name is not None:
            return (
                f"the installed module `{module}` has no `{name}` (ImportError); "
                "install the version the project needs"
            )
        return (
            f"the Python module `{module}` is not installed (ModuleNotFoundError); "
            "install the project's dependencies"
        )
    return None


def _usage_error(step: CommandResult, root: Path, task_text: str) -> str | None:
    pytest_usage = step.exit_code == PYTEST_USAGE_EXIT and _PYTEST.search(step.command)
    if pytest_usage:
        missing = _PYTEST_MISSING_PATH.search(step.output)
        if missing:
            path = missing.group(1).split("::", 1)[0]
            if _is_task_path(path, root, task_text):
                return None  # a test file the task is meant to add
            return f"pytest was given `{missing.group(1)}`, which does not exist (exit code 4)"
    elif step.exit_code not in USAGE_EXITS or not _USAGE.search(step.output):
        return None
    return f"the command line was rejected (exit code {step.exit_code}: {_usage_line(step.output)})"


def _usage_line(output: str) -> str:
    """The line that says what was wrong, e.g. `error: unrecognized arguments: --bogus`."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        says_what = re.search(r"error|unrecognized|unknown|invalid|no such", line, re.I)
        if says_what and not line.lower().startswith(("usage:", "error: usage:")):
            return shorten(line, 200)
    return shorten(lines[0], 200) if lines else "usage error"


def _is_task_path(path: str, root: Path, task_text: str) -> bool:
    """A path the task text names, by its path or its file name."""
    relative = path.removeprefix(str(root)).lstrip("/").removeprefix("./")
    return any(mentions(task_text, p) for p in {path, relative, os.path.basename(relative)} if p)


def _looks_like_path(name: str) -> bool:
    # `./run.sh` may be the task's to write; `mypy` or `python` never is, whatever the text says.
    return "/" in name or bool(re.search(r"\.\w+$", name))


def _program(step: CommandResult) -> str:
    words = step.command.split()
    return words[0] if words else step.command


def _first_line(text: str) -> str:
    return shorten(next((line.strip() for line in text.splitlines() if line.strip()), "no output"), 200)


def repository_modules(root: Path) -> frozenset[str]:
    """Top-level names a Python import could resolve to inside the repository.

    Every `.py` file's stem and every directory holding Python files counts, wherever it
    sits (flat, `src/` or nested layouts alike): a false match only makes the check more
    cautious (an import error is then left to the loop instead of being blamed on the
    environment).
    """
    names: set[str] = set()
    for directory, files in _walk(root):
        python = [f for f in files if f.endswith((".py", ".pyi"))]
        names.update(f.rsplit(".", 1)[0] for f in python)
        if python and directory != root:
            names.add(directory.name)
    return frozenset(names)


def _walk(root: Path) -> Iterator[tuple[Path, list[str]]]:
    seen = 0
    for current, dirs, files in os.walk(root):
        # Hidden dirs (.git, .venv, caches) and installed packages are not the project.
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS]
        seen += len(files)
        yield Path(current), files
        if seen > _WALK_LIMIT:
            log.debug("stopped listing modules of %s after %d files", root, seen)
            return
