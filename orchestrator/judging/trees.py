"""The trees the judge runs the checks on, made as git tree objects: no working tree and
no index of the user's is touched, and each costs a few git processes whatever the size
of the repository.

- the candidate: exactly what the attempt would commit (`Repo.tree_with`);
- the old tests' tree: the candidate, with every test file and runner configuration
  (`test_paths.judged_from_base`) as the base has it, so that what the attempt did to
  them cannot change how the old tests run;
- the new tests on the base: the base, with the candidate's copies of those files, so
  that a new test is seen to fail before the change.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from posixpath import basename

from orchestrator.git.repo import GitPlumbing, RepoError
from orchestrator.judging.export import read_blobs
from orchestrator.judging.test_paths import (
    RUNNER_FILES,
    SECTIONED_FILES,
    command_scripts,
    is_test_path,
    judged_from_base,
    module_files,
    named_paths,
    plugin_modules,
    runner_section,
)
from orchestrator.tempfiles import private_temp, temp_prefix


def _split_z(output: str) -> list[str]:
    return [item for item in output.split("\0") if item]


class SessionTrees:
    """Tree objects over one base tree, in one repository."""

    def __init__(self, repo: GitPlumbing, base: str, globs: Sequence[str], commands: Sequence[str]) -> None:
        self.repo, self.base = repo, base  # `base`: the tree the task started from
        self.globs, self.commands = tuple(globs), tuple(commands)
        self.scripts: frozenset[str] = command_scripts(commands)  # then `pin`: every file the runner uses

    def pin(self, test_files: Iterable[str]) -> None:
        """The base's files the old tests run with, beyond test paths and runner files: the
        files its tests were found in, the scripts the test commands run and what those
        source or include, and the plugin modules its conftest.py files and configuration
        load. Their base copies run the old tests, whatever an attempt did to them."""
        known = set(_split_z(self.repo.git("ls-tree", "-r", "-z", "--name-only", "--full-tree", self.base)))
        pinned = (set(self.scripts) | set(test_files)) & known
        readers = sorted(p for p in known if basename(p) in RUNNER_FILES | SECTIONED_FILES)
        for path, data in zip(readers, read_blobs(self.repo, self._ids(readers)), strict=True):
            text = data.decode("utf-8", "replace")
            pinned |= {f for module in plugin_modules(text) for f in module_files(module)} & known
        todo = sorted(p for p in pinned | set(readers) if not p.endswith(".py") or p in self.scripts)
        for _ in range(3):  # what a script sources, and what that sources in turn
            found = set()
            for path, data in zip(todo, read_blobs(self.repo, self._ids(todo)), strict=True):
                found |= named_paths(data.decode("utf-8", "replace"), os.path.dirname(path), known) - pinned
            pinned |= found
            todo = sorted(p for p in found if not is_test_path(p, self.globs))
        self.scripts = frozenset(pinned)

    def _ids(self, paths: Sequence[str]) -> list[str]:
        listed = self.repo.git("ls-tree", "-z", "--full-tree", self.base, "--", *paths) if paths else ""
        ids = {}
        for entry in _split_z(listed):
            meta, _, path = entry.partition("\t")
            ids[path] = meta.split(" ")[2]
        return [ids.get(p, "") for p in paths]

    def changed(self, tree: str, other: str | None = None) -> list[str]:
        """Paths whose entries differ between `tree` and `other` (the base when None)."""
        if tree == (other or self.base):
            return []
        listed = self.repo.git("diff-tree", "-r", "-z", "--name-only", "--no-renames", other or self.base, tree)
        return sorted(_split_z(listed))

    def test_side(self, candidate: str) -> list[str]:
        """The paths where the candidate's tests or runner configuration differ from the base's."""
        found = []
        for path in self.changed(candidate):
            if not judged_from_base(path, self.globs, self.scripts):
                continue
            if basename(path) in SECTIONED_FILES and not self._section_differs(path, candidate):
                continue  # a package's metadata changed, not how its tests run
            found.append(path)
        return found

    def old_tests(self, candidate: str, paths: Sequence[str]) -> str:
        """The candidate's code under the base's tests and runner configuration."""
        return self.overlay(candidate, self.base, paths)

    def new_tests_on_base(self, candidate: str, paths: Sequence[str], drop: Sequence[str] = ()) -> str:
        """The base's code under the candidate's tests and runner configuration, less `drop`."""
        return self.overlay(self.overlay(self.base, candidate, paths), self.base, drop, remove=True)

    def own_tests(self, candidate: str, paths: Sequence[str], drop: Sequence[str]) -> str:
        """The candidate less `drop`: the base's test files it left as they were, whose tests
        the old tests' run has run already, so that its own copies run alone."""
        return self.overlay(candidate, self.base, drop, remove=True)

    def runner_changed(self, paths: Sequence[str]) -> bool:
        """Whether the candidate changed how tests run (a runner file, a conftest, a script a
        test command runs), not only test files: its own tests then run in the whole tree."""
        return any(basename(p) in RUNNER_FILES | SECTIONED_FILES or p in self.scripts
                   or not is_test_path(p, self.globs) for p in paths)

    def holds(self, tree: str, paths: Sequence[str]) -> list[str]:
        """Those of `paths` that `tree` has."""
        listed = self.repo.git("ls-tree", "-r", "-z", "--name-only", "--full-tree", tree, "--", *paths) if paths else ""
        return sorted(_split_z(listed))

    def overlay(self, onto: str, source: str, paths: Sequence[str], *, remove: bool = False) -> str:
        """`onto` with `paths` as `source` has them (a path `source` lacks: removed);
        `remove`: the paths removed, whatever `source` holds."""
        if not paths:
            return onto
        with tempfile.TemporaryDirectory(prefix=temp_prefix("index"), dir=private_temp()) as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.repo.git("read-tree", onto, env=env)
            listed = "" if remove else self.repo.git("ls-tree", "-r", "-z", "--full-tree", source, "--", *paths)
            entries = {}
            for entry in _split_z(listed):
                meta, _, path = entry.partition("\t")
                mode, _, sha = meta.split(" ")
                entries[path] = f"{mode} {sha}"
            none = "0 " + "0" * len(onto)
            info = "".join(f"{entries.get(path, none)}\t{path}\0" for path in paths)
            self.repo.feed("update-index", "-z", "--index-info", data=os.fsencode(info), env=env)
            return self.repo.git("write-tree", env=env)

    def _section_differs(self, path: str, candidate: str) -> bool:
        name = basename(path)
        return runner_section(name, self._blob(self.base, path)) != runner_section(name, self._blob(candidate, path))

    def _blob(self, tree: str, path: str) -> bytes | None:
        try:
            return self.repo.feed("cat-file", "blob", f"{tree}:{path}", data=b"")
        except RepoError:  # no such file in that tree
            return None
