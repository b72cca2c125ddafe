"""What 30 configurations of one scenario type change against the protocol's 10 (issue 59).

Two planners fly every platform of the protocol on the first N configurations of one type
(``volary bench run --suite flyingtrust --scenarios TYPE --configs N``); this script compares
the first 10 configurations (the protocol's fixed ten for the seeds-0-9 types), the new ones
(10..N-1, scenes the protocol never used: an independent replication) and all N, for each
planner's success interval and for the paired sign-flip test of the two planners, raw and
Holm-adjusted within the pair's family of seven per-type tests (the other six types from the
committed slate rows). It also sets the power model (``volary.studies.flyingtrust.power``)
beside the outcome, and checks the re-flown first ten against the committed slate rows.

    .venv/bin/python experiments/flyingtrust/more-configs/run.py --type perlin \\
        --runs out/bench/perlin30-topo out/bench/perlin30-ego \\
        --out experiments/flyingtrust/more-configs/results/perlin-30configs

Writes OUT/summary.json and OUT/<planner>/trials.csv (the runs' rows, no tracks).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tools"))  # carry_rows: the trials.csv reader
SLATE = HERE.parent / "table-ii" / "results" / "slate"


def _interval(rows: list) -> dict:
    from volary.studies.flyingtrust.stats import summarize

    g = summarize(rows).by_algo[0]
    return {
        "trials": g.n,
        "configs": len({r.config for r in rows}),
        "success": round(g.success_rate, 4),
        "ci95": [round(g.ci_lo, 4), round(g.ci_hi, 4)],
        "ci_width": round(g.ci_hi - g.ci_lo, 4),
    }


def _family(rows: list, a: str, b: str, scen: str, label: str) -> dict:
    """The pair's test in ``scen`` on ``rows`` and the Holm adjustment of its seven-type family
    (the other types from the committed slate rows)."""
    from carry_rows import read_rows

    from volary.bench.stats import holm
    from volary.studies.flyingtrust.compare import paired_test
    from volary.studies.flyingtrust.power import detectable_difference
    from volary.studies.flyingtrust.stats import order_scenarios

    slate = [r for x in (a, b) for r in read_rows(SLATE / x / "trials.csv").values()]
    others = [paired_test(slate, a, b, s) for s in order_scenarios({r.scenario for r in slate})]
    others = [t for t in others if t.scenario != scen]
    t = paired_test(rows, a, b, scen)
    family = [t, *others]
    adj = holm([x.p_value for x in family])
    return {
        "configs": label,
        "n_configs": t.n_configs,
        "differing": t.n_differing,
        f"rate_{a}": round(t.rate_a, 4),
        f"rate_{b}": round(t.rate_b, 4),
        "diff": round(t.diff, 4),
        "sd_config_diff": round(t.sd, 4),
        "p": t.p_value,
        "method": t.method,
        "p_holm_7_types": float(adj[0]),
        "family_p_holm": {x.scenario: round(float(h), 4) for x, h in zip(family, adj, strict=True)},
        "detectable_80pct_alpha_0.05/7": round(
            detectable_difference(t.sd, t.n_configs, 0.05 / 7), 4
        )
        if math.isfinite(t.sd)
        else None,
    }


def _refly_check(rows: list, algo: str, scen: str) -> dict:
    """How the re-flown first ten configurations compare with the committed slate rows."""
    from carry_rows import read_rows

    from volary.studies.flyingtrust.compare import paired_test

    old = {r.key: r for r in read_rows(SLATE / algo / "trials.csv").values() if r.scenario == scen}
    new = [r for r in rows if r.key in old]
    same = sum(old[r.key].cause == r.cause for r in new)
    both = [*old.values(), *(r.__class__(**{**r.to_row(), "algo": "refly"}) for r in new)]
    t = paired_test(both, algo, "refly", scen)
    return {
        "trials_compared": len(new),
        "same_outcome": same,
        "committed_success": round(t.rate_a, 4),
        "reflown_success": round(t.rate_b, 4),
        "p_committed_vs_reflown": t.p_value,
    }


def _write_trials(rows: list, path: Path) -> None:
    from volary.studies.flyingtrust.schema import ROW_FIELDS

    cols = [f for f in ROW_FIELDS if f != "track"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for r in sorted(rows, key=lambda r: (r.config, r.trial, r.platform)):
            w.writerow([getattr(r, c) for c in cols])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--type", required=True, help="the scenario type flown")
    ap.add_argument("--runs", type=Path, nargs=2, required=True, help="two run directories")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--first", type=int, default=10, help="the protocol's configurations")
    a = ap.parse_args()
    from volary.studies.flyingtrust.run import load_results

    runs = [load_results(d / "run.sqlite") for d in a.runs]
    names = [rs[0].algo for rs in runs]
    rows = [r for rs in runs for r in rs if r.scenario == a.type]
    seeds = sorted({r.config for r in rows})
    first = [s for s in seeds if s < a.first]
    new = [s for s in seeds if s >= a.first]
    out: dict = {"type": a.type, "planners": names, "configs": seeds, "per_planner": {}}
    for name in names:
        mine = [r for r in rows if r.algo == name]
        out["per_planner"][name] = {
            "first": _interval([r for r in mine if r.config in first]),
            "new": _interval([r for r in mine if r.config in new]),
            "all": _interval(mine),
            "refly_vs_committed": _refly_check(mine, name, a.type),
        }
        _write_trials(mine, a.out / name / "trials.csv")
    x, y = sorted(names)
    out["paired"] = [
        _family([r for r in rows if r.config in cs], x, y, a.type, label)
        for cs, label in ((first, f"0-{a.first - 1}"), (new, f"{a.first}-{seeds[-1]}"),
                          (seeds, f"0-{seeds[-1]}"))
    ]  # fmt: skip
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "summary.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
