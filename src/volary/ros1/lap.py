"""The lap as FlightGoggles' reporter saw it, scored by volary's AlphaPilot rules.

The reporter (``flightgoggles_reporter``) started its clock at the first IMU message (the
moment the vehicle armed), followed the gates in ``/uav/gate_names`` order, and ended the run at
the last gate ("Challenge Completed"), at the first collision ("Collision"), at ``/uav/timeout``
s of sim time ("Timed out") or on SIGINT ("Interrupted"); it wrote a YAML file at
``/uav/results_location``: ``Gate0``.. (by course position) ``{Name, Success: "True", Time,
Location}`` for a passed gate, ``{Name, Success: "False"}`` for one not passed, and
``Result``. The official scorer turned that into 10 n - t (0 unless completed).

:class:`Lap` keeps the same record, fed by the bridge with volary's gate passages
(:class:`volary.worlds.GateTracker`: the reporter's box-and-plane rule, in order, a skipped gate
missed), its collision rule (:func:`volary.bench.gate_race.crashed_out`) and sim times; its
score is :func:`volary.bench.gate_race.race_score` of that record, the function ``volary race``
scores with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COMPLETED = "Challenge Completed"
TIMED_OUT = "Timed out"
COLLISION = "Collision"
INTERRUPTED = "Interrupted"


@dataclass
class Lap:
    """One run of the course ``names`` (course order) with the time limit ``timeout_s``."""

    names: Sequence[str]
    timeout_s: float
    t0: float | None = None  # s sim time of arming (the reporter's first IMU stamp)
    times: list[float | None] = field(default_factory=list)  # s since t0, per course gate
    locations: list[list[float] | None] = field(default_factory=list)
    result: str | None = None  # None while running

    def __post_init__(self) -> None:
        self.times = [None] * len(self.names)
        self.locations = [None] * len(self.names)

    @property
    def running(self) -> bool:
        return self.t0 is not None and self.result is None

    def start(self, t: float) -> None:
        """The vehicle armed at sim time ``t`` (s); a second arming changes nothing."""
        if self.t0 is None:
            self.t0 = float(t)

    def passed(self, k: int, t: float, pos: Sequence[float]) -> None:
        """Course gate ``k`` passed at sim time ``t`` at ``pos`` (m); the last one ends the
        run."""
        if not self.running or self.times[k] is not None:
            return
        assert self.t0 is not None
        self.times[k] = float(t) - self.t0
        self.locations[k] = [float(v) for v in pos]
        if k == len(self.names) - 1:
            self.result = COMPLETED

    def collided(self) -> None:
        if self.running:
            self.result = COLLISION

    def check_time(self, t: float) -> None:
        """End the run as timed out when ``t`` is past the limit."""
        if self.running and self.t0 is not None and float(t) - self.t0 > self.timeout_s:
            self.result = TIMED_OUT

    def interrupt(self) -> None:
        if self.running:
            self.result = INTERRUPTED

    @property
    def gates_passed(self) -> int:
        return sum(t is not None for t in self.times)

    @property
    def time(self) -> float:
        """s from arming to the final gate; NaN when it was not reached."""
        last = self.times[-1] if self.times else None
        return math.nan if last is None else last

    def score(self) -> float:
        """AlphaPilot's score of this run by :func:`volary.bench.gate_race.race_score`."""
        import torch

        from volary.bench.gate_race import race_score

        t = torch.tensor([self.time], dtype=torch.float64)
        return float(
            race_score(
                torch.tensor([self.gates_passed]),
                t,
                torch.tensor([self.result == COMPLETED and not math.isnan(self.time)]),
                torch.tensor([self.result == COLLISION]),
                self.timeout_s,
            )[0]
        )

    def results(self) -> dict[str, Any]:
        """The reporter's results document (module docstring)."""
        doc: dict[str, Any] = {}
        for k, name in enumerate(self.names):
            t = self.times[k]
            if t is None:
                doc[f"Gate{k}"] = {"Name": name, "Success": "False"}
            else:
                doc[f"Gate{k}"] = {"Name": name, "Success": "True", "Time": t,
                                   "Location": self.locations[k]}  # fmt: skip
        doc["Result"] = self.result
        return doc

    def results_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.results(), sort_keys=False, default_flow_style=None)

    def write(self, path: str | Path) -> Path:
        """Write :meth:`results_yaml` to ``path`` (directories made as needed)."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(self.results_yaml())
        return out

    def summary(self) -> str:
        t = "" if math.isnan(self.time) else f" time={self.time:.3f}"
        return (
            f"result={self.result!r} gates={self.gates_passed}/{len(self.names)}{t} "
            f"score={self.score():.3f}"
        )
