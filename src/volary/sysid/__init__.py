"""System identification from flight logs (layer 2): read a log, fit a platform, score its
open-loop prediction against the constant-velocity/constant-rates baseline (issue 61).

    from volary.sysid import evaluate, read_log
    from volary.sysid.fit import fit
    logs = [read_log(p) for p in paths]
    model, report = fit(logs, volary.platforms.get("crazyflie"))
    errors = evaluate(test_logs, model, horizon=50)   # per-horizon RMSEs

The command line is ``volary sysid LOG --test LOG`` (docs/sysid.md).
"""

from volary.sysid.logs import FORMATS, FlightLog, read_log
from volary.sysid.predict import CommandMap, SysidModel, evaluate, summary

__all__ = ["FORMATS", "CommandMap", "FlightLog", "SysidModel", "evaluate", "read_log", "summary"]
