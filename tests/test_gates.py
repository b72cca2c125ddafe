"""The official AlphaPilot passage rule on hand-computed cases, in order, batched."""

from __future__ import annotations

import math

import pytest
import torch

from volary.errors import ConfigError
from volary.worlds import Gate, Scene, SceneSpec
from volary.worlds.gates import GateTracker, gate_planes, inside_passage


def _gate(x: float, yaw: float = 0.0, w: float = 1.0, h: float = 1.0, z: float = 1.0):
    """Corners of a vertical gate centred at (x, 0, z), opening w x h, plane yawed by ``yaw``
    from the y-z plane (normal along +x at yaw 0)."""
    u = (-math.sin(yaw) * w / 2, math.cos(yaw) * w / 2)
    return [
        [x + s * u[0], s * u[1], z + t * h / 2] for s, t in ((-1, 1), (1, 1), (1, -1), (-1, -1))
    ]


def _tracker(gates, device, n=1, **kw):
    c = torch.tensor([gates] * n, device=device)
    return GateTracker(c, **kw)


def _once(gates, pos, device, **kw) -> list[bool]:
    """Passage of each point (one env each) through the first gate of a fresh course."""
    t = _tracker(gates, device, n=len(pos), **kw)
    return t.update(torch.tensor(pos, device=device)).tolist()


def test_inflated_box_inside_and_outside(device):
    """Gate in the plane x = 0, y in [-0.5, 0.5], z in [0.5, 1.5]; inflation 0.1 gives the box
    x in [-0.1, 0.1], y in [-0.6, 0.6], z in [0.4, 1.6]."""
    pos = [
        [0.05, 0.55, 1.0],
        [0.05, 0.65, 1.0],
        [0.0, 0.0, 1.58],
        [0.0, 0.0, 1.62],
        [0.0, -0.59, 0.41],
        [0.0, -0.59, 0.39],
        [0.09, 0.0, 1.0],
        [0.11, 0.0, 1.0],
    ]
    got = _once([_gate(0.0)], pos, device, gate_width=0.3, inflation=0.1)
    assert got == [True, False, True, False, True, False, True, False]
    # no inflation: the same first point is outside the bare corner box
    assert _once([_gate(0.0)], pos[:1], device, gate_width=0.3, inflation=0.0) == [False]


def test_plane_distance_above_and_below_gate_width(device):
    """Gate yawed 45 deg: its corner box spans x, y in +-0.354 (+0.1) m, so the plane distance
    decides. Point (a, a, 1) lies at a*sqrt(2) from the plane: a = 0.2 -> 0.283 m < 0.3 passes,
    a = 0.22 -> 0.311 m > 0.3 does not (both inside the inflated box); (0.3, -0.3, 1) is in the
    plane."""
    g = _gate(0.0, yaw=math.pi / 4)
    got = _once(
        [g],
        [[0.2, 0.2, 1.0], [0.22, 0.22, 1.0], [0.3, -0.3, 1.0]],
        device,
        gate_width=0.3,
        inflation=0.1,
    )
    assert got == [True, False, True]
    # a wider gate_width admits the second point
    assert _once([g], [[0.22, 0.22, 1.0]], device, gate_width=0.32, inflation=0.1) == [True]
    centre, normal = gate_planes(torch.tensor(g))
    assert torch.allclose(normal.abs(), torch.tensor([1.0, 1.0, 0.0]) / math.sqrt(2), atol=1e-6)
    assert torch.allclose(centre, torch.tensor([0.0, 0.0, 1.0]), atol=1e-6)


def test_corner_order_does_not_matter(device):
    """AlphaPilot files list some gates' corners in Z order, not around the frame."""
    g = _gate(0.0, yaw=math.pi / 4)
    z_order = [g[0], g[1], g[3], g[2]]
    pos = torch.tensor([[0.2, 0.2, 1.0], [0.22, 0.22, 1.0]], device=device)
    for corners in (g, z_order):
        c = torch.tensor(corners, device=device)
        got = inside_passage(
            pos, c, torch.tensor(0.3, device=device), torch.tensor(0.1, device=device)
        )
        assert got.tolist() == [True, False]


def test_in_order_with_a_skipped_gate(device):
    """Gates at x = 0, 2, 4. Env 0 flies through all three; env 1 skips the middle one, which
    is marked missed when gate 3 is passed; the re-entry into gate 1's zone counts once."""
    t = _tracker([_gate(0.0), _gate(2.0), _gate(4.0)], device, n=2)
    path0 = [-1.0, 0.0, 0.05, 1.0, 2.0, 3.0, 4.0]
    path1 = [-1.0, 0.0, 0.05, 1.0, 3.0, 3.0, 4.0]
    now = []
    for a, b in zip(path0, path1, strict=True):
        pos = torch.tensor([[a, 0.0, 1.0], [b, 0.0, 1.0]], device=device)
        now.append(t.update(pos).tolist())
    assert [n[0] for n in now] == [False, True, False, False, True, False, True]
    assert [n[1] for n in now] == [False, True, False, False, False, False, True]
    assert t.passed.tolist() == [[True, True, True], [True, False, True]]
    assert t.missed.tolist() == [[False, False, False], [False, True, False]]
    assert t.next_gate.tolist() == [3, 3] and t.finished.all()
    # a gate behind the vehicle in the order is not counted again
    assert not t.update(torch.tensor([[2.0, 0.0, 1.0]] * 2, device=device)).any()
    t.reset(torch.tensor([False, True], device=device))
    assert t.next_gate.tolist() == [3, 0] and not t.passed[1].any()


def test_course_order_and_scene_input(device):
    """Course order differs from storage order; envs hold different gate counts (padding)."""
    gates = [Gate(tuple(map(tuple, _gate(x))), object_id=i) for i, x in enumerate((0.0, 2.0, 4.0))]
    a = SceneSpec("a", (-5, -5, 0), (5, 5, 5), gates=tuple(gates))
    b = SceneSpec("b", (-5, -5, 0), (5, 5, 5), gates=tuple(gates[:2]))
    scene = Scene.stack([a, b], device=device)
    t = GateTracker(scene, order=torch.tensor([[2, 0, 1], [1, 0, -1]]))
    assert t.n_gates.tolist() == [3, 2]
    assert t.update(torch.tensor([[0.0, 0, 1], [0.0, 0, 1]], device=device)).tolist() == [
        True,
        True,
    ]
    # env 0: course gate 0 is x = 4 and was skipped; env 1: course gate 0 (x = 2) skipped
    assert t.missed.tolist() == [[True, False, False], [True, False, False]]
    assert t.next_gate.tolist() == [2, 2] and t.finished.tolist() == [False, True]


def test_input_errors_name_the_argument(device):
    c = torch.tensor([[_gate(0.0)]], device=device)
    with pytest.raises(ConfigError, match="scene_or_corners"):
        GateTracker(c[0])
    with pytest.raises(ConfigError, match="order"):
        GateTracker(c, order=[3])
    with pytest.raises(ConfigError, match="gate_width"):
        GateTracker(c, gate_width=0.0)
    with pytest.raises(ConfigError, match="inflation"):
        GateTracker(c, inflation=-0.1)
    with pytest.raises(ConfigError, match=r"pos: expected a tensor of shape \(1, 3\)"):
        GateTracker(c).update(torch.zeros(2, 3, device=device))


def test_for_courses_reads_each_specs_order_and_passage_settings():
    from volary.worlds import alphapilot_2019

    spec = alphapilot_2019()
    order = list(spec.meta["order_index"])
    short = SceneSpec(**{**spec.__dict__, "meta": {**spec.meta, "order_index": order[:3],
                                                     "gate_width": 0.5}})  # fmt: skip
    tracker = GateTracker.for_courses(Scene.stack([spec, short]), [spec, short])
    assert tracker.n_gates.tolist() == [len(order), 3]  # the short course is padded with -1
    assert tracker.course_valid[1, 3:].any().item() is False
    assert tracker.gate_width.tolist() == pytest.approx([spec.meta.get("gate_width", 0.3), 0.5])
    assert tracker.inflation.tolist() == pytest.approx([spec.meta.get("inflation", 0.1)] * 2)
