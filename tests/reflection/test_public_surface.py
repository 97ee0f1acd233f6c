"""The reflection package as a library user meets it: its public names and its schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import reflection
from reflection import FailureContext

ROOT = Path(__file__).resolve().parents[2]


def test_every_public_name_resolves_without_loading_a_model_client_or_driver():
    probe = (
        "import json, sys, reflection\n"
        "before = sorted(sys.modules)\n"
        "names = {n: type(getattr(reflection, n)).__name__ for n in reflection.__all__}\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('litellm', 'openai', 'psycopg'))\n"
        "print(json.dumps({'names': names, 'heavy': heavy,\n"
        "                  'eager': [m for m in before if m.startswith('reflection.') and m != 'reflection.exports']}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    found = json.loads(done.stdout)
    assert found["heavy"] == []  # importing and using the surface costs no litellm, openai or psycopg
    assert found["eager"] == []  # `import reflection` alone imports none of its modules
    for name in ("ReflectionService", "Reflection", "FailureContext", "ReflectionStore", "JsonlReflectionStore",
                 "InMemoryReflectionStore", "format_for_prompt", "TaskReflectionStore", "ReflectionStrategy"):
        assert name in found["names"]


def test_an_unknown_name_is_an_attribute_error():
    try:
        reflection.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("an unknown name resolved")


def _context(**extra: object) -> FailureContext:
    return FailureContext(session_id="s1", task_id="T-1", subtask_id="T-1.1", attempt_number=2,
                          subtask_title="Fix add", digest="FAILED test_calc.py::test_add", **extra)


def test_a_failure_context_carries_its_own_id_and_created_at_like_the_seed_schema():
    first, second = _context(), _context()
    body = first.to_dict()
    assert list(body)[:6] == ["id", "sessionId", "taskId", "subtaskId", "attemptNumber", "createdAt"]
    assert first.id and first.id != second.id
    assert body["createdAt"].endswith("Z")
    again = FailureContext.model_validate(json.loads(json.dumps(body)))
    assert again.id == first.id and again.created_at == first.created_at
