"""Trajectory recording: per-control-step snapshots stacked into (T, N, ...) tensors."""

from __future__ import annotations

import csv
from dataclasses import dataclass, fields
from pathlib import Path

import torch
from torch import Tensor

from volary.math.quaternion import quat_to_euler

_FIELDS = ("pos", "vel", "quat", "omega", "rotor_speed")


@dataclass(frozen=True)
class Trajectory:
    """A recorded run: time (T,) and per-env tensors (T, N, ...)."""

    time: Tensor  # (T,) s
    pos: Tensor  # (T, N, 3) m
    vel: Tensor  # (T, N, 3) m/s
    quat: Tensor  # (T, N, 4) [w, x, y, z]
    omega: Tensor  # (T, N, 3) rad/s body
    rotor_speed: Tensor  # (T, N, R) rad/s
    setpoint: Tensor  # (T, N, S)
    command: Tensor  # (T, N, C) what the controller sent to the dynamics
    diverged: Tensor  # (T, N) bool
    crashed: Tensor  # (T, N) bool

    @property
    def euler(self) -> Tensor:
        """(T, N, 3) roll, pitch, yaw in rad."""
        return quat_to_euler(self.quat)

    def to_csv(self, path: str | Path, env: int = 0, append: bool = False) -> Path:
        """Write env ``env``'s run as CSV (one row per control step, SI units); ``append``:
        add the rows to an existing file without a header (a run written in blocks).

        Each row is the state after the step ending at ``t``; ``cmd0..`` is the command that
        step held (rotor speeds in rad/s for the rigid-body model), so a row's state follows
        from the previous row's state and this row's command. ``volary sysid`` reads the file
        (its ``fly`` columns)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        r = self.rotor_speed.shape[-1]
        s = self.setpoint.shape[-1]
        c = self.command.shape[-1]
        header = (
            [
                "t",
                "x",
                "y",
                "z",
                "vx",
                "vy",
                "vz",
                "qw",
                "qx",
                "qy",
                "qz",
                "roll",
                "pitch",
                "yaw",
                "p",
                "q",
                "r",
            ]
            + [f"w{i}" for i in range(r)]
            + [f"sp{i}" for i in range(s)]
            + ["crashed", "diverged"]
            + [f"cmd{i}" for i in range(c)]
        )
        cols = torch.cat(
            (
                self.time[:, None].double(),
                self.pos[:, env].double(),
                self.vel[:, env].double(),
                self.quat[:, env].double(),
                self.euler[:, env].double(),
                self.omega[:, env].double(),
                self.rotor_speed[:, env].double(),
                self.setpoint[:, env].double(),
                self.crashed[:, env, None].double(),
                self.diverged[:, env, None].double(),
                self.command[:, env].double(),
            ),
            dim=-1,
        )
        with path.open("a" if append else "w", newline="") as fh:
            w = csv.writer(fh)
            if not append:
                w.writerow(header)
            w.writerows([[f"{v:.6g}" for v in row] for row in cols.tolist()])
        return path


class Recorder:
    """Collects snapshots on the host (cheap views of the batch) until ``stack``; whole recorded
    runs (the fused loop's) join as blocks."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Tensor]] = []  # each value (t, ...) with t >= 1

    def add(self, time: float, state, setpoint: Tensor, command: Tensor) -> None:
        row = {f: getattr(state, f).detach()[None].clone() for f in _FIELDS}
        row.update(
            time=torch.tensor([time]),
            setpoint=setpoint.detach()[None].clone(),
            command=command.detach()[None].clone(),
            diverged=state.diverged[None].clone(),
            crashed=state.crashed[None].clone(),
        )
        self.rows.append(row)

    def extend(self, traj: Trajectory) -> None:
        """Append a recorded run (T steps) as one block."""
        self.rows.append({f.name: getattr(traj, f.name) for f in fields(Trajectory)})

    def stack(self) -> Trajectory:
        if not self.rows:
            raise ValueError("nothing recorded: run the simulator with record=True first")
        keys = self.rows[0].keys()
        return Trajectory(**{k: torch.cat([r[k] for r in self.rows]).cpu() for k in keys})
