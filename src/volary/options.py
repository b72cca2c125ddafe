"""The one path from command-line options to a config dataclass (:mod:`volary.config`), for
the core's commands (:mod:`volary.cli`) and the studies' (``volary.studies.<study>.cli``), layer 0.

A command builds its config with :func:`configure`: the options that name a config field
(``--lr``, ``--size``, ...) first, then every ``--set FIELD=VALUE`` (:data:`SetOption`). An error
names the option that caused it (``--latent: latent: expected an integer >= 1, got 0``). Imports
typer: only command modules import this module.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, TypeVar

import typer

C = TypeVar("C")

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="FIELD=VALUE",
        help="Override a field of the command's config (named in its help): FIELD=VALUE or "
        "NESTED.FIELD=VALUE, repeatable, applied after the other options.",
    ),
]


def configure(
    base: C, options: Iterable[tuple[str, str, Any]] = (), sets: Iterable[str] | None = None
) -> C:
    """``base`` with ``options`` ``(flag, field path, value)`` (a value of None: the flag was
    not given) and then ``sets`` (``"FIELD=VALUE"``) applied; ConfigError names the flag."""
    from volary.config import apply_overrides
    from volary.errors import ConfigError, VolaryError

    given = [(flag, path, value) for flag, path, value in options if value is not None]
    try:
        cfg = apply_overrides(base, {path: value for _, path, value in given})
    except VolaryError as err:
        raise ConfigError(f"{_culprit(base, given)}{err}") from err
    try:
        return apply_overrides(cfg, list(sets or ()))
    except VolaryError as err:
        raise ConfigError(f"--set: {err}") from err


def _culprit(base: Any, given: list[tuple[str, str, Any]]) -> str:
    """``"--flag: "`` of the first option that fails on its own ("" if only together)."""
    from volary.config import apply_overrides
    from volary.errors import VolaryError

    for flag, path, value in given:
        try:
            apply_overrides(base, {path: value})
        except VolaryError:
            return f"{flag}: "
    return ""


__all__ = ["SetOption", "configure"]
