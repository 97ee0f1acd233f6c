"""Test integrity guard: an attempt must fix the code, not weaken the tests that judge it.

A coding agent under pressure to "make the tests pass" can edit the failing test,
delete it, or mark it skipped, and verification then passes for the wrong reason.
`check_integrity` looks at what an attempt changed and at its unified diff and reports,
in one sentence fit for the retry prompt, when the attempt

- edited or deleted a test file (matched by path globs, see `DEFAULT_TEST_GLOBS`), or
- added a skip / xfail / ignore marker, or a focus marker (`it.only`) that silences
  every other test, in any file.

Creating a new test file is allowed (it adds checks, it cannot weaken old ones), except a
new `conftest.py`, which can change how every test around it runs. A subtask whose job
is the tests themselves (`Subtask.about_tests`) may do all of the above.

Pure functions over strings: no git, no file system.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from posixpath import basename

from pydantic import BaseModel, ConfigDict

from reflection.text import english_list

log = logging.getLogger("goldenloop.integrity")

_JS_EXT = "{js,jsx,ts,tsx,mjs,cjs,mts,cts}"

DEFAULT_TEST_GLOBS: tuple[str, ...] = (
    # Python (pytest, unittest, Django's tests.py)
    "test_*.py",
    "*_test.py",
    "tests.py",
    "conftest.py",
    "tests/**",
    "test/**",
    # JavaScript / TypeScript (jest, vitest, mocha)
    f"*.test.{_JS_EXT}",
    "*.spec.*",
    "__tests__/**",
    # Go
    "*_test.go",
    # Rust integration tests. Unit tests live in `#[cfg(test)]` modules inside ordinary
    # source files, which no path can tell apart; `find_skip_markers` still sees an
    # added `#[ignore]` there because it scans every file of the diff.
    "tests/**/*.rs",
)

_REMEDY = "fix the code, not the tests"
_MAX_LISTED = 3  # paths or markers named in the one-sentence reason
_LINE_CLIP = 160  # longest added line quoted in a marker description


# --- paths ---------------------------------------------------------------------------------------


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


# --- diffs ---------------------------------------------------------------------------------------

_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class _FileDiff:
    """One file's section of a unified diff."""

    path: str | None = None
    deleted: bool = False
    created: bool = False
    added: list[tuple[int, str]] = field(default_factory=list)  # (new line number, text)
    removed: list[str] = field(default_factory=list)


def _header_path(value: str) -> str | None:
    """The path of a `--- a/x` or `+++ b/x` header value; None for /dev/null."""
    value = value.split("\t", 1)[0].strip()
    if value.startswith('"') and value.endswith('"') and len(value) > 1:
        value = value[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        value = value.encode("latin-1", "ignore").decode("utf-8", "replace")
    if value == "/dev/null":
        return None
    return value[2:] if value[:2] in ("a/", "b/") else value


def _git_header_path(line: str) -> str | None:
    """The `b/` path of a `diff --git a/x b/x` line (unquoted paths only)."""
    rest = line[len("diff --git ") :]
    at = rest.rfind(" b/")
    return rest[at + 3 :] if at >= 0 and not rest.startswith('"') else None


def _parse_diff(diff: str) -> Iterator[_FileDiff]:
    """Files of a unified diff, hunk lines counted so that `+++x` content is not a header."""
    current: _FileDiff | None = None
    old_left = new_left = 0
    line_no = 0
    for line in diff.splitlines():
        if old_left > 0 or new_left > 0:  # inside a hunk
            tag, text = line[:1], line[1:]
            if tag == "+" and current is not None:
                current.added.append((line_no, text))
                line_no, new_left = line_no + 1, new_left - 1
            elif tag == "-" and current is not None:
                current.removed.append(text)
                old_left -= 1
            elif tag in (" ", ""):
                line_no, old_left, new_left = line_no + 1, old_left - 1, new_left - 1
            # "\ No newline at end of file" takes no room in the hunk
            continue
        if line.startswith("diff --git "):
            if current is not None:
                yield current
            current = _FileDiff(path=_git_header_path(line))
        elif line.startswith("--- "):
            if current is None or current.added or current.removed:  # plain diff -u output
                if current is not None:
                    yield current
                current = _FileDiff()
            current.path = current.path or _header_path(line[4:])
        elif line.startswith("+++ ") and current is not None:
            current.path = _header_path(line[4:]) or current.path
        elif line.startswith("deleted file mode") and current is not None:
            current.deleted = True
        elif line.startswith("new file mode") and current is not None:
            current.created = True
        elif (hunk := _HUNK.match(line)) and current is not None:
            old_left = int(hunk.group(1) or 1)
            line_no, new_left = int(hunk.group(2)), int(hunk.group(3) or 1)
    if current is not None:
        yield current


def deleted_paths(diff: str) -> set[str]:
    """Paths the diff deletes (its `deleted file mode` headers)."""
    return {f.path for f in _parse_diff(diff) if f.deleted and f.path}


def created_paths(diff: str) -> set[str]:
    """Paths the diff creates (its `new file mode` headers)."""
    return {f.path for f in _parse_diff(diff) if f.created and f.path}


# --- skip markers --------------------------------------------------------------------------------

_MARKER = re.compile(
    r"""
      \bpytest\.mark\.(?:skip|skipif|xfail)\b           # Python: pytest decorators, pytestmark
    | \bpytest\.(?:skip|xfail|importorskip)\s*\(        # Python: imperative pytest skips
    | @unittest\.(?:skip|skipIf|skipUnless|expectedFailure)\b
    | \.skipTest\s*\(                                   # Python: unittest, inside a test
    | \b(?:it|test|describe|suite|context)\.(?:skip|skipIf|todo|only)\b  # JS; .only silences the rest
    | \bx(?:it|test|describe)\s*\(                      # JS: jasmine/jest/mocha x-prefixes
    | \b[tb]\.Skip(?:Now|f)?\s*\(                       # Go
    | \#\[\s*ignore\b                                   # Rust
    """,
    re.VERBOSE,
)
_COMMENT = re.compile(r"^\s*(?://|/\*|\*|#(?!\[))")  # `#[` is a Rust attribute, not a comment


def _marker_lines(file: _FileDiff) -> Iterator[tuple[int, str]]:
    """Added lines of one file that carry a marker and did not merely move within it."""
    removed = Counter(" ".join(text.split()) for text in file.removed)
    for line_no, text in file.added:
        if _COMMENT.match(text) or not _MARKER.search(text):
            continue
        key = " ".join(text.split())
        if removed[key] > 0:  # the same line was removed elsewhere in the file: moved
            removed[key] -= 1
            continue
        yield line_no, text


def has_marker(text: str) -> bool:
    """Whether `text` (a whole file) holds anything like a marker; only a diff says who added it."""
    return _MARKER.search(text) is not None


def find_skip_markers(diff: str) -> list[str]:
    """Added lines that skip, xfail, ignore or focus tests, as "path:line: <line>".

    Every file of the diff is scanned, not only test files: Rust unit tests and helper
    modules live beside the code. Comment lines and lines that only moved are ignored.
    """
    return _markers(_parse_diff(diff))


def _markers(files: Iterable[_FileDiff]) -> list[str]:
    found = []
    for file in files:
        for line_no, text in _marker_lines(file):
            shown = text.strip()
            if len(shown) > _LINE_CLIP:
                shown = shown[: _LINE_CLIP - 1] + "…"
            found.append(f"{file.path or '?'}:{line_no}: {shown}")
    return found


# --- the verdict ---------------------------------------------------------------------------------


class IntegrityResult(BaseModel):
    """Why an attempt was refused: what it did to the tests, in one sentence."""

    model_config = ConfigDict(frozen=True)

    ok: bool = False
    reason: str
    paths: list[str]  # test files the attempt edited or deleted
    markers: list[str]  # "path:line: <added line>" of added skip markers


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_MAX_LISTED])
    more = len(items) - _MAX_LISTED
    return f"{shown} and {more} more" if more > 0 else shown


def _reason(edited: list[str], deleted: list[str], markers: list[str]) -> str:
    parts = []
    if edited:
        parts.append(f"edited test files ({_listed(edited)})")
    if deleted:
        parts.append(f"deleted test files ({_listed(deleted)})")
    if markers:
        places = [m.split(": ", 1)[0] for m in markers]
        parts.append(f"added skip markers ({_listed(places)})")
    return f"the attempt {english_list(parts)} — {_REMEDY}"


def check_integrity(
    changed: Collection[str],
    deleted: Collection[str] = (),
    diff: str = "",
    *,
    globs: Sequence[str] = DEFAULT_TEST_GLOBS,
    about_tests: bool = False,
) -> IntegrityResult | None:
    """None when the attempt left the tests alone; else what it did to them.

    `changed` is every path the attempt touched (as `Repo.changed_files` lists them);
    deletions are known from `deleted`, from the diff's `deleted file mode` headers, or
    both. New test files named by the diff's `new file mode` headers are allowed, except
    `conftest.py`. When `about_tests` is true, the subtask's job is the tests: nothing is
    reported, not even skip markers, since marking a known-broken test may be that job.
    """
    if about_tests:
        return None
    files = list(_parse_diff(diff))
    gone = {_normalise(p) for p in deleted} | {f.path for f in files if f.deleted and f.path}
    created = {f.path for f in files if f.created and f.path} - gone
    touched = {_normalise(p) for p in changed} | gone
    tests = {p for p in touched if is_test_path(p, globs)}
    removed = sorted(tests & gone)
    edited = sorted(p for p in tests - gone if p not in created or basename(p) == "conftest.py")
    markers = _markers(files)
    if not (edited or removed or markers):
        return None
    result = IntegrityResult(
        reason=_reason(edited, removed, markers),
        paths=sorted(edited + removed),
        markers=markers,
    )
    log.info("integrity: %s", result.reason)
    return result
