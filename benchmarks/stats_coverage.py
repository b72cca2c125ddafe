"""Coverage of the benchmark's success-rate intervals on protocol-shaped simulated data.

Each experiment draws 10 configurations x 36 platforms: configuration c succeeds with
probability p_c ~ Beta with mean mu and intra-configuration correlation rho (rho = 0.88 is
forest straight's measured within-configuration correlation of success; 1 / (a + b + 1) = rho),
and each platform's trial is Bernoulli(p_c). The true rate is mu. For each method, the share of
experiments whose 95 % interval contains mu:

- ``trial bootstrap``: :func:`volary.bench.nav.stats.bootstrap_ci` over the 360 trials (what the
  report published so far: trials treated as independent);
- ``cluster``: :func:`volary.bench.nav.stats.cluster_bootstrap_ci` (configurations, then trials;
  hull with a Wilson interval on n = 10 configurations).

Second design, one platform's rate (the per-platform intervals): 7 scenario types x 10
configurations x 1 trial; type h has its own mean rate (``--type-rates``, shaped like a mapper
platform: easy, hard and middling types) and configuration rates drawn around it as above; the
true rate is the mean of the type rates. Methods: the trial bootstrap over the 70 trials,
``cluster`` unstratified and ``stratified`` (configurations resampled within their type, the
stratified Wilson floor), the report's per-platform intervals.

    .venv/bin/python benchmarks/stats_coverage.py    # -> results/stats_coverage.json
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
    from volary.bench.nav.stats import bootstrap_ci, cluster_bootstrap_ci

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiments", type=int, default=1000)
    ap.add_argument("--rates", default="0.05,0.256,0.5,0.8")
    ap.add_argument("--rho", type=float, default=0.88)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--type-rates", default="0.97,0.97,0.95,0.03,0.8,0.2,0.95;0.3,0.2,0.03,0.03,"
                    "0.03,0.03,0.03")  # fmt: skip
    ap.add_argument("--out", type=Path, default=HERE / "results" / "stats_coverage.json")
    args = ap.parse_args(argv)
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
    from volary.bench.nav.stats import bootstrap_ci, cluster_bootstrap_ci

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


if __name__ == "__main__":
    raise SystemExit(main())
