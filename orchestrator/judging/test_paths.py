"""Which paths are tests, and which files say how the tests run.

The judge runs the tests that existed at the base with the base's own copies of these
files (judging/trees.py): the test files themselves (by `DEFAULT_TEST_GLOBS`, or
`retry.testGlobs`), and the runner's configuration (`pytest.ini`, `tox.ini`,
`conftest.py`, the pytest sections of `pyproject.toml` and `setup.cfg`, jest's and
vitest's config files). What an attempt does to any of them cannot change how the old
tests run.
"""

from __future__ import annotations

import configparser
import json
import re
import tomllib
from collections.abc import Sequence
from functools import lru_cache
from posixpath import basename

_JS_EXT = "{js,jsx,ts,tsx,mjs,cjs,mts,cts}"

DEFAULT_TEST_GLOBS: tuple[str, ...] = (
    # Python (pytest, unittest, Django's tests.py)
    "test_*.py",
    "*_test.py",
    "tests.py",
    "conftest.py",
    "tests/**",
    "test/**",
    "testing/**",
    "testdata/**",
    "test_data/**",
    # JavaScript / TypeScript (jest, vitest, mocha)
    f"*.test.{_JS_EXT}",
    "*.spec.*",
    "__tests__/**",
    # Go
    "*_test.go",
    # Rust integration tests. Unit tests live in `#[cfg(test)]` modules inside ordinary
    # source files, which no path can tell apart: they are judged as code.
    "tests/**/*.rs",
)



def _expand_braces(glob: str) -> list[str]:
    """`*.{js,ts}` -> [`*.js`, `*.ts`]; nested and repeated groups expand too."""
    match = re.search(r"\{([^{}]*)\}", glob)
    if match is None:
        return [glob]
    head, tail = glob[: match.start()], glob[match.end() :]
    return [x for alt in match.group(1).split(",") for x in _expand_braces(head + alt + tail)]


def _translate(glob: str) -> str:
    """One brace-free glob as a regex body: `**` crosses folders, `*` and `?` do not."""
    out: list[str] = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append(r"(?:[^/]*/)*")  # zero or more whole folders
            i += 3
        elif glob.startswith("**", i):
            out.append(r".*")
            i += 2
        elif glob[i] == "*":
            out.append(r"[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append(r"[^/]")
            i += 1
        elif glob[i] == "[" and (end := glob.find("]", i + 2)) > 0:
            body = glob[i + 1 : end].replace("\\", "\\\\")
            out.append(f"[^{body[1:]}]" if body.startswith("!") else f"[{body}]")
            i = end + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


@lru_cache(maxsize=256)
def _compile(glob: str) -> tuple[re.Pattern[str], bool]:
    """(pattern, on_basename) for one glob, braces expanded."""
    on_basename = "/" not in glob
    bodies = []
    for alt in _expand_braces(glob):
        if alt.startswith("/"):  # anchored at the repository root
            bodies.append(_translate(alt[1:]))
        elif on_basename:
            bodies.append(_translate(alt))
        else:  # a folder glob matches at any depth: monorepos nest their tests/
            bodies.append(r"(?:[^/]*/)*" + _translate(alt))
    return re.compile("(?:" + "|".join(bodies) + r")\Z"), on_basename


def _normalise(path: str) -> str:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def is_test_path(path: str, globs: Sequence[str] = DEFAULT_TEST_GLOBS) -> bool:
    """Whether a repository-relative posix path is a test file by any of `globs`.

    `*` and `?` stay within one path segment and `**` crosses folders; `{a,b}` and
    `[abc]` work as in a shell. A glob without `/` matches the file name in any folder;
    a glob with `/` matches from any folder boundary (`tests/**` also matches
    `pkg/tests/x.py`), unless it starts with `/`, which anchors it at the root.
    """
    path = _normalise(path)
    name = basename(path)
    for glob in globs:
        pattern, on_basename = _compile(glob)
        if pattern.match(name if on_basename else path):
            return True
    return False




# --- the runner's configuration ------------------------------------------------------------------

# Files that only say how tests run: the base's copy judges the old tests, whole.
RUNNER_FILES = frozenset({
    "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini", "tox.toml", "conftest.py", "noxfile.py",
    "jest.config.js", "jest.config.ts", "jest.config.mjs", "jest.config.cjs", "jest.config.json",
    "vitest.config.js", "vitest.config.ts", "vitest.config.mjs", "vitest.config.mts",
    ".mocharc.js", ".mocharc.json", ".mocharc.yml", ".mocharc.yaml", "karma.conf.js",
    "Makefile", "makefile", "GNUmakefile", "justfile", "Justfile",
})
# Files with a section for the test runner beside much else (a package's metadata): the
# base's copy judges the old tests when that section differs.
SECTIONED_FILES = frozenset({"pyproject.toml", "setup.cfg", "package.json"})


# Modules that run before or around the tests when they lie on Python's path (the
# repository's top and its src/ are): one of these that an attempt writes would run the
# tests its own way.
RUNNER_MODULES = frozenset({"pytest", "_pytest", "pluggy", "py", "sitecustomize", "usercustomize", "site"})


def judged_from_base(path: str, globs: Sequence[str] = DEFAULT_TEST_GLOBS,
                     scripts: frozenset[str] = frozenset()) -> bool:
    """Whether the base's copy of `path` (or its absence there) runs the old tests: a test
    file, a file of the test runner's configuration, a module that would stand in for the
    runner or Python's start-up, or a file the base's test commands use (`scripts`: the
    scripts they run, what those source, the base's plugins, the files its tests are in)."""
    path = _normalise(path)
    name = basename(path)
    return (name in RUNNER_FILES or name in SECTIONED_FILES or path in scripts or is_test_path(path, globs)
            or runs_first(path))


def runs_first(path: str) -> bool:
    """A module on Python's path at start-up named like the runner or `sitecustomize`."""
    parts = path.removeprefix("src/").split("/")
    return parts[0].removesuffix(".py") in RUNNER_MODULES and (len(parts) > 1 or parts[0].endswith(".py"))


_INTERPRETERS = re.compile(r"^(?:python[\d.]*|sh|bash|zsh|dash|node|ruby|perl|php|tclsh)$")


def command_scripts(commands: Sequence[str]) -> frozenset[str]:
    """Files of the repository that the test commands run: the program of each simple
    command when it is a path (`./run_tests.sh`), or the script an interpreter is given
    (`bash scripts/test.sh`, `python tools/check.py`), or a Makefile `make -f` names. A
    code file a command merely passes to the runner is not one of them."""
    found = set()
    for command in commands:
        for simple in re.split(r"&&|\|\||[;|&\n]", command):
            words = [w.strip("'\"") for w in simple.split() if "=" not in w.split("/")[0] or w.startswith(("-", "."))]
            if not words:
                continue
            program = words[0]
            outside = program.startswith(("/", "~", "$"))  # a program outside the repository
            if not outside and ("/" in program or re.search(r"\.(?:sh|bash|py|js|mjs|ts)$", program)):
                found.add(_normalise(program))
            elif "-m" not in words and (_INTERPRETERS.match(basename(program)) or basename(program) == "make"):
                given = next((w for w in words[1:] if not w.startswith("-")), None)
                flagged = words[words.index("-f") + 1] if "-f" in words[:-1] else None
                script = flagged if basename(program) == "make" else given
                if script and (not script.startswith("/")):
                    found.add(_normalise(script))
    return frozenset(found)


def runner_section(name: str, data: bytes | None) -> object:
    """The part of a sectioned file (`SECTIONED_FILES`) that configures the tests, as data;
    a file that cannot be read stands for itself, so any change to it counts."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
        if name == "pyproject.toml":
            tool = tomllib.loads(text).get("tool", {})
            return {key: tool.get(key) for key in ("pytest", "tox", "hatch", "poe", "pdm")}
        if name == "setup.cfg":
            parser = configparser.RawConfigParser()
            parser.read_string(text)
            return dict(parser["tool:pytest"]) if parser.has_section("tool:pytest") else None
        if name == "package.json":
            found = json.loads(text)
            return {k: found.get(k) for k in ("jest", "mocha", "ava", "scripts")} if isinstance(found, dict) else found
    except (UnicodeDecodeError, ValueError, configparser.Error):
        return data
    return data


_PLUGINS = re.compile(r"pytest_plugins\s*=\s*([\[\(][^\]\)]*[\]\)]|['\"][^'\"]*['\"])")
_PLUGIN_FLAG = re.compile(r"(?:^|[\s\"'\[,])-p\s*[\"']?([A-Za-z_][\w.]*)")


def plugin_modules(text: str) -> set[str]:
    """The plugin modules a conftest.py (`pytest_plugins = [...]`) or a configuration
    (`-p name` in its options) loads."""
    found = {name for block in _PLUGINS.findall(text) for name in re.findall(r"['\"]([\w.]+)['\"]", block)}
    return found | {name for name in _PLUGIN_FLAG.findall(text) if not name.startswith("no")}


def module_files(module: str) -> list[str]:
    """The files a dotted module name may be, at the top of the repository or in src/."""
    stem = module.replace(".", "/")
    return [f"{root}{stem}{end}" for root in ("", "src/") for end in (".py", "/__init__.py")]


def named_paths(text: str, folder: str, known: set[str]) -> set[str]:
    """The repository's files a script names to source, include or run, by path from the
    top or from the script's folder: any file but Python code, which only counts when an
    interpreter runs it (a script naming `src/app.py` to lint it does not make it the
    runner's)."""
    found = set()
    run = {m for m in re.findall(r"python[\d.]*\s+([\w./-]+\.py)", text)}
    for word in re.findall(r"[\w./-]+", text):
        if word.endswith(".py") and word not in run:
            continue
        for candidate in (_normalise(word), _normalise(f"{folder}/{word}") if folder else ""):
            if candidate in known:
                found.add(candidate)
    return found


def is_doctest(test_id: str) -> bool:
    """A doctest's id (`calc.py::calc.add`): its name is the dotted path of what it documents,
    and it lives in the code it tests."""
    name = test_id.rsplit("::", 1)[-1].split("[", 1)[0]
    return "::" in test_id and "." in name
