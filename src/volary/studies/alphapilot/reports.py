"""``volary race``: the AlphaPilot 2019 race, written as JSON and plots.

Two modes. ``challenge`` (the default, :func:`challenge_cli`): the challenge as it was posed, a
contestant racing from sensors (:mod:`volary.studies.alphapilot.challenge`). ``oracle``
(:func:`race_cli`): a planned racer handed the true perturbed gates and the true state
(:mod:`volary.studies.alphapilot.race`, :mod:`volary.studies.alphapilot.racers`), an upper
bound on what a sensors-only racer can score. This module only runs them and writes the files;
the ``volary race`` command over them is :mod:`volary.studies.alphapilot.cli`.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from volary.errors import ConfigError, not_one_of
from volary.studies.alphapilot.race import (
    BEST_OF,
    RACE_PLATFORM,
    TOP_2019_SCORE,
    RaceResult,
    leaderboard,
    run_race,
)
from volary.studies.alphapilot.racers import DEFAULT_RACER, RACERS, make_racer
from volary.worlds import SceneSpec, alphapilot_2019, alphapilot_2019_courses

ORACLE_NOTE = (
    "oracle: the racer knows the true perturbed gate poses and the true state; an upper bound, "
    "not a challenge score (the 2019 teams raced from sensors: volary race --mode challenge)"
)


def plot_race(result: RaceResult, spec: SceneSpec, path: str | Path, env: int = 0) -> Path:
    """Top-down view (x-y) of one env's run: every gate of the arena (course gates numbered in
    order, passed ones green, missed/unreached red), the flown path coloured by speed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 8))
    order = list(spec.meta.get("order_index", []))
    passed = ~torch.isnan(result.gate_times[env])
    for i, g in enumerate(spec.gates):
        xy = np.asarray(g.corners)[:, :2]
        k = order.index(i) if i in order else None
        color = "0.6" if k is None else ("tab:green" if bool(passed[k]) else "tab:red")
        ax.plot(xy[:, 0], xy[:, 1], "-", color=color, lw=3)
        if k is not None:
            ax.annotate(str(k + 1), xy[:2].mean(0), textcoords="offset points", xytext=(6, 6))
    p = result.path[:, env].numpy()
    v = np.linalg.norm(np.diff(p[:, :2], axis=0), axis=-1) / np.diff(result.path_time.numpy())
    sc = ax.scatter(p[1:, 0], p[1:, 1], c=v, s=3, cmap="viridis")
    fig.colorbar(sc, ax=ax, label="horizontal speed [m/s]")
    ax.plot(*spec.start[:2], "k^", ms=9, label="start")
    ax.set(xlabel="x [m]", ylabel="y [m]", aspect="equal", title=_title(result, env))
    ax.legend(loc="best")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


def _title(result: RaceResult, env: int) -> str:
    status = (
        "finished"
        if bool(result.finished[env])
        else "collided"
        if bool(result.collided[env])
        else "timeout"
    )
    t = float(result.time[env])
    when = "" if math.isnan(t) else f" in {t:.2f} s"
    return (
        f"{result.courses[env]}: {int(result.gates_passed[env])} gates, {status}{when}, "
        f"score {float(result.score[env]):.2f}"
    )


def race_cli(
    out: str | Path,
    seed: int = 0,
    courses: int = 25,
    device: str = "cpu",
    racer: str = DEFAULT_RACER,
    courses_from: str = "volary",
) -> Path:
    """``volary race``: the nominal course and ``courses`` perturbed ones (seed ``seed``, drawn by
    the ``courses_from`` generator setting) flown by
    the racer named ``racer`` (:data:`RACERS`) in one batch; writes ``race.json`` (per-course
    results, leaderboard over the perturbed courses, or over the nominal alone when ``courses`` is
    0) and top-down PNGs of the nominal run and of the best perturbed run. Returns the JSON
    path."""
    if not isinstance(courses, int) or isinstance(courses, bool) or courses < 0:
        raise ConfigError(f"courses: expected a course count >= 0, got {courses!r}")
    pilot = make_racer(racer)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    nominal = alphapilot_2019()
    drawn = alphapilot_2019_courses(courses, seed, courses_from) if courses else []
    specs = [nominal, *drawn]
    res = run_race(specs, racer=pilot, seed=seed, device=device)
    rows = res.to_dict()["courses"]
    scores = res.score[1:] if courses else res.score
    doc = {
        "mode": "oracle",
        "note": ORACLE_NOTE,
        "seed": seed,
        "courses_from": courses_from,
        "platform": RACE_PLATFORM,
        "racer": type(pilot).__name__,
        "nominal": rows[0],
        "leaderboard": leaderboard(scores),
        "leaderboard_over": f"{courses} perturbed courses" if courses else "the nominal course",
        "best_of": BEST_OF,
        "top_2019_score": TOP_2019_SCORE,
        "courses": rows[1:],
    }
    plot_race(res, nominal, out_dir / "race_nominal.png", env=0)
    if courses:
        best = 1 + int(scores.argmax())
        plot_race(res, specs[best], out_dir / "race_best.png", env=best)
    path = out_dir / "race.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


def challenge_cli(
    out: str | Path,
    seed: int = 0,
    courses: int = 25,
    device: str = "cpu",
    contestant: str = "reference",
    sensors: str = "imu+ir+ranger",
    faults: str = "none",
    *,
    noise_seeds: int = 10,
    first_noise_seed: int = 0,
    courses_from: str = "volary",
    workers: int = 1,
    arena: str = "factory",
) -> Path:
    """``volary race --mode challenge``: ``courses`` perturbed courses (seed ``seed``, drawn by
    the ``courses_from`` generator setting, in the ``arena`` of
    :func:`volary.worlds.tracks.alphapilot_2019`), each raced by ``contestant`` from the sensor set
    ``sensors`` with ``faults`` under ``noise_seeds`` IMU/sensor/process noise seeds
    (``first_noise_seed`` onwards; :func:`volary.studies.alphapilot.challenge.run_challenge_seeds`,
    in ``workers`` processes); writes ``challenge.json`` (the figures over the course x
    noise-seed pairs of :func:`~volary.studies.alphapilot.challenge.seeds_summary`, per-seed and
    per-pair rows, Table IV beside), ``race_best.png`` (top-down view of the best pair) and
    ``estimation.png`` (the contestant's estimation error along the course, over all pairs)."""
    from volary.studies.alphapilot.challenge import (
        FAULTS,
        SENSOR_SETS,
        TABLE_IV,
        plot_estimation,
        run_challenge_seeds,
        seeds_summary,
    )
    from volary.worlds.tracks import COURSE_GENERATORS

    for name, v, lo in (
        ("courses", courses, 1),
        ("noise_seeds", noise_seeds, 1),
        ("first_noise_seed", first_noise_seed, 0),
        ("workers", workers, 1),
    ):
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ConfigError(f"{name}: expected an int >= {lo}, got {v!r}")  # fmt: skip
    if sensors not in SENSOR_SETS:
        raise not_one_of("sensors", sensors, sorted(SENSOR_SETS), shown=str(sorted(SENSOR_SETS)))
    if faults not in FAULTS:
        raise not_one_of("faults", faults, sorted(FAULTS), shown=str(sorted(FAULTS)))
    generator = COURSE_GENERATORS.get(courses_from)
    cfg = replace(SENSOR_SETS[sensors], **FAULTS[faults])
    specs = alphapilot_2019_courses(courses, seed, courses_from, arena)
    seeds = list(range(first_noise_seed, first_noise_seed + noise_seeds))
    res = run_challenge_seeds(specs, contestant, seeds, sensors=cfg, workers=workers,
                              device=device)  # fmt: skip
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = res.race.to_dict()["courses"]
    for row, n in zip(rows, res.noise_seeds, strict=True):
        row["noise_seed"] = n
    doc = {
        "mode": "challenge",
        "seed": seed,
        "courses_from": courses_from,
        "courses_from_summary": generator.summary,
        "arena": arena,
        "platform": RACE_PLATFORM,
        "faults": faults,
        "workers": workers,
        **seeds_summary(res),
        "best_of": BEST_OF,
        "table_iv": {
            k: dict(zip(("teams", "completed_pct", "mean_score", "std_score"), v, strict=True))
            for k, v in TABLE_IV.items()
        },  # fmt: skip
        "courses_detail": rows,
    }
    best = int(res.race.score.argmax())
    plot_race(res.race, specs[best % courses], out_dir / "race_best.png", env=best)
    if res.pos_err.numel():
        plot_estimation(res, out_dir / "estimation.png")
    path = out_dir / "challenge.json"
    path.write_text(json.dumps(doc, indent=2, default=_json_default))
    return path


def _json_default(x: object) -> object:
    if isinstance(x, float) and math.isnan(x):
        return None
    return str(x)


__all__ = ["ORACLE_NOTE", "RACERS", "challenge_cli", "plot_race", "race_cli"]
