"""`goldenloop checks baseline | waive | unwaive`: which tests fail now, and which the user accepts.

goldenloop closes a task only when its checks pass, apart from the known failures listed
in `checks.knownFailures` of project.json. These commands are how a user sees the tests
failing on the tree as it is and, only when they say so, records some as known failures.
Exit codes: 0 done, 1 refused (the failing tests are not all known), 2 usage or config
error, 4 a run holds the repository (it reads project.json when it starts and puts back
what it read, so a change made meanwhile would be lost).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio

from orchestrator.checks.preflight import Baseline, preflight
from orchestrator.checks.waivers import Waivers
from orchestrator.config import ConfigError, check_config, config_path, load_config
from orchestrator.layout import find_project
from reflection.fileio import atomic_write

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_LOCKED = 0, 1, 2, 4
KEY = "checks.knownFailures"


class ChecksCommandError(Exception):
    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


PLACEHOLDERS = {"", "...", "…", "why"}  # what a pasted example holds instead of a reason


def run_checks(args: argparse.Namespace) -> int:
    try:
        _check_arguments(args)
        project = _project(args.dir)
        return COMMANDS[args.action](args, project)
    except ChecksCommandError as exc:
        print(f"goldenloop checks {args.action}: {exc}", file=sys.stderr)
        return exc.code
    except ConfigError as exc:
        print(f"goldenloop checks {args.action}: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _check_arguments(args: argparse.Namespace) -> None:
    reason = getattr(args, "reason", None)
    if reason is not None and (reason.strip() in PLACEHOLDERS or reason.strip().startswith("<")):
        raise ChecksCommandError(f"--reason {reason!r} is a placeholder: say why these tests may fail")
    if args.action == "baseline" and reason is not None and not args.waive:
        raise ChecksCommandError("--reason goes with --waive: without it nothing is recorded")
    if any(not test.strip() for test in getattr(args, "tests", None) or []):
        raise ChecksCommandError("a test to waive cannot be empty: give its id as the runner prints it")


def _project(start: Path) -> Path:
    try:
        project = find_project(start)
    except ValueError as exc:
        hint = " (or create one with goldenloop init)" if start.is_dir() else ""
        raise ChecksCommandError(f"{exc}{hint}") from None
    for warning in load_config(project).warnings:  # a misspelt key would waive nothing
        if "unknown key" in warning or "no longer read" in warning:
            print(f"note: {warning}", file=sys.stderr)
    return project


# -- baseline ---------------------------------------------------------------------------


def _baseline(args: argparse.Namespace, project: Path) -> int:
    config = load_config(project).config
    if not config.checks.any:
        raise ChecksCommandError("no testCommands or typecheckCommands in .openagents/project.json: nothing to run")
    print(f"Running {len(config.checks.steps)} check command(s) on the working tree as it is ...", flush=True,
          file=sys.stderr if args.json else sys.stdout)
    baseline = anyio.run(preflight, project, config.checks)
    waivers = Waivers.of(config.checks_config.known_failures)
    failing = sorted(baseline.failing_tests)
    new = [t for t in failing if waivers.entry_for(t) is None]
    if args.json:
        return _baseline_json(args, project, baseline, failing, waivers, new)
    if baseline.environment_error:
        print(f"The checks cannot run: {baseline.environment_error}")
        return EXIT_REFUSED
    print(_report(baseline.verdict.summary(), failing, waivers, baseline.duration_s))
    if not baseline.complete:
        print("Not every failure is a test goldenloop can name (a crash, a collection or typecheck error, a "
              "timeout): no task can close until that is fixed, and it cannot be waived.")
        return EXIT_REFUSED if args.waive else EXIT_OK
    if args.waive and new:
        _add_waivers(project, new, args.reason)
        print(f"Waived {len(new)} test(s) in {KEY} of .openagents/project.json; commit it to share them.")
    elif new:
        print("A task is done only when these pass. If they are known failures that no task need fix, "
              f'waive them all with `goldenloop checks baseline --waive --reason "..."`, or some with '
              '`goldenloop checks waive ID... --reason "..."`.')
    return EXIT_OK


def _baseline_json(args: argparse.Namespace, project: Path, baseline: Baseline, failing: list[str], waivers: Waivers,
                   new: list[str]) -> int:
    """`baseline --json`: what the sentences say, as one object; the same exit codes."""
    refused = bool(baseline.environment_error) or (not baseline.complete and args.waive)
    waiving = args.waive and new and not refused
    if waiving:
        _add_waivers(project, new, args.reason)
    print(json.dumps({
        "summary": baseline.verdict.summary(), "durationS": round(baseline.duration_s, 3),
        "environmentError": baseline.environment_error or None, "complete": baseline.complete,
        "failing": [{"test": t, "waived": waivers.entry_for(t) is not None} for t in failing],
        "waivedNow": new if waiving else [],
    }))
    return EXIT_REFUSED if refused else EXIT_OK


def _report(summary: str, failing: list[str], waivers: Waivers, duration_s: float) -> str:
    if not failing:
        return f"{summary} ({duration_s:.1f} s): no failing test."
    lines = [f"{summary} ({duration_s:.1f} s): {len(failing)} failing test(s):"]
    for test in failing:
        entry = waivers.entry_for(test)
        waived = f"   (waived{': ' + entry.reason if entry and entry.reason else ''})" if entry else ""
        lines.append(f"  {test}{waived}")
    return "\n".join(lines)


# -- waive / unwaive --------------------------------------------------------------------


def _waive(args: argparse.Namespace, project: Path) -> int:
    added = _add_waivers(project, args.tests, args.reason)
    kept = len(args.tests) - added
    note = f" ({kept} already listed)" if kept else ""
    if args.json:
        print(json.dumps({"waived": added, "alreadyListed": kept}))
        return EXIT_OK
    print(f"Waived {added} test(s) in {KEY} of .openagents/project.json{note}: a task may close while they fail, "
          "unless it names them or broke them. `goldenloop checks baseline` shows which fail now; "
          "`goldenloop checks unwaive` takes one back.")
    return EXIT_OK


def _unwaive(args: argparse.Namespace, project: Path) -> int:
    def drop(entries: list[Any]) -> list[Any]:
        return [e for e in entries if _pattern(e) not in args.tests]

    before, after = _edit_waivers(project, drop)
    missing = [t for t in args.tests if t not in {_pattern(e) for e in before}]
    if args.json:
        print(json.dumps({"removed": len(before) - len(after), "left": len(after), "notListed": missing}))
        return EXIT_REFUSED if missing else EXIT_OK
    if missing:
        print(f"Not in {KEY}: {', '.join(missing)}", file=sys.stderr)
    print(f"{len(before) - len(after)} waiver(s) removed; {len(after)} left.")
    return EXIT_REFUSED if missing else EXIT_OK


def _add_waivers(project: Path, tests: list[str], reason: str | None) -> int:
    def add(entries: list[Any]) -> list[Any]:
        known = {_pattern(e) for e in entries}
        fresh = [t for t in dict.fromkeys(tests) if t not in known]
        return [*entries, *({"test": t, **({"reason": reason} if reason else {})} for t in fresh)]

    before, after = _edit_waivers(project, add)
    return len(after) - len(before)


def _edit_waivers(project: Path, change: Any) -> tuple[list[Any], list[Any]]:
    """Change checks.knownFailures in project.json, under the agent lock, keeping every other
    key as it is; the result must load as a config. Returns the list before and after."""
    from orchestrator.lock import AgentLock, LockHeld

    try:
        lock = AgentLock(project).acquire()
    except LockHeld as exc:
        raise ChecksCommandError(f"{exc}; wait for it to end", EXIT_LOCKED) from None
    try:
        load_config(project)  # a file that does not load now is named as it is, not rewritten
        path = config_path(project)
        data = _read(path)
        section = data.setdefault("checks", {})
        if not isinstance(section, dict):
            raise ChecksCommandError("checks in .openagents/project.json must be a JSON object")
        before = list(section.get("knownFailures") or [])
        after = change(before)
        section["knownFailures"] = after
        check_config(data)  # refuse to write a file the next run could not read
        atomic_write(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode())
        return before, after
    finally:
        lock.release()


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ChecksCommandError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ChecksCommandError(f"{path} must hold a JSON object")
    return data


def _pattern(entry: Any) -> str:
    return str(entry.get("test")) if isinstance(entry, dict) else str(entry)


COMMANDS = {"baseline": _baseline, "waive": _waive, "unwaive": _unwaive}
