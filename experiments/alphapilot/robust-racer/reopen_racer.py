"""The reference stack with re-opening on, as a ``module:Class`` contestant: a course gate whose
beacon corners are all gated out for three frames gets its offset covariance reset to three
times its prior (``SensorRacer.reopen_after = 3``; ``GateEkf._reopen``). Off by default.

    PYTHONPATH=experiments/alphapilot/robust-racer volary race --seed 3 --courses-from moved \\
        --noise-seeds 10 --workers 2 --contestant reopen_racer:ReopenRacer
"""

from dataclasses import dataclass

from volary.studies.alphapilot.sensor_racer import SensorRacer


@dataclass
class ReopenRacer(SensorRacer):
    """:class:`SensorRacer` with ``reopen_after = 3``."""

    reopen_after: int = 3
