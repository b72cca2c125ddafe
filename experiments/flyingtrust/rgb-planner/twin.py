"""The RGB planner beside its depth twin (issue 21, "RGB observations").

``learned_rgb`` (the learned policy on a depth grid predicted from RGB) and ``learned`` (the same
policy on the measured depth grid) over the forest and urban types of the FLYINGTRUST protocol:
the same 36 platforms, 10 fixed configurations per type, seed and trials, so every row has a
twin. The RGB rows come from

    volary bench run --suite flyingtrust --algo learned_rgb --seed 0 --workers 2 \\
        --set 'scenarios=(forest,urban)' --out out/bench/ft-learned-rgb
    volary bench report out/bench/ft-learned-rgb

and the depth rows from the committed full-protocol run of ``learned``:

    .venv/bin/python experiments/flyingtrust/rgb-planner/twin.py \\
        --rgb out/bench/ft-learned-rgb/report/trials.csv \\
        --depth experiments/flyingtrust/table-ii/results/slate/learned/trials.csv

Writes ``results/`` (the RGB rows, ``summary.json``, ``README.md``'s table)
and prints the table. Unit of replication: the scene configuration; success rates carry 95 %
intervals from a bootstrap of configurations (``cluster_bootstrap_ci``), the comparison is the
paired sign-flip test of per-configuration differences (``volary.studies.flyingtrust.compare``).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results"
TYPES = ("forest", "urban")
RGB, DEPTH = "learned_rgb", "learned"


def rows_of(path: Path, algo: str) -> list:
    sys.path.insert(0, str(HERE.parent / "tools"))
    from carry_rows import read_rows  # the trials.csv reader

    rows = [r for r in read_rows(path).values() if r.algo == algo and r.scenario in TYPES]
    if not rows:
        raise SystemExit(f"{path}: no {algo} rows in {', '.join(TYPES)}")
    return rows


def success_ci(rows: list, scenario: str) -> tuple[float, float, float, int]:
    """(rate, lo, hi, trials): configurations are the clusters (one row of platforms each)."""
    from volary.bench.stats import cluster_bootstrap_ci

    by_config: dict = {}
    for r in rows:
        if not scenario or r.scenario == scenario:
            by_config.setdefault((r.scenario, r.config), []).append(float(bool(r.success)))
    keys = sorted(by_config)
    mean, lo, hi = cluster_bootstrap_ci([np.array(by_config[k]) for k in keys], seed=0,
                                        strata=[k[0] for k in keys])  # fmt: skip
    return mean, lo, hi, sum(len(v) for v in by_config.values())


def causes(rows: list, scenario: str) -> dict[str, float]:
    sel = [r.cause for r in rows if not scenario or r.scenario == scenario]
    return {c: sel.count(c) / len(sel) for c in sorted(set(sel))}


def main(argv: list[str] | None = None) -> int:
    from volary.bench.stats import holm
    from volary.studies.flyingtrust.compare import paired_test

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rgb", type=Path, required=True, help="trials.csv of the learned_rgb run")
    ap.add_argument("--depth", type=Path, required=True, help="trials.csv with learned rows")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rgb, depth = rows_of(args.rgb, RGB), rows_of(args.depth, DEPTH)
    keys = {(r.platform, r.scenario, r.config, r.trial) for r in rgb}
    depth = [r for r in depth if (r.platform, r.scenario, r.config, r.trial) in keys]
    if len(depth) != len(rgb):
        raise SystemExit(f"{len(rgb)} RGB rows but {len(depth)} depth twins")
    both = rgb + depth
    summary: dict = {"trials_per_planner": len(rgb), "types": {}}
    lines = [
        "| type | trials | `learned` (depth) success [95 % CI] | `learned_rgb` success [95 % CI] "
        "| RGB - depth | configurations differing | sign-flip p | Holm (over the types) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    tests = {scen: paired_test(both, RGB, DEPTH, scen) for scen in (*TYPES, "")}
    per_type = holm([tests[s].p_value for s in TYPES])  # the pooled test is one claim alone
    adjusted = {**dict(zip(TYPES, per_type, strict=True)), "": tests[""].p_value}
    for scen in (*TYPES, ""):
        d, r = success_ci(depth, scen), success_ci(rgb, scen)
        t = tests[scen]
        summary["types"][scen or "pooled"] = {
            "depth": {"success": d[0], "ci": [d[1], d[2]], "causes": causes(depth, scen)},
            "rgb": {"success": r[0], "ci": [r[1], r[2]], "causes": causes(rgb, scen)},
            "diff": t.diff, "configs": t.n_configs, "differing": t.n_differing,
            "p_value": t.p_value, "p_holm": float(adjusted[scen]), "method": t.method,
        }  # fmt: skip
        lines.append(
            f"| {scen or 'both'} | {d[3]} | {d[0]:.1%} [{d[1]:.1%}, {d[2]:.1%}] | "
            f"{r[0]:.1%} [{r[1]:.1%}, {r[2]:.1%}] | {t.diff:+.1%} | {t.n_differing} of "
            f"{t.n_configs} | {t.p_value:.3g} ({t.method}) | {adjusted[scen]:.3g} |"
        )
    walls = [float(r.wall_time) for r in rgb if math.isfinite(float(r.wall_time))]
    summary["rgb_wall_s_sum"] = sum(walls)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.rgb.resolve() != (args.out / "trials.csv").resolve():
        shutil.copyfile(args.rgb, args.out / "trials.csv")
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    table = "\n".join(lines)
    (args.out / "table.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
