"""Plots of recorded trajectories (matplotlib, imported on use, Agg backend)."""

from __future__ import annotations

from pathlib import Path

from volary.sim.recording import Trajectory


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_trajectory(
    traj: Trajectory,
    path: str | Path,
    env: int = 0,
    title: str = "",
    target: tuple[float, float, float] | None = None,
) -> Path:
    """Position, attitude (deg) and rotor speeds of one env over time, written as PNG."""
    import math

    from matplotlib.figure import Figure  # no pyplot: a CLI run does not pay for its import

    t = traj.time.numpy()
    fig = Figure(figsize=(8, 7.5))
    ax = fig.subplots(3, 1, sharex=True)
    for i, lab in enumerate("xyz"):
        ax[0].plot(t, traj.pos[:, env, i].numpy(), label=lab)
        if target is not None:
            ax[0].axhline(target[i], ls=":", lw=0.8, color=f"C{i}")
    ax[0].set_ylabel("position [m]")
    ax[0].legend(loc="best", ncols=3)
    eul = traj.euler[:, env].numpy() * 180.0 / math.pi
    for i, lab in enumerate(("roll", "pitch", "yaw")):
        ax[1].plot(t, eul[:, i], label=lab)
    ax[1].set_ylabel("attitude [deg]")
    ax[1].legend(loc="best", ncols=3)
    w = traj.rotor_speed[:, env].numpy()
    for i in range(w.shape[1]):
        if w[:, i].any():
            ax[2].plot(t, w[:, i], lw=0.9, label=f"rotor {i}")
    ax[2].set_ylabel("rotor speed [rad/s]")
    ax[2].set_xlabel("time [s]")
    ax[2].legend(loc="best", ncols=4, fontsize=7)
    for a in ax:
        a.grid(alpha=0.3)
    fig.suptitle(title)
    # fixed margins: tight_layout draws the figure once more (a third of the plot's time)
    fig.subplots_adjust(left=0.11, right=0.97, top=0.93, bottom=0.07, hspace=0.12)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
