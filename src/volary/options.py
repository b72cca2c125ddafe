"""What every command module shares: the ``--set`` option (:data:`SetOption`),
:func:`~volary.config.configure` (re-exported here), the :data:`console` and :func:`fail`; for
the core's commands (:mod:`volary.cli`) and the studies' (``volary.studies.<study>.cli``),
layer 0.

A command builds its config with ``configure``: the options that name a config field (``--lr``,
``--size``, ...) first, then every ``--set FIELD=VALUE``. An error names the option that caused
it (``--latent: latent: expected an integer >= 1, got 0``). Imports typer and rich: only
command modules import this module.
"""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer
from rich.console import Console

from volary.config import configure
from volary.errors import ConfigError

console = Console(soft_wrap=True)  # what commands print to: paths are not broken at 80 columns

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="FIELD=VALUE",
        help="Override a field of the command's config (named in its help): FIELD=VALUE or "
        "NESTED.FIELD=VALUE, repeatable, applied after the other options.",
    ),
]


def fail(msg: str) -> NoReturn:
    """A bad input the option checks cannot see alone: raised as ConfigError, which the
    ``volary`` command (:class:`~volary.cli.checks.VolaryGroup`) prints as one line, exit 2."""
    raise ConfigError(msg)


__all__ = ["SetOption", "configure", "console", "fail"]
