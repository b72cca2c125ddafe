"""``volary bench run|resume|report|list``: the FLYINGTRUST navigation benchmark."""

from __future__ import annotations

import typer


def register(bench_app: typer.Typer) -> None:
    """Add the navigation-benchmark commands to ``volary bench``."""
