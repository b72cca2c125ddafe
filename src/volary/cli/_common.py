"""What every ``volary`` command module shares, so none imports another for it (nor
``volary.cli.main``): the console commands print to, and :func:`fail` for a bad input."""

from __future__ import annotations

from typing import NoReturn

from rich.console import Console

from volary.errors import ConfigError

console = Console(soft_wrap=True)  # paths and messages are not broken at 80 columns


def fail(msg: str) -> NoReturn:
    """A bad input the option checks (:mod:`volary.cli.checks`) cannot see alone: raised as
    ConfigError, printed by :class:`~volary.cli.checks.VolaryGroup` as one line, exit code 2."""
    raise ConfigError(msg)
