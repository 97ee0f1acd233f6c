"""The marker format (SEARCH/REPLACE, FILE, DELETE): parsing, and applying edits safely."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from projects import CALC_FIXED, FIX_ADD, do_one_task, events_of, git, make_project, tasks_on_disk, write_file

from orchestrator.edits import Edit, EditError, apply_edits, safe_path
from orchestrator.edits import parse_reply as parse_edits

CALC = '''\
def add(a, b):
    return a - b


def mul(a, b):
    return a * b
'''


def block(path: str, search: str, replace: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


# --------------------------------------------------------------------------- parse


def test_parse_single_block() -> None:
    edits = parse_edits(block("src/calc.py", "    return a - b\n", "    return a + b\n"))
    assert edits == [
        Edit(path="src/calc.py", kind="replace", search="    return a - b\n", replace="    return a + b\n")
    ]


def test_parse_multiple_blocks_in_fences_with_prose() -> None:
    reply = (
        "The subtraction is wrong; here is the fix.\n\n"
        "src/calc.py\n```python\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n"
        ">>>>>>> REPLACE\n```\n\nAnd a test:\n\n```python\ntests/test_calc.py\n"
        "<<<<<<< SEARCH\n=======\ndef test_add():\n    assert add(1, 2) == 3\n>>>>>>> REPLACE\n```\n"
        "That should do it.\n"
    )
    edits = parse_edits(reply)
    assert [(e.path, e.kind) for e in edits] == [
        ("src/calc.py", "replace"),
        ("tests/test_calc.py", "replace"),
    ]
    assert edits[1].search == ""
    assert edits[1].replace == "def test_add():\n    assert add(1, 2) == 3\n"


@pytest.mark.parametrize(
    "path_line",
    ["src/calc.py", "`src/calc.py`", "File: src/calc.py", "### src/calc.py", "**src/calc.py**", "src/calc.py:"],
)
def test_parse_path_line_variants(path_line: str) -> None:
    reply = block(path_line, "x = 1\n", "x = 2\n")
    assert parse_edits(reply)[0].path == "src/calc.py"


def test_parse_block_right_after_another_edits_the_same_file() -> None:
    reply = block("a.py", "x = 1\n", "x = 2\n") + "<<<<<<< SEARCH\ny = 1\n=======\ny = 2\n>>>>>>> REPLACE\n"
    assert [e.path for e in parse_edits(reply)] == ["a.py", "a.py"]


def test_parse_file_block_keeps_markers_inside_the_body() -> None:
    body = "Example:\n<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n"
    reply = f"docs/guide.md\n<<<<<<< FILE\n{body}>>>>>>> FILE\n"
    assert parse_edits(reply) == [Edit(path="docs/guide.md", kind="write", replace=body)]


def test_parse_delete_block() -> None:
    reply = "Remove the old module.\n\nold/legacy.py\n<<<<<<< DELETE\n>>>>>>> DELETE\n"
    assert parse_edits(reply) == [Edit(path="old/legacy.py", kind="delete")]


def test_parse_tolerates_crlf_reply() -> None:
    reply = block("a.py", "x = 1\n", "x = 2\n").replace("\n", "\r\n")
    assert parse_edits(reply)[0].replace == "x = 2\n"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("", "the reply is empty"),
        ("   \n\n", "the reply is empty"),
        ("I think the bug is in add(); it subtracts.\n", "the reply holds no code to apply"),
        ("a.py\n<<<<<<< SEARCH\n\n>>>>>>> REPLACE\n", "block 1 (a.py) is empty and has no ======= divider"),
        ("a.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n", "block 1 (a.py) is truncated"),
        ("a.py\n<<<<<<< FILE\nx = 1\n", "block 1 (a.py) is truncated"),
        ("a.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> FILE\n", "closes with >>>>>>> FILE"),
        ("x = 1\n=======\nx = 2\n>>>>>>> REPLACE\n", "without a matching opening marker"),
        ("a.py\n<<<<<<< DELETE\nsome text\n>>>>>>> DELETE\n", "a DELETE block has no body"),
    ],
)
def test_parse_malformed_replies(reply: str, message: str) -> None:
    with pytest.raises(EditError) as caught:
        parse_edits(reply)
    assert message in str(caught.value)


def test_parse_names_the_broken_block() -> None:
    reply = block("a.py", "x = 1\n", "x = 2\n") + "\nb.py\n<<<<<<< SEARCH\ny = 1\n>>>>>>> FILE\n"
    with pytest.raises(EditError, match=r"block 2 \(b\.py\) opens with <<<<<<< SEARCH"):
        parse_edits(reply)


@pytest.mark.parametrize("prose", ["", "Here is the fix:\n"])
def test_parse_block_without_path_leaves_the_file_to_the_resolver(prose: str) -> None:
    (edit,) = parse_edits(prose + "<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n")
    assert edit == Edit(path="", kind="replace", search="x\n", replace="y\n")


def test_parse_search_without_divider_is_read_as_the_new_code() -> None:
    # Real models write the whole new function between the markers and forget =======.
    reply = "solution.py\n<<<<<<< SEARCH\ndef f(n):\n    return n + 1\n>>>>>>> REPLACE\n"
    (edit,) = parse_edits(reply)
    assert edit == Edit(path="solution.py", kind="block", replace="def f(n):\n    return n + 1\n")


def test_parse_reports_unclosed_block_before_next_one() -> None:
    reply = "a.py\n<<<<<<< SEARCH\nx\n=======\ny\nb.py\n<<<<<<< SEARCH\nz\n=======\nw\n>>>>>>> REPLACE\n"
    with pytest.raises(EditError, match=r"block 1 \(a\.py\) is not closed"):
        parse_edits(reply)


# --------------------------------------------------------------------------- apply


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "calc.py").write_text(CALC)
    return root


def replace(path: str, search: str, new: str) -> Edit:
    return Edit(path=path, kind="replace", search=search, replace=new)


def test_apply_exact_match(repo: Path) -> None:
    touched = apply_edits(repo, [replace("src/calc.py", "    return a - b\n", "    return a + b\n")])
    assert touched == ["src/calc.py"]
    assert (repo / "src/calc.py").read_text() == CALC.replace("a - b", "a + b")


def test_apply_tolerates_trailing_whitespace_and_extra_indentation(repo: Path) -> None:
    search = "  def add(a, b):  \n      return a - b\n"
    edit = replace("src/calc.py", search, "  def add(a, b):\n      return a + b\n")
    assert apply_edits(repo, [edit]) == ["src/calc.py"]
    assert (repo / "src/calc.py").read_text() == CALC.replace("a - b", "a + b")


def test_apply_reindents_replacement_to_the_files_indentation(repo: Path) -> None:
    (repo / "cls.py").write_text("class C:\n    def f(self):\n        return 1\n")
    edit = replace("cls.py", "def f(self):\n    return 1\n", "def f(self):\n    x = 2\n    return x\n")
    apply_edits(repo, [edit])
    assert (repo / "cls.py").read_text() == "class C:\n    def f(self):\n        x = 2\n        return x\n"


def test_apply_not_found_shows_closest_line(repo: Path) -> None:
    edit = replace("src/calc.py", "    return a - bb\n", "    return a + b\n")
    with pytest.raises(EditError) as caught:
        apply_edits(repo, [edit])
    message = str(caught.value)
    assert message.startswith("edit 1 for src/calc.py: SEARCH text not found")
    assert "closest line 2: 'return a - b'" in message
    assert (repo / "src/calc.py").read_text() == CALC


def test_apply_lines_out_of_order_says_so(repo: Path) -> None:
    edit = replace("src/calc.py", "    return a * b\ndef add(a, b):\n", "")
    with pytest.raises(EditError, match="every SEARCH line exists, but not consecutively in this order"):
        apply_edits(repo, [edit])


def test_apply_ambiguous_match_is_an_error(repo: Path) -> None:
    (repo / "dup.py").write_text("x = 1\ny = 2\nx = 1\n")
    with pytest.raises(EditError, match=r"matches 2 times \(at lines 1, 3\)"):
        apply_edits(repo, [replace("dup.py", "x = 1\n", "x = 3\n")])
    assert (repo / "dup.py").read_text() == "x = 1\ny = 2\nx = 1\n"


def test_apply_is_all_or_nothing(repo: Path) -> None:
    (repo / "other.py").write_text("value = 1\n")
    edits = [
        replace("src/calc.py", "    return a - b\n", "    return a + b\n"),
        Edit(path="brand/new.py", kind="write", replace="x = 1\n"),
        replace("other.py", "value = 42\n", "value = 43\n"),
    ]
    with pytest.raises(EditError, match="edit 3 for other.py: SEARCH text not found"):
        apply_edits(repo, edits)
    assert (repo / "src/calc.py").read_text() == CALC
    assert not (repo / "brand").exists()


def test_apply_creates_new_file_in_new_directory(repo: Path) -> None:
    edits = [
        replace("pkg/sub/mod.py", "", "def f():\n    return 1"),
        Edit(path="pkg/sub/__init__.py", kind="write", replace=""),
    ]
    assert apply_edits(repo, edits) == ["pkg/sub/mod.py", "pkg/sub/__init__.py"]
    assert (repo / "pkg/sub/mod.py").read_text() == "def f():\n    return 1\n"
    assert (repo / "pkg/sub/__init__.py").read_text() == ""


def test_apply_search_on_missing_file_explains_how_to_create(repo: Path) -> None:
    with pytest.raises(EditError, match="does not exist, so there is nothing to SEARCH in; to create it"):
        apply_edits(repo, [replace("nope.py", "x = 1\n", "x = 2\n")])


def test_apply_empty_search_on_existing_file_is_refused(repo: Path) -> None:
    with pytest.raises(EditError, match="SEARCH is empty but the file already has content"):
        apply_edits(repo, [replace("src/calc.py", "", "x = 1\n")])
    assert (repo / "src/calc.py").read_text() == CALC


def test_apply_delete_and_rewrite(repo: Path) -> None:
    (repo / "old.py").write_text("gone = True\n")
    edits = [
        Edit(path="old.py", kind="delete"),
        Edit(path="src/calc.py", kind="write", replace="def add(a, b):\n    return a + b\n"),
    ]
    assert apply_edits(repo, edits) == ["old.py", "src/calc.py"]
    assert not (repo / "old.py").exists()
    assert (repo / "src/calc.py").read_text() == "def add(a, b):\n    return a + b\n"


def test_apply_delete_missing_file_is_an_error(repo: Path) -> None:
    with pytest.raises(EditError, match="cannot delete: the file does not exist"):
        apply_edits(repo, [Edit(path="ghost.py", kind="delete")])


def test_apply_successive_edits_to_one_file(repo: Path) -> None:
    edits = [
        replace("src/calc.py", "    return a - b\n", "    return a + b\n"),
        replace("src/calc.py", "    return a * b\n", "    return b * a\n"),
    ]
    assert apply_edits(repo, edits) == ["src/calc.py"]
    assert (repo / "src/calc.py").read_text() == CALC.replace("a - b", "a + b").replace("a * b", "b * a")


def test_apply_preserves_crlf_and_missing_final_newline(repo: Path) -> None:
    (repo / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    (repo / "open.txt").write_bytes(b"alpha\nbeta")
    apply_edits(repo, [replace("win.txt", "two\n", "2\n"), replace("open.txt", "alpha\n", "ALPHA\n")])
    assert (repo / "win.txt").read_bytes() == b"one\r\n2\r\nthree\r\n"
    assert (repo / "open.txt").read_bytes() == b"ALPHA\nbeta"


def test_apply_keeps_file_mode(repo: Path) -> None:
    script = repo / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o755)
    apply_edits(repo, [replace("run.sh", "echo old\n", "echo new\n")])
    assert script.read_text() == "echo new\n"
    assert os.access(script, os.X_OK)


def test_apply_refuses_binary_and_non_utf8(repo: Path) -> None:
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (repo / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(EditError, match="edit 1 for logo.png: a binary file"):
        apply_edits(repo, [Edit(path="logo.png", kind="write", replace="text\n")])
    with pytest.raises(EditError, match="not a UTF-8 text file"):
        apply_edits(repo, [replace("latin.txt", "caf\n", "cafe\n")])
    assert (repo / "logo.png").read_bytes().startswith(b"\x89PNG")


# --------------------------------------------------------------------------- path safety


@pytest.mark.parametrize(
    ("rel", "reason"),
    [
        ("/etc/passwd", "absolute paths are not allowed"),
        ("../escape.py", "outside the repository"),
        ("src/../../escape.py", "outside the repository"),
        (".git/config", "inside .git"),
        ("sub/.git/hooks/pre-commit", "inside .git"),
        (".openagents/project.json", "goldenloop's own state"),
        ("", "empty"),
    ],
)
def test_safe_path_refuses(repo: Path, rel: str, reason: str) -> None:
    with pytest.raises(EditError, match="refused path") as caught:
        safe_path(repo, rel)
    assert reason in str(caught.value)


def test_safe_path_accepts_paths_inside(repo: Path) -> None:
    assert safe_path(repo, "src/calc.py") == (repo / "src/calc.py").resolve()
    assert safe_path(repo, "new/dir/file.py") == (repo / "new/dir/file.py").resolve()


def test_symlink_leading_outside_is_refused_and_nothing_written(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.txt").write_text("keep\n")
    (repo / "linkdir").symlink_to(outside, target_is_directory=True)
    (repo / "linkfile.txt").symlink_to(outside / "target.txt")
    edits_sets = [
        [Edit(path="linkdir/new.py", kind="write", replace="x = 1\n")],
        [replace("linkfile.txt", "keep\n", "changed\n")],
        [Edit(path="ok.py", kind="write", replace="x\n"), Edit(path="linkfile.txt", kind="delete")],
    ]
    for edits in edits_sets:
        with pytest.raises(EditError, match="outside the repository"):
            apply_edits(repo, edits)
    assert sorted(p.name for p in outside.iterdir()) == ["target.txt"]
    assert (outside / "target.txt").read_text() == "keep\n"
    assert not (repo / "ok.py").exists()


def test_apply_refuses_git_dir_edit(repo: Path) -> None:
    (repo / ".git").mkdir()
    (repo / ".git" / "config").write_text("[core]\n")
    with pytest.raises(EditError, match=r"edit 1 for \.git/config: refused path"):
        apply_edits(repo, [Edit(path=".git/config", kind="write", replace="evil\n")])
    assert (repo / ".git" / "config").read_text() == "[core]\n"


def test_apply_leaves_unchanged_files_alone(repo: Path) -> None:
    before = (repo / "src/calc.py").stat()
    edit = replace("src/calc.py", "    return a * b\n", "    return a * b\n")
    assert apply_edits(repo, [edit]) == []
    after = (repo / "src/calc.py").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


# --------------------------------------------------------------------------- the file system refuses

LONG_NAME = "a" * 300 + ".py"  # longer than any common file system allows for one name


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its bytes: what a refused reply must leave unchanged."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_name_too_long_for_the_file_system_is_a_refused_edit(repo: Path) -> None:
    before = tree(repo)
    edits = [
        replace("src/calc.py", "    return a - b\n", "    return a + b\n"),
        Edit(path=LONG_NAME, kind="write", replace="x = 1\n"),
    ]
    with pytest.raises(EditError) as caught:
        apply_edits(repo, edits)
    message = str(caught.value)
    assert message.startswith("edit 2 for aaaa")
    assert "longer than the file system allows" in message
    assert "\n" not in message and len(message) < 300
    assert tree(repo) == before


@pytest.mark.parametrize("order", [["x.py", "x.py/y.py"], ["x.py/y.py", "x.py"]])
def test_a_file_and_a_folder_of_one_name_are_refused_and_nothing_stays_written(
    repo: Path, order: list[str]
) -> None:
    # Each edit is fine alone, so only writing them finds the clash.
    before = tree(repo)
    edits = [replace("src/calc.py", "    return a - b\n", "    return a + b\n")]
    edits += [Edit(path=path, kind="write", replace="x = 1\n") for path in order]
    with pytest.raises(EditError, match=r"^writing x\.py failed: it is a directory, not a file; no file was changed$"):
        apply_edits(repo, edits)
    assert tree(repo) == before
    assert not (repo / "x.py").exists()


def test_a_write_refused_part_way_puts_back_what_was_written(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "run.sh").write_text("echo old\n")
    (repo / "run.sh").chmod(0o755)
    (repo / "old.py").write_text("gone = True\n")
    before = tree(repo)
    real_replace = os.replace

    def refuse_locked(source: str | Path, target: str | Path) -> None:
        if Path(target).name == "locked.py":
            raise PermissionError(13, "Permission denied", str(target))
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", refuse_locked)
    edits = [
        replace("run.sh", "echo old\n", "echo new\n"),
        Edit(path="old.py", kind="delete"),
        Edit(path="new/dir/made.py", kind="write", replace="x = 1\n"),
        Edit(path="locked.py", kind="write", replace="x = 1\n"),
    ]
    with pytest.raises(EditError, match=r"^writing locked\.py failed: permission denied; no file was changed$"):
        apply_edits(repo, edits)
    assert tree(repo) == before  # run.sh and old.py back, made.py, locked.py and staged files gone
    assert not (repo / "new").exists()
    assert os.access(repo / "run.sh", os.X_OK)


def test_a_symlink_loop_is_a_refused_path(repo: Path) -> None:
    (repo / "loop_a").symlink_to(repo / "loop_b")
    (repo / "loop_b").symlink_to(repo / "loop_a")
    refused = r"^edit 1 for loop_a/x\.py: refused path 'loop_a/x\.py': it cannot be resolved"
    with pytest.raises(EditError, match=refused):
        apply_edits(repo, [Edit(path="loop_a/x.py", kind="write", replace="x = 1\n")])


def test_a_reply_naming_a_file_too_long_for_the_file_system_is_retried_not_a_crash(git_repo: Path) -> None:
    replies = [
        {"match": "Attempt 1 could not be applied", "reply": FIX_ADD},
        {"match": "Task T-1", "reply": write_file(LONG_NAME, "x = 1\n")},
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 0

    plan = json.loads((repo / ".openagents" / "subtasks" / "T-1.json").read_text())
    first, second = plan["subtasks"][0]["attempts"]
    assert first["outcome"] == "edit_failed"
    assert "longer than the file system allows" in first["summary"]
    assert second["outcome"] == "passed"
    assert len(events_of(repo, "verdict")) == 1  # the refused reply was never tested
    assert (repo / "calc.py").read_text() == CALC_FIXED
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert git(repo, "status", "--porcelain") == ""
