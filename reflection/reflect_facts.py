"""What a (redacted) conversation shows, read without a model, for the Reflect skill.

A file counts as **written** only on evidence of a write: a tool whose name says it
writes (Write, Edit, MultiEdit, apply_patch, create_file, ...; not a to-do list's
TodoWrite, nor an editing tool's `view` of a file), a tool result that says
so ("File created successfully at: a.py", "The file a.py has been updated"), a diff's
`+++ b/a.py` header, or an assistant sentence whose verb is one of writing ("changed
a.py and b.py"). A path a tool read, listed or printed in a failure (`FAILED
tests/test_x.py::test_y`) is not written. **Code** is what the conversation wrote that
can be read: the assistant's code blocks, the added lines of diffs, and a write tool's
own text when it looks like code. **Tests added or changed** are the test functions in
that code, else the test files written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from reflection.reflect_code import CodeReading, CodeSeen, read_code

_EXTENSIONS = (
    "py|pyi|ts|tsx|js|jsx|mjs|cjs|go|rs|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|scala|sh|sql"
    "|md|rst|txt|json|ya?ml|toml|ini|cfg|html|css|scss|vue|svelte|lock"
)
_PATH = re.compile(rf"(?<![\w/.:@-])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:{_EXTENSIONS}))(?![\w/-])")
# How every path ends. Its search skips from one "." to the next, where _PATH tries each
# word: it finds the lines a path can be on (no path holds a line end or needs one beside it).
_PATH_END = re.compile(rf"\.(?:{_EXTENSIONS})(?![\w/-])")
_TEST_FILE = re.compile(r"(?:^|/)(?:tests?/|test_[\w-]+\.|[\w-]+_test\.|[\w.-]+\.(?:test|spec)\.)")
_TOOL_PREFIX = re.compile(r"^\s*\[?([A-Za-z][\w-]{1,40})\]?:")
_WRITE_TOOL = re.compile(r"^(?!.*todo)(?=.*(?:write|edit|creat|patch|replace|insert|apply|save))", re.IGNORECASE)
# An editing tool that only showed a file (a `view` command): a read, whatever its name.
_VIEWED = re.compile(r"^\s*Here's the (?:result of running `cat -n`|files and directories)", re.IGNORECASE)
_EDITED = re.compile(r"\b(?:has been (?:edited|updated|created|modified)|created successfully|written)\b",
                     re.IGNORECASE)
_READ_TOOL = re.compile(r"read|view|cat\b|open|grep|glob|search|find|^ls$|list", re.IGNORECASE)
_WRITE_VERB = re.compile(
    r"\b(?:creat(?:e|ed|ing)|wr(?:ote|ite|iting|itten)|modif(?:y|ied|ying)|updat(?:e|ed|ing)|edit(?:s|ed|ing)?"
    r"|chang(?:e|ed|ing)|add(?:s|ed|ing)?|fix(?:es|ed|ing)?|implement(?:s|ed|ing)?|refactor(?:s|ed|ing)?"
    r"|renam(?:e|ed|ing)|delet(?:e|ed|ing)|rewr(?:ote|ite|itten)|patch(?:ed|ing)?)\b",
    re.IGNORECASE,
)
_READ_VERB = re.compile(
    r"\b(?:read(?:s|ing)?|look(?:ed|ing)? at|open(?:ed|ing)?|inspect(?:ed|ing)?|view(?:ed|ing)?|check(?:ed|ing)?"
    r"|found|see|saw|search(?:ed|ing)?|grep(?:ped)?|ran)\b",
    re.IGNORECASE,
)
_WROTE = re.compile(
    r"(?:File created successfully at:?|The file|Successfully (?:wrote|written) to|(?:Wrote|Created|Updated|Modified"
    r"|Edited|Saved)(?: file)?(?: \d+ lines? to)?)\s+`?([\w./-]+\.\w+)`?(?: has been (?:updated|modified|created))?",
)
_DIFF_FILE = re.compile(r"^(?:\+\+\+ b/|diff --git a/\S+ b/)(\S+)", re.MULTILINE)
_DIFF_ADDED = re.compile(r"^\+(?!\+\+ )(.*)$", re.MULTILINE)
_FENCE = re.compile(r"```([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n")
_TEST_DEF = re.compile(
    r"^\s*(?:async\s+)?def\s+(test_\w+)|^\s*func\s+(Test\w+)|^\s*(?:it|test)\(\s*['\"`]([^'\"`]{1,80})|#\[test\]",
    re.MULTILINE,
)
_CODE_SIGN = re.compile(r"^\s*(?:def |class |import |from \S+ import |return\b|function |const |let |fn |func )",
                        re.MULTILINE)
_LANGUAGES = {"py": "python", "python": "python", "python3": "python", "pyi": "python"}


class Turn(Protocol):
    """A turn as read here: a request's `Message`, or a redacted copy of one (read only)."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def name(self) -> str | None: ...


@dataclass(frozen=True)
class Writes:
    """The files written and read, and the code written, as far as the turns show."""

    written: tuple[str, ...]
    read: tuple[str, ...]
    code: tuple[CodeSeen, ...]

    @property
    def test_files(self) -> tuple[str, ...]:
        return tuple(f for f in self.written if _TEST_FILE.search(f))

    @property
    def tests_added(self) -> tuple[str, ...]:
        """The test functions in the written code, by name."""
        found = (next(filter(None, m.groups()), "test") for c in self.code for m in _TEST_DEF.finditer(c.text))
        return unique(found)


def tool_name(turn: Turn) -> str:
    if turn.name and turn.name.strip():
        return turn.name.strip()
    prefix = _TOOL_PREFIX.match(turn.content)
    return prefix.group(1) if prefix else "tool"


def writes_of(conversation: Sequence[Turn]) -> Writes:
    """What the assistant and its tools wrote and read."""
    written: list[str] = []
    read: list[str] = []
    code: list[CodeSeen] = []
    for turn in conversation:
        if turn.role not in ("assistant", "tool"):
            continue
        text = turn.content
        diffs = _DIFF_FILE.findall(text) if "+++ b/" in text or "diff --git a/" in text else []
        written += diffs + _WROTE.findall(text)
        if diffs:  # a diff names its files exactly: its a/ and b/ paths are not more files
            code += _diff_code(text)
        elif turn.role == "tool":
            _tool_turn(turn, written, read, code)
        else:
            _assistant_turn(text, written, read, code)
    kept = unique(p for p in written if "://" not in p)
    return Writes(kept, tuple(p for p in unique(read) if p not in kept), tuple(code))


def _tool_turn(turn: Turn, written: list[str], read: list[str], code: list[CodeSeen]) -> None:
    name = tool_name(turn)
    viewed = bool(_VIEWED.search(turn.content)) and not _EDITED.search(turn.content)
    if _WRITE_TOOL.search(name) and not viewed:
        paths = _paths(turn.content)
        written += paths
        if _CODE_SIGN.search(turn.content):
            code.append(CodeSeen(paths[0] if paths else None, _language("", paths), turn.content, whole=False))
    elif viewed or _READ_TOOL.search(name):
        read += _paths(turn.content)  # a tool that neither writes nor reads (a shell) names no file of its own


def _assistant_turn(text: str, written: list[str], read: list[str], code: list[CodeSeen]) -> None:
    prose = _FENCE.sub(" ", text)
    # Sentences split at spaces and line ends, which no path holds or needs beside it: a
    # prose without a path has no sentence with one, and most have none.
    if _PATH_END.search(prose):
        for sentence in _SENTENCE.split(prose):
            _sentence_paths(sentence, written, read)
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip().rsplit("\n", 1)[-1]
        paths = _paths(before)
        if paths:
            written.append(paths[-1])  # "src/a.py:" above a block: the block is that file's new text
        path = paths[-1] if paths else None
        code.append(CodeSeen(path, _language(match.group(1), paths), match.group(2), whole=True))


def _sentence_paths(sentence: str, written: list[str], read: list[str]) -> None:
    """Each path takes the mood of the verb nearest before it: writing, reading, or none."""
    paths = list(_PATH.finditer(sentence))
    if not paths:
        return
    marks = sorted([(m.start(), "write") for m in _WRITE_VERB.finditer(sentence)]
                   + [(m.start(), "read") for m in _READ_VERB.finditer(sentence)])
    for match in paths:
        if "://" in sentence[max(0, match.start() - 12): match.start()]:
            continue  # part of a URL
        mood = next((kind for at, kind in reversed(marks) if at < match.start()), None)
        if mood == "write":
            written.append(match.group(1))
        elif mood == "read":
            read.append(match.group(1))


def _diff_code(text: str) -> list[CodeSeen]:
    """Each file's added lines in a diff, as code that is not whole."""
    found = []
    parts = re.split(r"^(?=diff --git |\+\+\+ b/)", text, flags=re.MULTILINE)
    for part in parts:
        files = _DIFF_FILE.findall(part)
        added = "\n".join(line for line in _DIFF_ADDED.findall(part))
        if files and added.strip():
            found.append(CodeSeen(files[0], _language("", files), added, whole=False))
    return found


def _paths(text: str) -> list[str]:
    """The paths in `text`, read only on the lines that end one."""
    found: list[str] = []
    line_end = -1
    for end in _PATH_END.finditer(text):
        if end.start() < line_end:
            continue  # on a line read already
        line_start = text.rfind("\n", 0, end.start()) + 1
        line_end = text.find("\n", end.end())
        line_end = len(text) if line_end < 0 else line_end
        found += (p for p in _PATH.findall(text, line_start, line_end) if "://" not in p)
    return found


def _language(tag: str, paths: Sequence[str]) -> str:
    if tag:
        return _LANGUAGES.get(tag.lower(), tag.lower())
    extension = paths[-1].rsplit(".", 1)[-1] if paths else ""
    return _LANGUAGES.get(extension, extension)


def is_test_file(path: str) -> bool:
    return bool(_TEST_FILE.search(path))


def unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


# -- the conversation as a whole ----------------------------------------------------------

_ERRORS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("traceback", re.compile(r"Traceback \(most recent call last\)")),
    ("failing tests", re.compile(r"\bFAILED\b|\b[1-9]\d* failed\b|\bFAIL\b|\btests? failed\b", re.IGNORECASE)),
    ("type errors", re.compile(r"\berror TS\d+|\berror: Incompatible types|\btypecheck failed", re.IGNORECASE)),
    ("build errors", re.compile(r"\bnpm ERR!|\bcompilation failed|\berror\[E\d+\]|\bbuild failed", re.IGNORECASE)),
    ("non-zero exit", re.compile(r"\bexit(?:ed with)?(?: code| status)?[ :=]+[1-9]\d*\b|\breturned non-zero exit",
                                 re.IGNORECASE)),
)
_NAMED_ERROR = re.compile(r"\b([A-Z]\w*(?:Error|Exception))\b|(?<![\w-])(Error):")
_RAISED_ERROR = re.compile(r"(?m)^[ \t>E]*(?:[\w.]+\.)?([A-Z]\w*(?:Error|Exception)):|^[ \t]*(Error):")
_TEST_RUN = re.compile(
    r"\b(?:pytest|unittest|npm (?:run )?test|yarn test|pnpm test|go test|cargo test|jest|vitest|mocha"
    r"|test session starts|\d+ (?:passed|failed)|Ran \d+ tests?)\b",
    re.IGNORECASE,
)
_PASSING = re.compile(r"\b\d+ passed\b(?!.*\b[1-9]\d* failed\b)|\ball (?:\d+ )?tests? pass|\bOK \(|\bPASS\b",
                      re.IGNORECASE | re.DOTALL)
_DONE = re.compile(
    r"\b(?:done|completed?|implemented|finished|fixed|resolved|all tests pass(?:ed|ing)?|works now|is working)\b",
    re.IGNORECASE,
)
_NOT_DONE = re.compile(
    r"\b(?:unable to|could not|couldn't|not yet|still (?:fail|broken|error)\w*|blocked|gave up|failed to)\b",
    re.IGNORECASE,
)
# Lower-case words without one of which a pattern cannot match: a substring test is far
# cheaper than a case-insensitive regex scan, and most turns hold none of them.
_ERROR_WORDS = ("traceback", "fail", "error", "npm err", "exception")  # _ERRORS and _NAMED_ERROR
_TEST_RUN_WORDS = ("test", "jest", "mocha", "passed", "failed")
_PASSING_WORDS = ("pass", "ok (")


def _holds(lowered: str, words: tuple[str, ...]) -> bool:
    """Whether a lower-cased text holds one of `words`."""
    for word in words:
        if word in lowered:
            return True
    return False


def _passing(text: str, lowered: str) -> bool:
    return _holds(lowered, _PASSING_WORDS) and bool(_PASSING.search(text))


@dataclass(frozen=True)
class ConversationFacts:
    """What the heuristic read out of a (redacted) conversation."""

    writes: Writes
    code: CodeReading  # of writes.code
    tools: tuple[str, ...]
    errors: tuple[str, ...]  # distinct error patterns, in the order met
    tests_run: bool
    tests_passing: bool  # the last test output seen passes
    claims_done: bool
    unresolved_error: bool
    assistant_turns: int

    @property
    def files(self) -> tuple[str, ...]:
        """The files written (never those only read or named in a failure)."""
        return self.writes.written


def facts_of(conversation: Sequence[Turn]) -> ConversationFacts:
    """The heuristic's reading of a conversation (already redacted)."""
    worked = [m for m in conversation if m.role in ("assistant", "tool")]
    last_error, last_pass, last_test = -1, -1, None
    errors: list[str] = []
    for index, message in enumerate(worked):
        text = message.content
        lowered = text.lower()
        found = _error_patterns(text, lowered, output=message.role == "tool")
        errors.extend(found)
        last_error = index if found else last_error
        if not found and (_passing(text, lowered) or _claims_done(message)):
            last_pass = index  # a pass, or the assistant saying it fixed what came before
        if _holds(lowered, _TEST_RUN_WORDS) and _TEST_RUN.search(text):
            last_test = (text, lowered)
    assistant = [m for m in conversation if m.role == "assistant"]
    closing = assistant[-1].content if assistant else ""
    writes = writes_of(conversation)
    return ConversationFacts(
        writes=writes,
        code=read_code(writes.code),
        tools=unique(tool_name(m) for m in conversation if m.role == "tool"),
        errors=unique(errors),
        tests_run=last_test is not None,
        tests_passing=last_test is not None and _passing(*last_test) and not _error_patterns(*last_test),
        claims_done=bool(assistant) and _claims_done(assistant[-1]),
        unresolved_error=last_error > last_pass or bool(_NOT_DONE.search(closing)),
        assistant_turns=len(assistant),
    )


def _claims_done(message: Turn) -> bool:
    return message.role == "assistant" and bool(_DONE.search(message.content)) and not _NOT_DONE.search(message.content)


def _error_patterns(text: str, lowered: str, *, output: bool = True) -> list[str]:
    """The error kinds in one message (`lowered`: the same lower-cased): families
    (tracebacks, failing tests, a non-zero exit) and named errors. In a tool's result
    (`output`) an error's name is one that happened; in the assistant's words it is one
    only where it stands as output does (`ValueError: ...` at a line's start): "retries
    on ConnectionError" names an exception, it does not report one."""
    if not _holds(lowered, _ERROR_WORDS) and "exit" not in lowered:
        return []
    found = [kind for kind, pattern in _ERRORS if (output or kind != "non-zero exit") and pattern.search(text)]
    named = unique(a or b for a, b in (_NAMED_ERROR if output else _RAISED_ERROR).findall(text))
    # A bare "Error:" says less than the named error beside it.
    return found + [n for n in named if n != "Error" or len(named) == 1]
