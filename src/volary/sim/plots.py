"""Plots of recorded trajectories (matplotlib, imported on use, Agg backend)."""

from __future__ import annotations

from pathlib import Path

from volary.sim.recording import Trajectory


def plot_trajectory(
    traj: Trajectory,
    path: str | Path,
    env: int = 0,
    title: str = "",
    target: tuple[float, float, float] | None = None,
) -> Path:
    """Position, attitude (deg) and rotor speeds of one env over time, written as PNG."""
    from volary.sim._draw import draw

    return draw(path, **trajectory_arrays(traj, env), title=title, target=target)


def trajectory_arrays(traj: Trajectory, env: int = 0) -> dict:
    """What :func:`volary.sim._draw.draw` plots of env ``env``, as numpy arrays."""
    import math

    return {
        "t": traj.time.numpy(),
        "pos": traj.pos[:, env].numpy(),
        "euler_deg": traj.euler[:, env].numpy() * 180.0 / math.pi,
        "rotor_speed": traj.rotor_speed[:, env].numpy(),
    }
