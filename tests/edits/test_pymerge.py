"""Putting a block of Python into a file: whole files, fragments, classes, broken code."""

from __future__ import annotations

import ast

import pytest

from orchestrator.edits import EditError
from orchestrator.edits.pymerge import merge_python

MODULE = '''"""Shapes."""

import math
from typing import List

SCALE = 2


def area(r: float) -> float:
    return math.pi * r * r


def scaled(values: List[float]) -> List[float]:
    raise NotImplementedError


class Box:
    def __init__(self, w, h):
        self.w, self.h = w, h

    def area(self):
        return 0

    def grow(self, k):
        return Box(self.w * k, self.h * k)
'''


def names(text: str) -> list[str]:
    return [n.name for n in ast.parse(text).body if isinstance(n, ast.FunctionDef | ast.ClassDef)]


def test_a_fragment_replaces_its_function_and_keeps_everything_else() -> None:
    block = "def scaled(values):\n    return [v * SCALE for v in values]\n"
    merged = merge_python(MODULE, block)
    assert names(merged) == ["area", "scaled", "Box"]
    assert "return [v * SCALE for v in values]" in merged and "NotImplementedError" not in merged
    assert merged.startswith('"""Shapes."""\n\nimport math\n')


def test_new_helpers_go_before_the_function_that_uses_them_and_imports_join_the_others() -> None:
    block = (
        "import itertools\n\n\ndef _double(v):\n    return v * SCALE\n\n\n"
        "def scaled(values):\n    return list(map(_double, values))\n\nprint(scaled([1]))\n"
    )
    merged = merge_python(MODULE, block)
    assert names(merged) == ["area", "_double", "scaled", "Box"]
    assert "import itertools" in merged.split("SCALE = 2")[0]
    assert "print(" not in merged  # an example call is not part of the change


def test_a_class_with_only_the_changed_method_keeps_its_other_methods() -> None:
    block = "class Box:\n    def area(self):\n        return self.w * self.h\n"
    merged = merge_python(MODULE, block)
    box = next(n for n in ast.parse(merged).body if isinstance(n, ast.ClassDef))
    assert [m.name for m in box.body] == ["__init__", "area", "grow"]
    assert "return self.w * self.h" in merged and "return 0" not in merged


def test_a_block_with_everything_the_file_has_is_the_whole_file() -> None:
    block = (
        '"""Shapes, whole."""\n\nSCALE = 3\n\n\ndef area(r):\n    return math.pi * r ** 2\n\n\n'
        "def scaled(values):\n    return values\n\n\nclass Box:\n    pass\n"
    )
    merged = merge_python(MODULE, block)
    assert merged.startswith('"""Shapes, whole."""\n\nimport math\n')  # a forgotten import it uses is kept
    assert "from typing import List" not in merged  # the one it no longer uses is not
    assert "def __init__" not in merged  # the model rewrote the file: its choice


def test_a_file_with_a_docstring_and_one_function_keeps_the_docstring_and_constants() -> None:
    original = '"""Slugs."""\n\nimport re\n\nSEPARATOR = "-"\n\n\ndef slugify(t):\n    raise NotImplementedError\n'
    merged = merge_python(original, "def slugify(t):\n    return SEPARATOR.join(re.findall(r'\\w+', t))\n")
    assert merged.startswith('"""Slugs."""\n\nimport re\n\nSEPARATOR = "-"\n')
    assert "NotImplementedError" not in merged


def test_an_assignment_is_replaced_by_name() -> None:
    merged = merge_python(MODULE, "SCALE = 3\n")
    assert "SCALE = 3" in merged and "SCALE = 2" not in merged
    assert names(merged) == ["area", "scaled", "Box"]


def test_a_broken_file_is_still_merged_by_its_top_level_lines() -> None:
    broken = "def keep():\n    return 1\n\n\ndef fix(:\n    retur 2\n"
    merged = merge_python(broken, "def fix():\n    return 2\n")
    assert merged == "def keep():\n    return 1\n\n\ndef fix():\n    return 2\n"


def test_a_block_with_nothing_to_put_in_is_refused() -> None:
    with pytest.raises(EditError, match="no function, class or assignment"):
        merge_python(MODULE, "print(area(2))\n")
