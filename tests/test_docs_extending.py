"""docs/extending.md: every Python block runs as written (in order, each as its own module), and
each example stays well under 100 lines."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def _module_name(code: str) -> str:
    first = code.splitlines()[0]
    match = re.fullmatch(r"# module: (\w+)", first)
    assert match, f"a block must start with '# module: NAME', got {first!r}"
    return match.group(1)


def test_the_page_has_the_three_examples():
    names = [_module_name(b) for b in BLOCKS]
    assert {
        "extending_task",
        "extending_rl_task",
        "extending_planner",
        "extending_sensor",
        "extending_contestant",
    } <= set(names)
    assert all(len(b.splitlines()) < 100 for b in BLOCKS)


def test_every_example_runs(monkeypatch):
    for code in BLOCKS:
        name = _module_name(code)
        module = types.ModuleType(name)
        monkeypatch.setitem(sys.modules, name, module)
        try:
            exec(compile(code, f"{DOC.name}:{name}", "exec"), module.__dict__)
        except Exception as exc:  # pragma: no cover - the message says which example broke
            pytest.fail(f"docs/extending.md example {name!r} failed: {exc!r}")
