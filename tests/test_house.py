"""The shape of the code, read from its own import graph (tools/house.py)."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import house  # noqa: E402


def test_no_module_imports_itself_through_others() -> None:
    assert house.circles(house.modules()) == []


def test_no_private_name_is_imported_from_another_module() -> None:
    assert [p for m in house.modules().values() for p in m.private] == []


def test_the_reflection_library_never_imports_the_orchestrator() -> None:
    found = house.modules()
    leaks = {m.name: sorted(i for i in m.imports if i.startswith("orchestrator"))
             for m in found.values() if m.name.startswith("reflection")}
    assert {name: imports for name, imports in leaks.items() if imports} == {}


def test_no_class_is_longer_than_the_limit() -> None:
    assert house.over(house.modules(), ast.ClassDef, house.MAX_CLASS_LINES) == []


def test_no_function_is_longer_than_the_limit() -> None:
    assert house.over(house.modules(), house.FUNCTIONS, house.MAX_FUNCTION_LINES) == []


def test_the_orchestrator_folder_holds_few_modules_the_rest_live_by_concern() -> None:
    assert len(house.top_modules(house.modules())) <= house.MAX_TOP_MODULES


def test_every_package_of_the_library_says_what_it_exports() -> None:
    assert house.without_all(house.modules()) == []


@pytest.mark.parametrize("package", ["orchestrator", "reflection", "orchestrator.checks", "orchestrator.loop",
                                     "orchestrator.recovery", "orchestrator.session", "orchestrator.batch",
                                     "orchestrator.git", "orchestrator.executors", "orchestrator.edits"])
def test_each_exported_name_is_there(package: str) -> None:
    module = importlib.import_module(package)
    assert [name for name in module.__all__ if not hasattr(module, name)] == []


def test_the_limits_are_read_from_the_code(tmp_path: Path) -> None:
    package = tmp_path / "orchestrator"
    package.mkdir()
    (package / "__init__.py").write_text('"""No __all__ here."""\n')
    body = "".join(f"    x{n} = {n}\n" for n in range(house.MAX_FUNCTION_LINES))
    (package / "long.py").write_text(f"def long():\n{body}")
    found = house.modules(tmp_path)
    assert house.over(found, house.FUNCTIONS, house.MAX_FUNCTION_LINES) == [
        (house.MAX_FUNCTION_LINES + 1, "orchestrator.long.long")]
    assert house.top_modules(found) == ["orchestrator.long"]
    assert house.without_all(found) == ["orchestrator"]


def test_the_graph_reader_sees_a_circle_when_there_is_one(tmp_path: Path) -> None:
    package = tmp_path / "orchestrator"
    package.mkdir()
    (package / "a.py").write_text("from orchestrator.b import thing\n")
    (package / "b.py").write_text("from orchestrator import a\nfrom orchestrator.a import _hidden\n")
    found = house.modules(tmp_path)
    assert house.circles(found) == [["orchestrator.a", "orchestrator.b"]]
    assert found["orchestrator.b"].private == ["orchestrator.a._hidden"]
