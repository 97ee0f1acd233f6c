"""Which refused writes an agent's output names, as its tools print them."""

from pathlib import Path

from orchestrator.loop.escapes import escape_sentence, refused_writes

CHECKOUT = Path("/home/ann/shop")
OUTPUT = """\
[Errno 13] Permission denied: '/home/ann/shop/README.md'
Error: EACCES: permission denied, open '/home/ann/shop/src/app.js'
sh: 1: cannot create /home/ann/shop/stray.txt: Permission denied
fatal: Unable to create '/home/ann/shop/.git/worktrees/worker-1/index.lock': Permission denied
npm ERR! Error: EACCES: permission denied, mkdir '/home/ann/.npm/_cacache'
wrote /home/ann/shop-worktree/calc.py
cp: cannot create regular file '/home/ann/shop/README.md': Permission denied
"""


def test_writes_refused_in_the_checkout_are_told_from_git_and_the_rest() -> None:
    inside, outside = refused_writes(OUTPUT, CHECKOUT, CHECKOUT / ".git")
    assert inside == ["README.md", "src/app.js", "stray.txt"]
    assert outside == ["/home/ann/shop/.git/worktrees/worker-1/index.lock", "/home/ann/.npm/_cacache"]


def test_a_line_that_names_the_checkout_without_a_refusal_is_no_escape() -> None:
    assert refused_writes("reading /home/ann/shop/README.md\nall tests passed\n", CHECKOUT, CHECKOUT / ".git") == (
        [], [])


def test_the_sentence_names_a_few_paths_and_counts_the_rest() -> None:
    sentence = escape_sentence([f"f{n}.py" for n in range(7)])
    assert sentence.startswith("rejected: the agent tried to change f0.py, f1.py, f2.py, f3.py, f4.py (and 2 more) "
                               "in your checkout, outside its worktree, and the sandbox refused it")
