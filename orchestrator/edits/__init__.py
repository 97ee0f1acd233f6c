"""From a model's reply to changes in the working tree, safely.

`parse_reply` reads any of the shapes models write (SEARCH/REPLACE blocks, unified
diffs, fenced code blocks under a path, bare code) into `Edit`s; `resolve_targets`
finds the file each edit is for, or refuses what is ambiguous; `apply_edits` applies
them all or nothing. `formats` holds the words that ask a model for a format.
docs/EDIT_FORMAT.md is the contract.
"""

from orchestrator.edits.apply import apply_edits
from orchestrator.edits.base import Edit, EditError
from orchestrator.edits.formats import FORMATS, ROBUST, EditFormat, reply_shape, system_prompt
from orchestrator.edits.paths import safe_path
from orchestrator.edits.reply import parse_reply, shape_of
from orchestrator.edits.targets import RepoView, resolve_targets

__all__ = [
    "FORMATS",
    "ROBUST",
    "Edit",
    "EditError",
    "EditFormat",
    "RepoView",
    "apply_edits",
    "parse_reply",
    "reply_shape",
    "resolve_targets",
    "safe_path",
    "shape_of",
    "system_prompt",
]
