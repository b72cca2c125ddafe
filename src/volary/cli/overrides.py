"""The ``--set`` option and :func:`configure` of the ``volary`` commands: defined in
:mod:`volary.options` (layer 0) so that the studies' commands use them too; named here for the
modules of :mod:`volary.cli`."""

from volary.options import SetOption, configure

__all__ = ["SetOption", "configure"]
