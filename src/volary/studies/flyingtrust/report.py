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
import itertools
import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from volary.bench.stats import holm_by_family
from volary.errors import ConfigError
from volary.studies.flyingtrust import figures
from volary.studies.flyingtrust.compare import (
    Correlation,
    PairedTest,
    PartialCorrelation,
    ScoreDifference,
    ScoreInterval,
    compact_letters,
    indicator_correlations,
    paired_tests,
    partial_correlations,
    score_differences,
    score_draws,
    score_intervals,
    score_letters,
)
from volary.studies.flyingtrust.power import PowerRow, detectable_difference, power_table
from volary.studies.flyingtrust.schema import ROW_FIELDS, TrialResult
from volary.studies.flyingtrust.score import (
    PAPER_MAX_VARIANCE,
    PAPER_TABLE_II,
    TABLE_II_SOURCE,
    ScoreRow,
    ScoreWeights,
    composite_scores,
)
from volary.studies.flyingtrust.stats import GroupStats, Summary, summarize

DEFAULT_TITLE = "volary navigation benchmark"
INTERVALS_SENTENCE = (
    "Intervals are 95 % and treat the configuration (one scene of a scenario type, flown by "
    "every platform) as the unit of replication: configurations are resampled within their "
    "type, then trials within them, so they say how much a rate could change with other scenes "
    "of the same generators; success rates are widened to at least a Wilson interval over the "
    "configurations, so 0 % and 100 % get one too."
)


class Inference:
    """What the report infers beyond the point values, computed once per report: composite-
    score intervals and paired FinalScore differences, paired success tests, the compact
    letter displays of both rankings, indicator correlations raw and with mass and size held
    fixed (:mod:`volary.studies.flyingtrust.compare`), and what the design can detect
    (:mod:`volary.studies.flyingtrust.power`)."""

    def __init__(self, rows: list[TrialResult], summary: Summary, weights: ScoreWeights) -> None:
        draws = score_draws(rows, weights)
        points = {s.algo: s.final_score_fixed for s in composite_scores(rows, weights)}
        self.intervals: dict[str, ScoreInterval] = score_intervals(draws)
        self.differences: list[ScoreDifference] = score_differences(draws, points)
        self.tests: list[PairedTest] = paired_tests(rows)
        self.correlations: list[Correlation] = indicator_correlations(summary)
        self.partials: list[PartialCorrelation] = partial_correlations(summary)
        self.power: list[PowerRow] = power_table(rows)
        self.letters_score = score_letters(self.differences, points)
        pooled = [t for t in self.tests if not t.scenario]
        rates = {g.algo: g.success_rate for g in summary.by_algo}
        held = dict(zip(map(id, self.tests), paired_holm(self.tests), strict=True))
        self.letters_success = compact_letters(rates, _separated(
            [(t.algo_a, t.algo_b) for t in pooled], [held[id(t)] for t in pooled]
        ))  # fmt: skip


def _separated(pairs: list[tuple[str, str]], adjusted: Sequence[float]) -> list[tuple[str, str]]:
    """The pairs whose adjusted p-value is below 0.05."""
    return [pr for pr, p in zip(pairs, adjusted, strict=True) if p < 0.05]


def make_report(
    results: Iterable[TrialResult],
    out_dir: str | Path,
    title: str = DEFAULT_TITLE,
    suite: Any = None,
    weights: ScoreWeights | None = None,
    max_failures: int = 6,
    run: str | Path | None = None,
    hosts: Sequence[Mapping[str, Any]] = (),
) -> Path:
    """Write the report of ``results`` into ``out_dir`` and return the path of ``index.html``.

    ``suite``: the :class:`~volary.studies.flyingtrust.protocol.Suite` (or its name) that was run,
    shown in the headline; ``weights``: composite-score weights (paper defaults);
    ``max_failures``: how many sample failures get a top-down plot; ``run``: the run directory,
    named in each sample failure's ``volary view`` command (default ``RUN_DIR``); ``hosts``: the
    machines that flew the rows (``RunDB.hosts()``), shown in the headline.
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
    weights = weights or ScoreWeights()
    scores = composite_scores(rows, weights)
    inf = Inference(rows, summary, weights)
    _remove_old_figures(out / "figures")
    figs = _figures(summary, scores, rows, out / "figures", max_failures, inf, run)
    files = export_tables(rows, summary, scores, out, inf)
    page = _html(title, rows, summary, scores, figs, files, suite, weights, inf, hosts)
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
    summary: Summary,
    scores: list[ScoreRow],
    rows: list[TrialResult],
    d: Path,
    n_fail: int,
    inf: Inference,
    run: str | Path | None = None,
) -> list[_Fig]:
    f = figures
    bars = f.composite_bars(scores, PAPER_TABLE_II, d / "composite_scores.png", inf.intervals)
    out = [
        _Fig("scores", bars, "Composite score",
             "FinalScore (eq. 18) of this run beside FLYINGTRUST Table II, both with Var_norm = "
             f"Var / {PAPER_MAX_VARIANCE} (the paper's largest variance); error bars: 95 % "
             "bootstrap over configurations."),
        _Fig("scenario", f.success_by_scenario(summary, d / "success_by_scenario.png"),
             "Success by scenario type (cf. FLYINGTRUST Fig. 8)",
             "Mean success over all platforms and trials of each scenario type; error bars: 95 % "
             "intervals with the configuration as the unit (B = 1000, Wilson floor)."),
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
        cap = f"In 3-D: {view_command(r.key, run)}" if r.track else ""
        out.append(_Fig(f"fail-{i}", p, f"Failure {i + 1}: {r.algo}, {r.scenario}", cap))
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


def view_command(key: str, run: str | Path | None) -> str:
    """The shell command that opens trial ``key`` of ``run`` in the browser viewer."""
    import shlex

    return f"volary view {shlex.quote(str(run)) if run else 'RUN_DIR'} --trial {shlex.quote(key)}"


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
    rows: list[TrialResult],
    summary: Summary,
    scores: list[ScoreRow],
    out: Path,
    inf: Inference | None = None,
) -> list[Path]:
    """CSV (and Parquet when pyarrow is importable) of the trials, summaries, scores (with their
    intervals), paired tests and indicator correlations."""
    trial_fields = [f for f in ROW_FIELDS if f != "track"]
    if inf is None:
        inf = Inference(rows, summary, ScoreWeights())
    tables: dict[str, list[dict[str, Any]]] = {
        "trials": [{k: getattr(r, k) for k in trial_fields} for r in rows],
        **{k: [g.to_row() for g in t] for k, t in _summary_tables(summary).items()},
        "scores": [
            {
                **_score_row(s, inf.intervals.get(s.algo)),
                "letters_final_score": inf.letters_score.get(s.algo, ""),
                "letters_success": inf.letters_success.get(s.algo, ""),
            }
            for s in scores
        ],
        "score_differences": _ci_rows(inf.differences, difference_holm(inf.differences)),
        "partial_correlations": _ci_rows(inf.partials, correlation_holm(inf.partials)),
        "power": [asdict(r) for r in inf.power],
        "paired_tests": [
            {**asdict(t), "p_holm": float(h), "holm_family": fam}
            for t, h, fam in zip(
                inf.tests, paired_holm(inf.tests), paired_families(inf.tests), strict=True
            )
        ],
        "correlations": _ci_rows(inf.correlations, correlation_holm(inf.correlations)),
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


def _ci_rows(items: Sequence[Any], adjusted: Sequence[float]) -> list[dict[str, Any]]:
    """Export rows of dataclasses with a ``ci`` pair: its bounds as ci_lo/ci_hi, and the
    Holm-adjusted p-value."""
    return [
        {**{k: v for k, v in asdict(x).items() if k != "ci"}, "ci_lo": x.ci[0], "ci_hi": x.ci[1],
         "p_holm": float(h)}
        for x, h in zip(items, adjusted, strict=True)
    ]  # fmt: skip


def _summary_tables(summary: Summary) -> dict[str, list[GroupStats]]:
    return {f"summary_{k}": v for k, v in summary.tables().items()}


def _score_row(s: ScoreRow, iv: ScoreInterval | None) -> dict[str, Any]:
    d = asdict(s)
    d["missing_scenarios"] = ";".join(s.missing_scenarios)
    if iv is not None:
        for k in ("score", "var", "final_score", "final_score_fixed"):
            d[f"{k}_lo"], d[f"{k}_hi"] = getattr(iv, k)
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


def _headline(
    rows: list[TrialResult], summary: Summary, suite: Any, hosts: Sequence[Mapping[str, Any]] = ()
) -> str:
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
        ("Flown on", _e(_hosts_text(hosts))),
        ("Report written", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
    ]
    return _table(("", ""), [(f"<b>{k}</b>", v) for k, v in items], left=2)


def _hosts_text(hosts: Sequence[Mapping[str, Any]]) -> str:
    """Each machine once, with its sittings' start times; "not recorded" for rows from a
    list or a database older than the record."""
    seen: dict[str, list[str]] = {}
    for h in hosts:
        key = f"{h.get('cpu', '?')} ({h.get('cores', '?')} cores, {h.get('workers', '?')})"
        seen.setdefault(key, []).append(str(h.get("started", "?")))
    return "; ".join(f"{k}: {', '.join(v)}" for k, v in seen.items()) or "not recorded"


def _ranges(xs: list[int]) -> str:
    if not xs:
        return "–"
    return (
        f"{xs[0]}-{xs[-1]}"
        if xs == list(range(xs[0], xs[-1] + 1)) and len(xs) > 1
        else (", ".join(map(str, xs)))
    )


def findings(
    summary: Summary,
    scores: list[ScoreRow],
    rows: Sequence[TrialResult],
    inf: Inference | None = None,
) -> list[str]:
    """A few sentences generated from the numbers (plain text); every "A beats B" comes from a
    paired test over configurations (:func:`~volary.studies.flyingtrust.compare.paired_tests`)."""
    rows = list(rows)
    if inf is None:
        inf = Inference(rows, summary, ScoreWeights())
    out = []
    best = scores[0]
    if len(scores) > 1:
        fixed = sorted(scores, key=lambda s: -s.final_score_fixed)
        out.append(
            f"Highest FinalScore: {fixed[0].algo} ({_score_ci(fixed[0], inf, 'final_score_fixed')}"
            f" with the paper's normalization Var / {PAPER_MAX_VARIANCE}; "
            f"{_score_ci(fixed[0], inf, 'final_score')} relative to this run), then "
            f"{fixed[1].algo} ({_score_ci(fixed[1], inf, 'final_score_fixed')})."
        )
        order = [x.algo for x in fixed]
        out.append(
            "FinalScore ranking, ties where the paired bootstrap difference does not separate "
            f"neighbours after Holm's adjustment: {ranking_sentence(order, inf.letters_score)}; "
            "by success (paired sign-flip tests, Holm): "
            + ranking_sentence(
                sorted(inf.letters_success, key=lambda a: -_rate(summary, a)), inf.letters_success
            )
            + "."
        )
    else:
        out.append(
            f"One algorithm, {best.algo}: Score {_score_ci(best, inf, 'score')}, FinalScore "
            f"{_score_ci(best, inf, 'final_score_fixed')} with the paper's normalization "
            f"(Var / {PAPER_MAX_VARIANCE}; relative to itself eq. 17 would cost the full beta)."
        )
    for g in summary.by_algo:
        top = max((c for c in g.causes if c != "success"), key=lambda c: g.causes[c])
        fail = g.n - g.successes
        tail = f"; most failures: {top} ({g.causes[top]} of {fail})" if fail else ""
        out.append(
            f"{g.algo} succeeded in {g.successes} of {g.n} trials ({100 * g.success_rate:.1f} %, "
            f"95 % CI {100 * g.ci_lo:.1f}-{100 * g.ci_hi:.1f} %){tail}."
        )
    out += _comparison_sentences(inf.tests)
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
    out += _indicator_sentences(inf.correlations)
    out += _partial_sentences(inf.partials)
    out += _power_sentences(inf.power)
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


def _score_ci(s: ScoreRow, inf: Inference, key: str) -> str:
    v = getattr(s, key)
    iv = getattr(inf.intervals.get(s.algo), key, None)
    return f"{v:.1f}" if iv is None else f"{v:.1f} [{iv[0]:.1f}, {iv[1]:.1f}]"


def _p(p: float) -> str:
    """A p-value as printed; "n/a" where there is none (NaN: e.g. a constant success rate)."""
    if math.isnan(p):
        return "n/a"
    return f"p = {p:.2g}" if p >= 1e-3 else "p < 0.001"


def _comparison_sentences(tests: list[PairedTest]) -> list[str]:
    """Per pair: the pooled test, then which types differ and which do not, each judged on its
    Holm-adjusted p-value (:func:`paired_holm`: the pooled tests one family, each pair's types
    another) at 0.05, the raw p-value beside it."""
    out = []
    adjusted = dict(zip(map(id, tests), paired_holm(tests), strict=True))

    def p_both(t: PairedTest) -> str:
        return f"{_p(t.p_value)}, Holm-adjusted {_p(adjusted[id(t)])}"

    pairs = sorted({(t.algo_a, t.algo_b) for t in tests})
    for a, b in pairs:
        mine = [t for t in tests if (t.algo_a, t.algo_b) == (a, b)]
        pooled = next((t for t in mine if not t.scenario), None)
        if pooled is None:
            continue
        hi, lo = (a, b) if pooled.diff >= 0 else (b, a)
        verdict = (
            "succeeds more often than"
            if adjusted[id(pooled)] < 0.05
            else "is not distinguishable from"
        )
        text = (
            f"{hi} {verdict} {lo} over all types ({100 * abs(pooled.diff):.1f} points, paired "
            f"sign-flip test over {pooled.n_configs} configurations, {p_both(pooled)})"
        )
        per = [t for t in mine if t.scenario]
        sig = [t.scenario for t in per if adjusted[id(t)] < 0.05]
        not_sig = [f"{t.scenario} ({p_both(t)})" for t in per if adjusted[id(t)] >= 0.05 or
                   math.isnan(adjusted[id(t)])]  # fmt: skip
        if per:
            text += (
                f"; per type, significant after Holm's adjustment at 0.05 in {len(sig)} of "
                f"{len(per)}"
                + (f" ({', '.join(sig)})" if sig else "")
                + (f", not in {', '.join(not_sig)}" if not_sig else "")
            )
        out.append(text + ".")
    return out


def _scenario_means(summary: Summary) -> dict[str, float]:
    out = {}
    for s in summary.scenarios:
        v = [g.success_rate for g in summary.by_scenario if g.scenario == s]
        if v:
            out[s] = sum(v) / len(v)
    return out


def _indicator_sentences(corrs: list[Correlation]) -> list[str]:
    out = []
    for a in sorted({c.algo for c in corrs}):
        parts = [
            f"{c.indicator} ρ = {c.rho:+.2f} [{c.ci[0]:+.2f}, {c.ci[1]:+.2f}], {_p(c.p_value)}"
            for c in corrs
            if c.algo == a and c.platforms == "all" and not math.isnan(c.rho)
        ]
        real = [
            f"{c.indicator} {c.rho:+.2f} ({_p(c.p_value)})"
            for c in corrs
            if c.algo == a and c.platforms == "real" and not math.isnan(c.rho)
        ]
        if parts:
            n = next(c.n for c in corrs if c.algo == a and c.platforms == "all")
            out.append(
                f"{a}: Spearman correlation of per-platform success with the indicators over "
                f"{n} platforms (permutation test): " + "; ".join(parts)
                + (f"; among the real platforms alone: {', '.join(real)}" if real else "") + "."
            )  # fmt: skip
    return out


def _rate(summary: Summary, algo: str) -> float:
    return next(g.success_rate for g in summary.by_algo if g.algo == algo)


def _partial_sentences(parts: list[PartialCorrelation]) -> list[str]:
    """Per algorithm: which indicator correlations remain with mass and size held fixed
    (Holm-adjusted p < 0.05 within the algorithm's family)."""
    if not parts:
        return []
    held = dict(zip(map(id, parts), correlation_holm(parts), strict=True))
    full = max(c.controls for c in parts)  # "mass+size" when present
    remain, gone = [], []
    for a in sorted({c.algo for c in parts}):
        mine = [c for c in parts if c.algo == a and c.controls == full]
        kept = [f"{c.indicator} {c.rho:+.2f} (Holm {_p(held[id(c)])})" for c in mine
                if held[id(c)] < 0.05]  # fmt: skip
        (remain if kept else gone).append(f"{a}: {', '.join(kept)}" if kept else a)
    text = f"With {full.replace('+', ' and ')} held fixed (Spearman partial correlations), "
    text += (
        ("indicator effects remain for " + "; ".join(remain))
        if remain
        else ("no indicator effect remains for any algorithm")
    )
    if remain and gone:
        text += f"; none remains for {', '.join(gone)}"
    return [text + "."]


def _power_sentences(rows: list[PowerRow]) -> list[str]:
    """How large a per-type difference the flown configurations can show (80 % power, Holm's
    first step over the types) for the median pair."""
    if not rows:
        return []
    n = min(r.n_configs for r in rows)
    strict = min(r.alpha for r in rows)
    sel = [r for r in rows if r.n_configs == n and r.alpha == strict]
    parts = [
        f"{figures.scenario_label(r.scenario)} {100 * r.detectable:.0f}" if math.isfinite(
            r.detectable) else f"{figures.scenario_label(r.scenario)} none" for r in sel
    ]  # fmt: skip
    return [
        f"With {n} configurations a type, a per-type difference is found with 80 % power "
        f"(α = {strict:.3g}, Holm's first step over the types) only from about (points, median "
        "pair): " + ", ".join(parts) + "; smaller per-type differences need more "
        "configurations (volary bench run --configs N)."
    ]


def _ci_cell(v: float, iv: tuple[float, float] | None, digits: int = 1) -> str:
    if iv is None:
        return _fmt(v, digits)
    return f"{_fmt(v, digits)} <small>[{_fmt(iv[0], digits)}, {_fmt(iv[1], digits)}]</small>"


def _score_tables(scores: list[ScoreRow], weights: ScoreWeights, inf: Inference) -> str:
    colors = figures.algo_colors([s.algo for s in scores])
    iv = inf.intervals
    ours = _table(
        ("Algorithm", "Score", "Variance", "FinalScore (Var / 0.122)", "Var_norm (run)",
         "FinalScore (run)", "Missing", "Trials"),
        [
            (
                f"<span class=swatch style='background:{colors[s.algo]}'></span>{_e(s.algo)}",
                _ci_cell(s.score, getattr(iv.get(s.algo), "score", None)),
                _ci_cell(s.var, getattr(iv.get(s.algo), "var", None), 3),
                "<b>" + _ci_cell(s.final_score_fixed,
                                 getattr(iv.get(s.algo), "final_score_fixed", None)) + "</b>",
                _fmt(s.var_norm, 3),
                _ci_cell(s.final_score, getattr(iv.get(s.algo), "final_score", None)),
                _e(", ".join(s.missing_scenarios) or "–"),
                str(s.n_trials),
            )
            for s in scores
        ],
    )  # fmt: skip
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
        "in % (eq. 15, 18); Variance of the 0-1 success rates (eq. 16). FinalScore (Var / "
        f"{PAPER_MAX_VARIANCE}) divides by the largest variance of Table II (NavRL's), which "
        "reproduces the paper's FinalScores and compares across runs; FinalScore (run) divides "
        "by the largest variance among this run's algorithms (eq. 17 as written), so it changes "
        "with which algorithms were run. Intervals: 95 % bootstrap of configurations within "
        "each type (the same draw for every algorithm)."
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


def paired_families(tests: Sequence[PairedTest]) -> list[str]:
    """The family of claims each paired test belongs to, for Holm's adjustment: the pooled
    tests of every pair form one family ("all types": the ranking), and each pair's per-type
    tests another ("A vs B by type": one sentence of the report)."""
    return [f"{t.algo_a} vs {t.algo_b} by type" if t.scenario else "all types" for t in tests]


def paired_holm(tests: Sequence[PairedTest]) -> list[float]:
    """Holm-adjusted p-values of ``tests`` within their :func:`paired_families`."""
    return [float(x) for x in holm_by_family([t.p_value for t in tests], paired_families(tests))]


def difference_holm(diffs: Sequence[ScoreDifference]) -> list[float]:
    """Holm-adjusted p-values of the FinalScore differences: every pair one family (the
    ranking)."""
    return [float(x) for x in holm_by_family([d.p_value for d in diffs], ["pairs"] * len(diffs))]


def correlation_holm(corrs: Sequence[Correlation | PartialCorrelation]) -> list[float]:
    """Holm-adjusted p-values of indicator correlations, one family per algorithm (raw: its
    indicators over all platforms and over the real ones; partial: its indicators under each
    set of controls)."""
    return [float(x) for x in holm_by_family([c.p_value for c in corrs], [c.algo for c in corrs])]


def _tests_table(tests: list[PairedTest]) -> str:
    fams = paired_families(tests)
    size = Counter(fams)
    body = [
        [_e(t.algo_a), _e(t.algo_b), _e(figures.scenario_label(t.scenario) if t.scenario else
                                           "all types"),
         f"{100 * t.rate_a:.1f}", f"{100 * t.rate_b:.1f}", f"{100 * t.diff:+.1f}",
         f"{t.n_differing} / {t.n_configs}", _e(_p(t.p_value)), _e(_p(h)),
         _detectable(t, size[f]), _e(t.method)]
        for t, h, f in zip(tests, paired_holm(tests), fams, strict=True)
    ]  # fmt: skip
    head = ("A", "B", "Scenario", "A success %", "B success %", "A - B [points]",
            "configs differing", "p (two-sided)", "p (Holm)", "detectable [points]",
            "test")  # fmt: skip
    note = (
        "detectable: the smallest difference this pair's configurations could show with 80 % "
        "power at the level its family's first Holm step needs (0.05 / the family's size), "
        "given the spread of its configuration differences (volary.studies.flyingtrust.power)."
    )
    return _table(head, body, left=3) + f"<p class=meta>{_e(note)}</p>"


def _detectable(t: PairedTest, family_size: int) -> str:
    """The pair's detectable difference at 80 % power and Holm's first step (points)."""
    if not math.isfinite(t.sd):
        return "–"
    v = detectable_difference(t.sd, t.n_configs, 0.05 / family_size)
    return _fmt(100 * v, 1) if math.isfinite(v) else "none"


def _correlation_table(corrs: Sequence[Correlation | PartialCorrelation]) -> str:
    """Raw (``platforms`` column) or partial (``controls`` column) correlations, with Holm."""
    partial = bool(corrs) and isinstance(corrs[0], PartialCorrelation)
    third = (lambda c: c.controls) if partial else (lambda c: c.platforms)  # noqa: E731
    body = [
        [_e(c.algo), _e(c.indicator), _e(third(c)), str(c.n), _fmt(c.rho),
         f"[{_fmt(c.ci[0])}, {_fmt(c.ci[1])}]", _e(_p(c.p_value)), _e(_p(h))]
        for c, h in zip(corrs, correlation_holm(corrs), strict=True)
    ]  # fmt: skip
    head = ("Algorithm", "Indicator", "held fixed" if partial else "Platforms", "n",
            "partial ρ" if partial else "Spearman ρ", "95 % CI (bootstrap)",
            "p (permutation)", "p (Holm)")  # fmt: skip
    return _table(head, body, left=3)


def _ranking_tables(scores: list[ScoreRow], summary: Summary, inf: Inference) -> str:
    """Compact letter displays of FinalScore and success, and every paired FinalScore
    difference with its interval and Holm-adjusted p."""
    rate = {g.algo: g.success_rate for g in summary.by_algo}
    ranked = sorted(scores, key=lambda s: -s.final_score_fixed)
    letters = _table(
        ("Algorithm", "FinalScore (Var / 0.122)", "group", "success %", "group"),
        [(_e(s.algo), _ci_cell(s.final_score_fixed, getattr(inf.intervals.get(s.algo),
                                                          "final_score_fixed", None)),
          f"<b>{_e(inf.letters_score.get(s.algo, ''))}</b>", _fmt(rate.get(s.algo), 1, 100.0),
          f"<b>{_e(inf.letters_success.get(s.algo, ''))}</b>") for s in ranked],
    )  # fmt: skip
    diffs = _table(
        ("A", "B", "FinalScore A - B [95 % CI]", "p (bootstrap)", "p (Holm)"),
        [(_e(d.algo_a), _e(d.algo_b), _ci_cell(d.diff, d.ci), _e(_p(d.p_value)), _e(_p(h)))
         for d, h in zip(inf.differences, difference_holm(inf.differences), strict=True)],
        left=2,
    )  # fmt: skip
    note = (
        "Algorithms sharing a letter are not separated: FinalScore by the paired bootstrap "
        "difference (the configuration draws of the intervals, two-sided p, Holm over all "
        "pairs), success by the pooled paired sign-flip test (Holm over all pairs); compact "
        "letter display (Piepho 2004)."
    )
    return f"<div class=pair><div>{letters}</div><div>{diffs}</div></div><p class=meta>{note}</p>"


def ranking_sentence(order: Sequence[str], letters: Mapping[str, str]) -> str:
    """``order`` written with '>' where the letters separate neighbours and '≈' where they
    share one (a compact letter display read left to right)."""
    out = [order[0]] if order else []
    for prev, cur in itertools.pairwise(order):
        tie = set(letters.get(prev, "")) & set(letters.get(cur, ""))
        out.append(("≈ " if tie else "> ") + cur)
    return " ".join(out)


def _partial_table(parts: list[PartialCorrelation]) -> str:
    if not parts:
        return "<p>Fewer than six catalogue platforms: no partial correlations.</p>"
    return _correlation_table(parts)


def _power_section(rows: list[PowerRow]) -> str:
    if not rows:
        return "<p>Fewer than two algorithms or configurations: nothing to size.</p>"
    ns = sorted({r.n_configs for r in rows})
    levels = sorted({r.alpha for r in rows}, reverse=True)
    cols = [(n, a) for n in ns for a in levels]
    by = {(r.scenario, r.n_configs, r.alpha): r for r in rows}
    body = []
    for scen in dict.fromkeys(r.scenario for r in rows):
        r0 = by[(scen, *cols[0])]
        body.append(
            [_e(figures.scenario_label(scen)),
             f"{100 * r0.sd:.1f} <small>[{100 * r0.sd_min:.1f}, {100 * r0.sd_max:.1f}]</small>"]
            + [_fmt(100 * by[(scen, n, a)].detectable, 1) if math.isfinite(
                by[(scen, n, a)].detectable) else "none" for n, a in cols]
        )  # fmt: skip
    head = ("Scenario", "spread of config. differences [points]",
            *(f"{n} configs, α = {a:.3g}" for n, a in cols))  # fmt: skip
    note = (
        "Smallest difference in success rate (points) a paired sign-flip test over the "
        "configurations finds with 80 % power, for the median algorithm pair of the type (its "
        "standard deviation of per-configuration differences; [min, max] over the pairs). "
        "α = 0.05 for one type alone; 0.05 / 7 is what the first claim of a pair's seven "
        "per-type tests must reach under Holm. Model: normal differences with that spread, "
        "power simulated with scipy.stats.power (volary.studies.flyingtrust.power). 'none': "
        "that many configurations cannot reach α."
    )
    return _table(head, body) + f"<p class=meta>{_e(note)}</p>"


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
    inf: Inference,
    hosts: Sequence[Mapping[str, Any]] = (),
) -> str:
    fig = {f.key: f for f in figs}
    fails = [f for f in figs if f.key.startswith("fail-")]
    heat = [f for f in figs if f.key.startswith("heat-")]
    facts = "".join(f"<li>{_e(s)}</li>" for s in findings(summary, scores, rows, inf))
    parts = [
        f"<h1>{_e(title)}</h1><p class=meta>FLYINGTRUST navigation protocol flown in volary's "
        "simulator: success, failure causes, SOUS VIDE flight metrics, 95 % confidence "
        "intervals, paired tests and the composite score of FLYINGTRUST eq. 12-19.</p>"
        f"<p class=box>{_e(INTERVALS_SENTENCE)}</p>",
        "<h2>Headline</h2><div class=pair><div>" + _headline(rows, summary, suite, hosts) + "</div>"
        "<div class=box style='flex:1;min-width:320px'><b>Findings</b>"
        f"<ul>{facts}</ul></div></div>",
        "<h2>Composite score (FLYINGTRUST Table II)</h2>" + _score_tables(scores, weights, inf),
        _img(fig["scores"]),
        "<h3>Ranking: what the data separate</h3>" + _ranking_tables(scores, summary, inf),
        "<h2>Comparisons (paired over configurations)</h2><p class=meta>Each configuration's "
        "success rate of A minus B over the platforms and trials both flew; two-sided sign-flip "
        "permutation test of their mean (exact when at most 16 configurations differ).</p>"
        + (
            _tests_table(inf.tests) if inf.tests else "<p>One algorithm: nothing to compare.</p>"
        ),  # fmt: skip
        "<h2>Success by scenario type</h2>" + _img(fig["scenario"]),
        _metrics_table(summary.by_scenario, "scenario"),
        "<h3>All scenarios</h3>" + _metrics_table(summary.by_algo, "scenario"),
        "<h2>Success and platform capability</h2>" + _img(fig["indicators"]) + _img(fig["grid"]),
        "<h3>Correlation with the platform indicators</h3><p class=meta>Unit: the platform "
        "(its success over all its trials); p from 10,000 permutations of the platforms, "
        "interval from 2,000 bootstrap resamples of them.</p>"
        + _correlation_table(inf.correlations)
        + "<h3>Holding mass and size fixed</h3><p class=meta>Success falls with the vehicle's "
        "size and mass, and the indicators move with them, so a raw correlation can be size "
        "in disguise. Spearman partial correlation (ranks; residuals after a least-squares fit "
        "on the ranks of mass, or of mass and collision radius), p from 10,000 permutations "
        "of the residuals (Freedman-Lane), Holm within each algorithm.</p>"
        + _partial_table(inf.partials),
        "<h2>What this design can detect</h2>" + _power_section(inf.power),
        "<details><summary>Per-platform table (intervals stratified by scenario type)</summary>"
        + _platform_table(summary)
        + "</details>",
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
        "Sec. IV-B); failure causes: collision, timeout, outside_goal, no_plan, over_speed "
        "(about to pass the speed cap: the vehicle left the runner's speed guard), error.",
        "Confidence intervals: the unit of replication is the configuration. Two-stage "
        "percentile bootstrap (B = 1000, seeded per group): configurations resampled with "
        "replacement within their scenario type, then trials within each; success rates take "
        "the hull with a Wilson interval on the configuration-level rate (per type, combined "
        "in quadrature with the types' weights when a group spans several), so 0 % and 100 % "
        "are not zero-width. Per-platform intervals are stratified by type. Coverage on "
        "protocol-shaped simulations: experiments/flyingtrust/interval-coverage/run.py.",
        "Comparisons: paired sign-flip permutation tests over configurations; correlations with "
        "the platform indicators: Spearman's ρ with a permutation p-value over platforms. "
        "p (Holm): Holm's step-down adjustment within each family of claims (the pooled tests "
        "of all pairs; each pair's per-type tests; each algorithm's correlations), which holds "
        "the chance of any false claim in a family at 5 % when p (Holm) < 0.05.",
        "Time to goal: mean over successful trials. Path length, speeds, tracking error (mean "
        "distance to the start-goal reference) and proximity percentile (share of samples within "
        "0.3 m of it; SOUS VIDE Sec. VI): means over the trials where they are defined. "
        "Collisions per 100 m: total collisions / total path length of the group.",
        "Composite score: FLYINGTRUST eq. 12-19 (conventions: the docstring of "
        "volary.studies.flyingtrust.score); "
        f"FinalScore under the paper's fixed normalization Var / {PAPER_MAX_VARIANCE} and "
        "relative to the run (eq. 17).",
        "Speed cap: planners are told 95 % of the protocol's cap and faster references are "
        "retimed; at the 240 Hz control rate the position controller's velocity command is "
        "saturated at 97 % of it; max speed is the peak at the control rate (rows flown before "
        "the cap was enforced carry the 40 Hz track's peak).",
    ]
    lis = "".join(f"<li>{_e(i)}</li>" for i in items)
    fl = ", ".join(_e(p.name) for p in files)
    return (
        f"<h2>Methods</h2><ul>{lis}</ul>"
        f"<p class=meta>Exports beside this file: {fl}; PNGs in figures/.</p>"
    )
