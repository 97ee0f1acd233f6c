"""The base's run, recorded per tree: a second task on a tree already judged takes the
recorded run instead of running the suite again.

A record stands for one run of the checks in the judge's tree, and is keyed by all that
decides that run: the content tree (the base's tree without `.openagents/`, which only the
bookkeeping changes), the check and setup commands with their limits, the interpreter
and the programs the commands find on `PATH`, the environment variables the runners read,
and the provided ignored paths (`worktree.link`, `worktree.copy`: a `.venv`, whose
installed packages are what runs the tests) down to their installed packages' folders.
A changed tracked file is a new tree; a package installed or removed changes a folder's
time; either is a new key.

Records are goldenloop's own: written by it under `.openagents/baselines/` (git-ignored,
beyond an agent's reach), each holding its whole key, which must equal the key of the
run asking, this checkout's folder included. A record from another clone, one git tracks,
one a different key would have made, or one that does not read back whole is not
trusted: the suite runs. A run that did not end cleanly (setup failed, a tree not
exported, a command killed at its time limit) is never recorded.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path

import anyio

from orchestrator.checks.settings import CheckSettings
from orchestrator.checks.verify import Verdict
from orchestrator.config import ProjectConfig
from orchestrator.git.provided import Provided
from orchestrator.git.repo import NO_HOOKS, GitPlumbing, RepoError
from orchestrator.judging.sessions import Run
from orchestrator.layout import FOLDER
from reflection.fileio import atomic_write
from reflection.redact import redact

log = logging.getLogger("goldenloop.judging")

FORMAT = 1
FOLDER_NAME = "baselines"
PROGRAMS = ("python", "python3", "pytest", "tox", "nox", "make", "npm", "node", "go", "cargo", "uv", "poetry")
RUNNER_VARIABLES = ("PATH", "PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "NODE_OPTIONS",
                    "GOFLAGS", "PYTHONHASHSEED", "TZ", "LANG", "LC_ALL")
PROVIDED_DEPTH = 3  # .venv/lib/python3.x/site-packages: a package installed changes its folder's time


class BaselineRecords:
    """The recorded base runs of one project, in `<project>/.openagents/baselines/`."""

    def __init__(self, project_dir: Path) -> None:
        self.project_dir = project_dir
        self.folder = project_dir / FOLDER / FOLDER_NAME
        self._contents: dict[str, str] = {}  # tree -> its content digest: a tree never changes

    @classmethod
    def of(cls, project_dir: Path, config: ProjectConfig) -> BaselineRecords | None:
        """The project's records, or None where `checks.recordRuns` is off."""
        return cls(project_dir) if config.checks_config.record_runs else None

    def key(self, repo: GitPlumbing, tree: str, checks: CheckSettings, setup: tuple[str, ...],
            provided: Provided | None) -> dict[str, object]:
        """All that decides the checks' run on `tree`."""
        return {
            "format": FORMAT,
            "project": str(self.project_dir.resolve()),
            "content": self._content(repo, tree),
            "checks": asdict(checks),
            "setup": list(setup),
            "interpreter": _interpreter(),
            "environment": {name: os.environ.get(name) for name in RUNNER_VARIABLES},
            "provided": _provided_state(provided),
        }

    def _content(self, repo: GitPlumbing, tree: str) -> str:
        """`content_tree`, once per tree: the base's run is keyed to be read, then to be recorded."""
        if tree not in self._contents:
            self._contents[tree] = content_tree(repo, tree)
        return self._contents[tree]

    @asynccontextmanager
    async def held(self, key: Mapping[str, object]) -> AsyncIterator[None]:
        """One run per key at a time, across workers and processes: a second task on the same
        tree waits for the first's run and takes its record (an exclusive `flock`, which two
        threads of one process hold apart too, since each opens the file itself)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / f"{_name(key)}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            await anyio.to_thread.run_sync(fcntl.flock, fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the last descriptor releases the lock

    def read(self, key: Mapping[str, object], tree: str) -> Run | None:
        """The recorded run for exactly `key`, as a run of `tree`; None when there is none to trust."""
        path = self.folder / f"{_name(key)}.json"
        try:
            data = json.loads(path.read_bytes())
            if data.get("key") != json.loads(json.dumps(key)) or self._tracked(path):
                return None
            run = data["run"]
            singles = tuple(Verdict.model_validate(single) for single in run["singles"])
            return Run(tree, Verdict.model_validate(run["verdict"]), dict(run["outcomes"]), bool(run["reported"]),
                       singles)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:  # half a file, or not ours: run the suite
            log.info("recorded baseline %s not used: %s", path.name, exc)
            return None

    def write(self, key: Mapping[str, object], run: Run) -> None:
        """Record a run that ended cleanly (see the module's note)."""
        if not recordable(run):
            return
        body = {"key": key, "run": {"verdict": _masked(run.verdict).model_dump(mode="json"),
                                    "outcomes": dict(run.outcomes), "reported": run.reported,
                                    "singles": [_masked(single).model_dump(mode="json") for single in run.singles]}}
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write(self.folder / f"{_name(key)}.json", json.dumps(body).encode(), durable=False)

    def _tracked(self, path: Path) -> bool:
        """A record git tracks came from a commit, not from this checkout's runs."""
        done = subprocess.run(["git", *NO_HOOKS, "ls-files", "--error-unmatch", str(path)], cwd=self.project_dir,
                              capture_output=True, check=False)
        return done.returncode == 0


# A credential-like run of characters with nothing to name it (a key's body a test printed):
# a record may be written before the run has learned that value, so it goes by shape too.
_BARE_KEY = re.compile(r"(?<![\w+/=])(?=[A-Za-z0-9+/=]*[a-z])(?=[A-Za-z0-9+/=]*[A-Z])(?=[A-Za-z0-9+/=]*\d)"
                       r"[A-Za-z0-9+/=]{32,}(?![\w+/=])")


def _mask(text: str) -> str:
    return _BARE_KEY.sub("[REDACTED:key]", redact(text))


def _masked(verdict: Verdict) -> Verdict:
    """The verdict with what the checks printed, and their commands, masked: a record is a
    file at rest, and a failing test may print a secret. Ids and the signature stay."""
    steps = [step.model_copy(update={"output": _mask(step.output), "command": redact(step.command)})
             for step in verdict.steps]
    digest = verdict.digest
    if digest is not None:
        digest = digest.model_copy(update={"text": _mask(digest.text),
                                           "first_error": _mask(digest.first_error) if digest.first_error else None})
    return verdict.model_copy(update={"steps": steps, "digest": digest})


def recordable(run: Run) -> bool:
    """A run that ended cleanly: nothing about it was chance or half done."""
    return (run.setup_failed is None and run.unexported is None
            and not any(step.timed_out or not step.started for single in run.singles for step in single.steps))


def content_tree(repo: GitPlumbing, tree: str) -> str:
    """`tree` without `.openagents/`, as one digest of its other top-level entries."""
    try:
        listing = repo.git("ls-tree", "-z", tree)
    except RepoError:
        return tree
    entries = [entry for entry in listing.split("\0") if entry and not entry.endswith(f"\t{FOLDER}")]
    return hashlib.sha256("\0".join(entries).encode()).hexdigest()


def _interpreter() -> dict[str, object]:
    """goldenloop's own Python and each program the checks may start, by what it resolves to."""
    found: dict[str, object] = {"self": _identity(sys.executable)}
    for program in PROGRAMS:
        where = shutil.which(program)
        if where:
            found[program] = _identity(where)
    return found


def _identity(path: str) -> list[object]:
    real = os.path.realpath(path)
    try:
        seen = os.stat(real)
    except OSError:
        return [real]
    return [real, seen.st_size, seen.st_mtime_ns]


def _provided_state(provided: Provided | None) -> dict[str, int]:
    """Each provided path's folders down to `PROVIDED_DEPTH`, and its top files, by their times."""
    if provided is None:
        return {}
    state: dict[str, int] = {}
    for source in (*provided.link, *provided.copy):
        for current, dirs, files in os.walk(source):
            depth = 0 if current == str(source) else os.path.relpath(current, source).count(os.sep) + 1
            for name in [*dirs, *files] if depth == 0 else dirs:
                path = os.path.join(current, name)
                try:
                    state[os.path.relpath(path, provided.root)] = os.lstat(path).st_mtime_ns
                except OSError:
                    continue
            if depth >= PROVIDED_DEPTH - 1:
                dirs[:] = []
        try:
            state[source.relative_to(provided.root).as_posix()] = os.lstat(source).st_mtime_ns
        except OSError:
            continue
    return state


def _name(key: Mapping[str, object]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
