"""The repository as goldenloop changes it: `Repo` (an attempt's changes, exact commits on
a private index, restore) and what a bookkeeping commit holds of `.openagents/`."""

from orchestrator.git.bookkeeping import Pending, is_own
from orchestrator.git.repo import OPENAGENTS, Repo, RepoError

__all__ = ["OPENAGENTS", "Pending", "Repo", "RepoError", "is_own"]
