"""``volary race`` over course x noise-seed pairs, and the course generator settings: a pair flies
the same alone, beside other seeds and in a worker; the figures over seeds are the per-seed
leaderboards' median with a bootstrap interval; each generator setting draws what its
documentation says (``volary``: today's courses, draw for draw)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from volary.cli.main import app
from volary.errors import ConfigError, UnknownNameError
from volary.studies.alphapilot.challenge import (
    ChallengeResult,
    ChallengeSensors,
    noise_key,
    run_challenge,
    run_challenge_seeds,
    seeds_summary,
)
from volary.studies.alphapilot.race import RaceResult, leaderboard
from volary.studies.alphapilot.sensor_racer import SensorRacer
from volary.worlds import alphapilot_2019, perturb_course, unperturbed
from volary.worlds.tracks import (
    COURSE_GENERATORS,
    GENERATOR_KEY,
    _opening,
    alphapilot_2019_courses,
    gate_shape_problem,
)

QUICK = {"iters": 20, "samples": 200}  # a rough nominal plan: these tests fly seconds, not laps
runner = CliRunner()


class Quick(SensorRacer):
    """The reference stack with a rough nominal plan (``--contestant test_race_seeds:Quick``)."""

    def __init__(self) -> None:
        super().__init__(**QUICK)


# ---- course x noise-seed pairs ------------------------------------------------------------------
def test_a_pair_flies_the_same_alone_and_beside_other_noise_seeds():
    c = alphapilot_2019_courses(2, 0)
    alone = run_challenge([c[1]], SensorRacer(**QUICK), seed=3, time_limit_s=0.5)
    pairs = run_challenge_seeds(c, SensorRacer(**QUICK), [2, 3], time_limit_s=0.5)
    assert pairs.noise_seeds == (2, 2, 3, 3)
    assert pairs.race.courses == (c[0].name, c[1].name) * 2
    assert torch.equal(alone.race.path[:, 0], pairs.race.path[:, 3])
    assert torch.equal(alone.pos_err[:, 0].nan_to_num(), pairs.pos_err[:, 3].nan_to_num())
    # another noise seed is another flight of the same course
    assert not torch.equal(pairs.race.path[:, 1], pairs.race.path[:, 3])
    assert noise_key(c[1], 3) != noise_key(c[1], 2) != noise_key(c[0], 2)


def test_a_pair_flies_the_same_alone_and_in_a_batch_with_mislabelled_beacons():
    """The mislabel fault is keyed by the pair like every other noise stream."""
    c = alphapilot_2019_courses(2, 0)
    faulty = ChallengeSensors(mislabel_rate=0.2)
    alone = run_challenge([c[1]], SensorRacer(**QUICK), seed=3, sensors=faulty, time_limit_s=0.5)
    pairs = run_challenge_seeds(c, SensorRacer(**QUICK), [2, 3], sensors=faulty,
                                time_limit_s=0.5)  # fmt: skip
    assert torch.equal(alone.race.path[:, 0], pairs.race.path[:, 3])
    assert torch.equal(alone.pos_err[:, 0].nan_to_num(), pairs.pos_err[:, 3].nan_to_num())


@pytest.mark.slow
def test_workers_change_the_wall_time_only():
    c = alphapilot_2019_courses(2, 0)
    one = run_challenge_seeds(c, Quick(), [0, 1, 2], time_limit_s=1.0)
    two = run_challenge_seeds(c, Quick(), [0, 1, 2], workers=2, time_limit_s=1.0)
    assert two.noise_seeds == one.noise_seeds == (0, 0, 1, 1, 2, 2)
    assert torch.equal(one.race.path, two.race.path)
    assert torch.equal(one.race.score, two.race.score)
    assert torch.equal(one.gate_err.nan_to_num(), two.gate_err.nan_to_num())


def test_pairs_refuse_repeated_or_bad_noise_seeds_and_workers():
    c = alphapilot_2019_courses(1, 0)
    for seeds, workers in (([1, 1], 1), ([-1], 1), ([True], 1), ([], 1), ([0], 0)):
        with pytest.raises(ConfigError):
            run_challenge_seeds(c, Quick(), seeds, workers=workers, time_limit_s=0.1)


# ---- figures over seeds -------------------------------------------------------------------------
def fake(scores: list[list[float]], finished: list[list[bool]] | None = None) -> ChallengeResult:
    """A result of S noise seeds x C courses with the given scores (finished where > 0)."""
    s = torch.tensor(scores, dtype=torch.float64)
    n_seeds, n_courses = s.shape
    done = s > 0 if finished is None else torch.tensor(finished)
    flat, done = s.flatten(), done.flatten()
    n = flat.numel()
    race = RaceResult(
        courses=tuple(f"c{j}" for _ in range(n_seeds) for j in range(n_courses)),
        gates_passed=torch.where(done, 11, 3), gate_times=torch.zeros(n, 11), finished=done,
        collided=~done, timed_out=torch.zeros(n, dtype=torch.bool),
        time=torch.where(done, 110.0 - flat, math.nan), score=flat,
        plan_time=torch.full((n,), math.nan), path=torch.zeros(1, n, 3), path_time=torch.zeros(1),
    )  # fmt: skip
    empty = torch.zeros(0, n)
    return ChallengeResult(
        race, ChallengeSensors(), "fake", torch.zeros(0), empty, empty, torch.zeros(0, n, 11),
        empty.bool(), 0.0, 0.0, noise_seeds=tuple(i for i in range(n_seeds) for _ in scores[0]),
    )  # fmt: skip


def test_the_leaderboard_is_taken_per_noise_seed_and_summarised_over_seeds():
    rng = np.random.default_rng(0)
    scores = np.where(rng.uniform(size=(5, 25)) < 0.4, rng.uniform(85, 93, (5, 25)), 0.0)
    doc = seeds_summary(fake(scores.tolist()))
    per = [leaderboard(row.tolist()) for row in scores]
    assert [r["leaderboard"] for r in doc["per_seed"]] == pytest.approx(per)
    assert [r["noise_seed"] for r in doc["per_seed"]] == [0, 1, 2, 3, 4] == doc["noise_seeds"]
    lb = doc["leaderboard"]
    assert lb["median"] == pytest.approx(float(np.median(per)))
    assert (lb["min"], lb["max"]) == pytest.approx((min(per), max(per)))
    lo, hi = lb["interval"]
    assert lo <= lb["median"] <= hi and lo < hi and lb["confidence"] == 0.9
    done = (scores > 0).mean(1) * 100
    assert doc["completed_pct"]["median"] == pytest.approx(float(np.median(done)))
    assert doc["pooled"]["completed_pct"] == pytest.approx(float(done.mean()))
    assert doc["pooled"]["mean_score"] == pytest.approx(float(scores.mean()))
    assert doc["pairs"] == 125 and doc["courses"] == 25
    assert "scipy.stats.bootstrap" in doc["interval_method"]
    # the same result, the same interval (the resampling has its own seed)
    assert seeds_summary(fake(scores.tolist()))["leaderboard"]["interval"] == [lo, hi]


def test_the_interval_narrows_when_the_courses_agree_and_is_absent_for_one_course():
    same = seeds_summary(fake([[90.0] * 25] * 3))
    assert same["leaderboard"]["interval"] == pytest.approx([90.0, 90.0])
    one = seeds_summary(fake([[90.0], [80.0]]))
    assert one["leaderboard"]["interval"] is None and one["leaderboard"]["median"] == 85.0


def test_a_summary_refuses_seeds_that_flew_different_courses():
    res = fake([[1.0, 2.0], [3.0, 4.0]])
    race = dataclasses.replace(res.race, courses=("c0", "c1", "c1", "c0"))
    bad = dataclasses.replace(res, race=race)
    with pytest.raises(ConfigError, match="same courses"):
        seeds_summary(bad)


# ---- course generator settings ------------------------------------------------------------------
NOMINAL = alphapilot_2019()
COURSE = NOMINAL.meta["order_index"]
BOUNDS = NOMINAL.meta["perturbation"]


def test_the_volary_setting_draws_todays_courses_draw_for_draw():
    g = np.random.default_rng(4)
    today = [perturb_course(NOMINAL, g) for _ in range(3)]
    for a, b in zip(today, alphapilot_2019_courses(3, 4), strict=True):
        assert a.gates == b.gates and a.goal == b.goal
        assert a.meta["perturbation_draw"] == b.meta["perturbation_draw"]
    assert alphapilot_2019_courses(3, 4, "volary")[2].gates == today[2].gates


def _normal(c: np.ndarray) -> np.ndarray:
    x = c - c.mean(0)
    return np.linalg.svd(x)[2][2]


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(sorted(COURSE_GENERATORS.names())))
def test_every_setting_draws_what_its_documentation_says(seed, name):
    gen = COURSE_GENERATORS.get(name)
    spec = alphapilot_2019_courses(1, seed, name)[0]
    assert spec.meta[GENERATOR_KEY] == name
    base = unperturbed(spec)
    assert GENERATOR_KEY not in base.meta and base.gates == NOMINAL.gates
    shapes = [_opening(np.asarray(g.corners)) for g in NOMINAL.gates]
    for i, (g, g0) in enumerate(zip(spec.gates, NOMINAL.gates, strict=True)):
        c, c0 = np.asarray(g.corners), np.asarray(g0.corners)
        assert gate_shape_problem(c) is None and c[:, 2].min() >= 0.2 - 1e-9
        d = c.mean(0) - c0.mean(0)
        b = np.array(BOUNDS[g.name], dtype=float)
        if i not in COURSE or gen.rigid_only:  # a rigid shift + yaw within the published bounds
            assert np.all(np.abs(d[:2]) <= b[:2] + 1e-9) and abs(d[2]) < 1e-9
            assert _opening(c)[:2] == pytest.approx(_opening(c0)[:2], abs=1e-6)
            assert g.border == g0.border
            continue
        lim = b[:2] * gen.shift_scale + gen.extra_shift_m
        assert np.all(np.abs(d[:2]) <= lim + 1e-9)
        assert gen.dz_m[0] - 1e-9 <= d[2] <= gen.dz_m[1] + 1e-9
        tilt = math.degrees(math.asin(min(1.0, abs(_normal(c)[2]))))
        assert tilt <= gen.tilt_deg + 1e-6
        w, h, _ = _opening(c)
        lo, hi = gen.resize
        assert any(
            lo - 1e-6 <= w / w0 <= hi + 1e-6 and lo - 1e-6 <= h / h0 <= hi + 1e-6
            for w0, h0, _ in (shapes if gen.replace_p > 0 else [shapes[i]])
        )
        assert gen.border[0] * g0.border - 1e-9 <= g.border <= gen.border[1] * g0.border + 1e-9


def _varied_share(name: str, changed) -> float:
    specs = alphapilot_2019_courses(20, 7, name)
    hits = [changed(np.asarray(s.gates[i].corners), np.asarray(NOMINAL.gates[i].corners))
            for s in specs for i in COURSE]  # fmt: skip
    return float(np.mean(hits))


def test_the_report_settings_change_what_they_say_and_volary_does_not():
    def resized(c, c0):
        return abs(_opening(c)[0] - _opening(c0)[0]) > 0.02

    def tilted(c, c0):
        return abs(_normal(c)[2]) > math.sin(math.radians(1.0))

    assert 0.15 <= _varied_share("replaced", resized) <= 0.45  # p = 0.3 of the course gates
    assert _varied_share("resized", resized) > 0.8
    assert _varied_share("moved", tilted) > 0.8
    for check in (resized, tilted):
        assert _varied_share("volary", check) == 0.0


def test_an_unknown_setting_is_refused_with_the_valid_names():
    with pytest.raises(UnknownNameError, match="moved"):
        alphapilot_2019_courses(1, 0, "shuffled")


# ---- the command --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, option",
    [
        (["--courses-from", "shuffled"], "--courses-from"),
        (["--noise-seeds", "0"], "--noise-seeds"),
        (["--workers", "0"], "--workers"),
        (["--mode", "oracle", "--noise-seeds", "3"], "--noise-seeds"),
        (["--mode", "oracle", "--workers", "2"], "--workers"),
        (["--arena", "warehouse"], "--arena"),
        (["--mode", "oracle", "--arena", "factory"], "--arena"),
    ],
)
def test_race_refuses_bad_seed_and_generator_options_before_flying(tmp_path, args, option):
    r = runner.invoke(app, ["race", *args, "--out", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert option in r.output
    assert not tmp_path.exists() or not list(tmp_path.iterdir())


@pytest.mark.slow
def test_race_writes_the_figures_over_seeds(tmp_path):
    import json

    r = runner.invoke(app, ["race", "--courses", "2", "--noise-seeds", "2", "--first-noise-seed",
                            "5", "--courses-from", "resized", "--contestant",
                            "test_race_seeds:Quick", "--out", str(tmp_path)])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "per noise seed" in r.output and "median" in r.output
    doc = json.loads((tmp_path / "challenge.json").read_text())
    assert doc["noise_seeds"] == [5, 6] and doc["courses_from"] == "resized"
    assert [row["noise_seed"] for row in doc["courses_detail"]] == [5, 5, 6, 6]
    assert {p.name for p in tmp_path.iterdir()} >= {"challenge.json", "race_best.png"}
