"""Index entries that tell git not to look at a file (skip-worktree, assume-unchanged):
an edit to such a file shows in no status and no diff, so an attempt that sets the flag
hides its edit. The loop notes the flags a subtask starts with and clears any an attempt
added, so that its edits are seen and judged."""

from __future__ import annotations

from orchestrator.git.repo import GitPlumbing


def hidden_from_status(repo: GitPlumbing) -> set[str]:
    """Paths whose index entries tell git not to look at the file."""
    entries = [item for item in repo.git("ls-files", "-v", "-z").split("\0") if item]
    return {entry[2:] for entry in entries if entry[0] == "S" or entry[0].islower()}


def show_to_status(repo: GitPlumbing, paths: list[str]) -> None:
    """Those flags cleared: git looks at the files again."""
    if paths:  # one flag per call: given together, git clears neither
        repo.git("update-index", "--no-skip-worktree", "--", *paths)
        repo.git("update-index", "--no-assume-unchanged", "--", *paths)
