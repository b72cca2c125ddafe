"""SOUS VIDE evaluation: Sec. VI metrics, Table II disturbances, the expert end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from volary.errors import ConfigError, UnknownNameError
from volary.studies.sousvide.evaluate import (
    PAPER_TABLE_II,
    EvalConfig,
    ExpertPolicy,
    classify,
    count_hits,
    evaluate,
    format_table,
    path_distance,
    path_length,
    proximity_percentile,
    summarize,
    tracking_error,
    without_objects,
)
from volary.studies.sousvide.scene import LANDMARK_IDS, make_scene


@pytest.fixture(scope="module")
def scene():
    return make_scene(width=32, height=32)


class Hover:
    """Constant command: nominal hover thrust fraction, zero rates."""

    def __init__(self) -> None:
        self.calls = 0
        self.images: list[torch.Tensor] = []

    def reset(self, n_envs: int) -> None:
        self.n = n_envs

    def act(self, obs):
        self.calls += 1
        self.images.append(obs["image"].clone())
        assert obs["state"].shape == (self.n, 10) and obs["objective"].shape == (self.n, 7)
        u = torch.zeros(self.n, 4)
        u[:, 0] = 1.167 * 9.81 / 28.62
        return u


def test_metric_functions_on_hand_computed_cases() -> None:
    desired = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    flown = torch.tensor([[[0.0, 0.1, 0.0], [1.0, 0.0, 0.4], [2.0, 0.0, 0.0], [3.0, 0.0, 0.0]]])
    d = path_distance(flown, desired)
    torch.testing.assert_close(d, torch.tensor([[0.1, 0.4, 0.0, 1.0]], dtype=torch.float64))
    assert float(tracking_error(d)) == pytest.approx(1.5 / 4)
    assert float(proximity_percentile(d, 0.3)) == pytest.approx(50.0)
    hits = count_hits(
        torch.tensor([[False, True, True, False, True], [True, False, False, False, False]])
    )
    assert hits.tolist() == [2, 1]
    assert float(path_length(torch.tensor([[[0.0, 0, 0], [3.0, 4.0, 0], [3.0, 4.0, 1.0]]]))) == 6.0
    cfg = EvalConfig()
    t = torch.tensor
    out = classify(
        crashed=t([True, False, False, False, False, False]),
        off_course=t([False, True, False, False, False, False]),
        goal_error=t([0.0, 0.0, 0.9, 0.1, 0.1, 0.1]),
        heading_error=t([0.0, 0.0, 0.0, 1.0, 0.1, -0.1]),
        hits=t([1, 0, 0, 0, 2, 0]),
        cfg=cfg,
    )
    assert out == ["crash", "off_course", "off_course", "partial", "recovery", "success"]


def test_expert_succeeds_on_baseline_with_small_tracking_error(scene) -> None:
    r = evaluate(ExpertPolicy(scene), EvalConfig(trials=2, steps=80), scene=scene)
    s = summarize(r)
    assert r.hits.tolist() == [0, 0]
    assert s["tracking_error"] < 0.05 and s["proximity"] == 100.0
    assert r.positions.shape == (2, 81, 3)
    assert r.positions[:, -1, 0].min() > 1.8  # on its way to the gate (x_des(4 s) = 2.0 m)


@pytest.mark.slow
def test_expert_flies_the_whole_trajectory_and_every_disturbance(scene) -> None:
    rows = []
    for d in ("baseline", "static", "payload", "wind"):
        r = evaluate(ExpertPolicy(scene), EvalConfig(disturbance=d, trials=2), scene=scene)
        assert r.outcome == ["success", "success"], d
        rows.append((d, summarize(r)))
    assert "baseline (paper)" in format_table(rows, PAPER_TABLE_II)


def _fly(scene, disturbance: str, steps: int = 6, **kw):
    pol = Hover()
    cfg = EvalConfig(disturbance=disturbance, trials=2, steps=steps, **kw)
    return evaluate(pol, cfg, scene=scene), pol


def test_each_disturbance_changes_what_it_should(scene) -> None:
    base, bp = _fly(scene, "baseline")
    light, _ = _fly(scene, "lighting")
    assert light.image_mean.mean() < 0.5 * base.image_mean.mean()
    dyn, dp = _fly(scene, "dynamic", steps=20)
    base20, bp20 = _fly(scene, "baseline", steps=20)
    diff = [
        float((a.float() - b.float()).abs().mean())
        for a, b in zip(dp.images, bp20.images, strict=True)
    ]
    assert max(diff) > 1.0  # someone walks through the view
    np.testing.assert_array_equal(dyn.positions, base20.positions)  # visual only
    static, sp = _fly(scene, "static")
    assert float((sp.images[0].float() - bp.images[0].float()).abs().mean()) > 1.0
    payload, _ = _fly(scene, "payload")
    np.testing.assert_allclose(payload.mass, 1.3 * base.mass, rtol=1e-6)
    assert payload.positions[:, -1, 2].mean() < base.positions[:, -1, 2].mean() - 0.01  # sinks
    wind, _ = _fly(scene, "wind", steps=120)
    calm, _ = _fly(scene, "baseline", steps=120)
    drift = wind.positions[:, -1, 1] - calm.positions[:, -1, 1]
    assert (drift > 0.1).all()  # pushed along +y by the gust from t = 4 s


def test_static_removes_the_landmarks_from_splat_and_collision(scene) -> None:
    from volary.studies.sousvide.evaluate import spec_without

    kept = without_objects(scene.splats, LANDMARK_IDS)
    assert 0 < kept.count < scene.splats.count
    assert not np.isin(kept.extra["object_id"], LANDMARK_IDS).any()
    spec = spec_without(scene.collision, LANDMARK_IDS)
    assert spec.gates == () and all(o.object_id not in LANDMARK_IDS for o in spec.obstacles)


def test_falling_is_a_crash_and_climbing_away_is_off_course(scene) -> None:
    class Drop(Hover):
        def act(self, obs):
            return 0.0 * super().act(obs)  # no thrust: falls 1 m onto the floor

    class Climb(Hover):
        def act(self, obs):
            return 1.5 * super().act(obs)  # climbs out of the room

    r = evaluate(Drop(), EvalConfig(trials=1, steps=20), scene=scene)
    assert r.outcome == ["crash"] and r.hits.tolist() == [1]
    assert r.positions[0, -1, 2] == pytest.approx(r.positions[0, -5, 2])  # frozen at the crash
    r = evaluate(Climb(), EvalConfig(trials=1, steps=40), scene=scene)
    assert r.outcome == ["off_course"] and r.hits.tolist() == [0]


def test_bad_inputs(scene) -> None:
    with pytest.raises(UnknownNameError, match="lighting"):
        EvalConfig(disturbance="fog")
    with pytest.raises(ConfigError, match="trials"):
        EvalConfig(trials=0)
    with pytest.raises(ConfigError, match="heading_tol"):
        EvalConfig(heading_tol=math.nan)

    class Bad(Hover):
        def act(self, obs):
            return torch.zeros(3)

    with pytest.raises(ConfigError, match="policy.act"):
        evaluate(Bad(), EvalConfig(trials=1, steps=2), scene=scene)
