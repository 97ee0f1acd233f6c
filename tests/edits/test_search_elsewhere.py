"""A SEARCH/REPLACE block under a path that does not exist: applied to the one tracked
file holding its SEARCH text at one place, the correction noted; refused with the reason
when the text is in two files, twice in one, or only in an untracked, ignored, test or
goldenloop file.

The shape is a small model's habit: the lines copied exactly from the file it was shown,
under a path it made up (`src/helpers.py` for `helpers.py`, `utils.py` for `text_tools.py`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from projects import CALC, CALC_FIXED, do_one_task, events_of, git, make_project, tasks_on_disk

from orchestrator.judging.test_paths import DEFAULT_TEST_GLOBS, is_test_path
from orchestrator.edits import EditError, RepoView, apply_edits, parse_reply, resolve_targets

SLUGIFY = '''def slugify(title):
    return title.lower().replace(" ", "-")
'''
SHOUT = '''def shout(text):
    return text.upper() + "!"
'''
EDIT = '''utils.py
<<<<<<< SEARCH
    return title.lower().replace(" ", "-")
=======
    return "-".join(title.lower().split())
>>>>>>> REPLACE
'''


@pytest.fixture
def repo(git_repo: Path) -> Path:
    (git_repo / "text_tools.py").write_text(SLUGIFY)
    (git_repo / "shouting.py").write_text(SHOUT)
    (git_repo / "test_text_tools.py").write_text("from text_tools import slugify\n")
    (git_repo / ".gitignore").write_text("build/\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "tools")
    return git_repo


def view(repo: Path) -> RepoView:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=repo,
                            capture_output=True, text=True, check=True).stdout.split()
    shown = {name: (repo / name).read_text() for name in listed}
    return RepoView(repo, listed, shown, prompt="Make slugify collapse runs of spaces.",
                    is_test=lambda path: is_test_path(path, DEFAULT_TEST_GLOBS))


def resolve(repo: Path, reply: str) -> tuple[list[str], RepoView]:
    seen = view(repo)
    edits = resolve_targets(parse_reply(reply), seen)
    return apply_edits(repo, edits), seen


def test_a_made_up_path_whose_search_text_is_in_one_tracked_file_is_applied_there(repo: Path) -> None:
    touched, seen = resolve(repo, EDIT)

    assert touched == ["text_tools.py"]
    assert '"-".join(title.lower().split())' in (repo / "text_tools.py").read_text()
    assert not (repo / "utils.py").exists()
    assert seen.corrections == [
        ("edit 1 named utils.py, which does not exist; it was applied to text_tools.py, the one file "
         "holding its SEARCH text. Write paths exactly as listed")
    ]


def test_a_made_up_folder_whose_file_lacks_the_text_goes_to_the_file_that_has_it(repo: Path) -> None:
    (repo / "lib").mkdir()
    (repo / "lib" / "utils.py").write_text("def unrelated():\n    return 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "lib")

    touched, seen = resolve(repo, EDIT.replace("utils.py", "src/utils.py", 1))

    assert touched == ["text_tools.py"] and len(seen.corrections) == 1


def test_a_path_that_exists_is_never_second_guessed(repo: Path) -> None:
    with pytest.raises(EditError, match="SEARCH text not found"):
        resolve(repo, EDIT.replace("utils.py", "shouting.py", 1))


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        ("two_files", r"its SEARCH text is in 2 files \(slugs.py, text_tools.py\)"),
        ("twice", "its SEARCH text is in text_tools.py, but at 2 places"),
        ("untracked", "its SEARCH text is only in drafts.py, which git does not track"),
        ("ignored", r"utils.py does not exist; the files are: "),
        ("test_only", "its SEARCH text is only in test_text_tools.py, a test file that judges the attempt"),
    ],
)
def test_anything_ambiguous_is_refused_with_the_reason(repo: Path, setup: str, reason: str) -> None:
    line = '    return title.lower().replace(" ", "-")\n'
    if setup == "two_files":
        (repo / "slugs.py").write_text("def slug(title):\n" + line)
        git(repo, "add", "slugs.py")
    elif setup == "twice":
        (repo / "text_tools.py").write_text(SLUGIFY + "\n\ndef slug(title):\n" + line)
    else:  # the text leaves text_tools.py, for a file the edit must not go to
        (repo / "text_tools.py").write_text("def slugify(title):\n    return title\n")
        target = {"untracked": "drafts.py", "ignored": "build/slugify.py", "test_only": "test_text_tools.py"}[setup]
        (repo / target).parent.mkdir(exist_ok=True)
        (repo / target).write_text("def slugify(title):\n" + line)
    before = {p: p.read_bytes() for p in repo.rglob("*.py")}

    with pytest.raises(EditError, match=reason):
        resolve(repo, EDIT)

    assert {p: p.read_bytes() for p in repo.rglob("*.py")} == before


def test_goldenloop_state_is_never_a_target(repo: Path) -> None:
    (repo / "text_tools.py").write_text("def slugify(title):\n    return title\n")
    state = repo / ".openagents"
    state.mkdir()
    (state / "notes.py").write_text('    return title.lower().replace(" ", "-")\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "state")

    with pytest.raises(EditError, match="utils.py does not exist; the files are"):
        resolve(repo, EDIT)


# -- end to end: the loop, real pytest runs, the scripted model ------------------------

WRONG_PATH_ABS = """src/arith.py
<<<<<<< SEARCH
    return a - b
=======
    return abs(a) + abs(b)
>>>>>>> REPLACE
"""
WRONG_PATH_FIX = WRONG_PATH_ABS.replace("abs(a) + abs(b)", "a + b")


def test_the_loop_applies_it_logs_the_correction_and_tells_the_next_attempt(git_repo: Path) -> None:
    told = r"Note: edit 1 named src/arith.py, which does not exist; it was applied to calc.py"
    replies = [
        {"match": told, "reply": WRONG_PATH_FIX.replace("return a - b", "return abs(a) + abs(b)")},
        {"match": "# Task T-1", "reply": WRONG_PATH_ABS},
        {"match": "Failure digest", "reply": "not JSON: the heuristic reflects instead", "times": None},
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 0

    assert (repo / "calc.py").read_text() == CALC_FIXED and not (repo / "src").exists()
    corrected = events_of(repo, "edit_corrected")
    assert [e["attempt"] for e in corrected] == [1, 2]
    assert "it was applied to calc.py, the one file holding its SEARCH text" in corrected[0]["notes"][0]
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"


def test_the_loop_refuses_an_ambiguous_one_and_says_why(git_repo: Path) -> None:
    replies = [{"match": "# Task T-1", "reply": WRONG_PATH_ABS, "times": None}]
    files = {"calc_copy.py": CALC}  # the same lines in a second tracked file
    repo = make_project(git_repo, replies, files=files, config={"reflexion": {"maxRetries": 0}})

    assert do_one_task(repo) == 1

    (failed,) = events_of(repo, "edit_failed")
    assert "its SEARCH text is in 2 files (calc.py, calc_copy.py)" in failed["error"]
    assert events_of(repo, "edit_corrected") == []
    assert (repo / "calc.py").read_text() == CALC
