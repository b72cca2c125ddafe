"""``volary race``: the AlphaPilot 2019 race from the command line (challenge and oracle modes).

A typer app with one command, ``race``, that :mod:`volary.cli.main` mounts at the top level, so
``volary race ...`` reads as before the study moved. The command checks its options, runs
:func:`~volary.studies.alphapilot.reports.challenge_cli` or
:func:`~volary.studies.alphapilot.reports.race_cli` and prints their tables; the option checks
that need no run (names, ranges) are this module's :data:`OPTIONS`. A bad input
raises :class:`~volary.errors.ConfigError`, which the ``volary`` command prints as one line with
exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from volary.checks import DEVICE, OUT, SEED, Check, count, counts, looked_up, one_of
from volary.options import console, fail

race_app = typer.Typer(help="The AlphaPilot 2019 race (paper 001 Sec. V-C).")

Out = Annotated[Path, typer.Option("--out", help="Directory for the files this command writes.")]
Device = Annotated[str, typer.Option("--device", help="cpu or cuda.")]


#: The options only one mode of ``volary race`` uses (the other refuses them).
RACE_MODE_OPTIONS = {
    "challenge": (
        "contestant",
        "sensors",
        "faults",
        "noise_seeds",
        "first_noise_seed",
        "workers",
        "arena",
    ),  # fmt: skip
    "oracle": ("racer",),
}


def _challenge() -> Any:
    import volary.studies.alphapilot.challenge as challenge

    return challenge


def _racer(name: str) -> Any:
    from volary.studies.alphapilot.racers import RACERS

    return RACERS.get(name)


#: A racer's registered name (``volary race --racer``, ``volary view --race``).
RACER = looked_up(_racer)


def _course_generator(name: str) -> Any:
    from volary.worlds.tracks import COURSE_GENERATORS

    return COURSE_GENERATORS.get(name)


def _arenas() -> tuple[str, ...]:
    from volary.worlds.tracks import ARENAS

    return tuple(ARENAS)


def _contestant(name: str) -> None:
    """A registered name, or a ``module:Class`` spec imported now (a mistyped module is one
    ``--contestant`` line, before any course is drawn)."""
    from volary.studies.alphapilot.interface import CONTESTANTS

    CONTESTANTS.get(name)


#: ``volary race``'s declared option checks (:mod:`volary.checks`' vocabulary), which
#: :mod:`volary.cli.main` adds to the command table when it mounts the study.
OPTIONS: dict[str, dict[str, Check]] = {
    "race": {
        "--seed": SEED,
        "--courses": counts(1000, "perturbed courses", 0),
        "--courses-from": looked_up(_course_generator),
        "--noise-seeds": counts(1000, "noise seeds per course"),
        "--first-noise-seed": count(0, 2**31 - 1001, "first noise seed"),
        "--workers": count(1, 64, "worker processes"),
        "--out": OUT,
        "--device": DEVICE,
        "--mode": one_of(("challenge", "oracle")),
        "--contestant": looked_up(_contestant),
        "--sensors": one_of(lambda: _challenge().SENSOR_SETS),
        "--faults": one_of(lambda: _challenge().FAULTS),
        "--arena": one_of(_arenas),
        "--racer": RACER,
    },
}


@race_app.command()
def race(
    ctx: typer.Context,
    seed: Annotated[
        int, typer.Option(help="Seed of the perturbed courses (oracle: also its process noise).")
    ] = 0,
    courses: Annotated[
        int, typer.Option(help="Perturbed courses (challenge: 25; oracle: besides the nominal).")
    ] = 25,
    courses_from: Annotated[
        str,
        typer.Option(
            help="Course generator setting: volary (a rigid shift + yaw of each gate; the "
            "development setting), replaced, resized or moved (report settings; "
            "docs/race-interface.md)."
        ),
    ] = "volary",
    noise_seeds: Annotated[
        int,
        typer.Option(
            help="challenge: IMU/sensor/process noise seeds each course is flown with (the "
            "course x noise-seed pair is the unit of replication)."
        ),
    ] = 10,
    first_noise_seed: Annotated[
        int, typer.Option(help="challenge: the first noise seed (seeds run from it upwards).")
    ] = 0,
    workers: Annotated[
        int, typer.Option(help="challenge: processes sharing the noise seeds (wall time only).")
    ] = 1,
    out: Out = Path("out/race"),
    device: Device = "cpu",
    mode: Annotated[
        str,
        typer.Option(
            help="challenge (race from sensors, as the 2019 teams did; default) or oracle (the "
            "racer knows the true gates and state: an upper bound)."
        ),
    ] = "challenge",
    contestant: Annotated[
        str, typer.Option(help="challenge: 'reference' or your own module:Class.")
    ] = "reference",
    sensors: Annotated[
        str,
        typer.Option(
            help="challenge: imu+ir+ranger (default), imu+ir, or imu+camera+ranger (stereo depth "
            "instead of the IR beacons; slower to simulate)."
        ),
    ] = "imu+ir+ranger",
    faults: Annotated[
        str,
        typer.Option(
            help="challenge: none, dropout30 (30 % of the beacon reports dropped), false10 (10 % "
            "at a random pixel), mislabel10 (10 % under a wrong gate or corner label) or "
            "bias3x (3x the IMU turn-on bias)."
        ),
    ] = "none",
    arena: Annotated[
        str,
        typer.Option(
            help="challenge: factory (walls, roof, pillars and machines around the course, "
            "clear of the racing line; default) or empty (gates and floor only)."
        ),
    ] = "factory",
    racer: Annotated[
        str,
        typer.Option(
            help="oracle: mintime (min-snap through the gate centres, minimum-time segment "
            "times; default) or minsnap (entry/centre/exit points, balanced times)."
        ),
    ] = "mintime",
) -> None:
    """AlphaPilot 2019 race. challenge: a contestant races 25 perturbed courses x 10 noise
    seeds from IMU, IR beacons and the downward ranger; leaderboard per seed, its median and
    90 % interval, Table IV beside. oracle: a planned racer handed the true gates, scores,
    plots (an upper bound)."""
    _refuse_other_modes(ctx, mode, RACE_MODE_OPTIONS)
    if mode == "challenge" and courses < 1:
        fail(f"--courses: expected >= 1 in challenge mode, got {courses}")
    from volary.worlds.tracks import ARENAS  # imported on use, as the race itself

    if mode == "challenge" and arena not in ARENAS:
        fail(f"--arena: expected one of {', '.join(ARENAS)}, got {arena!r}")
    if mode == "challenge":
        _race_challenge(seed, courses, out, device, contestant, sensors, faults,
                        noise_seeds, first_noise_seed, courses_from, workers, arena)  # fmt: skip
    else:
        _race_oracle(seed, courses, out, device, racer, courses_from)


def _refuse_other_modes(ctx: Any, mode: str, by_mode: dict[str, tuple[str, ...]]) -> None:
    """ConfigError for an option given on the command line that ``mode`` does not use."""
    for other, names in by_mode.items():
        for name in names if other != mode else ():
            source = ctx.get_parameter_source(name)
            if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
                option = "--" + name.replace("_", "-")
                fail(f"{option}: used by --mode {other} only, not by --mode {mode}")


def _race_challenge(
    seed: int,
    courses: int,
    out: Path,
    device: str,
    contestant: str,
    sensors: str,
    faults: str,
    noise_seeds: int,
    first_noise_seed: int,
    courses_from: str,
    workers: int,
    arena: str,
) -> None:
    import json as _json

    from volary.studies.alphapilot.reports import challenge_cli

    with console.status(
        f"{contestant}: racing {courses} {courses_from} courses x {noise_seeds} noise seeds "
        f"from {sensors}..."
    ):
        path = challenge_cli(out, seed=seed, courses=courses, device=device,
                             contestant=contestant, sensors=sensors, faults=faults,
                             noise_seeds=noise_seeds, first_noise_seed=first_noise_seed,
                             courses_from=courses_from, workers=workers,
                             arena=arena)  # fmt: skip
    doc = _json.loads(path.read_text())
    title = f"{doc['courses']} {courses_from} courses (seed {seed}) per noise seed"
    t = Table("noise seed", f"leaderboard (best {doc['best_of']})", "completed [%]",
              "mean score", "std", "collided", "timed out", title=title)  # fmt: skip
    for r in doc["per_seed"]:
        t.add_row(str(r["noise_seed"]), f"{r['leaderboard']:.2f}", f"{r['completed_pct']:.1f}",
                  f"{r['mean_score']:.2f}", f"{r['std_score']:.2f}", str(r["collided"]),
                  str(r["timed_out"]))  # fmt: skip
    console.print(t)
    pooled = doc["pooled"]
    t4 = Table("sensors", "teams", "completed [%]", "mean score", "std", title="beside Table IV")
    t4.add_row(f"volary {doc['contestant']}: {doc['sensors']} ({doc['pairs']} pairs)", "-",
               f"{pooled['completed_pct']:.1f}", f"{pooled['mean_score']:.2f}",
               f"{pooled['std_score']:.2f}")  # fmt: skip
    for name, row in doc["table_iv"].items():
        t4.add_row(f"2019: {name}", str(row["teams"]), f"{row['completed_pct']:.1f}",
                   f"{row['mean_score']:.2f}", f"{row['std_score']:.2f}")  # fmt: skip
    console.print(t4)
    lb, done = doc["leaderboard"], doc["completed_pct"]
    console.print(
        f"{doc['contestant']} ({doc['sensors']}, faults {doc['faults']}, {courses_from} "
        f"courses, {doc['arena']} arena): leaderboard (mean of the best {doc['best_of']}) over "
        f"{len(doc['noise_seeds'])} noise seeds: median {lb['median']:.2f} "
        f"{_interval(lb)}, seeds {lb['min']:.2f}-{lb['max']:.2f} (top 2019 team: "
        f"{doc['top_2019_score']}); completed {done['median']:.1f} % {_interval(done)}; "
        f"{doc['wall_s']:.0f} s",
        markup=False,
    )
    console.print(f"interval: {doc['interval_method']}", markup=False)
    console.print(f"wrote {path}", markup=False)


def _interval(spread: dict[str, Any]) -> str:
    if spread["interval"] is None:
        return "(no interval: one course)"
    lo, hi = spread["interval"]
    return f"[{100 * spread['confidence']:.0f} % interval {lo:.2f}, {hi:.2f}]"


def _race_oracle(
    seed: int, courses: int, out: Path, device: str, racer: str, courses_from: str
) -> None:
    import json as _json

    from volary.studies.alphapilot.reports import race_cli

    with console.status(
        f"{racer} (oracle): flying the nominal course and {courses} {courses_from} ones..."
    ):
        path = race_cli(out, seed=seed, courses=courses, device=device, racer=racer,
                        courses_from=courses_from)  # fmt: skip
    doc = _json.loads(path.read_text())
    nom = doc["nominal"]
    t = Table("course", "gates passed", "finished", "collided", "time [s]", "score")
    for c in [nom, *doc["courses"]]:
        time_s = "-" if c["time_s"] is None else f"{c['time_s']:.2f}"
        t.add_row(
            str(c["course"]),
            str(c["gates_passed"]),
            str(c["finished"]),
            str(c["collided"]),
            time_s,
            f"{c['score']:.2f}",
        )
    console.print(t)
    console.print(
        f"{doc['racer']} (oracle: true gates and state, an upper bound): leaderboard (mean of "
        f"the best {doc['best_of']}): {doc['leaderboard']:.2f}  (top 2019 team: "
        f"{doc['top_2019_score']})"
    )
    console.print(f"wrote {path}", markup=False)


__all__ = ["OPTIONS", "RACER", "RACE_MODE_OPTIONS", "race", "race_app"]
