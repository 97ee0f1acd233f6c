"""A reply copies what the model was shown, placeholders included; the user's values stay.

The model sees every file redacted (the bookshop's tests read `[REDACTED:email]` where the
file has an address). Replies below copy those lines back, as a whole file, as a SEARCH
text, or write a placeholder on a new line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from projects import PY, do_one_task, git, make_project

from orchestrator.edits import EditError, apply_edits, parse_reply
from reflection.redact import redact

CUSTOMER_TESTS = '''from shop.customers import Customers


def test_register_and_get():
    customers = Customers()
    customers.register(" ann@example.com", "Ann")
    assert customers.get("ann@example.com").name == "Ann"
'''
CUSTOMERS = '''class Customers:
    def __init__(self):
        self.by_email = {}

    def register(self, email, name):
        self.by_email[email.strip()] = name

    def get(self, email):
        return type("Customer", (), {"name": self.by_email[email]})
'''


def shown(text: str) -> str:
    """What the model is shown of a file."""
    return redact(text)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_model_is_shown_the_address_redacted() -> None:
    assert "ann@example.com" not in shown(CUSTOMER_TESTS) and "[REDACTED:email]" in shown(CUSTOMER_TESTS)


def test_a_whole_file_copied_from_the_redacted_view_keeps_the_real_addresses(tmp_path: Path) -> None:
    write(tmp_path, {"tests/test_customers.py": CUSTOMER_TESTS})
    rewritten = shown(CUSTOMER_TESTS) + '\n\ndef test_unknown():\n    assert Customers().by_email == {}\n'
    reply = f"tests/test_customers.py\n```python\n{rewritten}```\n"

    apply_edits(tmp_path, parse_reply(reply))

    text = (tmp_path / "tests" / "test_customers.py").read_text()
    assert text.count("ann@example.com") == 2 and "REDACTED" not in text
    assert "def test_unknown" in text


def test_a_search_text_copied_with_a_placeholder_finds_the_real_line(tmp_path: Path) -> None:
    write(tmp_path, {"tests/test_customers.py": CUSTOMER_TESTS})
    line = '    customers.register(" [REDACTED:email]", "Ann")\n'
    reply = f"tests/test_customers.py\n<<<<<<< SEARCH\n{line}=======\n{line.replace('Ann', 'Anne')}>>>>>>> REPLACE\n"

    apply_edits(tmp_path, parse_reply(reply))

    assert '    customers.register(" ann@example.com", "Anne")\n' in (tmp_path / "tests" / "test_customers.py").read_text()


def test_a_placeholder_that_could_stand_for_two_values_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    two = CUSTOMER_TESTS.replace('customers.get("ann@example.com")', 'customers.get("bob@example.com")')
    write(tmp_path, {"tests/test_customers.py": two})
    extra = '\n\ndef test_carl():\n    Customers().register("[REDACTED:email]", "Carl")\n'
    reply = f"tests/test_customers.py\n```python\n{shown(two)}{extra}```\n"

    with pytest.raises(EditError, match=r"writes \[REDACTED:email\], which stands for a value hidden from you"):
        apply_edits(tmp_path, parse_reply(reply))

    assert (tmp_path / "tests" / "test_customers.py").read_text() == two


CONTACT = '''SUPPORT = "help@bookshop.example"


def contact_line() -> str:
    return "Write to us."
'''
CONTACT_TESTS = '''from shop.contact import contact_line


def test_the_line_names_the_address():
    assert contact_line() == "Write to help@bookshop.example"
'''


def test_a_task_whose_reply_copies_a_hidden_address_commits_the_real_one(git_repo: Path) -> None:
    rewritten = shown(CONTACT).replace('return "Write to us."', 'return f"Write to {SUPPORT}"')
    task = {"id": "T-1", "title": "Name the support address", "status": "open", "priority": 1, "type": "bug",
            "description": "contact_line() must say where to write: the support address."}
    repo = make_project(
        git_repo, [{"match": "Task T-1", "reply": f"```python\n{rewritten}```\n"}],
        tasks=[task], files={"shop/__init__.py": "", "shop/contact.py": CONTACT, "tests/test_contact.py": CONTACT_TESTS},
        config={"testCommands": [f"{PY} -m pytest -q -p no:cacheprovider tests/test_contact.py"]},
    )
    assert "[REDACTED:email]" in rewritten  # the reply copies what the model was shown

    assert do_one_task(repo) == 0

    committed = git(repo, "show", "HEAD~1:shop/contact.py")
    assert 'SUPPORT = "help@bookshop.example"' in committed and "REDACTED" not in committed
