"""Race tracks: AlphaPilot 2019 loader and perturbations, BoundaryPredictor courses, random
gate courses."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from volary.errors import ConfigError, FileFormatError, UnknownNameError
from volary.worlds import Scene
from volary.worlds.gates import GateTracker, gate_planes
from volary.worlds.sdf import scene_sdf
from volary.worlds.tracks import (
    GateCourseConfig,
    alphapilot_2019,
    alphapilot_2019_courses,
    around_frame,
    boundary_predictor_course,
    perturb_course,
    random_gate_course,
)

ORDER = [
    "Gate10",
    "Gate21",
    "Gate2",
    "Gate13",
    "Gate9",
    "Gate14",
    "Gate1",
    "Gate22",
    "Gate15",
    "Gate23",
    "Gate6",
]


def _centres(spec) -> np.ndarray:
    return np.stack([g.center for g in spec.gates])


def _fly_through(spec, order, device="cpu", **kw):
    """Step along each course gate's normal through its centre, gate after gate."""
    scene = Scene.stack(spec, device=device, dtype=torch.float64)
    tracker = GateTracker(scene, order=order, **kw)
    centre, normal = gate_planes(scene.gate_corners[0])
    for k in order:
        for s in np.linspace(-1.0, 1.0, 41):
            tracker.update(centre[k][None] + s * normal[k][None])
    return tracker


def test_alphapilot_gates_order_start_and_rule():
    spec = alphapilot_2019()
    assert len(spec.gates) == 23 and len(spec.meta["order"]) == 11
    assert spec.meta["order"] == ORDER
    assert [spec.gates[i].name for i in spec.meta["order_index"]] == ORDER
    assert [g.object_id for g in spec.gates] == list(range(1, 24))
    assert spec.start == (18.0, -23.0, 5.3) and abs(spec.start_yaw - math.pi / 2) < 1e-6
    assert spec.meta["gate_width"] == 0.3 and spec.meta["inflation"] == 0.1
    assert np.allclose(spec.goal, spec.gates[5].center)  # Gate6 is the last
    t = _fly_through(spec, spec.meta["order_index"], gate_width=0.3, inflation=0.1)
    assert t.passed.all() and not t.missed.any() and t.finished.all()


def test_alphapilot_corners_go_around_the_frame():
    """Z-ordered corners (Gate6) are reordered; every vertical course gate is a rectangle whose
    frame leaves about half the opening as clearance at its centre."""
    spec = alphapilot_2019()
    for g in spec.gates:
        c = np.asarray(g.corners)
        e = np.roll(c, -1, axis=0) - c  # edges around the frame
        assert abs(np.dot(e[0], e[1])) < 1e-2 * np.linalg.norm(e[0]) * np.linalg.norm(e[1])
    scene = Scene.stack(spec, dtype=torch.float64)
    idx = spec.meta["order_index"]
    ctr = torch.tensor(_centres(spec)[idx])[None]
    clearance = scene_sdf(scene, ctr).distance[0].numpy()
    half = [
        min(np.linalg.norm(np.diff(np.asarray(spec.gates[i].corners)[:3], axis=0), axis=1)) / 2
        for i in idx
    ]
    assert np.allclose(clearance, half, atol=1e-6)
    assert (scene_sdf(scene, torch.tensor([[spec.start]], dtype=torch.float64)).distance > 1).all()
    z_order = np.array([[0, 1, 1], [0, -1, 1], [0, 1, 0], [0, -1, 0]], float)
    assert np.allclose(around_frame(z_order)[:, 2], [1, 1, 0, 0])


def test_unperturbed_gives_back_the_course_a_perturbed_one_was_drawn_from():
    from dataclasses import replace

    from volary.worlds import perturb_course, unperturbed

    base = alphapilot_2019()
    assert unperturbed(base) is base  # not perturbed: itself
    a, b = alphapilot_2019_courses(2, 3)
    assert a.gates != base.gates and unperturbed(a) == base == unperturbed(b)
    twice = perturb_course(a, 5)  # a chain of perturbations keeps the first course
    assert twice.gates != a.gates and unperturbed(twice) == base
    bad = replace(a, meta={**a.meta, "perturbation_base": {"name": "x"}})
    with pytest.raises(ConfigError, match="perturbation_base"):
        unperturbed(bad)


def test_perturbation_within_bounds_and_deterministic():
    base = alphapilot_2019()
    courses = alphapilot_2019_courses(25, 7)
    again = alphapilot_2019_courses(25, np.random.default_rng(7))
    other = alphapilot_2019_courses(2, 8)
    assert len(courses) == 25
    assert all(a.gates == b.gates for a, b in zip(courses, again, strict=True))
    assert courses[0].gates != other[0].gates and courses[0].gates != courses[1].gates
    lim = np.array([base.meta["perturbation"][g.name] for g in base.gates])
    seen = np.zeros_like(lim)
    for spec in courses:
        draw = np.asarray(spec.meta["perturbation_draw"])
        assert (np.abs(draw) <= lim).all()
        seen = np.maximum(seen, np.abs(draw))
        moved = _centres(spec) - _centres(base)
        assert np.allclose(moved[:, :2], draw[:, :2], atol=1e-9) and np.allclose(moved[:, 2], 0)
        for g0, g1, d in zip(base.gates, spec.gates, draw, strict=True):
            c0, c1 = np.asarray(g0.corners), np.asarray(g1.corners)
            a0 = np.arctan2(*(c0[1] - c0[0])[[1, 0]])
            a1 = np.arctan2(*(c1[1] - c1[0])[[1, 0]])
            turn = math.degrees(math.remainder(a1 - a0, 2 * math.pi))
            assert abs(turn - d[2]) < 1e-6 and np.allclose(c1[:, 2], c0[:, 2])
        t = _fly_through(spec, spec.meta["order_index"], gate_width=0.3, inflation=0.1)
        assert t.passed.all()
    fixed = lim.sum(axis=1) == 0
    assert (seen[fixed] == 0).all() and (seen[~fixed] > 0).any(axis=1).all()
    # 25 draws of a uniform over +-L reach past half the bound on every moving axis
    assert (seen[lim > 0] > 0.5 * lim[lim > 0]).all()
    assert perturb_course(base, 3).gates == perturb_course(base, 3).gates


def test_loader_and_sampler_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[course]\nname = 'x'\n")
    with pytest.raises(FileFormatError, match="bad.toml"):
        alphapilot_2019(bad)
    bad.write_text("this is = = not toml")
    with pytest.raises(FileFormatError, match="bad.toml"):
        alphapilot_2019(bad)
    with pytest.raises(ConfigError, match="rng"):
        perturb_course(alphapilot_2019(), "seven")
    with pytest.raises(ConfigError, match="n:"):
        alphapilot_2019_courses(0)


@pytest.mark.parametrize(("kind", "n"), [("straight", 4), ("circular", 8), ("snaked", 6)])
def test_boundary_predictor_courses(kind, n):
    spec = boundary_predictor_course(kind)
    c = _centres(spec)
    assert len(spec.gates) == n
    assert set(np.round(c[:, 2], 6)) == {0.3, 0.525}
    legs = np.linalg.norm(np.diff(c[:, :2], axis=0), axis=1)
    assert np.allclose(legs, 1.2)  # default spacing, inside the paper's 0.8-1.5 m
    head = np.arctan2(*np.diff(c[:, :2], axis=0).T[::-1])
    turns = np.abs(np.remainder(np.diff(head) + math.pi, 2 * math.pi) - math.pi)
    assert (turns <= math.pi / 4 + 1e-9).all()
    if kind == "circular":
        assert abs(np.linalg.norm(c[0, :2] - c[-1, :2]) - 1.2) < 1e-9  # closed lap
    t = _fly_through(spec, spec.meta["order_index"], gate_width=0.05, inflation=0.02)
    assert t.passed.all()
    lo = np.asarray(spec.bounds_min)
    assert lo[2] == 0.0 and (np.asarray(spec.gates[0].corners)[:, 2] > 0).all()


def test_boundary_predictor_errors():
    with pytest.raises(UnknownNameError, match="circular, snaked, straight"):
        boundary_predictor_course("figure8")
    with pytest.raises(ConfigError, match="spacing"):
        boundary_predictor_course("straight", spacing=-1.0)


def test_random_courses_are_seeded_and_within_ranges():
    cfg = GateCourseConfig(n_gates=8)
    a, b = random_gate_course(5, cfg), random_gate_course(np.random.default_rng(5), cfg)
    assert a.gates == b.gates and a.gates != random_gate_course(6, cfg).gates
    for seed in range(20):
        spec = random_gate_course(seed, cfg)
        c = _centres(spec)
        legs = np.linalg.norm(np.diff(c[:, :2], axis=0), axis=1)
        assert len(spec.gates) == 8 and ((legs >= 0.8) & (legs <= 1.5)).all()
        assert set(np.round(c[:, 2], 6)) <= {0.3, 0.525}
        far = np.linalg.norm(c[:, None, :2] - c[None, :, :2], axis=-1)
        far[np.abs(np.subtract.outer(range(8), range(8))) <= 1] = np.inf
        assert far.min() >= cfg.min_separation
    with pytest.raises(ConfigError, match="spacing"):
        GateCourseConfig(spacing=(1.0, 0.5))
