"""``volary demo``: volary's breadth in about a minute on 2 cores, on one HTML page.

The benchmark's pool workers (two) fly the ``demo`` suite (4 platforms x 3 scenario types x
1 configuration, ``straight`` and ``mapper``) while this process, which only collects their
rows, flies an AlphaPilot lap (the min-snap racer on the nominal course) in a thread and
renders a ray-cast depth frame and a Gaussian-splat RGB frame from the same pose in one
forest. Then the benchmark's report (``bench/index.html``, with intervals and tests) and the
page (``index.html``) are written.
"""

from __future__ import annotations

import base64
import html
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console

FRAME_SCENE = ("forest", 3)  # scenario type and configuration of the sensor frames
FRAME_SIZE = (320, 180)  # px, both frames (the D455's 16:9)
RACER = "minsnap"  # the faster racer to plan (mintime plans ~3x longer for a faster lap)

NEXT_COMMANDS = (
    ("volary bench run --suite quick", "84 trials per planner over all seven scenario types"),
    (
        "volary bench run --suite flyingtrust --algo straight,mapper",
        "the full protocol: 36 platforms x 7 types x 10 configurations",
    ),  # fmt: skip
    ("volary view out/demo --trial KEY", "any trial of this run in 3-D (keys in the report)"),
    ("volary race", "the AlphaPilot challenge: 25 perturbed courses raced from sensors"),
    ("volary view --race mintime", "a race lap in the browser viewer"),
    ("volary splat render forest --out frame.png", "photoreal RGB of any scenario"),
    ("volary serve", "fly your own stack against a World over ZeroMQ (docs/serve.md)"),
    ("volary rl train", "PPO on the navigation env"),
)


DEMO_DB = "run.sqlite"  # the demo's run database, in its output folder


def demo_algos() -> list[str]:
    """straight + mapper, or straight + reactive when the mapper is not installed."""
    from volary.studies.flyingtrust.planners import available_planners

    have = available_planners()
    second = "mapper" if "mapper" in have else "reactive"
    return ["straight", second] if second in have else ["straight"]


def side_parts(out: str, seed: int) -> dict[str, Any]:
    """The side thread's share: the race lap and its plot, the depth and RGB frames (one torch
    thread: the cores are the pool workers')."""
    import torch

    torch.set_num_threads(1)
    d = Path(out)
    t0 = time.perf_counter()
    race = _race(d, seed)
    t1 = time.perf_counter()
    frames = _frames(d, seed)
    return {"race": race, "frames": frames, "race_s": t1 - t0,
            "frames_s": time.perf_counter() - t1}  # fmt: skip


def _race(d: Path, seed: int) -> dict[str, Any]:
    from volary.studies.alphapilot.race import run_race
    from volary.studies.alphapilot.racers import make_racer
    from volary.studies.alphapilot.reports import plot_race
    from volary.worlds import alphapilot_2019

    res = run_race(racer=make_racer(RACER), seed=seed)
    plot_race(res, alphapilot_2019(), d / "race.png")
    doc = res.to_dict()["courses"][0]
    doc["n_gates"] = int(res.gate_times.shape[1])
    return doc


def _frames(d: Path, seed: int) -> dict[str, Any]:
    import torch

    from volary.sensors import DepthCamera, camera_config
    from volary.sensors.plots import depth_png, rgb_png
    from volary.sensors.raycast.registry import make_raycaster
    from volary.sensors.splat import camera_poses, render
    from volary.sensors.splat.synth import SynthConfig, synthesize_scenario

    kind, config = FRAME_SCENE
    spec, splats = synthesize_scenario(kind, config, SynthConfig(max_gaussians=120_000))
    yaw = spec.start_yaw
    pos = torch.tensor([spec.start], dtype=torch.float64)
    quat = torch.tensor([[math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]], dtype=torch.float64)
    w, h = FRAME_SIZE
    c = camera_config("d455", width=w, height=h, vfov=None)  # its 87 deg, square pixels
    cam = DepthCamera(c, make_raycaster([spec], 1, dtype=torch.float64), seed=seed)
    reading = cam(pos, quat)
    depth = torch.where(reading.valid[0], reading.depth[0], float("nan"))
    depth_png(d / "depth.png", depth, title=f"depth [m] (no return: grey, > {c.max_range:.0f} m)")
    img = render(splats, c.intrinsics.tolist(), camera_poses(pos, quat), w, h)  # same camera
    rgb_png(d / "rgb.png", img.rgb[0].clamp(0, 1))
    return {"scene": f"{kind} configuration {config}", "gaussians": int(splats.count),
            "px": [w, h]}  # fmt: skip


def run_showcase(out: Path, *, seed: int = 0, console: Console | None = None) -> Path:
    """Fly, render and write ``out/index.html`` (see the module docstring); returns its path."""
    from volary.studies.flyingtrust.db import load_results
    from volary.studies.flyingtrust.protocol import get_suite
    from volary.studies.flyingtrust.run import run_suite

    console = console or Console(soft_wrap=True)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    db = out / DEMO_DB
    db.unlink(missing_ok=True)  # the demo always flies afresh with the code as it is now
    spec, algos = get_suite("demo"), demo_algos()
    console.print(
        f"volary demo (about a minute on 2 cores): {spec.n_trials(len(algos))} benchmark trials "
        f"({', '.join(algos)}; {len(spec.platforms)} platforms x {len(spec.scenarios)} scenario "
        f"types x {spec.n_configs()} configuration(s)) here, and beside them an AlphaPilot "
        f"lap and a depth + splat RGB frame of one forest -> {out}/index.html",
        markup=False,
    )
    t0 = time.perf_counter()
    workers = min(2, max(1, os.cpu_count() or 1))
    with ThreadPoolExecutor(1) as pool:  # the side parts here, the trials in the pool workers
        side = pool.submit(side_parts, str(out), seed)
        summary = run_suite(spec, algos, db, workers=workers, seed=seed, progress=True)
        t_bench = time.perf_counter() - t0
        console.print(f"benchmark: {summary.done} trials in {t_bench:.0f} s, "
                      f"{summary.successes} successes, {summary.errors} errors")  # fmt: skip
        with console.status("the AlphaPilot lap and the sensor frames..."):
            parts = side.result()
    console.print(f"AlphaPilot lap ({RACER}, oracle: true gates): {_lap_text(parts['race'])}; "
                  f"planned and flown in "
                  f"{parts['race_s']:.0f} s; frames in {parts['frames_s']:.0f} s")  # fmt: skip
    with console.status("writing the report..."):
        rows = load_results(db)
        index = _report(rows, out, spec)
        page = _page(rows, out, parts, index, time.perf_counter() - t0, seed)
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


def _report(rows: list[Any], out: Path, spec: Any) -> Path:
    from volary.studies.flyingtrust.report import make_report

    title = "volary demo: the demo navigation suite"
    return Path(make_report(rows, out / "bench", title=title, suite=spec, run=out,
                            max_failures=2))  # fmt: skip


def _lap_text(race: dict[str, Any]) -> str:
    t = race["time_s"]
    state = f"finished in {t:.2f} s" if race["finished"] else "did not finish"
    return f"{race['gates_passed']} of {race['n_gates']} gates, {state}, score {race['score']:.1f}"


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"<img alt='{html.escape(alt)}' src='data:image/png;base64,{data}'>"


def _bench_table(rows: list[Any]) -> str:
    from volary.studies.flyingtrust.stats import summarize

    s = summarize(rows)
    head = "<tr><th>planner</th><th>scenario</th><th>trials</th><th>success [95 % CI]</th></tr>"
    body = "".join(
        f"<tr><td>{html.escape(g.algo)}</td><td>{html.escape(g.scenario or 'all')}</td>"
        f"<td>{g.n}</td><td>{100 * g.success_rate:.0f} % [{100 * g.ci_lo:.0f}, "
        f"{100 * g.ci_hi:.0f}]</td></tr>"
        for g in [*s.by_scenario, *s.by_algo]
    )
    return f"<table>{head}{body}</table>"


_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;"
    "color:#222}img{max-width:100%}table{border-collapse:collapse;margin:.5em 0}"
    "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}.pair{display:flex;gap:1em;"
    "flex-wrap:wrap}.pair figure{flex:1;min-width:300px;margin:0}code{background:#f3f3f3;"
    "padding:0 .3em}.meta{color:#666}"
)


def _page(
    rows: list[Any], out: Path, parts: dict[str, Any], report: Path, wall: float, seed: int
) -> str:
    race, frames = parts["race"], parts["frames"]
    fig = out / "bench" / "figures" / "success_by_scenario.png"
    rel = report.relative_to(out).as_posix()
    nxt = "".join(f"<li><code>{html.escape(c)}</code>: {html.escape(w)}</li>"
                  for c, w in NEXT_COMMANDS)  # fmt: skip
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>volary demo</title>"
        f"<style>{_CSS}</style></head><body>"
        "<h1>volary demo</h1>"
        f"<p class=meta>Seed {seed}; {wall:.0f} s on this machine. Every figure below was made "
        "just now by the code in this checkout.</p>"
        "<h2>1. A small navigation benchmark</h2>"
        f"<p>FLYINGTRUST's protocol on {len(rows)} trials: two planners (<code>straight</code> "
        "flies the start-goal line; <code>mapper</code> maps depth into voxels and plans "
        "around them), four platforms spanning thrust-to-weight 1.4-6.0, three scenario types, "
        "one fixed configuration each. The configuration is the unit of replication: with one "
        "per type the intervals are wide, as they should be (the full protocol has ten). "
        f"<a href='{html.escape(rel)}'>The full report</a> has the composite "
        "scores, paired tests, indicator correlations and sample failures (each with its "
        "<code>volary view</code> command).</p>"
        + _bench_table(rows)
        + (_img(fig, "success by scenario type") if fig.is_file() else "")
        + "<h2>2. An AlphaPilot 2019 lap</h2>"
        f"<p>The min-snap racer on the nominal course, flown by the AlphaPilot vehicle with "
        f"the Mellinger controller: {html.escape(_lap_text(race))}. An oracle lap: the racer "
        f"knows the gates and the state (an upper bound); <code>volary race</code> runs the "
        f"challenge as posed, from the IMU, IR beacons and the ranger.</p>"
        + _img(out / "race.png", "AlphaPilot lap, top view")
        + "<h2>3. One scene, two sensors</h2>"
        f"<p>{html.escape(frames['scene'])}, from the start pose, one camera (the D455 "
        f"preset's field of view at {frames['px'][0]}x{frames['px'][1]} px): ray-cast depth "
        f"and photoreal RGB rendered on the CPU from {frames['gaussians']:,} Gaussian splats "
        "synthesized on the same geometry.</p>"
        "<div class=pair><figure>" + _img(out / "depth.png", "depth frame") + "</figure>"
        "<figure>" + _img(out / "rgb.png", "splat RGB frame") + "</figure></div>"
        "<h2>4. Next</h2><ul>" + nxt + "</ul></body></html>"
    )
