"""Figures of the navigation report (matplotlib Agg, imported on use), after FLYINGTRUST Figs. 8-15.

Every function draws from a :class:`~volary.studies.flyingtrust.stats.Summary` (or rows),
writes one PNG and returns its path. Colours are fixed per algorithm (:func:`algo_colors`) and
per failure cause (:data:`CAUSE_COLORS`) across all figures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from volary.studies.flyingtrust.compare import spearman
from volary.studies.flyingtrust.schema import CAUSES, TrialResult
from volary.studies.flyingtrust.stats import GroupStats, Summary

DPI = 90
_FIXED = {"straight": "#7f7f7f", "mapper": "#1f77b4", "reactive": "#ff7f0e"}
_CYCLE = ("#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
CAUSE_COLORS = {
    "success": "#2ca02c",
    "collision": "#d62728",
    "timeout": "#ff7f0e",
    "outside_goal": "#9467bd",
    "no_plan": "#8c564b",
    "over_speed": "#e377c2",
    "error": "#000000",
}
SCENARIO_LABELS = {
    "forest": "Forest",
    "urban": "Urban",
    "random_cylinders": "Random cyl.",
    "narrow_gap": "Narrow gap",
    "sudden_drop": "Sudden drop",
    "maze": "Maze",
    "perlin": "Perlin",
}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def algo_colors(algos: Sequence[str]) -> dict[str, str]:
    """One colour per algorithm: fixed for the built-ins, then a cycle in sorted order."""
    others = [a for a in sorted(algos) if a not in _FIXED]
    out = {a: _FIXED[a] for a in algos if a in _FIXED}
    out.update({a: _CYCLE[i % len(_CYCLE)] for i, a in enumerate(others)})
    return out


def scenario_label(s: str) -> str:
    return SCENARIO_LABELS.get(s, s)


def _save(fig: Any, path: Path, tight: bool = True) -> Path:
    """Write ``fig`` as PNG (``tight``: crop to the drawn content, one extra layout pass)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight" if tight else None)
    _plt().close(fig)
    return path


def _pct_err(g: GroupStats | None) -> tuple[float, float, float]:
    """(rate %, lower error, upper error) for an error bar; NaN-safe."""
    if g is None or math.isnan(g.success_rate):
        return math.nan, 0.0, 0.0
    r = 100 * g.success_rate
    return r, max(r - 100 * g.ci_lo, 0.0), max(100 * g.ci_hi - r, 0.0)


def success_by_scenario(summary: Summary, path: Path) -> Path:
    """FLYINGTRUST Fig. 8: success per scenario type and algorithm with configuration-unit CIs."""
    plt = _plt()
    algos, scen = summary.algos, summary.scenarios
    colors = algo_colors(algos)
    width = 0.8 / len(algos)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(scen) + 0.3 * len(scen) * len(algos)), 4))
    x = np.arange(len(scen))
    for i, a in enumerate(algos):
        vals = [_pct_err(summary.get(a, s)) for s in scen]
        r = np.array([v[0] for v in vals])
        err = np.array([[v[1] for v in vals], [v[2] for v in vals]])
        pos = x - 0.4 + width * (i + 0.5)
        ax.bar(pos, np.nan_to_num(r), width, color=colors[a], label=a, edgecolor="white")
        ax.errorbar(pos, r, yerr=err, fmt="none", ecolor="black", elinewidth=1, capsize=3)
        if len(algos) <= 4:  # value labels (a 0 % bar is otherwise invisible)
            for xx, v in zip(pos, r, strict=True):
                if not math.isnan(v):
                    ax.text(xx, 1.0, f"{v:.0f}", ha="center", va="bottom", fontsize=7,
                            color="white" if v > 8 else "black")  # fmt: skip
    ax.set_xticks(x, [scenario_label(s) for s in scen])
    ax.set_ylim(0, 105)
    ax.set_ylabel("success rate [%]")
    ax.set_title(
        "Success by scenario type (all platforms and trials; 95 % CI, configurations as unit)"
    )
    ax.grid(axis="y", alpha=0.3)
    ax.legend(title="algorithm", loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return _save(fig, path)


_MARKERS = {"real": "o", "virtual": "^", "other": "s", "unknown": "x"}


def success_vs_indicators(summary: Summary, path: Path) -> Path:
    """FLYINGTRUST Fig. 9: per-platform success (mean over scenarios) vs TWR_max, alpha_xy_max
    (log scale) and alpha_z_max; Spearman's rho per algorithm in the legends."""
    plt = _plt()
    colors = algo_colors(summary.algos)
    panels = (
        ("twr_max", "TWR$_{max}$ [-]", False),
        ("alpha_xy_max", r"$\alpha_{xy,max}$ [rad/s$^2$] (log)", True),
        ("alpha_z_max", r"$\alpha_{z,max}$ [rad/s$^2$]", False),
    )
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    for ax, (attr, label, log) in zip(axes, panels, strict=True):
        for a in summary.algos:
            pairs = [(g, g.platform_info) for g in summary.by_platform if g.algo == a]
            gs = [g for g, i in pairs if i is not None]
            infos = [i for _, i in pairs if i is not None]
            x = np.array([getattr(i, attr) for i in infos], dtype=float)
            y = np.array([100 * g.success_rate for g in gs])
            rho = spearman(x, y)
            tag = f"{a} (ρ={rho:+.2f})" if not math.isnan(rho) else a
            for cat, mk in _MARKERS.items():
                m = np.array([i.category == cat for i in infos])
                if m.any():
                    ax.scatter(x[m], y[m], marker=mk, color=colors[a], alpha=0.8, s=28)
            ax.scatter([], [], marker="o", color=colors[a], label=tag)
        if log:
            ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", frameon=False)
    axes[0].set_ylabel("success rate [%]")
    axes[0].set_ylim(-3, 103)
    fig.suptitle(
        "Success vs kinodynamic indicators (one marker per platform; o real, ^ virtual)", y=1.02
    )
    fig.tight_layout()
    return _save(fig, path)


def platform_grid(summary: Summary, path: Path) -> Path:
    """FLYINGTRUST Fig. 10: one panel per platform, TWR_max increasing left to right and
    alpha_xy_max bottom to top; bars are each algorithm's success over all scenarios (CI)."""
    plt = _plt()
    plats = list(summary.platforms)
    info = {g.platform: g.platform_info for g in summary.by_platform if g.platform_info}
    ncols = max(1, math.ceil(math.sqrt(len(plats))))
    nrows = max(1, math.ceil(len(plats) / ncols))
    by_twr = sorted(plats, key=lambda p: (_nan_last(info[p].twr_max), p))
    cols = [by_twr[i * nrows : (i + 1) * nrows] for i in range(ncols)]
    colors = algo_colors(summary.algos)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(2.3 * ncols, 1.9 * nrows), sharey=True, squeeze=False
    )
    for c, col in enumerate(cols):
        col = sorted(col, key=lambda p: (_nan_last(info[p].alpha_xy_max), p))
        for r in range(nrows):
            ax = axes[nrows - 1 - r, c]
            if r >= len(col):
                ax.axis("off")
                continue
            _grid_panel(ax, summary, col[r], info[col[r]], colors)
    for ax in axes[:, 0]:
        ax.set_ylabel("success [%]", fontsize=8)
    fig.suptitle(
        "Success per platform (columns: TWR$_{max}$ increasing →; rows: "
        r"$\alpha_{xy,max}$ increasing ↑; 95 % CI)",
        y=1 - 0.15 / (1.9 * nrows),
    )
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[a]) for a in summary.algos]
    fig.legend(handles, summary.algos, loc="lower center", ncol=len(summary.algos),
               bbox_to_anchor=(0.5, 0.0), frameon=False)  # fmt: skip
    # fixed margins instead of tight_layout: the 36-panel layout pass costs seconds
    h = fig.get_figheight()
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.5 / h, top=1 - 0.75 / h,
                        wspace=0.12, hspace=0.75)  # fmt: skip
    return _save(fig, path, tight=False)


def _nan_last(v: float) -> float:
    return math.inf if math.isnan(v) else v


def _grid_panel(ax: Any, summary: Summary, plat: str, info: Any, colors: dict) -> None:
    vals = [_pct_err(summary.get(a, platform=plat)) for a in summary.algos]
    r = np.array([v[0] for v in vals])
    x = np.arange(len(vals))
    ax.bar(x, np.nan_to_num(r), 0.8, color=[colors[a] for a in summary.algos])
    err = np.array([[v[1] for v in vals], [v[2] for v in vals]])
    ax.errorbar(x, r, yerr=err, fmt="none", ecolor="black", elinewidth=0.8)
    ax.set_ylim(0, 105)
    ax.set_xticks([])
    ax.tick_params(labelsize=7)
    sub = (
        f"TWR {info.twr_max:.1f}, αxy {info.alpha_xy_max:.0f}"
        if not math.isnan(info.twr_max)
        else "not in catalogue"
    )
    mark = {"real": " (real)", "virtual": " (virt.)"}.get(info.category, "")
    ax.set_title(f"{plat}{mark}\n{sub}", fontsize=7)


def heatmap(summary: Summary, algo: str, path: Path) -> Path:
    """FLYINGTRUST Figs. 11-15: success per platform (rows) x scenario type (columns) of one
    algorithm; grey cells were not run."""
    plt = _plt()
    plats, scen = summary.platforms, summary.scenarios
    grid = np.full((len(plats), len(scen)), np.nan)
    for i, p in enumerate(plats):
        for j, s in enumerate(scen):
            g = summary.get(algo, s, p)
            if g is not None:
                grid[i, j] = g.success_rate
    fig, ax = plt.subplots(figsize=(1.1 * len(scen) + 3.5, 0.3 * len(plats) + 1.6))
    cmap = plt.get_cmap("viridis").with_extremes(bad="#d9d9d9")
    im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for (i, j), v in np.ndenumerate(grid):
        if not math.isnan(v):
            ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=7,
                    color="black" if v > 0.6 else "white")  # fmt: skip
    ax.set_xticks(range(len(scen)), [scenario_label(s) for s in scen], rotation=30, ha="right")
    ax.set_yticks(range(len(plats)), plats, fontsize=7)
    fig.colorbar(im, ax=ax, label="success rate", fraction=0.04)
    ax.set_title(f"{algo}: success per platform and scenario [%]")
    return _save(fig, path)


def failure_causes(summary: Summary, path: Path) -> Path:
    """Share of each outcome (success and failure causes) per algorithm and scenario type."""
    plt = _plt()
    algos, scen = summary.algos, summary.scenarios
    fig, axes = plt.subplots(
        len(algos), 1, figsize=(max(6.0, 1.2 * len(scen) + 2), 2.4 * len(algos) + 0.6),
        sharex=True, squeeze=False,
    )  # fmt: skip
    causes = _present_causes(summary)
    for ax, a in zip(axes[:, 0], algos, strict=True):
        bottom = np.zeros(len(scen))
        for c in causes:
            share = np.array([_share(summary.get(a, s), c) for s in scen])
            ax.bar(range(len(scen)), share, 0.7, bottom=bottom, color=CAUSE_COLORS.get(c, "0.5"),
                   label=c)  # fmt: skip
            bottom += share
        ax.set_ylim(0, 100)
        ax.set_ylabel("trials [%]")
        ax.set_title(a, fontsize=10, loc="left")
    axes[-1, 0].set_xticks(range(len(scen)), [scenario_label(s) for s in scen])
    axes[0, 0].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, title="outcome")
    fig.suptitle("Outcome of each trial by scenario type")
    fig.tight_layout()
    return _save(fig, path)


def _present_causes(summary: Summary) -> list[str]:
    seen = {c for g in summary.by_algo for c, n in g.causes.items() if n}
    return [c for c in CAUSES if c in seen] + sorted(seen - set(CAUSES))


def _share(g: GroupStats | None, cause: str) -> float:
    return 0.0 if g is None or g.n == 0 else 100.0 * g.causes.get(cause, 0) / g.n


def composite_bars(
    ours: Sequence[Any], paper: Sequence[Any], path: Path, intervals: Any = None
) -> Path:
    """FinalScore (eq. 18) of our algorithms beside FLYINGTRUST Table II's (hatched), both under
    the paper's normalization (Var / 0.122); ``intervals``: {algo: ScoreInterval} error bars."""
    plt = _plt()
    colors = algo_colors([r.algo for r in ours])
    names = [r.algo for r in ours] + [p.algo for p in paper]
    vals = [r.final_score_fixed for r in ours] + [p.final_score for p in paper]
    cols = [colors[r.algo] for r in ours] + ["#c7c7c7"] * len(paper)
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(names) + 1.2))
    y = np.arange(len(names))[::-1]
    err = None
    if intervals:
        iv = [intervals[r.algo].final_score_fixed for r in ours]
        lo = [max(v - a, 0.0) for v, (a, _) in zip(vals, iv, strict=False)] + [0.0] * len(paper)
        hi = [max(b - v, 0.0) for v, (_, b) in zip(vals, iv, strict=False)] + [0.0] * len(paper)
        err = np.array([lo, hi])
    bars = ax.barh(y, vals, color=cols, xerr=err, capsize=3)
    for b in bars[len(ours) :]:
        b.set_hatch("//")
    for yy, v in zip(y, vals, strict=True):
        ax.text(v + 0.5, yy, f"{v:.1f}", va="center", fontsize=8)
    ax.set_yticks(y, names)
    ax.set_xlabel("FinalScore (eq. 18, Var_norm = Var / 0.122 as in Table II) [%]")
    ax.set_xlim(0, max(max(vals, default=0.0) * 1.15, 10))
    ax.set_title("Composite score: this run (colour) and FLYINGTRUST Table II (hatched)")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def parse_track(track: str) -> np.ndarray | None:
    """The ``track`` JSON ([[t, x, y, z], ...]) as a (K, 4) array, or None when absent/bad."""
    if not track:
        return None
    try:
        a = np.asarray(json.loads(track), dtype=float)
    except (ValueError, TypeError):
        return None
    return a if a.ndim == 2 and a.shape[1] >= 4 and len(a) else None


def draw_scene(ax: Any, spec: Any) -> None:
    """Top-down view of a SceneSpec's obstacles on ``ax`` (as ``worlds.preview``)."""
    from matplotlib.collections import LineCollection, PatchCollection, PolyCollection
    from matplotlib.patches import Circle

    from volary.worlds import Box, Cylinder, Mesh, Sphere

    lo, hi = spec.bounds_min, spec.bounds_max
    ax.add_patch(_plt().Rectangle(lo[:2], hi[0] - lo[0], hi[1] - lo[1], fill=False, lw=1.2))
    boxes, circles, segments, meshes = [], [], [], []
    for o in spec.obstacles:
        if isinstance(o, Box):
            boxes.append(_box_outline(o))
        elif isinstance(o, Cylinder):
            half = 0.5 * o.length * np.asarray(o.axis)[:2]
            p = np.asarray(o.center[:2])
            if np.linalg.norm(half) > 1e-6:  # tilted: its footprint is a thick segment
                segments.append(np.stack((p - half, p + half)))
            circles.append(Circle((float(p[0]), float(p[1])), o.radius))
        elif isinstance(o, Sphere):
            circles.append(Circle((o.center[0], o.center[1]), o.radius))
        elif isinstance(o, Mesh):
            meshes += list(o.corners[:, :, :2])
    # one collection per kind: hundreds of single patches (perlin) take seconds to draw
    ax.add_collection(LineCollection(segments, colors="0.45", linewidths=2.0, alpha=0.7))
    ax.add_collection(PolyCollection(boxes, facecolors="0.55", edgecolors="0.3", linewidths=0.3))
    ax.add_collection(PatchCollection(circles, facecolor="#4a7d4a", edgecolor="0.2", lw=0.3))
    ax.add_collection(PolyCollection(meshes, facecolors="0.6", edgecolors="none", alpha=0.5))


def _box_outline(b: Any) -> np.ndarray:
    hx, hy = b.size[0] / 2, b.size[1] / 2
    c, s = math.cos(b.yaw), math.sin(b.yaw)
    pts = np.array([[-hx, -hy], [hx, -hy], [hx, hy], [-hx, hy], [-hx, -hy]])
    return pts @ np.array([[c, s], [-s, c]]) + np.asarray(b.center[:2])


def scene_for(scenario: str, config: int) -> Any | None:
    """The scene a row flew (``make_scenario(type, seed=config)``: ``config`` is the generator
    seed, e.g. one of ``worlds.FIXED_SEEDS[type]``), or None when it cannot be rebuilt."""
    from volary import worlds

    if scenario not in worlds.SCENARIOS or not 0 <= int(config):
        return None
    try:
        return worlds.make_scenario(scenario, int(config))
    except Exception:  # noqa: BLE001 - a plot must not fail the report
        return None


ZOOM_HALF = 4.0  # m, half width of the close-up around where a failed trial ended


def failure_plot(row: TrialResult, path: Path, color: str = "#1f77b4") -> Path:
    """Top-down view of one failed trial: the scene's obstacles (the one hit outlined in red),
    the start-goal reference line, the flown track (``row.track``) and where it ended, with a
    close-up of the last 2 x ``ZOOM_HALF`` m."""
    plt = _plt()
    spec = scene_for(row.scenario, row.config)
    track = parse_track(row.track)
    fig, (ax, zoom) = plt.subplots(
        1, 2, figsize=(10, 4.4), gridspec_kw={"width_ratios": (2.0, 1.0)}
    )
    for a in (ax, zoom):
        _failure_axes(a, row, spec, track, color)
    if spec is not None:
        lo, hi = spec.bounds_min, spec.bounds_max
        ax.set_xlim(lo[0] - 1, hi[0] + 1)
        ax.set_ylim(lo[1] - 1, hi[1] + 1)
    if track is not None:
        end = track[-1, 1:3]
        zoom.set_xlim(end[0] - ZOOM_HALF, end[0] + ZOOM_HALF)
        zoom.set_ylim(end[1] - ZOOM_HALF, end[1] + ZOOM_HALF)
        zoom.set_title(f"close-up of the end (z = {track[-1, 3]:.1f} m)", fontsize=9)
    else:
        zoom.axis("off")
    note = [] if spec is not None else ["scene not rebuilt"]
    note += [] if track is not None else ["no track recorded"]
    if note:
        ax.text(0.5, 0.5, "; ".join(note), transform=ax.transAxes, ha="center", color="0.4")
    ax.set_title(
        f"{row.algo} | {row.platform} | {scenario_label(row.scenario)} config {row.config}, "
        f"trial {row.trial}\n{row.cause}, {_fmt(row.flight_time, 's')} flown, "
        f"{_fmt(row.final_distance, 'm')} from goal",
        fontsize=9,
    )
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=max(1, len(labels)), fontsize=8,
               frameon=False, bbox_to_anchor=(0.5, -0.06))  # fmt: skip
    fig.tight_layout()
    return _save(fig, path)


def _failure_axes(ax: Any, row: TrialResult, spec: Any, track: Any, color: str) -> None:
    plt = _plt()
    if spec is not None:
        draw_scene(ax, spec)
        hit = _hit_obstacle(row, spec)
        if hit is not None:
            ax.add_patch(plt.Polygon(hit, closed=True, fill=False, ec="red", lw=1.5))
        s, g = np.asarray(spec.start), np.asarray(spec.goal)
        ax.plot([s[0], g[0]], [s[1], g[1]], "--", color="0.2", lw=0.8, label="reference line")
        ax.plot(*s[:2], "g^", ms=9, label="start")
        ax.plot(*g[:2], "r*", ms=12, label="goal (2 m radius)")
        ax.add_patch(plt.Circle(g[:2], 2.0, fill=False, ec="r", lw=0.8, ls=":"))
    if track is not None:
        ax.plot(track[:, 1], track[:, 2], "-", color=color, lw=1.6, label="flown track")
        ax.plot(track[-1, 1], track[-1, 2], "X", color="black", ms=8, label=f"end ({row.cause})")
    ax.set_aspect("equal")
    ax.set(xlabel="x [m]", ylabel="y [m]")


def _hit_obstacle(row: TrialResult, spec: Any) -> np.ndarray | None:
    """Outline (K, 2) of the obstacle named in a collision's error ("obstacle <object_id>")."""
    import re

    m = re.search(r"obstacle (\d+)", row.error or "")
    if row.cause != "collision" or m is None:
        return None
    from volary.worlds import Box, Cylinder, Sphere

    for o in spec.obstacles:
        if getattr(o, "object_id", None) != int(m.group(1)):
            continue
        if isinstance(o, Box):
            return _box_outline(o)
        if isinstance(o, Cylinder | Sphere):
            a = np.linspace(0, 2 * np.pi, 33)
            r = o.radius + 0.15
            return np.stack((o.center[0] + r * np.cos(a), o.center[1] + r * np.sin(a)), -1)
    return None


def _fmt(v: float, unit: str) -> str:
    try:
        return "–" if math.isnan(float(v)) else f"{float(v):.1f} {unit}"
    except (TypeError, ValueError):
        return "–"
