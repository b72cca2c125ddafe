"""What every ``volary`` command module shares, so none imports another for it (nor
``volary.cli.main``): the console commands print to, and :func:`fail` for a bad input. Defined
in :mod:`volary.options` (layer 0), which the studies' commands use too."""

from volary.options import console, fail

__all__ = ["console", "fail"]
