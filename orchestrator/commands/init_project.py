"""`goldenloop init`: a project's `.openagents/` with the checks its files suggest.

Detection reads only marker files (no tool is run), so it is instant and safe in any
folder: pytest for Python tests or pytest config, the package manager's `test` script for
Node, `go test ./...`, `cargo test`, mypy when it is configured, `tsc --noEmit` when there
is a tsconfig.json. What it guessed is printed, for the user to correct in project.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from orchestrator.layout import Layout

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2

# npm writes this test script into every new package.json: it is no test suite.
_NPM_PLACEHOLDER = "no test specified"
_SKIP_DIRS = frozenset({".git", ".venv", "venv", "node_modules", ".openagents", "__pycache__", ".tox", "build", "dist"})


def run_init(args: argparse.Namespace) -> int:
    project = args.dir
    if not project.is_dir():
        return _fail(f"{project} is not a folder", EXIT_USAGE)
    layout = Layout(project.resolve())
    if layout.config.exists() and not args.force:
        return _fail(f"{layout.config} already exists; edit it, or add --force to write a new one", EXIT_REFUSED)
    tests, typechecks = detect_checks(layout.project_dir)
    try:
        _write(layout, tests, typechecks)
    except OSError as exc:
        return _fail(f"cannot write {layout.root}: {exc.strerror or exc}", EXIT_REFUSED)
    if args.json:
        print(json.dumps({"wrote": str(layout.config), "testCommands": tests, "typecheckCommands": typechecks}))
    else:
        print(_report(layout, tests, typechecks))
    return EXIT_OK


def _fail(message: str, code: int) -> int:
    print(f"goldenloop init: {message}", file=sys.stderr)
    return code


def _write(layout: Layout, tests: list[str], typechecks: list[str]) -> None:
    from orchestrator.session import ensure_runtime_ignored  # the engine only when a command runs

    layout.root.mkdir(parents=True, exist_ok=True)
    config = {"testCommands": tests, "typecheckCommands": typechecks}
    layout.config.write_text(json.dumps(config, indent=2) + "\n")
    if not layout.tasks.exists():  # --force renews the config, never the user's backlog
        layout.tasks.write_text("")
    ensure_runtime_ignored(layout.project_dir)


def _report(layout: Layout, tests: list[str], typechecks: list[str]) -> str:
    lines = [f"wrote {layout.config}"]
    lines += [f"  test:      {c}" for c in tests] or ["  test:      (none found)"]
    lines += [f"  typecheck: {c}" for c in typechecks]
    lines.append("next:")
    if not tests and not typechecks:
        lines.append("  set testCommands in .openagents/project.json: a run needs a check to judge its attempts")
    else:  # a task closes only when these pass: see what fails before it starts
        lines.append("  goldenloop checks baseline        (the tests failing now; a task must leave them passing)")
    lines += ['  goldenloop add "what to do"        (or goldenloop import TODO.md)',
              "  do-one-task                       (runs the next ready task)"]
    return "\n".join(lines)


def detect_checks(project: Path) -> tuple[list[str], list[str]]:
    """(test commands, typecheck commands) that the project's files point to."""
    tests: list[str] = []
    typechecks: list[str] = []
    python = _python(project)
    if _has_pytest(project):
        tests.append(f"{python} -m pytest -q")
    node = _node_test(project)
    if node:
        tests.append(node)
    if (project / "go.mod").is_file():
        tests.append("go test ./...")
    if (project / "Cargo.toml").is_file():
        tests.append("cargo test")
    if _has_mypy(project):
        typechecks.append(f"{python} -m mypy .")
    if (project / "tsconfig.json").is_file():
        typechecks.append("npx tsc --noEmit")
    return tests, typechecks


def _python(project: Path) -> str:
    # The project's own virtual environment has its dependencies; a bare `python` may not.
    for venv in (".venv", "venv"):
        if (project / venv / "bin" / "python").exists():
            return f"{venv}/bin/python"
    return "python3"  # `python` is missing on many systems that have Python 3


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace") if path.is_file() else ""
    except OSError:
        return ""


def _has_pytest(project: Path) -> bool:
    if (project / "pytest.ini").is_file() or (project / "conftest.py").is_file() or _python_tests_folder(project):
        return True
    if "[tool.pytest" in _text(project / "pyproject.toml") or "[tool:pytest]" in _text(project / "setup.cfg"):
        return True
    return "[pytest]" in _text(project / "tox.ini") or _has_test_files(project)


def _python_tests_folder(project: Path) -> bool:
    # A JavaScript project's tests/ is no reason to run pytest: only one holding Python is.
    folder = project / "tests"
    return folder.is_dir() and next(folder.rglob("*.py"), None) is not None


def _has_test_files(project: Path, depth: int = 3) -> bool:
    """A test_*.py or *_test.py within a few folders, leaving environments and builds out."""
    folders = [project]
    for _ in range(depth):
        below: list[Path] = []
        for folder in folders:
            try:
                entries = list(folder.iterdir())
            except OSError:
                continue
            for entry in entries:
                if entry.is_file() and entry.suffix == ".py" and (entry.name.startswith("test_")
                                                                  or entry.stem.endswith("_test")):
                    return True
                if entry.is_dir() and entry.name not in _SKIP_DIRS and not entry.name.startswith("."):
                    below.append(entry)
        folders = below
    return False


def _has_mypy(project: Path) -> bool:
    return ((project / "mypy.ini").is_file() or (project / ".mypy.ini").is_file()
            or "[tool.mypy" in _text(project / "pyproject.toml") or "[mypy" in _text(project / "setup.cfg"))


def _node_test(project: Path) -> str | None:
    """`<manager> test` when package.json has a real test script; the manager from its lock file."""
    try:
        package = json.loads(_text(project / "package.json") or "{}")
    except json.JSONDecodeError:
        return None
    scripts = package.get("scripts") if isinstance(package, dict) else None
    test = scripts.get("test") if isinstance(scripts, dict) else None
    if not isinstance(test, str) or not test.strip() or _NPM_PLACEHOLDER in test:
        return None
    for lock, manager in (("pnpm-lock.yaml", "pnpm"), ("yarn.lock", "yarn"), ("bun.lockb", "bun")):
        if (project / lock).is_file():
            return f"{manager} test"
    return "npm test"
