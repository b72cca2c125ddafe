"""FLYINGTRUST composite score (paper 004, Sec. III-C, eq. 12-19).

For each algorithm a, the success rates S_asm (scenario type s, platform m; the mean success
over that cell's trials) are averaged with normalized scenario weights W_s (eq. 12: classic
types 1.2, theoretical 1.0) and platform weights W_m (eq. 13: real 1.5, virtual 1.0):

- eq. 14-15: Score_a = 100 * sum W_s W_m S_asm / sum W_s W_m
- eq. 16:    Var_a = sum W_s W_m (S_asm - Score_hat_a)^2   (S on the 0-1 scale)
- eq. 17:    Var_norm_a = Var_a / max_a' Var_a'
- eq. 18:    FinalScore_a = Score_a (1 - beta Var_norm_a), beta = 0.3
- eq. 19:    a scenario type with no result for algorithm a is dropped and the remaining W_s
  renormalized for that algorithm.

Conventions beyond the paper: the scenario and platform sets are the
union over all algorithms of the rows given; a single missing (s, m) cell is left out of both
sums with the eq. 14 denominator, so eq. 16 uses the same weights divided by their sum over
the present cells (identical to eq. 16 with eq. 19 when whole types are missing); when every
algorithm has zero variance, Var_norm is 0 (no penalty); platforms outside FLYINGTRUST (presets,
custom airframes) get the ``other`` weight. ``final_score_fixed``: eq. 18 with Var_norm =
Var / PAPER_MAX_VARIANCE (0.122, the largest variance of Table II), which reproduces the
paper's FinalScores and does not depend on which other algorithms a run holds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from volary.errors import ConfigError
from volary.studies.flyingtrust.schema import TrialResult
from volary.studies.flyingtrust.stats import platform_category  # the catalogue's real/virtual, core

# FLYINGTRUST Sec. III-B, Fig. 7: (a-c) classic, (d-g) theoretical navigation scenarios.
CLASSIC_SCENARIOS = ("forest", "urban", "random_cylinders")
THEORETICAL_SCENARIOS = ("narrow_gap", "sudden_drop", "maze", "perlin")

TABLE_II_SOURCE = "FLYINGTRUST (paper 004) Table II, transcribed from the paper text"
# eq. 17's normalizer in Table II: the largest variance among the paper's planners (NavRL). A
# FinalScore under this fixed normalization compares across runs and with Table II; eq. 17's
# own normalizer is the largest variance among the algorithms of the run (relative to it).
PAPER_MAX_VARIANCE = 0.122


@dataclass(frozen=True)
class PaperScore:
    """One row of FLYINGTRUST Table II (Score and FinalScore in %, Variance on the 0-1 scale)."""

    algo: str
    score: float
    variance: float
    final_score: float
    missing: tuple[str, ...] = ()


# FLYINGTRUST Table II (beta = 0.3; NavRL's scores exclude Perlin-Noise, eq. 19).
PAPER_TABLE_II: tuple[PaperScore, ...] = (
    PaperScore("EGO-Planner", 30.25, 0.120, 21.32),
    PaperScore("Fast-Planner", 37.34, 0.106, 27.58),
    PaperScore("Path-Guided PGO", 20.39, 0.054, 17.70),
    PaperScore("NavRL", 37.78, 0.122, 26.41, ("perlin",)),
    PaperScore("Straight Flight Baseline", 6.05, 0.005, 5.97),
)


@dataclass(frozen=True)
class ScoreWeights:
    """Initial weights of eq. 12-13 and the penalty beta of eq. 18 (paper defaults, Sec. IV-B).

    ``scenario_overrides`` / ``platform_overrides``: per-name weights that replace the
    category weight, e.g. ``(("maze", 2.0),)``.
    """

    classic: float = 1.2
    theoretical: float = 1.0
    real: float = 1.5
    virtual: float = 1.0
    other: float = 1.0  # platforms that are neither FLYINGTRUST real nor virtual
    beta: float = 0.3
    scenario_overrides: tuple[tuple[str, float], ...] = ()
    platform_overrides: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        for name in ("classic", "theoretical", "real", "virtual", "other"):
            _check_weight(name, getattr(self, name))
        for group in ("scenario_overrides", "platform_overrides"):
            for item in getattr(self, group):
                if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
                    raise ConfigError(f"{group}: expected (name, weight) pairs, got {item!r}")
                _check_weight(f"{group}[{item[0]!r}]", item[1])
        b = self.beta
        if isinstance(b, bool) or not isinstance(b, int | float) or not 0.0 <= b <= 1.0:
            raise ConfigError(f"beta: expected a number in [0, 1] (eq. 18), got {b!r}")

    def scenario_weight(self, scenario: str) -> float:
        """Initial weight w_s of a scenario type (eq. 12 before normalization)."""
        over = dict(self.scenario_overrides)
        if scenario in over:
            return float(over[scenario])
        return self.classic if scenario in CLASSIC_SCENARIOS else self.theoretical

    def platform_weight(self, platform: str) -> float:
        """Initial weight w_m of a platform (eq. 13 before normalization)."""
        over = dict(self.platform_overrides)
        if platform in over:
            return float(over[platform])
        cat = platform_category(platform)
        return {"real": self.real, "virtual": self.virtual}.get(cat, self.other)


def _check_weight(name: str, w: object) -> None:
    if isinstance(w, bool) or not isinstance(w, int | float) or not (math.isfinite(w) and w > 0):
        raise ConfigError(f"{name}: expected a finite weight > 0, got {w!r}")


@dataclass(frozen=True)
class ScoreRow:
    """Composite score of one algorithm (Score, FinalScore in %; Var on the 0-1 scale)."""

    algo: str
    score: float  # eq. 15
    var: float  # eq. 16
    var_norm: float  # eq. 17
    final_score: float  # eq. 18
    missing_scenarios: tuple[str, ...]  # dropped by eq. 19
    n_cells: int  # (scenario, platform) cells with results
    n_trials: int
    final_score_fixed: float = math.nan  # eq. 18 with Var / PAPER_MAX_VARIANCE (not clipped)


Rates = Mapping[tuple[str, str, str], float]


def success_rates(results: Iterable[TrialResult]) -> tuple[dict[tuple[str, str, str], float], dict]:
    """S_asm: mean success per (algo, scenario, platform) cell, and the trial count per cell."""
    total: dict[tuple[str, str, str], int] = defaultdict(int)
    wins: dict[tuple[str, str, str], int] = defaultdict(int)
    for r in results:
        if not isinstance(r, TrialResult):
            raise ConfigError(f"results: expected TrialResult items, got {type(r).__name__}")
        key = (r.algo, r.scenario, r.platform)
        total[key] += 1
        wins[key] += bool(r.success)
    return {k: wins[k] / n for k, n in total.items()}, dict(total)


def normalized_weights(names: Sequence[str], weight_of) -> dict[str, float]:
    """W = w / sum w over ``names`` (eq. 12 for scenarios, eq. 13 for platforms)."""
    w = {n: float(weight_of(n)) for n in names}
    total = sum(w.values())
    return {n: v / total for n, v in w.items()}


def renormalized_scenario_weights(w_s: Mapping[str, float], present: Iterable[str]) -> dict:
    """W'_s = W_s / sum over the algorithm's present types (eq. 19)."""
    keep = {s: w_s[s] for s in present}
    total = sum(keep.values())
    return {s: v / total for s, v in keep.items()}


def weighted_score(cells: Mapping[tuple[str, str], float], w_s: Mapping, w_m: Mapping) -> tuple:
    """(Score_hat, Var) of one algorithm's cells {(s, m): S} (eq. 14 and 16)."""
    wts = [(w_s[s] * w_m[m], v) for (s, m), v in cells.items()]
    denom = sum(w for w, _ in wts)
    hat = sum(w * v for w, v in wts) / denom
    var = sum(w * (v - hat) ** 2 for w, v in wts) / denom
    return hat, var


def final_scores(scores: Sequence[float], variances: Sequence[float], beta: float) -> list:
    """(Var_norm, FinalScore) per algorithm from Score (%) and Var (eq. 17-18)."""
    vmax = max(variances, default=0.0)
    norm = [v / vmax if vmax > 0 else 0.0 for v in variances]
    return [(n, s * (1.0 - beta * n)) for s, n in zip(scores, norm, strict=True)]


def fixed_final_score(score: float, var: float, beta: float, ref: float = PAPER_MAX_VARIANCE):
    """FinalScore (eq. 18) with Var_norm = Var / ``ref`` (the paper's largest variance), not
    relative to the run: Score (1 - beta Var / ref). Not clipped: a run more uneven than every
    Table II planner is penalized more than beta."""
    return score * (1.0 - beta * var / ref)


def composite_scores(
    results_or_rates: Iterable[TrialResult] | Rates,
    weights: ScoreWeights | None = None,
) -> list[ScoreRow]:
    """Composite score per algorithm (eq. 12-19), best FinalScore first.

    ``results_or_rates``: TrialResult rows, or a mapping {(algo, scenario, platform): S_asm}
    with S in [0, 1] (NaN cells are treated as missing).
    """
    weights = ScoreWeights() if weights is None else weights
    if not isinstance(weights, ScoreWeights):
        raise ConfigError(f"weights: expected ScoreWeights, got {type(weights).__name__}")
    rates, counts = _rates_of(results_or_rates)
    if not rates:
        raise ConfigError("results_or_rates: expected at least one result or rate, got none")
    algos = sorted({a for a, _, _ in rates})
    scen = _ordered({s for _, s, _ in rates})
    plats = sorted({m for _, _, m in rates})
    w_s = normalized_weights(scen, weights.scenario_weight)
    w_m = normalized_weights(plats, weights.platform_weight)
    parts = []
    for a in algos:
        cells = {(s, m): v for (aa, s, m), v in rates.items() if aa == a}
        present = [s for s in scen if any(ss == s for ss, _ in cells)]
        hat, var = weighted_score(cells, renormalized_scenario_weights(w_s, present), w_m)
        n = sum(c for (aa, _, _), c in counts.items() if aa == a)
        parts.append((a, 100.0 * hat, var, tuple(s for s in scen if s not in present), cells, n))
    finals = final_scores([p[1] for p in parts], [p[2] for p in parts], weights.beta)
    rows = [
        ScoreRow(a, sc, var, vn, fs, miss, len(cells), n, fixed_final_score(sc, var, weights.beta))
        for (a, sc, var, miss, cells, n), (vn, fs) in zip(parts, finals, strict=True)
    ]
    return sorted(rows, key=lambda r: (-r.final_score, r.algo))


def _rates_of(data: Iterable[TrialResult] | Rates) -> tuple[dict, dict]:
    if isinstance(data, Mapping):
        rates = {}
        for k, v in data.items():
            if not (isinstance(k, tuple) and len(k) == 3 and all(isinstance(x, str) for x in k)):
                raise ConfigError(
                    f"results_or_rates: expected (algo, scenario, platform) keys, got {k!r}"
                )
            v = float(v)
            if math.isnan(v):
                continue
            if not 0.0 <= v <= 1.0:
                raise ConfigError(f"results_or_rates[{k!r}]: expected a rate in [0, 1], got {v}")
            rates[k] = v
        return rates, dict.fromkeys(rates, 0)
    if isinstance(data, str | bytes):
        raise ConfigError("results_or_rates: expected TrialResult rows or a rate mapping")
    return success_rates(data)


def _ordered(scenarios: Iterable[str]) -> list[str]:
    """Paper order (classic then theoretical), then any other type alphabetically."""
    known = CLASSIC_SCENARIOS + THEORETICAL_SCENARIOS
    s = set(scenarios)
    return [x for x in known if x in s] + sorted(s - set(known))
