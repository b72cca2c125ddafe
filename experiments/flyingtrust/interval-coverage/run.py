"""Coverage of the benchmark's success-rate intervals on protocol-shaped simulated data.

Each experiment draws 10 configurations x 36 platforms: configuration c succeeds with
probability p_c ~ Beta with mean mu and intra-configuration correlation rho (rho = 0.88 is
forest straight's measured within-configuration correlation of success; 1 / (a + b + 1) = rho),
and each platform's trial is Bernoulli(p_c). The true rate is mu. For each method, the share of
experiments whose 95 % interval contains mu:

- ``trial bootstrap``: :func:`volary.bench.stats.bootstrap_ci` over the 360
  trials (what the report published so far: trials treated as independent);
- ``cluster``: :func:`volary.bench.stats.cluster_bootstrap_ci` (configurations,
  then trials; hull with a Wilson interval on n = 10 configurations).

Second design, one platform's rate (the per-platform intervals): 7 scenario types x 10
configurations x 1 trial; type h has its own mean rate (``--type-rates``, shaped like a mapper
platform: easy, hard and middling types) and configuration rates drawn around it as above; the
true rate is the mean of the type rates. Methods: the trial bootstrap over the 70 trials,
``cluster`` unstratified and ``stratified`` (configurations resampled within their type, the
stratified Wilson floor), the report's per-platform intervals.

    .venv/bin/python experiments/flyingtrust/interval-coverage/run.py
        # -> results/stats_coverage.json

Grid study (``--study grid``, issue 59): the same 10 configurations x 36 platforms x
``--repeats`` design over a grid taken from the committed rows: the intra-configuration
correlation (ICC, one-way ANOVA estimator) measured in every planner x type cell of ``--rows``
whose rate is strictly between 0 and 1, its quartiles and maximum, crossed with success rates
``--grid-rates``. ICC 1 makes each configuration all-or-nothing (p_c ~ Bernoulli(mu)).
Candidates, each the share of ``--reps`` seeded experiments whose 95 % interval holds mu, and
its mean width:

- ``published``: :func:`volary.bench.stats.cluster_bootstrap_ci` (two-stage bootstrap,
  hull with the Wilson floor on n = configurations), on ``--published-reps`` experiments (it
  costs 10 ms a call);
- ``config bootstrap``: percentile bootstrap of the configuration means (B = 1000);
- ``cluster bootstrap-t``: studentized bootstrap of the configuration means (B = 1000);
- ``design-effect CP``: Clopper-Pearson at the effective sample size
  n_eff = p(1 - p) / var (var from the configuration means; n_eff <= n; n at 0 and 1);
- ``Korn-Graubard``: the same with n_eff scaled by (z / t_{k-1})^2 (Korn & Graubard 1998);
- ``Korn-Graubard, k at 0/1``: the same, but at a rate of 0 or 1 (where no variance between
  configurations can be seen) n_eff is the number of configurations, as if ICC were 1;
- ``design-effect Wilson``: a Wilson score interval at n_eff.

    nice -n 5 .venv/bin/python experiments/flyingtrust/interval-coverage/run.py --study grid
    # -> results/stats_coverage_grid.json (about 5 min on one core)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def experiment(rng: np.random.Generator, mu: float, rho: float, configs: int, platforms: int):
    total = 1.0 / rho - 1.0  # a + b
    p = rng.beta(mu * total, (1.0 - mu) * total, size=configs)
    return (rng.random((configs, platforms)) < p[:, None]).astype(np.float64)


def main(argv: list[str] | None = None) -> int:
    from volary.bench.stats import bootstrap_ci, cluster_bootstrap_ci

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiments", type=int, default=1000)
    ap.add_argument("--rates", default="0.05,0.256,0.5,0.8")
    ap.add_argument("--rho", type=float, default=0.88)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--type-rates", default="0.97,0.97,0.95,0.03,0.8,0.2,0.95;0.3,0.2,0.03,0.03,"
                    "0.03,0.03,0.03")  # fmt: skip
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default: results/stats_coverage.json, or _grid.json with --study grid",
    )
    ap.add_argument(
        "--study",
        choices=("rho", "grid"),
        default="rho",
        help="rho: the fixed-correlation study above; grid: the grid from the rows",
    )
    ap.add_argument(
        "--rows", type=Path, default=HERE.parent / "table-ii" / "results" / "slate" / "trials.csv"
    )
    ap.add_argument("--grid-rates", default="0.1,0.25,0.5,0.75,0.9,0.95")
    ap.add_argument("--iccs", default="", help="ICC grid (default: quartiles and max of --rows)")
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--published-reps", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=1, help="trials per configuration x platform")
    args = ap.parse_args(argv)  # fmt: skip
    if args.study == "grid":
        return grid_study(args)
    if args.out is None:
        args.out = HERE / "results" / "stats_coverage.json"
    rows = []
    t0 = time.perf_counter()
    for mu in (float(x) for x in args.rates.split(",")):
        rng = np.random.default_rng([args.seed, int(mu * 1e6)])
        hit = {"trial bootstrap": 0, "cluster": 0}
        width = {"trial bootstrap": [], "cluster": []}
        for i in range(args.experiments):
            g = experiment(rng, mu, args.rho, 10, 36)
            for name, (_, lo, hi) in (
                ("trial bootstrap", bootstrap_ci(g.ravel(), B=1000, seed=i)),
                ("cluster", cluster_bootstrap_ci(g, B=1000, seed=i)),
            ):
                hit[name] += lo <= mu <= hi
                width[name].append(hi - lo)
        for name in hit:
            rows.append({"true_rate": mu, "method": name, "coverage": hit[name] / args.experiments,
                         "median_width": float(np.median(width[name]))})  # fmt: skip
            print(
                f"rate {mu:.3f}  {name:16s} coverage {hit[name] / args.experiments:.3f}  "
                f"median width {np.median(width[name]):.3f}",
                flush=True,
            )
    rows += stratified_rows(args)
    doc = {"benchmark": "stats_coverage", "command": "python " + " ".join(sys.argv),
           "experiments_per_rate": args.experiments, "configurations": 10, "platforms": 36,
           "rho": args.rho, "level": 0.95, "seconds": time.perf_counter() - t0,
           "rows": rows}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


def stratified_rows(args: argparse.Namespace) -> list[dict]:
    from volary.bench.stats import bootstrap_ci, cluster_bootstrap_ci

    out = []
    strata = [h for h in range(7) for _ in range(10)]
    for k, spec in enumerate(args.type_rates.split(";")):
        mus = [float(x) for x in spec.split(",")]
        true = float(np.mean(mus))
        rng = np.random.default_rng([args.seed, 7, k])
        names = ("trial bootstrap", "cluster", "stratified")
        hit, width = dict.fromkeys(names, 0), {n: [] for n in names}
        for i in range(args.experiments):
            g = np.concatenate([experiment(rng, mu, args.rho, 10, 1) for mu in mus])  # (70, 1)
            for name, (_, lo, hi) in (
                ("trial bootstrap", bootstrap_ci(g.ravel(), B=1000, seed=i)),
                ("cluster", cluster_bootstrap_ci(g, B=1000, seed=i)),
                ("stratified", cluster_bootstrap_ci(g, B=1000, seed=i, strata=strata)),
            ):
                hit[name] += lo <= true <= hi
                width[name].append(hi - lo)
        for name in names:
            out.append({"design": "one platform: 7 types x 10 configurations x 1 trial",
                        "type_rates": mus, "true_rate": true, "method": name,
                        "coverage": hit[name] / args.experiments,
                        "median_width": float(np.median(width[name]))})  # fmt: skip
            print(
                f"platform rate {true:.3f}  {name:16s} coverage {hit[name] / args.experiments:.3f}"
                f"  median width {np.median(width[name]):.3f}",
                flush=True,
            )
    return out


# ------------------------------------------------------------------ grid study (issue 59)
CONFIGS, PLATFORMS, B_GRID = 10, 36, 1000


def measured_iccs(path: Path) -> dict[str, float]:
    """ICC (one-way ANOVA estimator over configurations) of success per planner x type cell
    of a trials CSV, for the cells whose rate is strictly between 0 and 1."""
    import csv
    from collections import defaultdict

    cells: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            cells[(r["algo"], r["scenario"])][r["config"]].append(float(r["success"] == "True"))
    out = {}
    for (algo, scen), by in sorted(cells.items()):
        y = [np.asarray(v) for _, v in sorted(by.items())]
        k, n = len(y), sum(v.size for v in y)
        p = sum(v.sum() for v in y) / n
        if not 0.0 < p < 1.0 or k < 2:
            continue
        m0 = (n - sum(v.size**2 for v in y) / n) / (k - 1)
        msb = sum(v.size * (v.mean() - p) ** 2 for v in y) / (k - 1)
        msw = sum(((v - v.mean()) ** 2).sum() for v in y) / (n - k)
        out[f"{algo}/{scen}"] = float((msb - msw) / (msb + (m0 - 1) * msw))
    return out


def simulate(rng: np.random.Generator, mu: float, rho: float, reps: int, m: int) -> np.ndarray:
    """(reps, CONFIGS) configuration success rates over m trials each (beta-binomial)."""
    if rho >= 1.0:
        p = (rng.random((reps, CONFIGS)) < mu).astype(np.float64)
    else:
        total = 1.0 / rho - 1.0
        p = rng.beta(mu * total, (1.0 - mu) * total, size=(reps, CONFIGS))
    return rng.binomial(m, p) / m


def cp_bounds(x: np.ndarray, n: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Clopper-Pearson bounds for (fractional) x successes of n (scipy.stats.beta)."""
    from scipy.stats import beta

    a = (1.0 - level) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(x > 0, beta.ppf(a, x, n - x + 1), 0.0)
        hi = np.where(x < n, beta.ppf(1 - a, x + 1, n - x), 1.0)
    return lo, hi


def effective_n(cm: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rate, n_eff) of equal-size clusters' means cm (reps, k): n_eff = p(1-p)/var <= n."""
    k = cm.shape[1]
    p = cm.mean(axis=1)
    var = cm.var(axis=1, ddof=1) / k
    with np.errstate(invalid="ignore", divide="ignore"):
        ne = np.where(var > 0, p * (1 - p) / var, n)
    return p, np.minimum(ne, n)


def candidates(cm: np.ndarray, n: int, rng: np.random.Generator, level: float = 0.95) -> dict:
    """Every vectorized candidate's (lo, hi) for the configuration means cm (reps, k)."""
    from scipy.stats import norm, t

    reps, k = cm.shape
    a = (1 - level) / 2
    out = {}
    idx = rng.integers(0, k, size=(reps, B_GRID, k))
    boot = np.take_along_axis(cm[:, None, :].repeat(B_GRID, 1), idx, axis=2)
    bm = boot.mean(axis=2)
    out["config bootstrap"] = tuple(np.quantile(bm, [a, 1 - a], axis=1))
    p = cm.mean(axis=1)
    se = cm.std(axis=1, ddof=1) / np.sqrt(k)
    bse = boot.std(axis=2, ddof=1) / np.sqrt(k)
    with np.errstate(invalid="ignore", divide="ignore"):
        tt = np.where(bse > 0, (bm - p[:, None]) / bse, 0.0)
    q_lo, q_hi = np.quantile(tt, [a, 1 - a], axis=1)
    out["cluster bootstrap-t"] = (np.clip(p - q_hi * se, 0, 1), np.clip(p - q_lo * se, 0, 1))
    p, ne = effective_n(cm, n)
    out["design-effect CP"] = cp_bounds(p * ne, ne, level)
    ne_kg = np.minimum(ne * (norm.ppf(1 - a) / t.ppf(1 - a, k - 1)) ** 2, n)
    out["Korn-Graubard"] = cp_bounds(p * ne_kg, ne_kg, level)
    edge = (p == 0) | (p == 1)  # no between-configuration variance to measure: assume ICC 1
    ne_b = np.where(edge, k * (norm.ppf(1 - a) / t.ppf(1 - a, k - 1)) ** 2, ne_kg)
    out["Korn-Graubard, k at 0/1"] = cp_bounds(p * ne_b, ne_b, level)
    z = norm.ppf(1 - a)
    den = 1 + z * z / ne
    centre = (p + z * z / (2 * ne)) / den
    half = z * np.sqrt(p * (1 - p) / ne + z * z / (4 * ne * ne)) / den
    out["design-effect Wilson"] = (np.maximum(centre - half, 0), np.minimum(centre + half, 1))
    return out


def grid_study(args: argparse.Namespace) -> int:
    """Coverage and mean width of each candidate at every (ICC, rate) grid point."""
    from volary.bench.stats import cluster_bootstrap_ci

    t0 = time.perf_counter()
    measured = measured_iccs(args.rows)
    vals = np.array(sorted(measured.values()))
    if args.iccs:
        iccs = [float(x) for x in args.iccs.split(",")]
    else:  # quartiles and max; an ICC below 0.005 simulated as 0.005 (beta needs rho > 0)
        iccs = [max(0.005, round(float(v), 3)) for v in np.quantile(vals, [0.25, 0.5, 0.75, 1])]
    m = PLATFORMS * args.repeats
    n = CONFIGS * m
    rows = []
    for i, rho in enumerate(iccs):
        for j, mu in enumerate(float(x) for x in args.grid_rates.split(",")):
            rng = np.random.default_rng([args.seed, 59, i, j])
            cm = simulate(rng, mu, rho, args.reps, m)
            ivs = {}
            for c in range(0, args.reps, 100):
                for name, (lo, hi) in candidates(cm[c : c + 100], n, rng).items():
                    ivs.setdefault(name, []).append((lo, hi))
            res = {}
            for name, parts in ivs.items():
                lo = np.concatenate([p[0] for p in parts])
                hi = np.concatenate([p[1] for p in parts])
                res[name] = (lo, hi)
            pub = [cluster_bootstrap_ci(_trials(cm[r], m), B=1000, seed=r)[1:]
                   for r in range(min(args.published_reps, args.reps))]  # fmt: skip
            res["published"] = tuple(np.array(pub).T)
            for name, (lo, hi) in res.items():
                cov = float(np.mean((lo <= mu) & (mu <= hi)))
                rows.append({"icc": rho, "true_rate": mu, "method": name, "reps": int(lo.size),
                             "coverage": cov, "mc_se": float(np.sqrt(cov * (1 - cov) / lo.size)),
                             "mean_width": float(np.mean(hi - lo))})  # fmt: skip
            print(f"icc {rho:.3f} rate {mu:.2f}  " + "  ".join(
                f"{r['method'][:12]:>12s} {r['coverage']:.3f}/{r['mean_width']:.3f}"
                for r in rows if r["icc"] == rho and r["true_rate"] == mu), flush=True)  # fmt: skip
    summary = choose(rows)
    print(json.dumps(summary, indent=1))
    doc = {"benchmark": "stats_coverage_grid", "command": "python " + " ".join(sys.argv),
           "design": f"{CONFIGS} configurations x {PLATFORMS} platforms x {args.repeats} repeats",
           "rows_file": str(args.rows.relative_to(HERE.parents[2])) if args.rows.is_absolute()
           and HERE.parents[2] in args.rows.parents else str(args.rows),
           "measured_icc": measured, "icc_grid": iccs, "reps": args.reps,
           "published_reps": args.published_reps, "seed": args.seed, "level": 0.95,
           "seconds": time.perf_counter() - t0, "summary": summary, "rows": rows}  # fmt: skip
    out = args.out or HERE / "results" / "stats_coverage_grid.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


def _trials(cm_row: np.ndarray, m: int) -> np.ndarray:
    """A (k, m) 0/1 table with the given configuration rates (what the report's code takes)."""
    s = np.rint(cm_row * m).astype(int)
    return (np.arange(m)[None, :] < s[:, None]).astype(np.float64)


def choose(rows: list[dict], target: float = 0.93) -> dict:
    """Per method: minimum coverage, where it falls below target, and the mean width over the
    grid; the chosen method is the narrowest with coverage >= target at every point."""
    out: dict = {"target": target, "methods": {}}
    for name in sorted({r["method"] for r in rows}):
        mine = [r for r in rows if r["method"] == name]
        out["methods"][name] = {
            "min_coverage": min(r["coverage"] for r in mine),
            "mean_width": float(np.mean([r["mean_width"] for r in mine])),
            "fails_at": [[r["icc"], r["true_rate"], r["coverage"]] for r in mine
                         if r["coverage"] < target],
        }  # fmt: skip
    ok = [(v["mean_width"], k) for k, v in out["methods"].items() if not v["fails_at"]]
    out["chosen"] = min(ok)[1] if ok else None
    return out


if __name__ == "__main__":
    raise SystemExit(main())
