"""Top-down preview of a scene (matplotlib, imported on use): obstacles, gates, start, goal and
the straight-line reference path."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from volary.errors import ConfigError
from volary.worlds.io import check_extent
from volary.worlds.primitives import Box, Cylinder, Mesh, Plane, SceneSpec, Sphere

# Height / width of the figure's plot area, clamped: a long thin scene is drawn with equal axes
# inside a figure of bounded size instead of a figure sized by the scene (the PNG of a scene
# 1 m wide and 10 km long would be millions of pixels tall).
_ASPECT = (0.25, 3.0)


def _box_outline(b: Box) -> np.ndarray:
    if b.tilt != (0.0, 0.0):  # the top view of a tilted box: the hull of its corners
        from scipy.spatial import ConvexHull

        bits = np.array([[(i >> k) & 1 for k in range(3)] for i in range(8)], dtype=float)
        xy = ((bits - 0.5) * np.asarray(b.size) @ b.axes.T)[:, :2] + np.asarray(b.center[:2])
        hull = xy[ConvexHull(xy).vertices]
        return np.vstack((hull, hull[:1]))
    hx, hy = b.size[0] / 2, b.size[1] / 2
    c, s = math.cos(b.yaw), math.sin(b.yaw)
    pts = np.array([[-hx, -hy], [hx, -hy], [hx, hy], [-hx, hy], [-hx, -hy]])
    return pts @ np.array([[c, s], [-s, c]]) + np.asarray(b.center[:2])


def plot_top_view(spec: SceneSpec, path: str | Path, title: str | None = None) -> Path:
    """Write a top-down PNG of ``spec`` (obstacles shaded by height), at most 700 x 2160
    pixels whatever the scene's shape; bounds outside the world extent are a ConfigError."""
    check_extent(spec.name, spec.bounds_min, "bounds_min", ConfigError)
    check_extent(spec.name, spec.bounds_max, "bounds_max", ConfigError)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, Polygon

    lo, hi = spec.bounds_min, spec.bounds_max
    aspect = min(max((hi[1] - lo[1]) / max(hi[0] - lo[0], 1e-9), _ASPECT[0]), _ASPECT[1])
    fig, ax = plt.subplots(figsize=(7, 7 * aspect + 0.6))
    ax.add_patch(plt.Rectangle(lo[:2], hi[0] - lo[0], hi[1] - lo[1], fill=False, lw=1.5))
    for o in spec.obstacles:
        if isinstance(o, Box):
            ax.add_patch(Polygon(_box_outline(o), closed=True, fc="0.45", ec="0.2", lw=0.4))
        elif isinstance(o, Cylinder):
            a = np.asarray(o.axis)
            half = 0.5 * o.length * a[:2]
            p = np.asarray(o.center[:2])
            if np.linalg.norm(half) > 1e-6:  # tilted: its footprint is a thick segment
                ax.plot(*np.stack((p - half, p + half)).T, color="0.35", lw=2.0, alpha=0.8)
            ax.add_patch(Circle(tuple(p), o.radius, fc="tab:green", ec="0.2", lw=0.3))
        elif isinstance(o, Sphere):
            ax.add_patch(Circle(o.center[:2], o.radius, fc="tab:brown", ec="0.2", lw=0.3))
        elif isinstance(o, Mesh):  # footprint: the triangles seen from above
            from matplotlib.collections import PolyCollection

            ax.add_collection(
                PolyCollection(list(o.corners[:, :, :2]), fc="0.6", ec="none", alpha=0.5)
            )
        elif isinstance(o, Plane):
            continue
    for g in spec.gates:
        c = np.asarray(g.corners)
        ax.plot(c[[0, 1], 0], c[[0, 1], 1], color="tab:orange", lw=3)
    s, gl = np.asarray(spec.start), np.asarray(spec.goal)
    ax.plot([s[0], gl[0]], [s[1], gl[1]], "b--", lw=1, label="reference line")
    ax.plot(*s[:2], "g^", ms=10, label=f"start (z={s[2]:.1f} m)")
    ax.plot(*gl[:2], "r*", ms=13, label=f"goal (z={gl[2]:.1f} m)")
    ax.set_xlim(lo[0] - 1, hi[0] + 1)
    ax.set_ylim(lo[1] - 1, hi[1] + 1)
    ax.set_aspect("equal")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title(
        title
        or f"{spec.name}: ceiling {spec.flight_ceiling:.1f} m, {len(spec.obstacles)} obstacles"
    )
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
