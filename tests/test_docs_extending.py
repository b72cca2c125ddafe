"""docs/extending.md: every Python block runs as written (in order, each as its own module, in a
temporary working directory for the files they write), each example stays well under 100 lines,
and the new study stays well under 150 lines and imports only the core, as a study must."""

from __future__ import annotations

import ast
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


STUDY = ("extending_study_task", "extending_study_runner", "extending_study_report",
         "extending_study_cli")  # fmt: skip


def test_the_page_has_the_examples():
    names = [_module_name(b) for b in BLOCKS]
    assert {
        "extending_task",
        "extending_rl_task",
        "extending_airframe",
        "extending_planner",
        "extending_sensor",
        "extending_contestant",
        *STUDY,
    } <= set(names)
    assert all(len(b.splitlines()) < 100 for b in BLOCKS)


def test_the_study_is_short_and_imports_only_the_core():
    """The study's blocks (task, runner, report, CLI) together stay well under 150 lines and
    import volary's layers 0-5 only: no other study, no volary.cli."""
    study = [b for b in BLOCKS if _module_name(b) in STUDY]
    assert len(study) == len(STUDY)
    assert sum(len(b.splitlines()) for b in study) < 150
    for code in study:
        for node in ast.walk(ast.parse(code)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            bad = [n for n in names if n.startswith(("volary.studies", "volary.cli"))]
            assert not bad, f"{_module_name(code)} imports {bad}: a study imports the core only"


def test_every_example_runs(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the study writes out/rotor_lag*/ here
    for code in BLOCKS:
        name = _module_name(code)
        module = types.ModuleType(name)
        monkeypatch.setitem(sys.modules, name, module)
        try:
            exec(compile(code, f"{DOC.name}:{name}", "exec"), module.__dict__)
        except Exception as exc:  # pragma: no cover - the message says which example broke
            pytest.fail(f"docs/extending.md example {name!r} failed: {exc!r}")
