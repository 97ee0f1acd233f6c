"""The morning report as a user opens it: in a real headless Chromium (tests/browser.py).

A night with a task closed and a task blocked, whose title carries markup a model or a
user could have written; then `goldenloop report` writes the page again, and the browser
loads it, unfolds each diff and follows each link.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from browser import Browser
from projects import FIX_ADD, goldenloop, make_project, task

from orchestrator.cli import overnight_main

PLANTED = '<img src=x onerror="window.planted=1"><script>window.planted=2</script>'
BREAK_MUL = "calc.py\n<<<<<<< SEARCH\n    return a * b\n=======\n    return a + b\n>>>>>>> REPLACE\n"


def night(repo: Path) -> Path:
    tasks = [task("T-1", "Fix add"), task("T-2", f"Speed up mul {PLANTED}", priority=2, type="feature")]
    replies = [{"match": "Task T-1:", "reply": FIX_ADD}, {"match": "Task T-2:", "reply": BREAK_MUL, "times": None}]
    repo = make_project(repo, replies, tasks=tasks, config={"reflexion": {"useLLM": False, "maxRetries": 1}})
    assert overnight_main([str(repo), "--max-tasks", "2"]) == 1  # T-2 ends blocked
    return repo


def test_the_report_loads_clean_unfolds_its_diffs_and_its_links_lead_to_files(
    git_repo: Path, tmp_path: Path, capsys
) -> None:
    repo = night(git_repo)
    capsys.readouterr()
    assert goldenloop(repo, "report") == 0
    page = Path(capsys.readouterr().out.strip())
    text = page.read_text()

    with Browser(tmp_path / "browser") as browser:
        browser.open_page(page)
        unfolded = browser.evaluate("""[...document.querySelectorAll('details.diff')].map(d => {
            const task = d.parentElement.closest('details');
            if (!task.open) task.querySelector('summary').click();
            d.querySelector('summary').click();
            const pre = d.querySelector('pre');
            return [d.open, pre.offsetHeight > 0, pre.textContent];
        })""")
        links = browser.evaluate("[...document.querySelectorAll('a')].map(a => a.href)")
        planted = browser.evaluate("window.planted === undefined && document.images.length === 0")
        problems = browser.problems()

    assert problems == []  # the page loads with no console error
    assert planted  # the planted markup shows as text and runs nothing
    assert len(unfolded) == 2 and all(opened and visible for opened, visible, _ in unfolded)
    closed_diff, blocked_diff = (diff for _, _, diff in unfolded)
    assert "+    return a + b" in closed_diff and "-    return a - b" in closed_diff  # T-1's commit
    assert "-    return a * b" in blocked_diff  # T-2's best attempt
    paths = [Path(unquote(urlsplit(link).path)) for link in links]
    assert paths and all(path.is_file() for path in paths)
    assert any(path.name == "T-2.md" for path in paths)  # the escalation packet, linked
    assert f"goldenloop reopen T-2 --dir {repo}" in text and "agent the builtin editor" in text
    assert "window.planted" in text  # shown, escaped
