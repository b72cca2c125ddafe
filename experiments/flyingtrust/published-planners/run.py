"""summary.json of the ros1:* quick-suite runs beside volary's ``ego`` and ``kinodynamic`` on
the same trials (their committed full-protocol rows, ../table-ii/results/slate/*/trials.csv).

    R=experiments/flyingtrust/published-planners/results
    .venv/bin/python experiments/flyingtrust/published-planners/run.py \
        ros1:ego=$R/ego ros1:fast_planner=$R/fast_planner ros1:ego_volume=$R/ego-volume \
        ros1:fast_planner_volume=$R/fast_planner-volume > $R/summary.json

The full protocol's six-platform part (420 trials a planner):

    .venv/bin/python experiments/flyingtrust/published-planners/run.py \
        ros1:ego=$R/ego-full6 ros1:fast_planner=$R/fast_planner-full6 \
        --report=$R/full6-report > $R/full6-summary.json

``--report=DIR`` also writes volary's HTML report of the rows (``DIR/index.html``, CSV exports).

The ``*_volume`` runs are the second setting (examples/ros1_planners.toml): the same planners
given the trial's flight volume (map floor and virtual ceiling) instead of upstream's fixed one.
Only complete runs belong here (pairs are over the trials every run has).

Each DIR holds the run's ``run.sqlite``, the relay's ``timing.jsonl`` and ``run.json`` (the
run's wall and trial count, from ``volary bench run``'s last line). Pairing key: (scenario,
configuration, trial, platform); intervals and sign-flip tests resample configurations
(volary.studies.flyingtrust.compare); the pooled p-values are Holm-adjusted over the tests listed.
"""

import json
import statistics as st
import sys
from pathlib import Path

import numpy as np

STUDY = Path(__file__).resolve().parents[1]  # experiments/flyingtrust
sys.path.insert(0, str(STUDY / "tools"))  # carry_rows: the trials.csv reader
from carry_rows import read_rows  # noqa: E402

from volary.bench.stats import holm  # noqa: E402
from volary.studies.flyingtrust.compare import (  # noqa: E402
    compact_letters,
    paired_tests,
    score_differences,
    score_draws,
    score_intervals,
    score_letters,
)
from volary.studies.flyingtrust.run import load_results  # noqa: E402
from volary.studies.flyingtrust.score import composite_scores  # noqa: E402

SLATE = STUDY / "table-ii" / "results" / "slate"


def key(r):  # noqa: ANN001, ANN201
    return (r.scenario, r.config, r.trial, r.platform)


# volary's version of each published planner's family (FLYINGTRUST Table II names)
TWIN = {"ego": "ego", "fast_planner": "kinodynamic"}
PAPER_FAMILY = {"ego": "EGO-Planner", "fast_planner": "Fast-Planner"}


def _twin(algo: str) -> str | None:
    """volary's planner of ros1:NAME's family (ros1:ego_volume -> ego), or None."""
    base = algo.removeprefix("ros1:").removesuffix("_volume")
    return TWIN.get(base) if algo.startswith("ros1:") else None


def family_tests(rows: list) -> list[dict]:
    """Each published planner against volary's version of its family: pooled and per type,
    the per-type tests Holm-adjusted within the pair (7 claims), the pooled ones over the
    pairs listed."""
    from volary.studies.flyingtrust.compare import paired_test
    from volary.studies.flyingtrust.stats import order_scenarios

    algos = {r.algo for r in rows}
    scen = order_scenarios({r.scenario for r in rows})
    pairs = [(a, _twin(a)) for a in sorted(algos) if _twin(a) in algos]
    out, pooled = [], []
    for pub, ours in pairs:
        per = [paired_test(rows, pub, ours, s) for s in scen]
        adj = holm([t.p_value for t in per])
        t0 = paired_test(rows, pub, ours)
        pooled.append(t0.p_value)
        out.append({
            "published": pub, "volary": ours, "configs": t0.n_configs,
            "differing": t0.n_differing, "rate_published": round(t0.rate_a, 4),
            "rate_volary": round(t0.rate_b, 4), "diff": round(t0.diff, 4), "p": t0.p_value,
            "by_type": [{"scenario": t.scenario, "configs": t.n_configs,
                         "differing": t.n_differing, "rate_published": round(t.rate_a, 4),
                         "rate_volary": round(t.rate_b, 4), "diff": round(t.diff, 4),
                         "p": t.p_value, "p_holm_types": float(h)}
                        for t, h in zip(per, adj, strict=True)],
        })  # fmt: skip
    for o, h in zip(out, holm(pooled), strict=True):
        o["p_holm_pairs"] = float(h)
    return out


def success_intervals(rows: list) -> dict:
    """Success with its 95 % interval over configurations, per algorithm, pooled and by type
    (volary.studies.flyingtrust.stats.summarize: the report's intervals)."""
    from volary.studies.flyingtrust.stats import summarize

    s = summarize(rows)
    out: dict = {}
    for g in s.by_algo:
        out[g.algo] = {"all": [round(g.success_rate, 4), round(g.ci_lo, 4), round(g.ci_hi, 4)]}
    for g in s.by_scenario:
        out[g.algo][g.scenario] = [round(g.success_rate, 4), round(g.ci_lo, 4), round(g.ci_hi, 4)]
    return out


def table_ii(scores: dict, iv: dict) -> list[dict]:
    """Our FinalScore (paper's normalization) beside FLYINGTRUST Table II, family by family."""
    from volary.studies.flyingtrust.score import PAPER_TABLE_II

    paper = {p.algo: p for p in PAPER_TABLE_II}
    out = []
    for a, s in sorted(scores.items(), key=lambda kv: -kv[1].final_score_fixed):
        base = a.removeprefix("ros1:").removesuffix("_volume")
        fam = PAPER_FAMILY.get(base) or {"kinodynamic": "Fast-Planner", "ego": "EGO-Planner"}.get(a)
        p = paper.get(fam) if fam else None
        out.append({
            "algo": a, "family": fam, "final_score_fixed": round(s.final_score_fixed, 2),
            "ci95": [round(x, 2) for x in iv[a].final_score_fixed],
            "paper_score": p.score if p else None,
            "paper_final_score": p.final_score if p else None,
        })  # fmt: skip
    return out


def write_report(rows: list, out: Path) -> None:
    """volary's HTML report (``volary bench report``'s) of the published planners beside
    volary's on the common trials: success and scores with intervals, paired tests, letters."""
    from volary.studies.flyingtrust.report import make_report

    title = "FLYINGTRUST protocol: the published planners beside volary's, same trials"
    index = make_report(rows, out, title=title, suite="flyingtrust")
    print(f"wrote {index}", file=sys.stderr)


def timing_lines(path: Path, algo: str, rows: list) -> list[dict]:
    """The relay's timing line of each of ``rows``, matched by (platform, trial seed): the
    relay names the trial by the seed of its NavTask, ``trial_seed(run seed, key)``. A trial
    flown twice (an interrupted unit flown again by ``volary bench resume``) keeps its last
    line; lines of trials not in ``rows`` are dropped."""
    from volary.studies.flyingtrust.schema import trial_seed

    want = {(r.platform, trial_seed(r.seed, r.key)) for r in rows}
    last: dict[tuple[str, int], dict] = {}
    for text in path.read_text().splitlines():
        t = json.loads(text)
        k = (t["platform"], t["seed"])
        if t["planner"] == algo and k in want:
            last[k] = t
    return list(last.values())


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--report=")]
    report = [Path(a.removeprefix("--report=")) for a in sys.argv[1:] if a not in args]
    runs = {a.split("=", 1)[0]: Path(a.split("=", 1)[1]) for a in args}
    mine = [r for d in runs.values() for r in load_results(d / "run.sqlite")]
    keys = {key(r) for r in mine}
    peers = [r for name in ("ego", "kinodynamic")
             for r in read_rows(SLATE / name / "trials.csv").values()
             if key(r) in keys]  # fmt: skip
    algos = sorted({r.algo for r in mine})
    common = set.intersection(*({key(r) for r in mine if r.algo == a} for a in algos))
    rows = [r for r in mine + peers if key(r) in common]
    for out_dir in report:
        write_report(rows, out_dir)
    scores = {s.algo: s for s in composite_scores(rows)}
    draws = score_draws(rows)
    iv = score_intervals(draws)
    out: dict = {"trials_common": len(common), "algos": {}}
    for a in sorted({r.algo for r in rows}):
        rr = [r for r in rows if r.algo == a]
        causes: dict[str, int] = {}
        for r in rr:
            causes[r.cause] = causes.get(r.cause, 0) + 1
        s, i = scores[a], iv[a]
        out["algos"][a] = {
            "trials": len(rr), "success": round(sum(r.success for r in rr) / len(rr), 4),
            "causes": causes,
            "final_score_fixed": round(s.final_score_fixed, 2),
            "final_score_fixed_ci95": [round(x, 2) for x in i.final_score_fixed],
            "final_score_run_relative": round(s.final_score, 2),
            "final_score_run_relative_ci95": [round(x, 2) for x in i.final_score],
            "score": round(s.score, 2), "score_ci95": [round(x, 2) for x in i.score],
            "success_by_scenario": {
                sc: round(float(np.mean([r.success for r in rr if r.scenario == sc])), 3)
                for sc in sorted({r.scenario for r in rr})},
        }  # fmt: skip
    tests = [t for t in paired_tests(rows) if t.scenario == ""]
    for t, p in zip(tests, holm([t.p_value for t in tests]), strict=True):
        out.setdefault("paired_tests_pooled", []).append({
            "a": t.algo_a, "b": t.algo_b, "configs": t.n_configs, "differing": t.n_differing,
            "rate_a": round(t.rate_a, 4), "rate_b": round(t.rate_b, 4), "diff": round(t.diff, 4),
            "p": t.p_value, "p_holm": p, "method": t.method})  # fmt: skip
    points = {a: s.final_score_fixed for a, s in scores.items()}
    diffs = score_differences(draws, points)
    diff_holm = holm([d.p_value for d in diffs])
    for d, p in zip(diffs, diff_holm, strict=True):
        out.setdefault("final_score_fixed_differences", []).append(
            {
                "a": d.algo_a,
                "b": d.algo_b,
                "diff": round(d.diff, 2),
                "ci95": [round(x, 2) for x in d.ci],
                "p_bootstrap": d.p_value,
                "p_holm": float(p),
            }
        )
    pooled_holm = holm([t.p_value for t in tests])
    sep = lambda pairs, ps: [pr for pr, p in zip(pairs, ps, strict=True) if p < 0.05]  # noqa: E731
    out["letters_final_score_fixed"] = score_letters(diffs, points)
    out["letters_success"] = compact_letters(
        {a: v["success"] for a, v in out["algos"].items()},
        sep([(t.algo_a, t.algo_b) for t in tests], pooled_holm))  # fmt: skip
    out["success_ci95"] = success_intervals(rows)
    out["family_tests"] = family_tests(rows)
    out["table_ii"] = table_ii(scores, iv)
    timing = {}
    for algo, d in runs.items():
        lines = timing_lines(d / "timing.jsonl", algo, [r for r in mine if r.algo == algo])
        run = json.loads((d / "run.json").read_text())
        shares = [t["wait_share"] for t in lines if t["wait_share"] is not None]
        timing[algo] = {
            **run, "wall_per_trial_s": round(run["run_wall_s"] / run["trials"], 1),
            "trials_timed": len(lines),
            "row_wall_time_s_mean": round(st.mean(r.wall_time for r in mine if r.algo == algo), 1),
            "relay_plan_wall_s_mean": round(st.mean(t["plan_wall_s"] for t in lines), 2),
            "relay_start_wall_s_mean": round(st.mean(t["start_wall_s"] for t in lines), 2),
            "wait_share_mean": round(st.mean(shares), 4), "wait_share_min": min(shares),
            "wait_wall_s_total": round(sum(t["wait_wall_s"] for t in lines), 1),
            "commands_mean": round(st.mean(t["commands"] for t in lines), 1),
        }  # fmt: skip
    out["timing"] = timing
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
