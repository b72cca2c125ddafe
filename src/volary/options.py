"""The ``--set`` option of every ``volary`` command (:data:`SetOption`) and
:func:`~volary.config.configure` (re-exported here), for the core's commands (:mod:`volary.cli`)
and the studies' (``volary.studies.<study>.cli``), layer 0.

A command builds its config with ``configure``: the options that name a config field (``--lr``,
``--size``, ...) first, then every ``--set FIELD=VALUE``. An error names the option that caused
it (``--latent: latent: expected an integer >= 1, got 0``). Imports typer: only command modules
import this module.
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
