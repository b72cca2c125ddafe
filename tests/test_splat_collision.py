"""Collision geometry of a splat scene: occupancy of opaque Gaussians, crashes detected."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from volary.errors import ConfigError
from volary.sensors.splat import GaussianSplats, load_ply, save_ply
from volary.sensors.splat.collision import occupancy, splat_scene
from volary.sensors.splat.synth import synthesize
from volary.worlds import Box, Cylinder, Scene, SceneSpec, collision_events

VOXEL = 0.2


def world() -> SceneSpec:
    return SceneSpec(
        "two",
        (-3.0, -3.0, 0.0),
        (3.0, 3.0, 3.0),
        obstacles=(
            Box((1.0, 0.0, 1.0), (0.6, 1.0, 2.0), yaw=0.3, object_id=1),
            Cylinder((-1.5, 1.0, 1.5), 0.4, 3.0, object_id=2),
        ),
    )


def points_on_surfaces(spec: SceneSpec, rng: np.random.Generator) -> np.ndarray:
    """Random points on the box and cylinder surfaces (exact geometry, not the mesh)."""
    box, cyl = spec.obstacles
    u = rng.uniform(-0.5, 0.5, (400, 3)) * np.asarray(box.size)
    ax = rng.integers(0, 3, 400)
    u[np.arange(400), ax] = np.sign(rng.uniform(-1, 1, 400)) * np.asarray(box.size)[ax] / 2
    c, s = np.cos(box.yaw), np.sin(box.yaw)
    pb = np.asarray(box.center) + u @ np.array([[c, s, 0], [-s, c, 0], [0, 0, 1]])
    th = rng.uniform(0, 2 * np.pi, 400)
    z = rng.uniform(0.0, 3.0, 400)
    pc = np.stack((-1.5 + 0.4 * np.cos(th), 1.0 + 0.4 * np.sin(th), z), -1)
    return np.concatenate((pb, pc))


def occupied(grid, pts: np.ndarray) -> np.ndarray:
    idx = np.floor((pts - np.asarray(grid.origin)) / grid.voxel).astype(int)
    inside = ((idx >= 0) & (idx < np.asarray(grid.occupied.shape))).all(1)
    out = np.zeros(len(pts), bool)
    out[inside] = grid.occupied[tuple(idx[inside].T)]
    return out


def test_occupancy_covers_the_surfaces_and_nothing_far_from_them():
    """Every surface point of the true geometry falls in an occupied voxel; every occupied
    voxel centre lies within one voxel diagonal + 3 sigma of a surface (SDF check)."""
    spec = world()
    s = synthesize(spec, seed=0, spacing=0.1, ground=False)
    grid = occupancy(s, VOXEL)
    pts = points_on_surfaces(spec, np.random.default_rng(0))
    assert occupied(grid, pts).mean() == 1.0
    centres = (np.argwhere(grid.occupied) + 0.5) * grid.voxel + np.asarray(grid.origin)
    from volary.worlds import scene_sdf

    d = scene_sdf(Scene.stack(spec, dtype=torch.float64), torch.from_numpy(centres)[None])
    reach = np.sqrt(3) * VOXEL / 2 + 3 * 0.06
    assert float(d.distance.abs().max()) <= reach


def test_splat_scene_detects_crashes_like_the_true_geometry(tmp_path):
    """Through a PLY round trip (a loaded splat has no meshes): a vehicle (radius 0.1 m)
    0.05 m off a face collides, as with the true geometry; ones > 0.6 m from every surface do
    not. (The grid holds surface shells, not solid interiors: see collision.py.)"""
    spec = world()
    path = tmp_path / "scene.ply"
    save_ply(path, synthesize(spec, seed=0, spacing=0.1))
    loaded = load_ply(path)
    derived = splat_scene(loaded, VOXEL, below=spec.bounds_min[2] + 0.05)
    assert derived.obstacles and derived.meta["occupied_voxels"] > 0
    scene = Scene.stack(derived, n_envs=4)
    pos = torch.tensor(
        [
            [1.0 + 0.35 * np.cos(0.3), 0.35 * np.sin(0.3), 1.0],  # 5 cm off the box's +x face
            [-1.5, 1.45, 1.5],  # 5 cm off the cylinder
            [-1.0, -2.0, 1.5],
            [2.5, 2.5, 2.0],
        ],
        dtype=torch.float32,
    )
    ev = collision_events(scene, pos, 0.1)
    assert ev.collided.tolist() == [True, True, False, False]
    truth = collision_events(Scene.stack(spec, n_envs=4), pos, 0.1)
    assert torch.equal(ev.collided, truth.collided)


def test_floaters_and_transparent_gaussians_are_ignored():
    spec = SceneSpec("box", (-2, -2, 0), (2, 2, 2), obstacles=(Box((0, 0, 1), (1, 1, 1)),))
    s = synthesize(spec, seed=0, ground=False)
    g = s.count
    # a faint Gaussian and a lone opaque floater far from the box
    extra = GaussianSplats(
        torch.tensor([[0.05, 1.75, 1.05], [1.75, 1.75, 1.75]]),
        torch.tensor([[1.0, 0, 0, 0], [1.0, 0, 0, 0]]),
        torch.log(torch.full((2, 3), 0.01)),
        torch.tensor([-4.0, 4.0]),  # opacity 0.018 and 0.982
        torch.zeros(2, 1, 3),
    )
    both = replace(
        s,
        extra={},
        **{
            f: torch.cat((getattr(s, f), getattr(extra, f)))
            for f in ("means", "quats", "log_scales", "opacity_logits", "sh")
        },
    )
    assert both.count == g + 2
    far = np.array([[0.05, 1.75, 1.05], [1.75, 1.75, 1.75]])
    assert occupied(occupancy(both, VOXEL), far).tolist() == [False, True]
    assert occupied(occupancy(both, VOXEL, min_count=2), far).tolist() == [False, False]


def test_bad_inputs_raise_clear_errors():
    s = synthesize(world(), seed=0, ground=False)
    with pytest.raises(ConfigError, match="voxel"):
        occupancy(s, 0.0)
    with pytest.raises(ConfigError, match="min_opacity"):
        occupancy(s, VOXEL, min_opacity=1.0)
    with pytest.raises(ConfigError, match="no Gaussian"):
        occupancy(replace(s, opacity_logits=torch.full_like(s.opacity_logits, -10.0)), VOXEL)
    with pytest.raises(ConfigError, match="one scene"):
        occupancy(
            replace(
                s,
                **{
                    f: getattr(s, f)[None]
                    for f in ("means", "quats", "log_scales", "opacity_logits", "sh")
                },
            ),
            VOXEL,
        )
    with pytest.raises(ConfigError, match="min_count"):
        occupancy(s, VOXEL, min_count=10_000)
