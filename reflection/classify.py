"""Heuristic reflection: a category and concrete advice without a model.

Used when reflexion runs without an LLM, or when the model call fails or answers badly.
Rules are tried in order, most specific first; each reads the failure context (the
digest's `First error:` line, failing tests, failure type, files changed) and names the
test, the error and its file:line, so the retry prompt says what to look at. Confidence
stays between 0.3 and 0.6: a pattern match is less sure than a model that read the code.

Known failures (`preexisting_tests`: failing before the task, and waived by the user) are
never what a reflection is about: the failures the attempt caused come first, and the
known ones are marked as such.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from reflection.classify_edit import classify_edit
from reflection.classify_stage import classify_stage
from reflection.digest import read_digest_line
from reflection.schema import (
    FailureCategory,
    FailureContext,
    FailureType,
    ReflectionDraft,
    fit_text,
)

log = logging.getLogger("goldenloop.classify")



def classify(ctx: FailureContext) -> ReflectionDraft:
    """The heuristic reflection for one failed attempt."""
    if ctx.stage == "edit":
        return classify_edit(ctx)
    if ctx.stage != "verify":  # no check output: the reason is the digest itself
        return classify_stage(ctx)
    facts = _read_facts(ctx)
    for rule in _RULES:
        draft = rule(ctx, facts)
        if draft is not None:
            log.debug("classify: %s by %s", draft.category, rule.__name__)
            return draft
    raise AssertionError("the last rule always answers")  # pragma: no cover


# --- what the context says -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Facts:
    """The failure's essentials, read once from the context and its digest."""

    first_error: str | None
    file: str | None
    line: int | None
    kind: str  # "AssertionError", "error[arg-type]", "TS2322", "panic", or ""
    message: str
    tests: list[str]  # the failures the attempt caused first
    preexisting: list[str]  # known failures from before the task, waived by the user
    tool: str | None
    command: str | None
    digest: str

    @property
    def place(self) -> str | None:
        return f"{self.file}:{self.line}" if self.file and self.line else self.file

    @property
    def short_kind(self) -> str:
        return self.kind.rsplit(".", 1)[-1]

    @property
    def what(self) -> str:
        """The error in a few words: `Kind: message`, or the message alone."""
        text = f"{self.kind}: {self.message}" if self.kind and self.message else self.kind
        return _clip(text or self.message or "the check failed", 160)

    @property
    def at(self) -> str:
        return f" at {self.place}" if self.place else ""

    @property
    def test(self) -> str | None:
        tests = self.new_tests or self.tests
        return tests[0] if tests else None

    @property
    def new_tests(self) -> list[str]:
        return [t for t in self.tests if t not in self.preexisting]

    def tests_phrase(self) -> str:
        tests = self.new_tests or self.tests
        if not tests:
            return ""
        more = f" (and {len(tests) - 1} more)" if len(tests) > 1 else ""
        return f"test {_clip(tests[0], 120)}{more}"

    def preexisting_note(self) -> str:
        """` (test X fails too, but ... known failure ...)`, or nothing."""
        old = [t for t in self.tests if t in self.preexisting]
        if not old:
            return ""
        if not self.new_tests:
            return " (a known failure: it failed the same way before the task)"
        more = f" and {len(old) - 1} more" if len(old) > 1 else ""
        return (
            f" (test {_clip(old[0], 100)}{more} fails too, but it is a known failure from before the "
            "task, not caused by this attempt)"
        )

    def rerun(self) -> str:
        if self.command:
            return f"`{_clip(self.command, 100)}`"
        return f"the failing test {_clip(self.test, 100)}" if self.test else "the same check"


_FIRST_ERROR = re.compile(r"^(?P<file>[^\s:]+)(?::(?P<line>\d+))?(?::\d+)?: (?P<rest>.+)$")
_KIND = re.compile(r"^(?P<kind>[A-Za-z_][\w.]*(?:\[[\w-]+\])?|TS\d+): (?P<message>.*)$")
_EXCEPTION_LINE = re.compile(
    r"^[ \t]*(?:E[ \t]+)?([A-Za-z_][\w.]*(?:Error|Exception)): ([^\n]*)$", re.M
)


def _read_facts(ctx: FailureContext) -> _Facts:
    # With known failures about, the digest's first error may be one of theirs: only
    # the error the caller found for a failure the attempt caused is trusted then.
    from_digest = not ctx.preexisting_tests
    first = ctx.first_error or (read_digest_line(ctx.digest, "First error") if from_digest else None)
    file, line, rest = _split_place(first)
    kind, message = "", rest
    match = _KIND.match(rest)
    if match:
        kind, message = match.group("kind"), match.group("message")
    elif not first and from_digest and (exc := _EXCEPTION_LINE.search(ctx.digest)):
        kind, message = exc.group(1), exc.group(2)  # a digest without our header lines
    tests = list(ctx.failing_tests) or _tests_from_digest(ctx.digest)
    old = [t for t in tests if t in ctx.preexisting_tests]
    return _Facts(
        first_error=first,
        file=file,
        line=line,
        kind=kind,
        message=message.strip(),
        tests=[t for t in tests if t not in old] + old,
        preexisting=old,
        tool=read_digest_line(ctx.digest, "Tool"),
        command=read_digest_line(ctx.digest, "Command"),
        digest=ctx.digest,
    )


def _split_place(first: str | None) -> tuple[str | None, int | None, str]:
    if not first:
        return None, None, ""
    match = _FIRST_ERROR.match(first)
    if not match or not re.search(r"[./]", match.group("file")):
        return None, None, first  # no file:line prefix (a "bash: ..." line is not a place)
    line = match.group("line")
    return match.group("file"), int(line) if line else None, match.group("rest")


def _tests_from_digest(digest: str) -> list[str]:
    listed = read_digest_line(digest, "Failing tests")
    if not listed or "): " not in listed:
        return []
    names = listed.split("): ", 1)[1].split(", ")
    return [name for name in names if name and not name.startswith("…")]


# --- drafting ------------------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    """A quote from the failure, redacted before it is cut (see `fit_text`)."""
    return fit_text(text, limit)


def _sentence(text: str) -> str:
    """Capitalised, nothing else: the quotes in it stay byte-exact (see `_then`)."""
    return text[:1].upper() + text[1:]


def _then(quote: str, rest: str) -> str:
    """`quote` followed by `rest` (". More.", ": why.", "; hint."), where a quote that ends
    its own sentence ("expected 3 items.") gets no second stop: `rest` loses its leading
    mark and opens a new sentence. The quote itself is never touched."""
    if not quote.endswith((".", "!", "?")) or rest[:1] not in {".", ":", ";"}:
        return quote + rest
    rest = rest[1:].strip()
    return f"{quote} {rest[:1].upper()}{rest[1:]}" if rest else quote


def _draft(
    category: FailureCategory,
    analysis: str,
    suggestion: str,
    items: list[str],
    confidence: float,
) -> ReflectionDraft:
    return ReflectionDraft.clamped(category, _sentence(analysis), _sentence(suggestion), items, confidence)


def _files(ctx: FailureContext) -> str:
    names = ", ".join(ctx.files_modified[:4])
    more = f" and {len(ctx.files_modified) - 4} more" if len(ctx.files_modified) > 4 else ""
    return names + more if names else "the files this attempt changed"


def _failure(f: _Facts) -> str:
    """`test X failed at file:line with Kind: message`, from whatever is known."""
    who = f.tests_phrase() or "the check"
    return f"{who} failed{f.at} with {f.what}{f.preexisting_note()}"


# --- rules, most specific first ------------------------------------------------------------------

_Rule = Callable[[FailureContext, _Facts], ReflectionDraft | None]


def _repeated(ctx: FailureContext, f: _Facts) -> ReflectionDraft | None:
    if not ctx.repeats_previous:
        return None
    return _draft(
        FailureCategory.APPROACH_ERROR,
        "The same failure as the last attempt: "
        + _then(_failure(f), ". The previous fix did not address it."),
        f"Change approach rather than adjusting the last edit: find why the change to "
        f"{_files(ctx)} could not affect {f.place or f.test or 'this failure'}, then try a "
        "different strategy.",
        [
            f"Re-read {f.place or f.test or 'the failing check'} and the code it exercises "
            "before editing",
            "State the assumption behind the previous fix and check it against the failure",
            f"Reproduce with {f.rerun()} and confirm the failing line moves after the change",
            "Pick a different fix (another function, the caller, the data), not a variant "
            "of the same edit",
        ],
        0.55,
    )


_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'|Cannot find module '([\w@][\w@/.-]*)'")
_MISSING_NAME = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
_NO_COMMAND = re.compile(
    r"(?:^|[\s:])([\w.+-]+): (?:command )?not found\b|exit (?:code|status) 127\b|"
    r"returned non-zero exit status 127",
    re.M,
)
_NO_PERMISSION = re.compile(r"[Pp]ermission denied|PermissionError|EACCES|Operation not permitted")
_NO_ENV_VAR = re.compile(
    r"(?:environment variable|env var)s? ['\"`]?([A-Z][A-Z0-9_]{2,})|"
    r"(?<![A-Z0-9_])['\"`]?([A-Z][A-Z0-9_]{2,})['\"`]? "
    r"(?:is not set|not set|is missing|is required)|"
    r"KeyError: '([A-Z][A-Z0-9]*_[A-Z0-9_]+)'"
)


def _environment(ctx: FailureContext, f: _Facts) -> ReflectionDraft | None:
    text = f"{f.first_error or ''}\n{f.digest}"
    for finder in (_missing_dependency, _missing_command, _missing_permission, _missing_env_var):
        found = finder(ctx, text)
        if found:
            problem, suggestion, items = found
            return _draft(
                FailureCategory.ENVIRONMENT,
                f"{problem}; "
                + _then(_failure(f), ". This is the environment, not the logic of the code."),
                suggestion,
                items,
                0.6,
            )
    return None


def _missing_dependency(ctx: FailureContext, text: str) -> tuple[str, str, list[str]] | None:
    module = _MISSING_MODULE.search(text)
    name = _MISSING_NAME.search(text)
    missing = (module.group(1) or module.group(2)) if module else None
    top = (missing or (name.group(2) if name else "")).split(".")[0]
    if not top or not _third_party(top, ctx):
        return None
    if missing or name is None:
        problem = f"The module '{missing}' is not installed where the checks run"
    else:
        problem = f"The installed '{top}' has no '{name.group(1)}' (name wrong or version differs)"
    return (
        problem,
        f"Do not rewrite working code around it: use what the project already depends on, or "
        f"add '{top}' to the project's dependencies if the task allows a new one.",
        [
            f"Check the project's dependency list (pyproject.toml, requirements) for '{top}'",
            f"If '{top}' is not a dependency, implement the feature with the standard library "
            "or an existing dependency",
            "Rerun the checks once the import succeeds",
        ],
    )


def _third_party(top: str, ctx: FailureContext) -> bool:
    """Neither the standard library nor a module of the project itself."""
    if top in sys.stdlib_module_names:
        return False
    local = {part.removesuffix(".py") for path in ctx.files_modified for part in path.split("/")}
    local |= set(re.findall(r"([\w]+)(?:/[\w/]*)?\.py\b", ctx.digest))
    return top not in local


def _missing_command(ctx: FailureContext, text: str) -> tuple[str, str, list[str]] | None:
    match = _NO_COMMAND.search(text)
    if not match:
        return None
    name = match.group(1)
    what = f"The command '{name}'" if name else "A command the check runs (exit code 127)"
    return (
        f"{what} is not available",
        "Use the project's configured runner or a tool that is installed; do not change the "
        "code to work around a missing program, and say so if the check itself is wrong.",
        [
            f"Check that {name or 'the program'} is installed and on PATH where checks run",
            "Look for the project's own way to run it (scripts, Makefile, package.json)",
            "If the tool cannot be installed, report it instead of editing code",
        ],
    )


def _missing_permission(ctx: FailureContext, text: str) -> tuple[str, str, list[str]] | None:
    if not _NO_PERMISSION.search(text):
        return None
    return (
        "An operation was refused for lack of permission",
        "Write only inside the repository or a temporary directory the test creates; do not "
        "touch system paths or change file modes to get past it.",
        [
            "Find the path in the error and check who owns it",
            "Use tmp_path (or an equivalent temp dir) for files the code writes under test",
            "Make paths configurable instead of hard-coding system locations",
        ],
    )


def _missing_env_var(ctx: FailureContext, text: str) -> tuple[str, str, list[str]] | None:
    match = _NO_ENV_VAR.search(text)
    if not match:
        return None
    var = next(group for group in match.groups() if group)
    return (
        f"The environment variable {var} is not set where the checks run",
        f"Make the code handle a missing {var} (a default, or a clear error message) and set "
        "it in the test's own setup (monkeypatch) rather than relying on the shell.",
        [
            f"Find where {var} is read and decide its default",
            f"Set {var} in the test fixture if the test needs it",
            "Never hard-code a secret value in the code",
        ],
    )


_HANG_DURATION = re.compile(r"^[ \t]*(\d+(?:\.\d+)?)s (?:call|setup|teardown)[ \t]+(\S+)", re.M)
_LAST_TEST = re.compile(r"(?<!\S)([^\s:]+::\S+)|=== RUN[ \t]+(\S+)|^test (\S+) \.\.\.", re.M)


def _timeout(ctx: FailureContext, f: _Facts) -> ReflectionDraft | None:
    if ctx.failure_type != FailureType.TIMEOUT:
        return None
    step = _hanging_step(f)
    return _draft(
        FailureCategory.VERIFICATION,
        f"The check timed out before it finished; the step that hung or ran longest was {step}.",
        f"Find why {step} does not finish: an endless loop, a blocking read (stdin, socket, "
        "lock) or a wait for a network. Make it finish quickly; do not just raise the timeout.",
        [
            f"Run {step} alone with a short timeout to reproduce the hang",
            f"Look in {_files(ctx)} for loops whose exit condition may never hold",
            "Check for input(), network calls or locks reached from the test",
            "Add a timeout to any blocking call the code under test makes",
        ],
        0.5,
    )


def _hanging_step(f: _Facts) -> str:
    durations = [(float(m.group(1)), m.group(2)) for m in _HANG_DURATION.finditer(f.digest)]
    if durations:
        seconds, name = max(durations)
        return f"{name} ({seconds:g}s)"
    mentioned = [next(g for g in m.groups() if g) for m in _LAST_TEST.finditer(f.digest)]
    if mentioned:
        return mentioned[-1]
    if f.test:
        return f.test
    return f.rerun()


_CODE = re.compile(r"error\[([\w-]+)\]|\b(TS\d+)\b|\b([A-Z]{1,4}\d{2,4})\b")
_CODE_HINTS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), hint)
    for pattern, hint in (
        (r"arg-type|call-arg|TS2345|TS2554", "the call does not match the callee's signature"),
        (r"return-value|assignment|TS2322", "the value's type does not match the declared type"),
        (r"name-defined|TS2304|F821", "a name is used that is not defined or imported"),
        (r"attr-defined|union-attr|TS2339", "the attribute does not exist on that type"),
        (r"import|TS2307", "the import does not resolve"),
        (r"F401|F841", "something is imported or assigned and never used"),
    )
)


def _typecheck(ctx: FailureContext, f: _Facts) -> ReflectionDraft | None:
    if ctx.failure_type != FailureType.TYPECHECK_FAILURE and f.tool not in {"mypy", "tsc", "ruff"}:
        return None
    match = _CODE.search(f.kind or "")
    code = next((g for g in match.groups() if g), None) if match else None
    hint = next((h for p, h in _CODE_HINTS if code and p.search(code)), None)
    checker = f.tool if f.tool not in (None, "generic") else "the typechecker"
    summary = read_digest_line(f.digest, "Summary")
    label = f"{code} " if code else ""
    return _draft(
        FailureCategory.MISCONCEPTION,
        f"{checker} reports {label}{f.at.strip() or 'an error'}: "
        + _then(
            _clip(f.message or f.what, 200) + (f" ({summary})" if summary else ""),
            f"; {hint}." if hint else ".",
        ),
        f"Fix the code at {f.place or 'the reported location'} so the types agree with how it "
        "is used: check the real signature or type of what is called there instead of "
        "silencing the error with a cast or an ignore comment.",
        [
            f"Open {f.place or 'the first reported location'} and read the "
            f"{label.strip() or 'error'} message in full",
            "Check the definition of the function, class or value it refers to",
            "Fix every reported error, not only the first",
            f"Rerun {f.rerun()} before the tests",
        ],
        0.55,
    )


_API_ERRORS = {"TypeError", "AttributeError", "NameError", "ImportError", "ModuleNotFoundError"}
_NONE_VALUE = re.compile(r"NoneType|undefined|null\b")
_WRONG_CALL = re.compile(
    r"argument|positional|keyword|not callable|has no attribute|is not a function|"
    r"not iterable|object is not subscriptable"
)


def _wrong_api(ctx: FailureContext, f: _Facts) -> ReflectionDraft | None:
    if f.short_kind not in _API_ERRORS:
        return None
    category, belief = _api_belief(f)
    return _draft(
        category,
        _then(_failure(f), f": {belief}."),
        f"Read {f.place or 'the failing line'} and the definition it relies on (signature, "
        f"attributes, return value), then change {_files(ctx)} to match the real interface.",
        [
            f"Open {f.place or 'the failing line'} and find the object the {f.short_kind} is about",
            "Check its real definition: parameters, attributes, what it returns",
            "Trace where a None or wrong-typed value comes from, if any",
            f"Rerun {f.rerun()}",
        ],
        0.45,
    )


def _api_belief(f: _Facts) -> tuple[FailureCategory, str]:
    """Whether an API error shows a wrong belief about an interface or a plain bug."""
    if f.short_kind == "NameError":
        return FailureCategory.ROOT_CAUSE, "a name is used before it is defined or imported"
    if _NONE_VALUE.search(f.message):
        return FailureCategory.ROOT_CAUSE, "a value is None/undefined where an object was expected"
    if f.short_kind in {"ImportError", "ModuleNotFoundError"}:
        return (
            FailureCategory.MISCONCEPTION,
            "the import names a module or symbol the project does not have (path, spelling)",
        )
    if _WRONG_CALL.search(f.message):
        in_test = bool(f.file and _is_test_path(f.file))
        return FailureCategory.MISCONCEPTION, (
            "the test expects an API the code does not provide"
            if in_test
            else "the code uses an API differently from how it is defined"
        )
    return FailureCategory.ROOT_CAUSE, "the code combines values of the wrong type"


def _is_test_path(path: str) -> bool:
    return bool(re.search(r"(?:^|/)tests?/|(?:^|/)test_|_test\.|\.test\.", path))


_COMPARISONS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern)
    for pattern in (
        r"^assert (.+?) (?:==|!=|<=|>=|<|>|is not|is|in) (.+)$",
        r"^(.+?) != (.+)$",
        r"Expected: (.+?), Received: ([^)]+)",
        r"left: (\S+) right: (\S+)",
        r"expected (.+?) to (?:be|equal|deeply equal|strictly equal|have length) (.+?)(?: //|$)",
        r"= (.+?); want (.+)$",
    )
)
_BOUNDARY_VALUES = {
    "", "''", '""', "``", "0", "0.0", "-1", "None", "null", "undefined", "nil", "[]", "{}", "()",
    "set()", "nan", "NaN", "Infinity", "-Infinity",
}  # fmt: skip
_BOUNDARY_NAME = re.compile(
    r"empty|zero|none|null|negative|boundary|edge|limit|max|min|overflow|first|last|single|"
    r"unicode|whitespace",
    re.I,
)
_BOUNDARY_ERROR = re.compile(
    r"ZeroDivisionError|IndexError|StopIteration|index out of (?:range|bounds)|divide by zero"
)


def _edge_case(ctx: FailureContext, f: _Facts) -> ReflectionDraft | None:
    values = _compared_values(f.message)
    boundary = next((v for v in values if v in _BOUNDARY_VALUES), None)
    off_by_one = _off_by_one(values)
    crash = _BOUNDARY_ERROR.search(f.what)
    by_name = _is_check(f) and f.test and _BOUNDARY_NAME.search(f.test)
    if not ((boundary is not None and _is_check(f)) or off_by_one or crash or by_name):
        return None
    if off_by_one:
        why = f"the result is off by one ({values[0]} vs {values[1]})"
    elif boundary is not None:
        why = f"a boundary value is involved ({boundary or 'an empty string'})"
    elif crash:
        why = "the code fails on an empty, zero or last-element input"
    else:
        why = "the failing test exercises a boundary case"
    return _draft(
        FailureCategory.EDGE_CASE,
        _then(_failure(f), f": {why}."),
        "The general path likely works; handle the boundary explicitly: check loop bounds and "
        "ranges (< vs <=, len vs len-1), empty inputs, zero and None before the main logic.",
        [
            f"Read {f.place or f.test or 'the failing assertion'} for the exact input and "
            "expected value",
            f"Trace that input through {_files(ctx)} by hand",
            "Check range ends, comparisons and empty/zero/None handling on that path",
            f"Rerun {f.rerun()}, then the whole suite",
        ],
        0.45 if (off_by_one or boundary is not None or crash) else 0.4,
    )


def _compared_values(message: str) -> list[str]:
    for pattern in _COMPARISONS:
        match = pattern.search(message)
        if match:
            return [value.strip().strip(",") for value in match.groups()]
    return []


def _off_by_one(values: list[str]) -> bool:
    if len(values) != 2:
        return False
    try:
        return abs(int(values[0]) - int(values[1])) == 1
    except ValueError:
        return False


def _is_check(f: _Facts) -> bool:
    """A failed assertion or expectation rather than a crash."""
    return bool(
        f.short_kind in {"AssertionError", "", "panic"} and f.message
    ) or f.message.startswith("assert")


def _root_cause(ctx: FailureContext, f: _Facts) -> ReflectionDraft:
    known = bool(f.first_error or f.tests)
    goal = f" so that '{_clip(ctx.subtask_title, 80)}' works" if ctx.subtask_title else ""
    return _draft(
        FailureCategory.ROOT_CAUSE,
        _then(_failure(f), ": the code written in this attempt does not do what the check expects.")
        if known
        else f"The {ctx.failure_type.value.replace('_', ' ')} gave no recognisable error; "
        "the digest's last lines are the only evidence.",
        f"Start from {f.place or f.test or 'the last lines of the output'}: compare what the "
        f"check expects with what {_files(ctx)} does on that input, and fix the logic{goal}.",
        [
            f"Read {f.place or f.test or 'the output'} to get the exact input and expectation",
            f"Step through the changed code in {_files(ctx)} with that input",
            "Fix the cause, not the symptom: do not special-case the test's values",
            f"Rerun {f.rerun()}, then the whole suite",
        ],
        0.35 if known else 0.3,
    )


_RULES: tuple[_Rule, ...] = (
    _repeated,
    _environment,
    _timeout,
    _typecheck,
    _wrong_api,
    _edge_case,
    _root_cause,
)
