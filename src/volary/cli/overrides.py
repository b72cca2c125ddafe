"""The one path from command-line options to a config dataclass (:mod:`volary.config`).

A command builds its config with :func:`~volary.config.configure` (layer 0, so the studies'
commands use it too): the options that name a config field (``--lr``, ``--size``, ...) first,
then every ``--set FIELD=VALUE``. An error names the option
that caused it (``--latent: latent: expected an integer >= 1, got 0``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from volary.config import configure

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="FIELD=VALUE",
        help="Override a field of the command's config (named in its help): FIELD=VALUE or "
        "NESTED.FIELD=VALUE, repeatable, applied after the other options.",
    ),
]

__all__ = ["SetOption", "configure"]
