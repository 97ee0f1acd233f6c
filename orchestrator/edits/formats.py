"""The edit formats a model can be asked for, and the words that ask for them.

- `whole`: each changed file's complete content in a fenced block under its path (in
  Python, the complete functions and classes that change are enough). What small
  models write most reliably; the most robust format, and the one to fall back to.
- `search-replace`: SEARCH/REPLACE blocks; economical on big files, for models that
  follow it.
- `diff`: a unified diff.

The instructions describe each shape in words and never show an example edit: a
small model copies a concrete example verbatim (paths and code included) rather than
writing its own. Where a path helps, it is a real path of the repository.
"""

from __future__ import annotations

from typing import Literal, get_args

EditFormat = Literal["whole", "search-replace", "diff"]
FORMATS: tuple[str, ...] = get_args(EditFormat)
ROBUST: EditFormat = "whole"

ROLE = (
    "You are a careful software engineer working in a git repository. You are given a task "
    "and the contents of the files that matter. You cannot run commands: your reply is "
    "applied to the files, then the project's checks (tests, type checks) run."
)

_HOW: dict[str, str] = {
    "whole": (
        "How to reply: for each file you change, write its path exactly as it appears under "
        '"Repository files", alone on a line, and right after it the complete new content '
        "of that file in one fenced code block. Write out every line, unchanged ones too; "
        "never shorten the code with \"...\" or a comment such as \"rest of the code\". In "
        "a Python file you may instead write only the complete functions and classes you "
        "change, with the imports they need: they replace the ones of the same name and the "
        "rest of the file stays as it is. To create a file, do the same under its new path. "
        "Keep any explanation short and outside the code blocks."
    ),
    "search-replace": (
        "How to reply: write each change as an edit block made of: the file's path exactly "
        'as listed under "Repository files", alone on a line; a line <<<<<<< SEARCH; the '
        "lines to change, copied exactly from the file; a line =======; the new lines; a "
        "line >>>>>>> REPLACE. The SEARCH lines must match exactly one place in the file: "
        "include a few neighbouring lines when they would match more than once. Use one "
        "block per change. To create a file or rewrite one completely, write its path and "
        "then its whole content in one fenced code block instead. Keep any explanation "
        "short and outside the blocks."
    ),
    "diff": (
        "How to reply: write your changes as a unified diff in one fenced ```diff block. "
        'For each file, a line "--- " and a line "+++ " each followed by its path exactly '
        "as listed, then hunks: each starts with a line @@ ... @@ and its lines start with "
        "a space (unchanged), - (removed) or + (added). Include two or three unchanged lines "
        "around each change; line numbers may be left out. For a new file, write --- /dev/null."
    ),
}


def system_prompt(edit_format: EditFormat) -> str:
    return f"{ROLE}\n\n{_HOW[edit_format]}"


def reply_shape(edit_format: EditFormat, target: str | None) -> str:
    """One sentence of what the reply must look like, naming the likely file."""
    if edit_format == "whole":
        if target:
            fence = "```" + _language(target)
            # No path line asked for: small models answer "a line that reads x.py" with a
            # block holding only the path; a block without one still finds its file.
            return (
                f"Reply with the complete new code of {target} (the whole file, or the complete "
                f"functions you change) in one {fence} code block."
            )
        return (
            "Reply with the complete new content of each file you change, each in one fenced "
            "code block right after a line holding its path."
        )
    if edit_format == "search-replace":
        where = f" (for {target}, its path is {target})" if target else ""
        return (
            "Reply with edit blocks: the path, <<<<<<< SEARCH, lines copied exactly from the "
            f"file, =======, the new lines, >>>>>>> REPLACE{where}."
        )
    where = f" ({target} is written as --- {target} and +++ {target})" if target else ""
    return f"Reply with a unified diff in one ```diff block{where}."


_LANGUAGES = {
    ".py": "python", ".js": "javascript", ".ts": "typescript", ".tsx": "tsx", ".jsx": "jsx",
    ".go": "go", ".rs": "rust", ".java": "java", ".rb": "ruby", ".c": "c", ".h": "c",
    ".cpp": "cpp", ".cs": "csharp", ".sh": "bash", ".md": "markdown", ".json": "json",
}


def _language(path: str) -> str:
    """The fence's info string for a file, "" when unsure."""
    dot = path.rfind(".")
    return _LANGUAGES.get(path[dot:].lower(), "") if dot > path.rfind("/") else ""
