"""FLYINGTRUST's Table II beside ours, for the planner slate (issue 21).

Combines the committed full-protocol rows of ``straight`` and ``mapper``
(``results/straight-mapper/trials.csv``) with the full-protocol runs of the new
planners (``volary bench run --suite flyingtrust --algo NAME --seed 0``; the same suite, seed,
configurations and trials, so every row has a twin in every planner) and writes the benchmark
report of all of them to ``results/slate/``: ``index.html`` (its
per-scenario x platform heatmaps are the analogues of the paper's Figs. 11-15), the CSV
exports (scores with 95 % intervals over configurations, paired sign-flip tests by
configuration), and ``table_ii.md``: the paper's Table II and ours side by side, with each
family's rank in both.

    .venv/bin/python experiments/flyingtrust/table-ii/run.py --runs out/bench/ft-kino

Unit of replication: the scene configuration (10 per scenario type, each flown by all 36
platforms); the intervals resample configurations within their type, the paired tests flip
the signs of per-configuration differences (``volary.studies.flyingtrust.compare``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMMITTED = HERE / "results" / "straight-mapper" / "trials.csv"
OUT = HERE / "results" / "slate"
TOOLS = HERE.parent / "tools"  # carry_rows: the trials.csv reader
# the paper's family of each of our planners (Table II names); None: no counterpart
FAMILY = {
    "kinodynamic": "Fast-Planner",
    "ego": "EGO-Planner",
    "topo": "Path-Guided PGO",
    "learned": "NavRL",
    "straight": "Straight Flight Baseline",
    "mapper": None,
}


def committed_rows(path: Path) -> list:
    sys.path.insert(0, str(TOOLS))
    from carry_rows import read_rows

    return list(read_rows(path).values())


def final_score_letters(rows: list, draws) -> dict:  # noqa: ANN001
    """Compact letter display of the fixed-normalization FinalScore (as the report's ranking)."""
    from volary.studies.flyingtrust.compare import score_differences, score_letters
    from volary.studies.flyingtrust.score import composite_scores

    points = {s.algo: s.final_score_fixed for s in composite_scores(rows)}
    return score_letters(score_differences(draws, points), points)


def table_ii(scores: list, intervals: dict, rows: list, letters: dict | None = None) -> str:
    from volary.studies.flyingtrust.score import PAPER_TABLE_II

    paper = {p.algo: p for p in PAPER_TABLE_II}
    paper_rank = {p.algo: k + 1 for k, p in
                  enumerate(sorted(PAPER_TABLE_II, key=lambda p: -p.final_score))}  # fmt: skip
    ours = sorted(scores, key=lambda s: -s.final_score_fixed)
    our_rank = {s.algo: k + 1 for k, s in enumerate(ours)}
    success = {}
    for r in rows:
        n, k = success.get(r.algo, (0, 0))
        success[r.algo] = (n + 1, k + bool(r.success))
    lines = [
        "| ours | family (paper) | success | Score [95 % CI] | FinalScore, paper's "
        "normalization [95 % CI] | our rank | group | paper Score | paper FinalScore | "
        "paper rank |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in ours:
        fam = FAMILY.get(s.algo)
        iv = intervals.get(s.algo)
        p = paper.get(fam) if fam else None
        n, k = success[s.algo]
        ci = lambda t: f"[{t[0]:.1f}, {t[1]:.1f}]" if t else ""  # noqa: E731
        lines.append(
            f"| `{s.algo}` | {fam or '(none)'} | {100 * k / n:.1f} % of {n} | {s.score:.1f} "
            f"{ci(iv.score if iv else None)} | {s.final_score_fixed:.1f} "
            f"{ci(iv.final_score_fixed if iv else None)} | {our_rank[s.algo]} | "
            f"{(letters or {}).get(s.algo, '')} | {p.score if p else ''} | "
            f"{p.final_score if p else ''} | {paper_rank[fam] if p else ''} |"
        )
    for p in PAPER_TABLE_II:
        if p.algo not in {FAMILY.get(s.algo) for s in ours}:
            lines.append(f"| (not flown) | {p.algo} | | | | | | {p.score} | {p.final_score} | "
                         f"{paper_rank[p.algo]} |")  # fmt: skip
    lines.append("")
    lines.append(
        "group: planners sharing a letter are not separated by FinalScore (paired "
        "bootstrap differences over configurations, Holm over all pairs)."
    )
    return "\n".join(lines) + "\n"


def _key(r) -> tuple:  # noqa: ANN001
    return (r.scenario, r.config, r.trial, r.platform)


def write_partial(rows: list, out: Path) -> None:
    """Per-scenario success (95 % intervals over configurations) and paired sign-flip tests
    on the trials that every planner has flown."""
    from volary.studies.flyingtrust.compare import paired_tests
    from volary.studies.flyingtrust.stats import summarize

    algos = sorted({r.algo for r in rows})
    common = set.intersection(*({_key(r) for r in rows if r.algo == a} for a in algos))
    rows = [r for r in rows if _key(r) in common]
    summary = summarize(rows)
    lines = [f"Trials flown by every planner: {len(common)} per planner "
             "(unit of replication: the configuration).", "",
             "| scenario | configs | " + " | ".join(f"`{a}` success [95 % CI]" for a in algos)
             + " |", "| --- | --- |" + " --- |" * len(algos)]  # fmt: skip
    for scen in summary.scenarios:
        n_cfg = len({r.config for r in rows if r.scenario == scen})
        cells = []
        for algo in algos:
            g = next(g for g in summary.by_scenario if g.algo == algo and g.scenario == scen)
            cells.append(f"{100 * g.success_rate:.1f} % [{100 * g.ci_lo:.1f}, {100 * g.ci_hi:.1f}]")
        lines.append(f"| {scen} | {n_cfg} | " + " | ".join(cells) + " |")
    lines += ["", "| A | B | scenario | configs | differing | rate A | rate B | p (sign flip) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for t in paired_tests(rows):
        lines.append(f"| `{t.algo_a}` | `{t.algo_b}` | {t.scenario or 'all'} | {t.n_configs} | "
                     f"{t.n_differing} | {100 * t.rate_a:.1f} % | {100 * t.rate_b:.1f} % | "
                     f"{t.p_value:.3g} |")  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines) + "\n"
    (out / "partial.md").write_text(text, encoding="utf-8")
    print(text)
    print(f"wrote {out / 'partial.md'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=Path, default=COMMITTED, help="committed trials.csv")
    ap.add_argument("--runs", type=Path, nargs="*", default=[],
                    help="run directories, databases or trials.csv of the new planners "
                    "(none: the report of the committed rows alone)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--title", default="FLYINGTRUST protocol: the planner slate")
    ap.add_argument(
        "--partial",
        action="store_true",
        help="runs still in progress: keep the trials every planner flew, write "
        "per-scenario success and paired tests (partial.md), no Table II",
    )
    a = ap.parse_args()
    from volary.studies.flyingtrust.compare import score_draws, score_intervals
    from volary.studies.flyingtrust.report import make_report
    from volary.studies.flyingtrust.run import load_results
    from volary.studies.flyingtrust.score import composite_scores

    rows = committed_rows(a.rows)
    for run in a.runs:
        if run.suffix == ".csv":  # a trials.csv export
            new = committed_rows(run)
        else:
            new = load_results(run / "run.sqlite" if run.is_dir() else run)
        db = run
        have = {r.key for r in rows}
        dup = [r.key for r in new if r.key in have]
        if dup:
            raise SystemExit(f"{db}: {len(dup)} rows already present, e.g. {dup[0]}")
        rows += new
    if a.partial:
        write_partial(rows, a.out)
        return
    keys = {(r.scenario, r.config, r.trial, r.platform) for r in rows}
    algos = sorted({r.algo for r in rows})
    for algo in algos:
        mine = {(r.scenario, r.config, r.trial, r.platform) for r in rows if r.algo == algo}
        if mine != keys:
            raise SystemExit(f"{algo}: {len(keys - mine)} trials missing; runs must be complete")
    index = make_report(rows, a.out, title=a.title, suite="flyingtrust")
    scores = composite_scores(rows)
    draws = score_draws(rows)
    text = table_ii(scores, score_intervals(draws), rows, final_score_letters(rows, draws))
    (a.out / "table_ii.md").write_text(text, encoding="utf-8")
    print(text)
    print(f"wrote {index} and {a.out / 'table_ii.md'}")


if __name__ == "__main__":
    main()
