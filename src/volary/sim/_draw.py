"""The trajectory figure drawn from plain arrays: numpy and matplotlib only, no torch.

:func:`volary.sim.plots.plot_trajectory` calls :func:`draw` in process. Run as a script (by
path, so that no volary package and no torch is imported) it reads one JSON object from
standard input and draws it: ``volary fly`` starts it first thing, so that matplotlib's import
(0.4 s) runs in a second process while the first imports torch and flies, and hands it the
trajectory at the end. End of input without an object: nothing is drawn.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def draw(
    path: str | Path,
    t: Any,
    pos: Any,
    euler_deg: Any,
    rotor_speed: Any,
    title: str = "",
    target: Any = None,
) -> Path:
    """Position, attitude and rotor speeds of one vehicle over time ((T,), (T, 3), (T, 3),
    (T, R) arrays), written as PNG."""
    import numpy as np
    from matplotlib.figure import Figure  # no pyplot: a CLI run does not pay for its import

    t, pos, eul, w = (np.asarray(a, dtype=float) for a in (t, pos, euler_deg, rotor_speed))
    fig = Figure(figsize=(8, 7.5))
    ax = fig.subplots(3, 1, sharex=True)
    for i, lab in enumerate("xyz"):
        ax[0].plot(t, pos[:, i], label=lab)
        if target is not None:
            ax[0].axhline(target[i], ls=":", lw=0.8, color=f"C{i}")
    ax[0].set_ylabel("position [m]")
    ax[0].legend(loc="best", ncols=3)
    for i, lab in enumerate(("roll", "pitch", "yaw")):
        ax[1].plot(t, eul[:, i], label=lab)
    ax[1].set_ylabel("attitude [deg]")
    ax[1].legend(loc="best", ncols=3)
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


def _serve() -> int:
    """Import matplotlib, then draw the one figure described on standard input."""
    import matplotlib.figure  # noqa: F401 - the point: imported while the parent works

    text = sys.stdin.read()
    if not text.strip():
        return 0
    job = json.loads(text)
    draw(**job)
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
