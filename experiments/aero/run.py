"""Rotor aerodynamics re-flown (issue 61): the AlphaPilot oracle race and a FLYINGTRUST quick run,
each with the effects off and on, the coefficients carried over from the identified Crazyflie.

The effects (docs/aerodynamics.md) are off on every catalogue platform but ``crazyflie_nanobench``.
Here each flown vehicle gets the NanoBench coefficients transferred by dimensional analysis at
equal advance ratio ``mu = v / (w R)`` (:func:`transfer`):

- rotor drag ``H = k_d |w| v``: ``H / T = (k_d R / k_f) mu``, so ``c_d = k_d R / k_f`` is
  dimensionless and ``k_d,target = c_d k_f,target / R_target``;
- blade flapping ``M = k_flap |w| v``: ``M / (T R) = (k_flap / k_f) mu``, so
  ``c_flap = k_flap / k_f`` carries over and ``k_flap,target = c_flap k_f,target``;
- ground effect: ``rho = R_target``.

Source: ``crazyflie_nanobench`` (k_f; k_flap from the platform file), its propeller radius
``R = 0.0235 m`` (the collider_radius source; ``Airframe.prop_radius`` does not give it there,
since ``moment_gain`` shrinks the rotor positions), and ``k_d = 1.59e-6`` from the NanoBench fit,
which was fitted in place of the x/y linear drag and NOT kept in the platform file
(experiments/sysid/nanobench/README.md). Targets: ``R = Airframe.prop_radius`` (collision sphere
minus arm: FlightGoggles 0.07 m; FLYINGTRUST platforms half the arm).

Flying a modified airframe under a catalogue name: :func:`flown_as` swaps the airframes the
catalogue returns for some names, for the duration of a ``with`` block, so ``run_race`` and the
benchmark's ``run_unit`` build exactly the run they build from the name (same seeds, same batch).
Nothing in ``src`` changes; with no effect on, the runs are the committed ones.

    .venv/bin/python experiments/aero/run.py race            # nominal lap + 25 courses, both racers
    .venv/bin/python experiments/aero/run.py bench           # FLYINGTRUST quick, straight
    .venv/bin/python experiments/aero/run.py report          # stats, results/README table

Writes ``results/race.json``, ``results/bench.json`` and ``results/summary.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ROOT = HERE.parents[1]

SOURCE = "crazyflie_nanobench"
SOURCE_RADIUS = 0.0235  # m, Crazyflie propeller radius (drone-models cf2x prop_radius)
# NanoBench fit of the in-plane rotor drag in place of the x/y linear drag (not kept in the file):
# experiments/sysid/nanobench/results/nanobench.json, "aero_effect_fits"
SOURCE_K_D = 1.5889159199317311e-06  # N/((rad/s)(m/s))

EFFECTS = ("rotor_drag", "flapping", "ground_effect")
FIELD = {
    "rotor_drag": "rotor_drag_inplane",
    "flapping": "flapping",
    "ground_effect": "ground_effect_radius",
}
# variant -> the effects on; "off" is the catalogue airframe itself
VARIANTS: dict[str, tuple[str, ...]] = {
    "off": (),
    "on": EFFECTS,  # all three transferred effects
    "kept": ("flapping", "ground_effect"),  # what an identified platform file keeps
    "rotor_drag": ("rotor_drag",),
    "flapping": ("flapping",),
    "ground_effect": ("ground_effect",),
}


# ---- the coefficients ---------------------------------------------------------------------------
def dimensionless(
    k_f: float, radius: float, k_d: float = SOURCE_K_D, k_flap: float | None = None
) -> dict[str, float]:
    """The dimensionless rotor-drag and flapping coefficients of a rotor (thrust ``k_f w|w|``,
    radius ``radius`` m): ``c_d = k_d R / k_f`` (H / T = c_d mu) and ``c_flap = k_flap / k_f``
    (M / (T R) = c_flap mu), mu = v / (w R) the advance ratio."""
    out = {"c_d": k_d * radius / k_f}
    if k_flap is not None:
        out["c_flap"] = k_flap / k_f
    return out


def source_coefficients() -> dict[str, float]:
    """The source rotor: ``crazyflie_nanobench``'s k_f and k_flap, R = 0.0235 m, k_d of the fit."""
    from volary import platforms

    src = platforms.get(SOURCE)
    k_f = float(sum(src.k_f) / len(src.k_f))
    c = dimensionless(k_f, SOURCE_RADIUS, SOURCE_K_D, src.flapping)
    return {"k_f": k_f, "R": SOURCE_RADIUS, "k_d": SOURCE_K_D, "k_flap": src.flapping, **c}


def transfer(target: Any, radius: float | None = None) -> dict[str, float]:
    """The source rotor's coefficients carried to airframe ``target`` at equal advance ratio:
    ``{rotor_drag_inplane, flapping, ground_effect_radius}`` (Airframe field names, SI).

    ``radius``: the target's propeller radius (m); default ``target.prop_radius``."""
    src = source_coefficients()
    r = float(target.prop_radius if radius is None else radius)
    if not r > 0:
        raise ValueError(f"{target.name}: propeller radius must be > 0, got {r}")
    k_f = float(sum(target.k_f) / len(target.k_f))
    return {
        "rotor_drag_inplane": src["c_d"] * k_f / r,
        "flapping": src["c_flap"] * k_f,
        "ground_effect_radius": r,
    }


def _ratios(af: Any, c: Mapping[str, float], mu: float) -> tuple[float, float]:
    """H / T and M / (T R) of one rotor of ``af`` with coefficients ``c`` at advance ratio
    ``mu`` (hover speed; any speed gives the same): equal to the source's at the same mu."""
    k_f, r = sum(af.k_f) / len(af.k_f), c["ground_effect_radius"]
    w = math.sqrt(af.mass * 9.81 / (len(af.k_f) * k_f))
    v = mu * w * r
    t = k_f * w * w
    return c["rotor_drag_inplane"] * w * v / t, c["flapping"] * w * v / (t * r)


def with_effects(airframe: Any, effects: Sequence[str]) -> Any:
    """``airframe`` with the transferred coefficients of ``effects`` (a subset of EFFECTS) set."""
    if not effects:
        return airframe
    coeffs = transfer(airframe)
    return airframe.replace(**{FIELD[e]: coeffs[FIELD[e]] for e in effects})


@contextlib.contextmanager
def flown_as(airframes: Mapping[str, Any]) -> Iterator[None]:
    """Within the block, the catalogue returns ``airframes[name]`` for those names (the
    Simulator resolves names through ``volary.platforms.get``); restored on exit."""
    import volary.platforms as P
    import volary.platforms.catalogue as C

    original = C.get

    def get(name: str) -> Any:
        return airframes[name] if isinstance(name, str) and name in airframes else original(name)

    P.get = C.get = get  # type: ignore[assignment]
    try:
        yield
    finally:
        P.get = C.get = original  # type: ignore[assignment]


def variant_airframes(names: Sequence[str], variant: str) -> dict[str, Any]:
    from volary import platforms

    return {n: with_effects(platforms.get(n), VARIANTS[variant]) for n in names}


# ---- AlphaPilot oracle race ---------------------------------------------------------------------
def race(args: argparse.Namespace) -> None:
    from volary.bench.gate_race import RACE_PLATFORM
    from volary.studies.alphapilot.race import leaderboard, make_racer, run_race
    from volary.worlds import alphapilot_2019, alphapilot_2019_courses

    nominal = alphapilot_2019()
    drawn = alphapilot_2019_courses(args.courses, args.seed, "volary") if args.courses else []
    specs = [nominal, *drawn]
    doc: dict[str, Any] = {
        "platform": RACE_PLATFORM,
        "seed": args.seed,
        "courses": [s.name for s in specs],
        "coefficients": transfer(_get(RACE_PLATFORM)),
        "runs": [],
    }
    t0 = time.perf_counter()
    for racer in args.racers:
        # the make-demo lap alone (a batch of one: what `make demo` flies)
        for variant in args.variants:
            doc["runs"].append(_race_run(racer, variant, [nominal], args.seed, "demo-lap"))
        # the nominal and the perturbed courses in one batch (what `volary race --mode oracle`)
        if args.courses:
            for variant in args.variants:
                row = _race_run(racer, variant, specs, args.seed, "oracle-batch")
                row["leaderboard"] = leaderboard([c["score"] for c in row["courses"][1:]])
                doc["runs"].append(row)
    doc["wall_s"] = time.perf_counter() - t0
    doc.update(_machine())
    _write(RESULTS / args.out, doc)
    del make_racer, run_race  # imported for _race_run's module cache


def _race_run(racer: str, variant: str, specs: list, seed: int, what: str) -> dict[str, Any]:
    from volary.bench.gate_race import RACE_PLATFORM
    from volary.studies.alphapilot.race import make_racer, run_race

    t0 = time.perf_counter()
    with flown_as(variant_airframes([RACE_PLATFORM], variant)):
        res = run_race(specs, racer=make_racer(racer), seed=seed)
    rows = res.to_dict()["courses"]
    wall = time.perf_counter() - t0
    key = (what, racer)
    if variant == "off":
        _OFF_PATHS[key] = (res.path, res.time)
    dev = _deviation(res.path_time, res.path, res.time, _OFF_PATHS.get(key))
    for r, d in zip(rows, dev, strict=True):
        r["path_dev_max_m"], r["path_dev_mean_m"] = d
    nom = rows[0]
    print(
        f"{what} {racer} {variant}: nominal {nom['gates_passed']} gates, t {nom['time_s']}, "
        f"score {nom['score']:.3f}; finished {sum(r['finished'] for r in rows)}/{len(rows)}, "
        f"collided {sum(r['collided'] for r in rows)}, nominal path dev max "
        f"{nom['path_dev_max_m']} m ({wall:.0f} s)",
        flush=True,
    )
    return {"what": what, "racer": racer, "variant": variant, "wall_s": wall, "courses": rows}


_OFF_PATHS: dict[tuple[str, str], Any] = {}  # (what, racer) -> the effects-off (path, lap time)


def _deviation(
    times: Any, path: Any, lap: Any, off: Any
) -> list[tuple[float | None, float | None]]:
    """Per env: max and mean distance (m) between this run's recorded positions (K, N, 3) at
    ``times`` (K,) and the effects-off run's at the same times, over the samples both flew
    until the earlier of the two laps' ends (``lap``, s to the final gate; NaN: not reached).
    After its final gate an env flies on until the batch's last lap ends: those samples are
    not the lap (one course's deviation reached 3.3 m there)."""
    import torch

    if off is None:
        return [(None, None)] * path.shape[1]
    off_path, off_lap = off
    k = min(path.shape[0], off_path.shape[0])
    d = (path[:k] - off_path[:k]).double().norm(dim=-1)  # (K, N)
    end = torch.fmin(lap.double(), off_lap.double()).nan_to_num(math.inf)  # (N,)
    d = torch.where(times[:k, None].double() <= end[None], d, math.nan)
    out = []
    for i in range(d.shape[1]):
        di = d[:, i][~d[:, i].isnan()]
        out.append((float(di.max()), float(di.mean())) if len(di) else (None, None))
    return out


# ---- FLYINGTRUST quick run ----------------------------------------------------------------------
BENCH_FIELDS = (
    "success",
    "cause",
    "time_to_goal",
    "flight_time",
    "path_length",
    "mean_speed",
    "max_speed",
    "collisions",
    "tracking_error",
    "final_distance",
    "sim_time",
    "wall_time",
)


def bench(args: argparse.Namespace) -> None:
    from volary.studies.flyingtrust.episode import run_unit
    from volary.studies.flyingtrust.protocol import get_suite

    spec = get_suite(args.suite)
    units = spec.units(args.algos, args.seed)
    if args.scenarios:
        units = [u for u in units if u.scenario in args.scenarios]
    doc: dict[str, Any] = {
        "suite": spec.name,
        "platforms": list(spec.platforms),
        "algos": args.algos,
        "seed": args.seed,
        "variants": args.variants,
        "coefficients": {p: transfer(_get(p)) for p in spec.platforms},
        "rows": [],
    }
    t0 = time.perf_counter()
    for k, unit in enumerate(units):
        for variant in args.variants:  # interleaved: every unit flown in each variant in turn
            t1 = time.perf_counter()
            with flown_as(variant_airframes(unit.platforms, variant)):
                results = run_unit(unit)
            for r in results:
                row = {"variant": variant, "key": r.key, "algo": r.algo, "platform": r.platform,
                       "scenario": r.scenario, "config": r.config, "trial": r.trial}  # fmt: skip
                row.update({f: _num(getattr(r, f)) for f in BENCH_FIELDS})
                doc["rows"].append(row)
            ok = sum(r.success for r in results)
            print(
                f"[{k + 1}/{len(units)}] {unit.algo} {unit.scenario} cfg {unit.config} "
                f"{variant}: {ok}/{len(results)} ok ({time.perf_counter() - t1:.0f} s)",
                flush=True,
            )
        doc["wall_s"] = time.perf_counter() - t0
        _write(RESULTS / args.out, doc)  # after every unit: a partial run keeps its rows
    doc.update(_machine())
    _write(RESULTS / args.out, doc)


# ---- report -------------------------------------------------------------------------------------
COMMITTED_RACE = ROOT / "experiments/alphapilot/oracle/results"
COMMITTED_TRIALS = ROOT / "experiments/flyingtrust/table-ii/results/straight-mapper/trials.csv"
N_BOOT = 10000


def paired(on: Sequence[float], off: Sequence[float], seed: int = 0) -> dict[str, Any]:
    """Paired comparison of ``on - off``: mean difference, 95 % bootstrap CI (percentile, over
    the pairs), Wilcoxon signed-rank p (zero differences dropped; None when all are zero)."""
    import numpy as np
    from scipy import stats

    d = np.asarray(on, dtype=float) - np.asarray(off, dtype=float)
    out: dict[str, Any] = {"n_pairs": int(len(d)), "mean_diff": None, "ci95": None,
                           "n_nonzero": int(np.count_nonzero(d)), "wilcoxon_p": None}  # fmt: skip
    if not len(d):
        return out
    rng = np.random.default_rng(seed)
    boot = d[rng.integers(0, len(d), (N_BOOT, len(d)))].mean(axis=1)
    out["mean_diff"] = float(d.mean())
    out["ci95"] = [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))]
    if np.count_nonzero(d):
        out["wilcoxon_p"] = float(stats.wilcoxon(d, zero_method="wilcox").pvalue)
    return out


def report(args: argparse.Namespace) -> None:
    summary: dict[str, Any] = {}
    races = sorted(RESULTS.glob("race*.json"))
    if races:
        summary["race"] = [row for p in races for row in _race_summary(json.loads(p.read_text()))]
    summary["bench"] = {
        p.stem: _bench_summary(json.loads(p.read_text()))
        for p in sorted(RESULTS.glob("bench*.json"))
    }
    _write(RESULTS / "summary.json", summary)
    (RESULTS / "tables.md").write_text(_tables(summary))
    print(_tables(summary))


def _ci(p: dict[str, Any], fmt: str = "+.4f") -> str:
    if p.get("mean_diff") is None:
        return "n/a"
    lo, hi = p["ci95"]
    w = "" if p["wilcoxon_p"] is None else f", p = {p['wilcoxon_p']:.2g}"
    return f"{p['mean_diff']:{fmt}} [{lo:{fmt}}, {hi:{fmt}}] (n = {p['n_pairs']}{w})"


def _tables(summary: dict[str, Any]) -> str:
    """Markdown tables of the summary (README)."""
    out = ["| run | racer | variant | nominal: gates, time (s), score | nominal path dev. max / "
           "mean (m) | 25 courses: finished / collided | leaderboard | score on - off, 25 "
           "courses [95 % CI] |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in summary.get("race", []):
        nom = f"{r['nominal_gates']}, {r['nominal_time_s']:.3f}, {r['nominal_score']:.3f}"
        dev = f"{r['nominal_path_dev_max_m']:.4f} / {r['nominal_path_dev_mean_m']:.4f}"
        if r["what"] == "oracle-batch":
            fin = f"{r['finished']} / {r['collided']}"
            lb, d = f"{r['leaderboard']:.3f}", _ci(r["score_vs_off"])
        else:
            fin = lb = d = ""
        out.append(f"| {r['what']} | {r['racer']} | {r['variant']} | {nom} | {dev} | {fin} | "
                   f"{lb} | {d} |")  # fmt: skip
    for name, b in summary.get("bench", {}).items():
        out += ["", f"{name} (unit: {b['unit_of_replication']})", "",
                "| variant | trials | successes | collided | success gained / lost | cause "
                "changed | flight time on - off, all trials (s) | path length on - off, all "
                "trials (m) | flight time, both succeeded (s) | path length, both succeeded (m) |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
        for v, e in b["variants"].items():
            if v == "off":
                out.append(f"| off | {e['trials']} | {e['successes']} | "
                           f"{e['collided_trials']} | | | | | | |")  # fmt: skip
                continue
            sc = e["success_changes"]
            out.append(
                f"| {v} | {e['trials']} | {e['successes']} | {e['collided_trials']} | "
                f"{sc['gained']} / {sc['lost']} | {e['cause_changed']} | "
                f"{_ci(e['flight_time_all'], '+.3f')} | {_ci(e['path_length_all'], '+.3f')} | "
                f"{_ci(e['flight_time_both_succeeded'], '+.3f')} | "
                f"{_ci(e['path_length_both_succeeded'], '+.3f')} |"
            )
        out.append(f"\nparity (off vs committed): {b['parity']}")
    for r in summary.get("race", []):
        if "parity" in r:
            out.append(f"\nparity {r['racer']} (off vs committed): {r['parity']}")
    return "\n".join(out) + "\n"


def _race_summary(doc: dict[str, Any]) -> list[dict[str, Any]]:
    runs = doc["runs"]
    off = {(r["what"], r["racer"]): r for r in runs if r["variant"] == "off"}
    out = []
    for r in runs:
        c, nom = r["courses"], r["courses"][0]
        row: dict[str, Any] = {
            "what": r["what"], "racer": r["racer"], "variant": r["variant"],
            "nominal_gates": nom["gates_passed"], "nominal_time_s": nom["time_s"],
            "nominal_score": nom["score"], "nominal_collided": nom["collided"],
            "nominal_path_dev_max_m": nom["path_dev_max_m"],
            "nominal_path_dev_mean_m": nom["path_dev_mean_m"],
            "wall_s": r["wall_s"],
        }  # fmt: skip
        if r["what"] == "oracle-batch":
            pert = c[1:]
            base = off[(r["what"], r["racer"])]["courses"][1:]
            row.update(
                finished=sum(x["finished"] for x in pert),
                collided=sum(x["collided"] for x in pert),
                gates_passed_total=sum(x["gates_passed"] for x in pert),
                mean_score=sum(x["score"] for x in pert) / len(pert),
                leaderboard=r["leaderboard"],
                path_dev_max_m=max(x["path_dev_max_m"] or 0.0 for x in pert),
                score_vs_off=paired([x["score"] for x in pert], [x["score"] for x in base]),
                time_vs_off=paired(
                    [x["time_s"] for x in pert if x["time_s"] is not None],
                    [
                        y["time_s"]
                        for x, y in zip(pert, base, strict=True)
                        if x["time_s"] is not None
                    ],  # both finished (checked in the table)
                ),
            )
            if r["variant"] == "off":
                row["parity"] = _race_parity(r)
        out.append(row)
    return out


def _race_parity(run: dict[str, Any]) -> dict[str, Any]:
    """The effects-off batch against the committed ``volary race --mode oracle`` file."""
    path = COMMITTED_RACE / f"{run['racer']}-seed0.json"
    if not path.exists():
        return {"committed": None}
    doc = json.loads(path.read_text())
    committed = [doc["nominal"], *doc["courses"]]
    same = [a["time_s"] == b["time_s"] and a["score"] == b["score"]
            and a["gates_passed"] == b["gates_passed"]
            for a, b in zip(run["courses"], committed, strict=True)]  # fmt: skip
    dt = [abs(a["time_s"] - b["time_s"]) for a, b in zip(run["courses"], committed, strict=True)
          if a["time_s"] is not None and b["time_s"] is not None]  # fmt: skip
    return {
        "committed": str(path.relative_to(ROOT)),
        "identical_courses": sum(same),
        "of": len(same),
        "max_abs_time_diff_s": max(dt) if dt else None,
        "committed_nominal": [
            doc["nominal"]["gates_passed"],
            doc["nominal"]["time_s"],
            doc["nominal"]["score"],
        ],  # fmt: skip
        "committed_leaderboard": doc["leaderboard"],
    }


def _bench_summary(doc: dict[str, Any]) -> dict[str, Any]:
    rows = doc["rows"]
    by = {(r["variant"], r["key"]): r for r in rows}
    keys = [r["key"] for r in rows if r["variant"] == "off"]
    unit = "trial (platform x scenario x configuration), flown once per variant, same seeds"
    out: dict[str, Any] = {"unit_of_replication": unit, "variants": {}}
    for v in doc["variants"]:
        ks = [k for k in keys if (v, k) in by]
        rs = [by[(v, k)] for k in ks]
        base = [by[("off", k)] for k in ks]
        entry: dict[str, Any] = {
            "trials": len(rs),
            "successes": sum(bool(r["success"]) for r in rs),
            "collided_trials": sum(r["collisions"] > 0 for r in rs),
            "causes": _count(r["cause"] for r in rs),
        }
        if v != "off":
            a = [bool(r["success"]) for r in rs]
            b = [bool(r["success"]) for r in base]
            gained = sum(x and not y for x, y in zip(a, b, strict=True))
            lost = sum(y and not x for x, y in zip(a, b, strict=True))
            entry["success_changes"] = {"gained": gained, "lost": lost,
                                        "mcnemar_exact_p": _binom(gained, lost)}  # fmt: skip
            entry["cause_changed"] = sum(
                r["cause"] != o["cause"] for r, o in zip(rs, base, strict=True)
            )
            both = [(r, o) for r, o in zip(rs, base, strict=True) if r["success"] and o["success"]]
            for f in ("flight_time", "path_length", "mean_speed", "time_to_goal"):
                entry[f"{f}_both_succeeded"] = paired(
                    [r[f] for r, _ in both], [o[f] for _, o in both]
                )
            anyrow = [(r, o) for r, o in zip(rs, base, strict=True)
                      if r["flight_time"] is not None and o["flight_time"] is not None]  # fmt: skip
            entry["flight_time_all"] = paired([r["flight_time"] for r, _ in anyrow],
                                              [o["flight_time"] for _, o in anyrow])  # fmt: skip
            entry["path_length_all"] = paired([r["path_length"] for r, _ in anyrow],
                                              [o["path_length"] for _, o in anyrow])  # fmt: skip
            entry["identical_rows"] = sum(
                all(r[f] == o[f] for f in BENCH_FIELDS if f != "wall_time")
                for r, o in zip(rs, base, strict=True)
            )
        out["variants"][v] = entry
    out["parity"] = _bench_parity([by[("off", k)] for k in keys])
    return out


def _bench_parity(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Effects-off rows against the committed Table II rows (same key) where there are some."""
    import csv

    if not COMMITTED_TRIALS.exists():
        return {"committed": None}
    committed = {}
    with COMMITTED_TRIALS.open() as f:
        for c in csv.DictReader(f):
            committed[
                (c["algo"], c["platform"], c["scenario"], int(c["config"]), int(c["trial"]))
            ] = c
    n = same_discrete = same_all = 0
    max_rel = 0.0
    for r in rows:
        c = committed.get((r["algo"], r["platform"], r["scenario"], r["config"], r["trial"]))
        if c is None:
            continue
        n += 1
        discrete = (str(bool(r["success"])) == c["success"] and r["cause"] == c["cause"]
                    and int(r["collisions"]) == int(c["collisions"]))  # fmt: skip
        same_discrete += discrete
        rel = 0.0
        for f in ("flight_time", "path_length", "final_distance", "time_to_goal"):
            x, y = r[f], float(c[f])
            if x is None and math.isnan(y):
                continue
            if x is None or math.isnan(y):
                rel = math.inf
                continue
            rel = max(rel, abs(x - y) / max(abs(y), 1e-12))
        same_all += discrete and rel == 0.0
        max_rel = max(max_rel, rel)
    return {"committed": str(COMMITTED_TRIALS.relative_to(ROOT)), "matched_rows": n,
            "same_success_cause_collisions": same_discrete, "identical_metrics": same_all,
            "max_rel_diff_flight_path_final_ttg": max_rel}  # fmt: skip


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return out


def _binom(gained: int, lost: int) -> float | None:
    from scipy import stats

    n = gained + lost
    return float(stats.binomtest(gained, n, 0.5).pvalue) if n else None


# ---- helpers ------------------------------------------------------------------------------------
def _get(name: str) -> Any:
    from volary import platforms

    return platforms.get(name)


def _num(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _machine() -> dict[str, Any]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    return {"commit": commit, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "python": platform.python_version()}  # fmt: skip


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("race", help="AlphaPilot oracle race, effects off and on")
    r.add_argument("--racers", nargs="+", default=["minsnap", "mintime"])
    r.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    r.add_argument("--courses", type=int, default=25)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", default="race.json", help="file name under results/")
    b = sub.add_parser("bench", help="FLYINGTRUST quick run, effects off and on")
    b.add_argument("--suite", default="quick")
    b.add_argument("--algos", nargs="+", default=["straight"])
    b.add_argument("--variants", nargs="+", default=["off", "on"], choices=list(VARIANTS))
    b.add_argument("--scenarios", nargs="*", default=None)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--out", default="bench.json", help="file name under results/")
    sub.add_parser("coefficients", help="print the transferred coefficients")
    sub.add_parser("report", help="paired comparisons and parity -> results/summary.json")
    a = ap.parse_args()
    if a.cmd == "race":
        race(a)
    elif a.cmd == "bench":
        bench(a)
    elif a.cmd == "report":
        report(a)
    else:
        from volary.bench.gate_race import RACE_PLATFORM
        from volary.studies.flyingtrust.protocol import QUICK_PLATFORMS

        src = source_coefficients()
        print(json.dumps(src, indent=1))
        for n in (RACE_PLATFORM, *QUICK_PLATFORMS):
            af, c = _get(n), transfer(_get(n))
            print(n, json.dumps(c), "H/T, M/(T R) at mu = 0.1:", _ratios(af, c, 0.1))
        print("source at mu = 0.1:", 0.1 * src["c_d"], 0.1 * src["c_flap"])


if __name__ == "__main__":
    main()
