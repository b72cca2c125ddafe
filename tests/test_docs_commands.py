"""The commands the README, the docs and every study and experiment README tell a user to run
name scripts that exist, and every experiment script at least compiles (the experiments are not
linted and no test imports most of them: a moved or renamed file must not leave a dead command
behind). A command line that records history (``# now ...``: how a result was made before a
move) is not a command to run and is skipped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = re.compile(r"((?:experiments|benchmarks|examples|scripts)/[\w\-/.]+\.(?:py|sh|toml))")
HISTORY = re.compile(r"#\s*now\b|\(now\b")


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "experiments").glob("**/README.md")),
            *sorted((ROOT / "src" / "volary" / "studies").glob("*/README.md"))]  # fmt: skip


def command_lines(text: str) -> list[str]:
    """The lines of fenced (```) and indented (4 spaces) code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        elif fenced or line.startswith("    "):
            out.append(line)
    return out


def test_command_lines_are_found_in_fenced_and_indented_blocks():
    text = "prose experiments/a.py\n\n    python experiments/b.py\n```\nrun c\n```\nafter"
    assert command_lines(text) == ["    python experiments/b.py", "run c"]
    assert HISTORY.search("python benchmarks/old.py --x    # now run.py")


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_names_a_script_that_exists(doc):
    missing = [
        (line.strip(), m.group(1))
        for line in command_lines(doc.read_text(encoding="utf-8"))
        if not HISTORY.search(line)
        for m in SCRIPT.finditer(line)
        if not (ROOT / m.group(1)).exists()
    ]
    assert not missing, f"{doc.relative_to(ROOT)}: commands name missing files: {missing}"


def test_every_experiment_script_compiles():
    scripts = sorted((ROOT / "experiments").glob("**/*.py"))
    assert len(scripts) > 20
    for path in scripts:
        compile(path.read_text(encoding="utf-8"), str(path), "exec")
