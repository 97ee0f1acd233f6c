"""The files that define the code names a task uses: where its change most likely goes.

Backlog items name code, not files: "format_price(123456) shows ...", "Cart.add(isbn,
quantity) must refuse ...". Without a file named, a small model shown a whole repository
tends to copy the listing back, and an edit without a path cannot be placed. So the names
that look like code (called, dotted, snake_case or camelCase) are looked up as definitions
(`def`, `class`, `function`, ...) in the repository's source files, or as a module's name
(`orders.cancel(...)` for a function still to be written), and the files defining the most
of them rank first, a name weighing more the earlier the task uses it (the thing to change
comes first: "Order.summary() should show money.format_price ...").
"""

from __future__ import annotations

import re
from pathlib import Path

_CALLED = re.compile(r"\b([A-Za-z_]\w*)\(")  # `f(`, not prose "copies (after"
_DOTTED = re.compile(r"\b([A-Za-z_]\w*)\.([A-Za-z_]\w*)\b")
_CODE_LIKE = re.compile(r"\b([A-Za-z]\w*_\w+|[a-z]+[A-Z]\w*)\b")  # snake_case, camelCase
_SOURCE_SUFFIXES = frozenset(
    {".py", ".js", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java", ".kt", ".rb", ".php", ".cs", ".swift",
     ".c", ".h", ".cc", ".cpp", ".hpp", ".scala", ".ex", ".exs", ".sh"}
)
_MAX_FILE_BYTES = 256 * 1024  # generated or vendored giants are not where a task's change goes
_MAX_TOTAL_BYTES = 8 * 1024 * 1024  # a huge repository is not scanned whole on every attempt
_MAX_NAMES = 40
_MOST = 3


def code_names(text: str) -> list[str]:
    """The names in `text` that look like code, in order of first appearance."""
    found: list[tuple[int, str]] = []
    for match in _CALLED.finditer(text):
        found.append((match.start(1), match[1]))
    for match in _DOTTED.finditer(text):
        if not match[2][:1].isdigit() and not _looks_like_file(match[0]):
            found += [(match.start(1), match[1]), (match.start(2), match[2])]
    for match in _CODE_LIKE.finditer(text):
        found.append((match.start(1), match[1]))
    names = dict.fromkeys(name for _, name in sorted(found) if len(name) > 2)
    return list(names)[:_MAX_NAMES]


def defining_files(repo_dir: Path, text: str, listed: list[str]) -> list[str]:
    """Up to 3 source files that define the most of the code names `text` uses; [] when none."""
    names = code_names(text)
    if not names:
        return []
    pattern = _definition_pattern(names)
    weight = {name: 1 / (1 + index) for index, name in enumerate(names)}
    scores: dict[str, float] = {}
    read = 0
    for name in (n for n in listed if Path(n).suffix.lower() in _SOURCE_SUFFIXES):
        source = _read(repo_dir / name)
        if source is not None:
            read += len(source)
            if read > _MAX_TOTAL_BYTES:
                break
            defined = {match[1] for match in pattern.finditer(source)} | ({Path(name).stem} & set(names))
            if defined:
                scores[name] = sum(weight[n] for n in defined)
    return sorted(scores, key=lambda n: (-scores[n], n))[:_MOST]


def _definition_pattern(names: list[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    keywords = r"(?:async\s+)?def|class|function|func(?:\s*\([^)]*\))?|fn|interface|struct|type|const|let|var"
    return re.compile(rf"^[ \t]*(?:export\s+)?(?:pub\s+)?(?:{keywords})\s+({alternatives})\b", re.MULTILINE)


def _looks_like_file(token: str) -> bool:
    """`money.py`, `README.md`: a file name, not an attribute."""
    return Path(token).suffix.lower() in _SOURCE_SUFFIXES or token.rsplit(".", 1)[-1] in {"md", "txt", "json",
                                                                                       "toml", "yaml", "yml"}


def _read(path: Path) -> str | None:
    try:
        if path.stat().st_size > _MAX_FILE_BYTES:
            return None
        return path.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
