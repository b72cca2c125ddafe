"""The navigation benchmark report: one self-contained HTML file, its PNGs and CSV/Parquet exports.

``make_report(results, out_dir)`` writes into ``out_dir``:

- ``index.html``: headline (what was run, composite score beside FLYINGTRUST Table II, findings
  generated from the numbers), then the figures (PNGs embedded as base64 data URIs; plain CSS,
  no JavaScript, nothing fetched) and tables;
- ``figures/*.png``: the same figures as files;
- ``trials.csv`` (every row except the ``track`` JSON), ``summary_by_{algo,scenario,platform,
  cell}.csv``, ``scores.csv``, ``paper_table_ii.csv``; the same as ``.parquet`` (with
  ``track``) when pyarrow is importable.
"""

from __future__ import annotations

import base64
import csv
import html
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from volary.bench.nav import figures
from volary.bench.nav.schema import ROW_FIELDS, TrialResult
from volary.bench.nav.score import (
    PAPER_TABLE_II,
    TABLE_II_SOURCE,
    ScoreRow,
    ScoreWeights,
    composite_scores,
)
from volary.bench.nav.stats import GroupStats, Summary, summarize
from volary.errors import ConfigError

DEFAULT_TITLE = "volary navigation benchmark"


def make_report(
    results: Iterable[TrialResult],
    out_dir: str | Path,
    title: str = DEFAULT_TITLE,
    suite: Any = None,
    weights: ScoreWeights | None = None,
    max_failures: int = 6,
) -> Path:
    """Write the report of ``results`` into ``out_dir`` and return the path of ``index.html``.

    ``suite``: the :class:`~volary.bench.nav.protocol.Suite` (or its name) that was run, shown in
    the headline; ``weights``: composite-score weights (paper defaults); ``max_failures``: how
    many sample failures get a top-down plot.
    """
    rows = _check_rows(results)
    if not isinstance(title, str) or not title.strip():
        raise ConfigError(f"title: expected a non-empty string, got {title!r}")
    if isinstance(max_failures, bool) or not isinstance(max_failures, int) or max_failures < 0:
        raise ConfigError(f"max_failures: expected an int >= 0, got {max_failures!r}")
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"out_dir: cannot create {str(out)!r}: {e}") from e
    summary = summarize(rows)
    scores = composite_scores(rows, weights)
    _remove_old_figures(out / "figures")
    figs = _figures(summary, scores, rows, out / "figures", max_failures)
    files = export_tables(rows, summary, scores, out)
    page = _html(title, rows, summary, scores, figs, files, suite, weights or ScoreWeights())
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index


def _check_rows(results: Iterable[TrialResult]) -> list[TrialResult]:
    if isinstance(results, str | bytes) or not isinstance(results, Iterable):
        raise ConfigError(f"results: expected an iterable of TrialResult, got {results!r}")
    rows = list(results)
    if not rows:
        raise ConfigError(
            "results: expected at least one TrialResult, got none (nothing to report)"
        )
    for r in rows:
        if not isinstance(r, TrialResult):
            raise ConfigError(f"results: expected TrialResult items, got {type(r).__name__}")
    return rows


# ---------------------------------------------------------------------------------- figures


class _Fig:
    def __init__(self, key: str, path: Path, title: str, caption: str) -> None:
        self.key, self.path, self.title, self.caption = key, path, title, caption


def _figures(
    summary: Summary, scores: list[ScoreRow], rows: list[TrialResult], d: Path, n_fail: int
) -> list[_Fig]:
    f = figures
    out = [
        _Fig("scores", f.composite_bars(scores, PAPER_TABLE_II, d / "composite_scores.png"),
             "Composite score", "FinalScore (eq. 18) of this run beside FLYINGTRUST Table II."),
        _Fig("scenario", f.success_by_scenario(summary, d / "success_by_scenario.png"),
             "Success by scenario type (cf. FLYINGTRUST Fig. 8)",
             "Mean success over all platforms and trials of each scenario type; error bars are "
             "95 % percentile bootstrap intervals (B = 1000)."),
        _Fig("indicators", f.success_vs_indicators(summary, d / "success_vs_indicators.png"),
             "Success vs kinodynamic indicators (cf. Fig. 9)",
             "Each marker is one platform's success averaged over all its trials; ρ is "
             "Spearman's rank correlation of success with the indicator."),
        _Fig("grid", f.platform_grid(summary, d / "platform_grid.png"),
             "Success per platform (cf. Fig. 10)",
             "Panels arranged by TWR_max (left to right) and alpha_xy_max (bottom to top) "
             "within each column; bars show each algorithm's success with 95 % CI."),
    ]  # fmt: skip
    for a in summary.algos:
        out.append(
            _Fig(
                f"heat-{a}",
                f.heatmap(summary, a, d / f"heatmap_{_safe(a)}.png"),
                f"{a}: platform x scenario success (cf. Figs. 11-15)",
                "Success rate in % per platform (rows, Table I order) and scenario type; "
                "grey: not run.",
            )  # fmt: skip
        )
    out.append(
        _Fig(
            "causes",
            f.failure_causes(summary, d / "failure_causes.png"),
            "Failure causes",
            "Share of trials ending in each outcome, per algorithm and scenario type.",
        )  # fmt: skip
    )
    colors = f.algo_colors(summary.algos)
    for i, r in enumerate(sample_failures(rows, n_fail)):
        p = f.failure_plot(r, d / f"failure_{i:02d}.png", colors[r.algo])
        out.append(_Fig(f"fail-{i}", p, f"Failure {i + 1}: {r.algo}, {r.scenario}", ""))
    return out


_OWN_FIGURES = (
    "composite_scores.png",
    "success_by_scenario.png",
    "success_vs_indicators.png",
    "platform_grid.png",
    "failure_causes.png",
    "heatmap_*.png",
    "failure_[0-9][0-9].png",
)


def _remove_old_figures(d: Path) -> None:
    """Delete the PNGs an earlier report wrote here (other files are left alone), so the folder
    matches the page after a rewrite with fewer algorithms or failures."""
    for pattern in _OWN_FIGURES:
        for p in d.glob(pattern):
            p.unlink()


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def sample_failures(rows: Sequence[TrialResult], n: int) -> list[TrialResult]:
    """Up to ``n`` failed trials, spread over (algo, cause, scenario) groups round-robin, trials
    with a recorded track first, deterministic for a given set of rows."""
    groups: dict[tuple[str, str, str], list[TrialResult]] = {}
    for r in sorted(rows, key=lambda r: (not r.track, r.key)):
        if not r.success:
            groups.setdefault((r.algo, r.cause, r.scenario), []).append(r)
    keys = sorted(groups)
    picked: list[TrialResult] = []
    depth = 0
    while len(picked) < n and any(len(groups[k]) > depth for k in keys):
        picked += [groups[k][depth] for k in keys if len(groups[k]) > depth][: n - len(picked)]
        depth += 1
    return picked


# ---------------------------------------------------------------------------------- exports


def export_tables(
    rows: list[TrialResult], summary: Summary, scores: list[ScoreRow], out: Path
) -> list[Path]:
    """CSV (and Parquet when pyarrow is importable) of the trials, summaries and scores."""
    trial_fields = [f for f in ROW_FIELDS if f != "track"]
    tables: dict[str, list[dict[str, Any]]] = {
        "trials": [{k: getattr(r, k) for k in trial_fields} for r in rows],
        **{k: [g.to_row() for g in t] for k, t in _summary_tables(summary).items()},
        "scores": [_score_row(s) for s in scores],
        "paper_table_ii": [
            {**asdict(p), "missing": ";".join(p.missing), "source": TABLE_II_SOURCE}
            for p in PAPER_TABLE_II
        ],
    }
    written = [_write_csv(out / f"{name}.csv", t) for name, t in tables.items()]
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return written
    tables["trials"] = [r.to_row() for r in rows]
    return written + [_write_parquet(out / f"{name}.parquet", t) for name, t in tables.items()]


def _summary_tables(summary: Summary) -> dict[str, list[GroupStats]]:
    return {f"summary_{k}": v for k, v in summary.tables().items()}


def _score_row(s: ScoreRow) -> dict[str, Any]:
    d = asdict(s)
    d["missing_scenarios"] = ";".join(s.missing_scenarios)
    return d


def _columns(table: list[dict[str, Any]]) -> list[str]:
    cols: dict[str, None] = {}
    for row in table:
        cols.update(dict.fromkeys(row))
    return list(cols)


def _write_csv(path: Path, table: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=_columns(table), restval="")
        w.writeheader()
        w.writerows(table)
    return path


def _write_parquet(path: Path, table: list[dict[str, Any]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = _columns(table)
    data = {c: [row.get(c) for row in table] for c in cols}
    pq.write_table(pa.table(data) if cols else pa.table({}), path)
    return path


# ------------------------------------------------------------------------------------ HTML

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#222;
background:#fafafa;line-height:1.45}
main{max-width:1180px;margin:0 auto;padding:1.5rem 2rem 4rem}
h1{margin:.2rem 0 .3rem}h2{margin-top:2.2rem;border-bottom:2px solid #ddd;padding-bottom:.2rem}
.meta{color:#555;font-size:.92rem}.box{background:#fff;border:1px solid #ddd;border-radius:6px;
padding:1rem 1.3rem;margin:1rem 0}
table{border-collapse:collapse;font-size:.86rem;margin:.6rem 0;background:#fff}
th,td{border:1px solid #ddd;padding:.25rem .55rem;text-align:right;white-space:nowrap}
th{background:#f0f0f0}td.l,th.l{text-align:left}
.pair{display:flex;gap:2rem;flex-wrap:wrap;align-items:flex-start}
figure{margin:1.2rem 0;background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:.8rem}
figure img{max-width:100%;height:auto}figcaption{color:#555;font-size:.88rem;margin-top:.4rem}
.swatch{display:inline-block;width:.8em;height:.8em;border-radius:2px;margin-right:.35em}
.fails{display:grid;grid-template-columns:repeat(auto-fill,minmax(480px,1fr));gap:.8rem}
.warn{color:#9a3412}details{margin:.6rem 0}summary{cursor:pointer;color:#1f4e8c}
.scroll{overflow-x:auto}
"""


def _fmt(v: Any, digits: int = 2, scale: float = 1.0) -> str:
    try:
        x = float(v) * scale
    except (TypeError, ValueError):
        return html.escape(str(v))
    return "–" if math.isnan(x) else f"{x:.{digits}f}"


def _pct_ci(g: GroupStats | None) -> str:
    if g is None or math.isnan(g.success_rate):
        return "–"
    return f"{100 * g.success_rate:.1f} <small>[{100 * g.ci_lo:.1f}, {100 * g.ci_hi:.1f}]</small>"


def _table(head: Sequence[str], body: Iterable[Sequence[str]], left: int = 1) -> str:
    def cells(tag: str, row: Sequence[str]) -> str:
        return "".join(
            f"<{tag}{' class=l' if i < left else ''}>{c}</{tag}>" for i, c in enumerate(row)
        )

    rows = "".join(f"<tr>{cells('td', r)}</tr>" for r in body)
    return f"<div class=scroll><table><tr>{cells('th', head)}</tr>{rows}</table></div>"


def _img(fig: Any) -> str:
    data = base64.b64encode(fig.path.read_bytes()).decode("ascii")
    cap = f"<figcaption>{html.escape(fig.caption)}</figcaption>" if fig.caption else ""
    alt = html.escape(fig.title)
    return (
        f"<figure id='{fig.key}'><img alt='{alt}' src='data:image/png;base64,{data}'>{cap}</figure>"
    )


def _e(s: Any) -> str:
    return html.escape(str(s))


def _headline(rows: list[TrialResult], summary: Summary, suite: Any) -> str:
    from volary import __version__

    seeds = sorted({r.seed for r in rows})
    suite_name = getattr(suite, "name", suite) or "(not given)"
    sim = sum(r.sim_time for r in rows if not math.isnan(r.sim_time))
    wall = sum(r.wall_time for r in rows if not math.isnan(r.wall_time))
    per_algo = ", ".join(f"{g.algo}: {g.n}" for g in summary.by_algo)
    items = [
        ("Suite", _e(suite_name)),
        ("Algorithms", _e(", ".join(summary.algos))),
        ("Trials", f"{summary.n_trials} ({_e(per_algo)})"),
        ("Platforms", f"{len(summary.platforms)}"),
        ("Scenario types", _e(", ".join(summary.scenarios))),
        ("Configurations", _e(_ranges(sorted({r.config for r in rows})))),
        ("Seed(s)", _e(", ".join(map(str, seeds)))),
        ("Simulated / trial wall time", f"{sim / 3600:.2f} h / {wall / 3600:.2f} h"),
        ("volary", _e(__version__)),
        ("Report written", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
    ]
    return _table(("", ""), [(f"<b>{k}</b>", v) for k, v in items], left=2)


def _ranges(xs: list[int]) -> str:
    if not xs:
        return "–"
    return (
        f"{xs[0]}-{xs[-1]}"
        if xs == list(range(xs[0], xs[-1] + 1)) and len(xs) > 1
        else (", ".join(map(str, xs)))
    )


def findings(summary: Summary, scores: list[ScoreRow], rows: Sequence[TrialResult]) -> list[str]:
    """A few sentences generated from the numbers (plain text)."""
    out = []
    best = scores[0]
    if len(scores) > 1:
        out.append(
            f"Best algorithm by FinalScore: {best.algo} ({best.final_score:.1f}; Score "
            f"{best.score:.1f}), ahead of {scores[1].algo} ({scores[1].final_score:.1f})."
        )
    else:
        out.append(
            f"One algorithm, {best.algo}: Score {best.score:.1f}, FinalScore "
            f"{best.final_score:.1f} (Var_norm is relative to itself, so any spread costs the "
            f"full penalty beta)."
        )
    for g in summary.by_algo:
        top = max((c for c in g.causes if c != "success"), key=lambda c: g.causes[c])
        fail = g.n - g.successes
        tail = f"; most failures: {top} ({g.causes[top]} of {fail})" if fail else ""
        out.append(
            f"{g.algo} succeeded in {g.successes} of {g.n} trials ({100 * g.success_rate:.1f} %, "
            f"95 % CI {100 * g.ci_lo:.1f}-{100 * g.ci_hi:.1f} %){tail}."
        )
    scen = _scenario_means(summary)
    if len(scen) > 1 and min(scen.values()) < max(scen.values()):
        lo, hi = min(scen.values()), max(scen.values())
        hard = [s for s, v in scen.items() if v == lo]
        easy = [s for s, v in scen.items() if v == hi]
        out.append(
            f"Hardest scenario type{'s' if len(hard) > 1 else ''}: {', '.join(hard)} (mean "
            f"success over algorithms {100 * lo:.1f} %); easiest: {', '.join(easy)} "
            f"({100 * hi:.1f} %)."
        )
    out += _indicator_sentences(summary)
    missing = [f"{s.algo}: {', '.join(s.missing_scenarios)}" for s in scores if s.missing_scenarios]
    if missing:
        out.append(
            "Scenario types missing (scores renormalized, eq. 19; not directly comparable): "
            + "; ".join(missing) + "."
        )  # fmt: skip
    errors = sum(r.cause == "error" for r in rows)
    if errors:
        out.append(
            f"{errors} trial(s) ended with a planner error (raised, hung or non-finite); "
            "their tracebacks are in the 'error' column of trials.csv."
        )
    return out


def _scenario_means(summary: Summary) -> dict[str, float]:
    out = {}
    for s in summary.scenarios:
        v = [g.success_rate for g in summary.by_scenario if g.scenario == s]
        if v:
            out[s] = sum(v) / len(v)
    return out


def _indicator_sentences(summary: Summary) -> list[str]:
    out = []
    for a in summary.algos:
        gs = [g for g in summary.by_platform if g.algo == a and g.platform_info is not None]
        if len(gs) < 3:
            continue
        import numpy as np

        y = np.array([g.success_rate for g in gs])
        parts = []
        for attr, name in (("twr_max", "TWR_max"), ("alpha_xy_max", "alpha_xy_max")):
            x = np.array([getattr(g.platform_info, attr) for g in gs], dtype=float)
            rho = figures._spearman(x, y)
            if not math.isnan(rho):
                parts.append(f"{name} ρ = {rho:+.2f}")
        if parts:
            out.append(
                f"{a}: rank correlation of per-platform success with " + ", ".join(parts) + "."
            )
    return out


def _score_tables(scores: list[ScoreRow], weights: ScoreWeights) -> str:
    colors = figures.algo_colors([s.algo for s in scores])
    ours = _table(
        ("Algorithm", "Score", "Variance", "Var_norm", "FinalScore", "Missing", "Trials"),
        [
            (
                f"<span class=swatch style='background:{colors[s.algo]}'></span>{_e(s.algo)}",
                _fmt(s.score),
                _fmt(s.var, 3),
                _fmt(s.var_norm, 3),
                f"<b>{_fmt(s.final_score)}</b>",
                _e(", ".join(s.missing_scenarios) or "–"),
                str(s.n_trials),
            )
            for s in scores
        ],
    )
    paper = _table(
        ("Algorithm", "Score", "Variance", "FinalScore", "Missing"),
        [
            (
                _e(p.algo),
                _fmt(p.score),
                _fmt(p.variance, 3),
                _fmt(p.final_score),
                _e(", ".join(p.missing) or "–"),
            )
            for p in PAPER_TABLE_II
        ],  # fmt: skip
    )
    w = weights
    note = (
        f"Weights: classic scenarios {w.classic}, theoretical {w.theoretical}; real platforms "
        f"{w.real}, virtual {w.virtual}, other {w.other}; beta = {w.beta}. Score and FinalScore "
        "in % (eq. 15, 18); Variance of the 0-1 success rates (eq. 16)."
    )
    return (
        "<div class=pair><div><h3>This run</h3>" + ours + "</div><div><h3>FLYINGTRUST Table II"
        f"</h3>{paper}<div class=meta>{_e(TABLE_II_SOURCE)}; Gazebo/ROS planners, 36 platforms "
        "x 7 types x 10 trials.</div></div></div>"
        f"<p class=meta>{_e(note)}</p>"
    )


_METRIC_HEAD = (
    "n",
    "success % [95 % CI]",
    "time to goal [s]",
    "path [m]",
    "mean speed [m/s]",
    "max speed [m/s]",
    "collisions / 100 m",
    "tracking err. [m]",
    "proximity [%]",
    "final dist. [m]",
)


def _metric_cells(g: GroupStats) -> list[str]:
    return [
        str(g.n),
        _pct_ci(g),
        _fmt(g.time_to_goal, 1),
        _fmt(g.path_length, 1),
        _fmt(g.mean_speed),
        _fmt(g.max_speed),
        _fmt(g.collisions_per_m, 2, 100.0),
        _fmt(g.tracking_error),
        _fmt(g.proximity, 1),
        _fmt(g.final_distance, 1),
    ]


def _metrics_table(groups: list[GroupStats], key: str) -> str:
    body = []
    for g in groups:
        name = getattr(g, key) or "all"
        body.append([_e(g.algo), _e(figures.scenario_label(name) if key == "scenario" else name),
                     *_metric_cells(g)])  # fmt: skip
    return _table(("Algorithm", key.capitalize(), *_METRIC_HEAD), body, left=2)


def _platform_table(summary: Summary) -> str:
    body = []
    for g in summary.by_platform:
        p = g.platform_info
        if p is None:
            continue
        body.append(
            [
                _e(g.algo),
                _e(g.platform),
                _e(p.category),
                _fmt(p.twr_max, 1),
                _fmt(p.alpha_xy_max, 1),
                _fmt(p.alpha_z_max, 1),
                str(g.n),
                _pct_ci(g),
                _fmt(g.time_to_goal, 1),
                _fmt(g.tracking_error),
            ]  # fmt: skip
        )
    head = ("Algorithm", "Platform", "Category", "TWR_max", "α_xy,max [rad/s²]", "α_z,max [rad/s²]",
            "n", "success % [95 % CI]", "time to goal [s]", "tracking err. [m]")  # fmt: skip
    return _table(head, body, left=3)


def _cause_table(summary: Summary) -> str:
    causes = figures._present_causes(summary)
    body = [[_e(g.algo), *(str(g.causes.get(c, 0)) for c in causes), str(g.n)]
            for g in summary.by_algo]  # fmt: skip
    return _table(("Algorithm", *causes, "total"), body)


def _html(
    title: str,
    rows: list[TrialResult],
    summary: Summary,
    scores: list[ScoreRow],
    figs: list[_Fig],
    files: list[Path],
    suite: Any,
    weights: ScoreWeights,
) -> str:
    fig = {f.key: f for f in figs}
    fails = [f for f in figs if f.key.startswith("fail-")]
    heat = [f for f in figs if f.key.startswith("heat-")]
    facts = "".join(f"<li>{_e(s)}</li>" for s in findings(summary, scores, rows))
    parts = [
        f"<h1>{_e(title)}</h1><p class=meta>FLYINGTRUST navigation protocol flown in volary's "
        "simulator: success, failure causes, SOUS VIDE flight metrics, 95 % bootstrap "
        "confidence intervals and the composite score of FLYINGTRUST eq. 12-19.</p>",
        "<h2>Headline</h2><div class=pair><div>" + _headline(rows, summary, suite) + "</div>"
        "<div class=box style='flex:1;min-width:320px'><b>Findings</b>"
        f"<ul>{facts}</ul></div></div>",
        "<h2>Composite score (FLYINGTRUST Table II)</h2>" + _score_tables(scores, weights),
        _img(fig["scores"]),
        "<h2>Success by scenario type</h2>" + _img(fig["scenario"]),
        _metrics_table(summary.by_scenario, "scenario"),
        "<h3>All scenarios</h3>" + _metrics_table(summary.by_algo, "scenario"),
        "<h2>Success and platform capability</h2>" + _img(fig["indicators"]) + _img(fig["grid"]),
        "<details><summary>Per-platform table</summary>" + _platform_table(summary) + "</details>",
        "<h2>Platform x scenario heatmaps</h2>" + "".join(_img(f) for f in heat),
        "<h2>Failure causes</h2>" + _img(fig["causes"]) + _cause_table(summary),
        "<h2>Sample failures</h2>"
        + (
            "<div class=fails>" + "".join(_img(f) for f in fails) + "</div>"
            if fails
            else "<p>No failed trial.</p>"
        ),
        _methods(files),
    ]
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width,initial-scale=1'>"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>"
        + "\n".join(parts)
        + "</main></body></html>"
    )


def _methods(files: list[Path]) -> str:
    items = [
        "Success: within the goal radius and stable there before the time limit (FLYINGTRUST "
        "Sec. IV-B); failure causes: collision, timeout, outside_goal, no_plan, error.",
        "Confidence intervals: percentile bootstrap, B = 1000 resamples of the trials of each "
        "group, seeded per group (Efron and Tibshirani). With few trials per group (e.g. the 10 "
        "of one platform x scenario cell) and rates near 0 or 1 they are too narrow.",
        "Time to goal: mean over successful trials. Path length, speeds, tracking error (mean "
        "distance to the start-goal reference) and proximity percentile (share of samples within "
        "0.3 m of it; SOUS VIDE Sec. VI): means over the trials where they are defined. "
        "Collisions per 100 m: total collisions / total path length of the group.",
        "Composite score: FLYINGTRUST eq. 12-19 (see bench/nav/REPORT.md for conventions).",
    ]
    lis = "".join(f"<li>{_e(i)}</li>" for i in items)
    fl = ", ".join(_e(p.name) for p in files)
    return (
        f"<h2>Methods</h2><ul>{lis}</ul>"
        f"<p class=meta>Exports beside this file: {fl}; PNGs in figures/.</p>"
    )
