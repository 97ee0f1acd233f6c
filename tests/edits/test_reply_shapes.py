"""Replies in the shapes real models write, read into edits and applied to a real tree.

The shapes come from what a small open code model (Qwen2.5-Coder-1.5B) wrote when
asked for edits: the function alone in a fenced block under a made-up `src/` path, a
SEARCH block with no divider, a path repeated inside the fence, a reply cut off at the
output limit, a block with no path at all, an example-usage block after the code.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.edits import EditError, RepoView, apply_edits, parse_reply, resolve_targets, shape_of

SOLUTION = '''from typing import List


def double(x: int) -> int:
    return x * 2


def doubled_evens(values: List[int]) -> List[int]:
    """The even values, doubled, in order."""
    raise NotImplementedError("not written yet")
'''

TESTS = '''from solution import doubled_evens


def test_doubled_evens():
    assert doubled_evens([1, 2, 3, 4]) == [4, 8]
'''

# The function alone, as models write it: no import, no helper.
FUNCTION = '''def doubled_evens(values: List[int]) -> List[int]:
    """The even values, doubled, in order."""
    return [double(v) for v in values if v % 2 == 0]
'''


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "solution.py").write_text(SOLUTION)
    (root / "test_solution.py").write_text(TESTS)
    (root / "lib").mkdir()
    (root / "lib" / "util.py").write_text("def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n")
    return root


def view(repo: Path, prompt: str = "Implement doubled_evens in solution.py; test_solution.py checks it.") -> RepoView:
    listed = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file())
    shown = {name: (repo / name).read_text() for name in listed}
    in_play = [name for name in listed if name in prompt]
    return RepoView(repo, listed, shown, in_play, {n for n in in_play if n.startswith("test_")}, prompt)


def apply(repo: Path, reply: str, *, truncated: bool = False, **kw: str) -> list[str]:
    edits = resolve_targets(parse_reply(reply, truncated=truncated), view(repo, **kw))
    return apply_edits(repo, edits)


def checks_pass(repo: Path) -> bool:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=repo,
                          capture_output=True, text=True)
    return done.returncode == 0


# --------------------------------------------------------------------------- shapes that apply


def test_function_alone_under_a_made_up_folder_goes_into_the_real_file(repo: Path) -> None:
    reply = f"src/solution.py\n```python\n{FUNCTION}```\n"

    assert shape_of(reply) == "whole"
    assert apply(repo, reply) == ["solution.py"]
    text = (repo / "solution.py").read_text()
    assert "from typing import List" in text and "def double(x: int)" in text  # helpers kept
    assert "NotImplementedError" not in text
    assert not (repo / "src").exists()
    assert checks_pass(repo)


def test_a_wrong_path_with_no_file_of_that_name_goes_where_the_function_is_defined(repo: Path) -> None:
    reply = f"src/calc.py\n```\n{FUNCTION}```\n"

    assert apply(repo, reply) == ["solution.py"]
    assert checks_pass(repo)


def test_a_new_file_the_task_names_is_created_where_it_says(repo: Path) -> None:
    reply = "src/extra.py\n```python\ndef double(x):\n    return 2 * x\n```\n"

    assert apply(repo, reply, prompt="Create src/extra.py with double().") == ["src/extra.py"]
    assert (repo / "solution.py").read_text() == SOLUTION


def test_path_repeated_inside_the_fence_and_a_search_block_without_divider(repo: Path) -> None:
    reply = f"src/calc.py\n```\nsrc/solution.py\n<<<<<<< SEARCH\n{FUNCTION}>>>>>>> REPLACE\n```\n"

    assert shape_of(reply) == "search-replace"
    assert apply(repo, reply) == ["solution.py"]
    assert checks_pass(repo)


def test_search_replace_under_the_wrong_folder_applies_to_the_only_file_of_that_name(repo: Path) -> None:
    reply = (
        "src/solution.py\n<<<<<<< SEARCH\n"
        '    raise NotImplementedError("not written yet")\n=======\n'
        "    return [double(v) for v in values if v % 2 == 0]\n>>>>>>> REPLACE\n"
    )
    assert apply(repo, reply) == ["solution.py"]
    assert checks_pass(repo)


@pytest.mark.parametrize(
    "label",
    [
        "solution.py",
        "./solution.py",
        "**solution.py**",
        "### File: solution.py",
        "Here is the updated `solution.py`:",
        "Here is the implementation for solution.py:",
    ],
)
def test_the_path_line_before_the_fence_in_its_usual_spellings(repo: Path, label: str) -> None:
    assert apply(repo, f"{label}\n\n```python\n{FUNCTION}```\n") == ["solution.py"]


@pytest.mark.parametrize(
    "reply",
    [
        f"```python solution.py\n{FUNCTION}```\n",
        f"```python\n# solution.py\n{FUNCTION}```\n",
        f"```python\nsolution.py\n{FUNCTION}```\n",
        f"```python\nsolution.py\n```\n```python\n{FUNCTION}```\n",  # the path in a block of its own
    ],
)
def test_the_path_in_the_info_string_or_on_the_first_line(repo: Path, reply: str) -> None:
    assert apply(repo, reply) == ["solution.py"]
    assert "# solution.py" not in (repo / "solution.py").read_text()
    assert checks_pass(repo)


def test_a_block_with_no_path_goes_to_the_file_defining_its_function(repo: Path) -> None:
    reply = f"Here is the implementation:\n\n```python\n{FUNCTION}```\n\nIt keeps the even values."
    assert apply(repo, reply) == ["solution.py"]
    assert checks_pass(repo)


def test_an_example_usage_block_after_the_code_is_left_out(repo: Path) -> None:
    reply = f"```python\n{FUNCTION}```\n\nExample:\n\n```python\nprint(doubled_evens([1, 2]))\n```\n"
    assert apply(repo, reply) == ["solution.py"]
    assert "print(" not in (repo / "solution.py").read_text()


def test_shell_blocks_are_not_code_to_apply(repo: Path) -> None:
    reply = f"solution.py\n```python\n{FUNCTION}```\n\nRun:\n```bash\npython -m pytest -q\n```\n"
    assert apply(repo, reply) == ["solution.py"]


def test_a_fence_round_the_files_heading_and_the_code_bare_after_it(repo: Path) -> None:
    """The small model copies the prompt's file headings into a block, then writes the code
    bare and closes with a lone fence (HumanEval/70 and /90, retries 3 and 4, on a CPU)."""
    done = SOLUTION.replace('raise NotImplementedError("not written yet")',
                            "return [double(v) for v in values if v % 2 == 0]")
    reply = f"```\n# Repository files\n\n## solution.py\n```\n\n{done}```\n"

    assert apply(repo, reply) == ["solution.py"]
    assert checks_pass(repo)


def test_a_fenced_heading_with_nothing_after_it_is_still_no_code(repo: Path) -> None:
    with pytest.raises(EditError):
        apply(repo, "```\n# Repository files\n\n## solution.py\n```\n\nI think this is right.\n")


def test_bare_code_with_no_fence_at_all(repo: Path) -> None:
    assert shape_of(FUNCTION) == "bare-code"
    assert apply(repo, FUNCTION) == ["solution.py"]


def test_a_whole_file_that_forgot_an_import_it_uses_keeps_the_import(repo: Path) -> None:
    whole = "def double(x: int) -> int:\n    return x * 2\n\n\n" + FUNCTION
    assert apply(repo, f"solution.py\n```python\n{whole}```\n") == ["solution.py"]
    assert (repo / "solution.py").read_text().startswith("from typing import List\n")
    assert checks_pass(repo)


def test_a_unified_diff(repo: Path) -> None:
    reply = (
        "```diff\n--- a/solution.py\n+++ b/solution.py\n@@ -10,3 +10,3 @@ def doubled_evens\n"
        '     """The even values, doubled, in order."""\n'
        '-    raise NotImplementedError("not written yet")\n'
        "+    return [double(v) for v in values if v % 2 == 0]\n```\n"
    )
    assert shape_of(reply) == "diff"
    assert apply(repo, reply) == ["solution.py"]
    assert checks_pass(repo)


def test_a_diff_can_create_and_delete_files(repo: Path) -> None:
    reply = (
        "--- /dev/null\n+++ b/notes/todo.md\n@@ -0,0 +1,2 @@\n+# To do\n+- more\n"
        "--- a/lib/util.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-def clamp(x, lo, hi):\n-    return max(lo, min(x, hi))\n"
    )
    assert sorted(apply(repo, reply)) == ["lib/util.py", "notes/todo.md"]
    assert (repo / "notes/todo.md").read_text() == "# To do\n- more\n"
    assert not (repo / "lib/util.py").exists()


def test_search_text_that_differs_only_in_whitespace_is_found_when_unique(repo: Path) -> None:
    reply = (
        "solution.py\n<<<<<<< SEARCH\n"
        'def doubled_evens(values:  List[int]) -> List[int]:\n'
        '  """The even values, doubled, in order."""\n'
        '  raise NotImplementedError("not written yet")\n=======\n'
        'def doubled_evens(values: List[int]) -> List[int]:\n'
        "    return [double(v) for v in values if v % 2 == 0]\n>>>>>>> REPLACE\n"
    )
    assert apply(repo, reply) == ["solution.py"]
    assert checks_pass(repo)


def test_a_missing_leading_folder_is_found_for_a_search_edit(repo: Path) -> None:
    reply = "util.py\n<<<<<<< SEARCH\n    return max(lo, min(x, hi))\n=======\n    return min(max(x, lo), hi)\n>>>>>>> REPLACE\n"
    assert apply(repo, reply) == ["lib/util.py"]


# --------------------------------------------------------------------------- shapes refused


def test_a_reply_cut_off_at_the_output_limit_is_refused_and_says_so(repo: Path) -> None:
    reply = "solution.py\n```python\ndef doubled_evens(values):\n    if values == [2]:\n        return [4]\n    if values =="
    with pytest.raises(EditError, match="cut off at the model's output limit inside the code block for solution.py"):
        apply(repo, reply, truncated=True)
    assert (repo / "solution.py").read_text() == SOLUTION


def test_an_unclosed_block_that_the_model_finished_is_accepted(repo: Path) -> None:
    assert apply(repo, f"solution.py\n```python\n{FUNCTION}") == ["solution.py"]


def test_a_block_that_elides_code_is_refused(repo: Path) -> None:
    reply = "lib/util.py\n```python\n# ... existing code ...\ndef wrap(x):\n    return x\n```\n"
    with pytest.raises(EditError, match="leaves code out"):
        apply(repo, reply)
    assert (repo / "lib/util.py").read_text().startswith("def clamp")


def test_a_block_that_could_be_for_several_files_is_refused_with_the_file_list(repo: Path) -> None:
    reply = "```python\nVERSION = 2\n```\n"
    with pytest.raises(EditError, match=r"names no file.*lib/util.py, solution.py, test_solution.py"):
        apply(repo, reply, prompt="Add a VERSION somewhere.")


def test_a_block_with_no_path_goes_to_the_code_file_the_task_names_not_its_tests(repo: Path) -> None:
    reply = "```python\nVERSION = 2\n```\n"
    assert apply(repo, reply) == ["solution.py"]
    assert "VERSION = 2" in (repo / "solution.py").read_text()


@pytest.mark.parametrize(
    "body",
    [
        "    return [double(v) for v in values if v % 2 == 0]\n",
        "return [double(v) for v in values if v % 2 == 0]\n",
        "result = []\nfor v in values:\n    if v % 2 == 0:\n        result.append(double(v))\nreturn result\n",
    ],
)
def test_a_bare_body_becomes_the_body_of_the_function_the_task_names(repo: Path, body: str) -> None:
    assert apply(repo, f"```python\n{body}```\n") == ["solution.py"]
    text = (repo / "solution.py").read_text()
    assert '"""The even values, doubled, in order."""' in text and "NotImplementedError" not in text
    assert checks_pass(repo)


def test_a_bare_body_for_an_unclear_function_is_refused(repo: Path) -> None:
    with pytest.raises(EditError, match="not clear which function it belongs to"):
        apply(repo, "solution.py\n```python\nreturn 1\n```\n", prompt="Fix solution.py.")


def test_a_name_two_files_share_is_ambiguous(repo: Path) -> None:
    (repo / "pkg").mkdir()
    (repo / "pkg" / "util.py").write_text("X = 1\n")
    # Its SEARCH text is in neither file, so it cannot tell them apart (test_search_elsewhere.py).
    reply = "util.py\n<<<<<<< SEARCH\nX = 0\n=======\nX = 2\n>>>>>>> REPLACE\n"
    with pytest.raises(EditError, match=r"2 files could be meant \(lib/util.py, pkg/util.py\)"):
        apply(repo, reply)


@pytest.mark.parametrize("reply", ["I would keep the even values and double them.", "```\nsolution.py\n```\n"])
def test_a_reply_with_no_code_is_refused(repo: Path, reply: str) -> None:
    with pytest.raises(EditError, match="holds no code"):
        apply(repo, reply)


# --------------------------------------------------------------------------- hostile replies


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("../outside.py\n```python\nprint('escaped')\n```\n", "outside the repository"),
        (".git/hooks/pre-commit\n```sh\n#!/bin/sh\nexit 0\n```\n", "inside .git"),
        (".openagents/project.json\n```json\n{\"testCommands\": [\"true\"]}\n```\n", "goldenloop's own state"),
    ],
)
def test_a_reply_aimed_outside_the_work_is_refused(repo: Path, reply: str, reason: str) -> None:
    (repo / ".openagents").mkdir()
    (repo / ".openagents" / "project.json").write_text("{}\n")
    with pytest.raises(EditError, match=reason):
        apply(repo, reply)
    assert (repo / ".openagents" / "project.json").read_text() == "{}\n"
    assert not (repo.parent / "outside.py").exists()


def test_code_too_deeply_nested_to_parse_is_still_read_without_a_crash(repo: Path) -> None:
    deep = "x = " + "-" * 200_000 + "1\n"
    assert apply(repo, f"lib/deep.py\n```python\n{deep}```\n") == ["lib/deep.py"]  # a new file
    assert apply(repo, f"solution.py\n```python\n{deep}```\n") == ["solution.py"]  # merged by its lines
    assert (repo / "solution.py").read_text().startswith(SOLUTION.rstrip("\n"))


def test_files_without_an_extension_can_be_named_before_a_block(repo: Path) -> None:
    reply = "Makefile\n```make\ntest:\n\tpytest -q\n```\n\nbin/check\n```sh\n#!/bin/sh\nmake test\n```\n"
    assert sorted(apply(repo, reply)) == ["Makefile", "bin/check"]
