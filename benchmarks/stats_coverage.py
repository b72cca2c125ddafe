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
    doc = {"benchmark": "stats_coverage", "command": "python " + " ".join(sys.argv),
           "experiments_per_rate": args.experiments, "configurations": 10, "platforms": 36,
           "rho": args.rho, "level": 0.95, "seconds": time.perf_counter() - t0,
           "rows": rows}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
