"""The shape of the code, read from its own import graph (tools/house.py)."""

from __future__ import annotations

import sys
from pathlib import Path

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


def test_the_graph_reader_sees_a_circle_when_there_is_one(tmp_path: Path) -> None:
    package = tmp_path / "orchestrator"
    package.mkdir()
    (package / "a.py").write_text("from orchestrator.b import thing\n")
    (package / "b.py").write_text("from orchestrator import a\nfrom orchestrator.a import _hidden\n")
    found = house.modules(tmp_path)
    assert house.circles(found) == [["orchestrator.a", "orchestrator.b"]]
    assert found["orchestrator.b"].private == ["orchestrator.a._hidden"]
