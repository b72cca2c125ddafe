"""Layer 6: the ``volary`` command line (thin typer commands over the library).

Importing it (which the ``volary`` command does before anything loads torch) measures the
machine for 50 ms (when another task is runnable) and, when other processes keep a core busy,
sets ``OMP_WAIT_POLICY=PASSIVE`` for this process (:func:`volary.cpu.choose_wait_policy`): idle
OpenMP threads then sleep instead of spinning on a core someone else needs."""

import sys as _sys

if "torch" not in _sys.modules:  # OpenMP reads the variable when torch loads it
    from volary.cpu import choose_wait_policy as _choose

    _choose()
