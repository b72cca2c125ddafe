"""EWA splat renderer: analytic single-Gaussian footprint, reference vs fast parity, depth of a
synthesized scene against the ray-cast depth of its geometry, input checks."""

from __future__ import annotations

import math

import pytest
import torch

from volary.errors import ConfigError, UnknownNameError
from volary.math.quaternion import quat_from_euler, quat_to_rotmat
from volary.sensors.splat import GaussianSplats, camera_poses, render, splats_from_colours
from volary.sensors.splat.render import ALPHA_MAX, ALPHA_MIN, look_at
from volary.worlds import Box, Cylinder, Gate, SceneSpec


def one_gaussian(mean, scales, quat, opacity, colour) -> GaussianSplats:
    t = torch.tensor
    return splats_from_colours(
        t([mean], dtype=torch.float64),
        t([quat], dtype=torch.float64),
        t([scales], dtype=torch.float64),
        t([opacity], dtype=torch.float64),
        t([colour], dtype=torch.float64),
    )


@pytest.mark.parametrize("backend", ["reference", "torch", "fast"])
def test_single_gaussian_renders_the_analytic_footprint(backend):
    """alpha(u) = o exp(-d^T S^-1 d / 2), S = J R S^2 R^T J^T + blur I (3DGS Eq. 5)."""
    mean, sig, o, col = (0.3, -0.2, 3.0), (0.3, 0.12, 0.02), 0.8, (0.9, 0.4, 0.1)
    quat = quat_from_euler(*torch.tensor([0.4, -0.3, 0.9], dtype=torch.float64)).tolist()
    s = one_gaussian(mean, sig, quat, o, col)
    fx, fy, cx, cy, w, h, blur = 60.0, 55.0, 31.0, 25.0, 64, 48, 0.3
    img = render(s, (fx, fy, cx, cy), torch.eye(4, dtype=torch.float64), w, h, backend=backend)
    x, y, z = mean
    jac = torch.tensor(
        [[fx / z, 0, -fx * x / z**2], [0, fy / z, -fy * y / z**2]], dtype=torch.float64
    )
    r = quat_to_rotmat(torch.tensor(quat, dtype=torch.float64))
    cov = jac @ r @ torch.diag(torch.tensor(sig, dtype=torch.float64) ** 2) @ r.T @ jac.T
    cov = cov + blur * torch.eye(2, dtype=torch.float64)
    centre = torch.tensor([fx * x / z + cx, fy * y / z + cy], dtype=torch.float64)
    v, u = torch.meshgrid(torch.arange(h) + 0.5, torch.arange(w) + 0.5, indexing="ij")
    d = torch.stack((u, v), -1).double() - centre
    alpha = o * torch.exp(-0.5 * torch.einsum("hwi,ij,hwj->hw", d, torch.linalg.inv(cov), d))
    alpha = torch.where(alpha >= ALPHA_MIN, alpha.clamp(max=ALPHA_MAX), 0.0)
    torch.testing.assert_close(img.alpha[0], alpha, atol=1e-9, rtol=0)
    rgb = alpha[..., None] * torch.tensor(col, dtype=torch.float64)
    torch.testing.assert_close(img.rgb[0], rgb, atol=1e-9, rtol=0)
    assert alpha.sum() > 20 * o  # the footprint spans many pixels, not a point


def random_scene(g: int, degree: int, seed: int, batch: int | None = None) -> GaussianSplats:
    gen = torch.Generator().manual_seed(seed)
    lead = () if batch is None else (batch,)
    k = (degree + 1) ** 2
    return GaussianSplats(
        torch.randn(*lead, g, 3, generator=gen) * torch.tensor([1.5, 1.0, 1.0])
        + torch.tensor([0.0, 0.0, 5.0]),
        torch.randn(*lead, g, 4, generator=gen),
        torch.log(0.02 + 0.15 * torch.rand(*lead, g, 3, generator=gen)),
        2.0 * torch.randn(*lead, g, generator=gen),
        0.6 * torch.randn(*lead, g, k, 3, generator=gen),
    )


def poses(n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    pos = 0.4 * torch.randn(n, 3, generator=gen)
    eul = 0.15 * torch.randn(n, 3, generator=gen)
    t = torch.eye(4).repeat(n, 1, 1)
    t[:, :3, :3] = quat_to_rotmat(quat_from_euler(*eul.unbind(-1)))
    t[:, :3, 3] = pos
    return t


@pytest.mark.parametrize(
    ("n", "g", "degree", "size", "batched"),
    [(1, 1500, 0, (40, 30), False), (3, 2000, 3, (33, 47), False), (2, 800, 2, (36, 24), True)],
)
@pytest.mark.parametrize("backend", ["fast", "torch"])
def test_fast_path_matches_reference(n, g, degree, size, batched, backend):
    """Tolerance: 1e-3 mean absolute error in [0, 1] colour (the issue's acceptance); the
    paths run the same equations, so the measured error is ~3e-8 mean, 3e-7 max (float32
    rounding)."""
    s = random_scene(g, degree, seed=n + g, batch=n if batched else None)
    k = torch.tensor([[38.0, 36.0, size[0] / 2, size[1] / 2]]).expand(n, 4)
    bg = (0.2, 0.3, 0.4)
    ref = render(s, k, poses(n, 1), *size, backend="reference", background=bg)
    fast = render(s, k, poses(n, 1), *size, backend=backend, background=bg)
    assert ref.rgb.shape == (n, size[1], size[0], 3)
    assert (ref.rgb - fast.rgb).abs().mean() < 1e-3
    assert (ref.rgb - fast.rgb).abs().max() < 1e-4  # much tighter than the acceptance
    assert (ref.alpha - fast.alpha).abs().max() < 1e-4
    both = torch.isfinite(ref.depth) & torch.isfinite(fast.depth)
    assert torch.equal(torch.isfinite(ref.depth), torch.isfinite(fast.depth))
    assert (ref.depth - fast.depth)[both].abs().max() < 1e-4
    assert ref.alpha.mean() > 0.3  # the scene fills a good part of the frame


def test_per_env_batch_does_not_change_an_env():
    s = random_scene(600, 1, seed=9)
    k = (30.0, 30.0, 16.0, 16.0)
    t = poses(4, 2)
    all4 = render(s, k, t, 32, 32, backend="fast")
    one = render(s, k, t[2:3], 32, 32, backend="fast")
    torch.testing.assert_close(all4.rgb[2:3], one.rgb)


def small_world() -> SceneSpec:
    return SceneSpec(
        "small",
        (-1.0, -4.0, 0.0),
        (12.0, 4.0, 4.0),
        obstacles=(
            Box((6.0, 1.0, 1.0), (1.0, 1.5, 2.0), yaw=0.4, object_id=1),
            Cylinder((4.0, -1.5, 1.5), 0.4, 3.0, object_id=2),
            Box((10.0, 0.0, 2.0), (0.5, 8.0, 4.0), object_id=3),
        ),
        gates=(Gate(((3, -0.6, 2.2), (3, 0.6, 2.2), (3, 0.6, 1.0), (3, -0.6, 1.0)), object_id=4),),
        start=(0.0, 0.0, 1.5),
    )


def interior(seg: torch.Tensor, valid: torch.Tensor, margin: int) -> torch.Tensor:
    """Valid pixels whose (2 margin + 1)^2 neighbourhood shows one object id (no silhouette,
    no miss within ``margin`` px)."""
    s = torch.where(valid, seg, torch.full_like(seg, -1)).double()[:, None]
    hi = torch.nn.functional.max_pool2d(s, 2 * margin + 1, 1, margin)[:, 0]
    lo = -torch.nn.functional.max_pool2d(-s, 2 * margin + 1, 1, margin)[:, 0]
    return valid & (hi == lo)


@pytest.mark.parametrize("backend", ["fast", pytest.param("reference", marks=pytest.mark.slow)])
def test_synthesized_scene_depth_matches_ray_cast_depth(backend):
    """Plane depth of the synthesized splats against Embree z-depth of the same geometry, on
    pixels >= 2 px from any object boundary (segmentation) or miss: with the 0.3 px^2
    dilation a sub-pixel disc spreads over ~2 px (3.3 sigma, sigma ~ 0.6 px), so pixels
    nearer a silhouette legitimately blend two depths. Tolerance: median 5 mm, 95th percentile
    3 cm (measured: median 0, p95 1.3 cm, p99 7 cm). The residual is discs overhanging convex
    edges (box corners, the facets of the 24-sided synthesized cylinder) by up to
    3 sigma = 9 cm, seen in front of the neighbouring face; facets of the 24- vs 64-sided
    cylinder differ by r (1 - cos(pi/24)) = 3.4 mm."""
    from volary.sensors import DepthCamera, camera_config
    from volary.sensors.raycast.registry import make_raycaster
    from volary.sensors.splat.synth import synthesize

    spec = small_world()
    splats = synthesize(spec, seed=0, spacing=0.05, floor_spacing=0.12)
    cfg = camera_config(
        "ideal_64", width=64, height=48, hfov=math.radians(80), max_range=30.0,
        segmentation=True, normals=False, invalid_value=float("nan"),
    )  # fmt: skip
    pos = torch.tensor([[0.0, 0.0, 1.5], [1.0, 1.5, 2.5], [2.0, -2.0, 1.0]])
    quat = quat_from_euler(
        torch.zeros(3), torch.tensor([0.0, 0.3, -0.1]), torch.tensor([0.0, -0.4, 0.5])
    )
    cast = DepthCamera(cfg, make_raycaster(spec, 3, backend="embree"))(pos, quat)
    img = render(splats, cfg.intrinsics.float(), camera_poses(pos, quat), 64, 48, backend=backend)
    inner = interior(cast.segmentation, cast.valid, margin=2)
    assert inner.sum() > 0.5 * cast.valid.sum()  # measured 0.59: most surface pixels count
    assert torch.isfinite(img.depth[inner]).all()
    err = (img.depth - cast.depth)[inner].abs()
    assert err.median() < 0.005
    assert torch.quantile(err, 0.95) < 0.03
    # every surface the caster sees is opaque in the splat rendering
    assert (img.alpha[cast.valid] > 0.5).float().mean() > 0.99


def test_plane_depth_is_exact_on_a_floor_seen_at_grazing_angles():
    """A floor of flat discs seen from 1.5 m: each disc's plane is the floor, so the plane depth
    equals the analytic ray / floor depth at every covered pixel, also far away where one pixel
    row spans metres and the footprint of a disc (dilated to ~2 px) reaches far beyond the disc
    itself (a clamp to the disc's own +-3 sigma biased such pixels by up to 0.2 m)."""
    from volary.sensors.splat.synth import synthesize

    spec = SceneSpec("floor", (-1.0, -15.0, 0.0), (25.0, 15.0, 3.0))
    s = synthesize(spec, seed=1, floor_spacing=0.15)
    k = (38.0, 38.0, 32.0, 24.0)
    cam = look_at((0.0, 0.0, 1.5), (10.0, 0.0, 1.2))
    img = render(s.to(dtype=torch.float64), k, cam, 64, 48)
    v = torch.arange(48, dtype=torch.float64)[:, None] + 0.5
    u = torch.arange(64, dtype=torch.float64)[None] + 0.5
    rays = torch.stack(
        (
            (u - 32.0) / 38.0 + 0 * v,
            (v - 24.0) / 38.0 + 0 * u,
            torch.ones(48, 64, dtype=torch.float64),
        ),
        -1,
    )
    down = rays @ cam[:3, :3].T  # world direction per unit camera z
    z_true = torch.where(down[..., 2] < 0, 1.5 / -down[..., 2], torch.tensor(math.nan))
    ok = torch.isfinite(img.depth[0]) & (z_true < 15.0)  # the floor's edges are farther
    assert ok.sum() > 0.3 * 64 * 48
    rel = ((img.depth[0] - z_true) / z_true)[ok].abs()
    assert rel.max() < 1e-4


def test_per_env_splats_render_each_env_like_its_own_scene():
    """(N, G) splats (one scene per env) against N renders of (G,) scenes, both paths."""
    n, size = 3, (30, 20)
    s = random_scene(400, 1, seed=4, batch=n)
    k = (25.0, 25.0, 15.0, 10.0)
    t = poses(n, 3)
    for backend in ("reference", "torch", "fast"):
        both = render(s, k, t, *size, backend=backend)
        for i in range(n):
            one = GaussianSplats(
                s.means[i], s.quats[i], s.log_scales[i], s.opacity_logits[i], s.sh[i]
            )
            torch.testing.assert_close(
                both.rgb[i], render(one, k, t[i], *size, backend=backend).rgb[0]
            )


def test_center_depth_mode_is_biased_toward_the_camera():
    from volary.sensors.splat.synth import synthesize

    spec = SceneSpec("wall", (-1, -3, 0), (6, 3, 3), obstacles=(Box((5, 0, 1.5), (1, 6, 3)),))
    s = synthesize(spec, spacing=0.1, ground=False)
    cam = look_at((0.0, -2.0, 1.5), (4.5, 1.0, 1.5)).float()  # oblique view of the face x = 4.5
    k = (30.0, 30.0, 16.0, 16.0)
    plane = render(s, k, cam, 32, 32, depth_mode="plane")
    centre = render(s, k, cam, 32, 32, depth_mode="center")
    ok = torch.isfinite(plane.depth) & torch.isfinite(centre.depth)
    assert (centre.depth - plane.depth)[ok].median() < -0.005


def test_input_checks():
    s = random_scene(10, 0, seed=0)
    k, t = (10.0, 10.0, 8.0, 8.0), torch.eye(4)
    with pytest.raises(UnknownNameError, match="reference"):
        render(s, k, t, 16, 16, backend="nope")
    with pytest.raises(ConfigError, match="CUDA"):
        render(s, k, t, 16, 16, backend="gsplat")
    with pytest.raises(ConfigError, match="width"):
        render(s, k, t, 0, 16)
    with pytest.raises(ConfigError, match="intrinsics"):
        render(s, (10.0, -1.0, 8.0, 8.0), t, 16, 16)
    with pytest.raises(ConfigError, match="world_from_cam"):
        render(s, k, torch.zeros(2, 3, 4), 16, 16)
    with pytest.raises(ConfigError, match="orthonormal"):
        render(s, k, 2 * torch.eye(4), 16, 16)
    with pytest.raises(ConfigError, match="background"):
        render(s, k, t, 16, 16, background=(1.0, 0.0))
    with pytest.raises(ConfigError, match="depth_mode"):
        render(s, k, t, 16, 16, depth_mode="median")


def test_gaussians_behind_the_camera_are_not_drawn():
    s = one_gaussian((0.0, 0.0, -2.0), (0.3, 0.3, 0.3), (1.0, 0, 0, 0), 0.9, (1.0, 1.0, 1.0))
    img = render(s, (20.0, 20.0, 16.0, 16.0), torch.eye(4, dtype=torch.float64), 32, 32)
    assert img.alpha.max() == 0 and torch.isnan(img.depth).all()


@pytest.mark.parametrize("backend", ["reference", "torch", "fast"])
def test_non_finite_gaussians_are_skipped(backend):
    """Documented output: Gaussians with a NaN/inf field or a zero quaternion are not drawn;
    the image equals the one of the scene without them."""
    s = random_scene(300, 1, seed=2)
    k, t = (30.0, 30.0, 16.0, 16.0), poses(2, 5)
    clean = render(s, k, t, 32, 32, backend=backend)
    fields = {
        f: getattr(s, f).clone() for f in ("means", "quats", "log_scales", "opacity_logits", "sh")
    }
    fields["means"][3, 0] = math.nan
    fields["quats"][5] = 0.0
    fields["log_scales"][7, 2] = math.inf
    fields["opacity_logits"][9] = math.nan
    fields["sh"][11, 2, 1] = math.nan
    bad = GaussianSplats(**fields)
    keep = torch.ones(300, dtype=torch.bool)
    keep[[3, 5, 7, 9, 11]] = False
    sub = GaussianSplats(**{f: v[keep] for f, v in fields.items()})
    a, b = render(bad, k, t, 32, 32, backend=backend), render(sub, k, t, 32, 32, backend=backend)
    assert torch.isfinite(a.rgb).all()
    torch.testing.assert_close(a.rgb, b.rgb)
    torch.testing.assert_close(a.depth, b.depth, equal_nan=True)
    assert not torch.equal(a.rgb, clean.rgb)  # the dropped ones were visible


@pytest.mark.parametrize("backend", ["reference", "torch", "fast"])
def test_empty_scene_and_cameras_outside_the_scene_give_the_background(backend):
    """Documented output: no Gaussian in view -> background RGB, alpha 0, depth ``depth_fill``
    (NaN by default) for an empty scene, a camera 1 km away looking away, or inside the near
    plane of every Gaussian."""
    bg = (0.1, 0.2, 0.3)
    empty = GaussianSplats(
        torch.zeros(0, 3),
        torch.zeros(0, 4),
        torch.zeros(0, 3),
        torch.zeros(0),
        torch.zeros(0, 1, 3),
    )
    s = random_scene(200, 0, seed=1)
    away = look_at((1000.0, 0.0, 0.0), (2000.0, 0.0, 0.0)).float()
    for scene, cam in ((empty, torch.eye(4)), (s, away)):
        img = render(scene, (20.0, 20.0, 8.0, 8.0), cam, 16, 16, backend=backend, background=bg)
        torch.testing.assert_close(img.rgb, torch.tensor(bg).expand(1, 16, 16, 3))
        assert img.alpha.max() == 0 and torch.isnan(img.depth).all()
    filled = render(s, (20.0, 20.0, 8.0, 8.0), away, 16, 16, backend=backend, depth_fill=-1.0)
    assert (filled.depth == -1.0).all()


def test_torch_pair_path_is_independent_of_its_chunking():
    """Depth-ordered chunks of at most max_pairs pairs carry the transmittance between them:
    200 pairs per chunk (dozens of chunks) gives the one-chunk result."""
    from volary.sensors.splat.pairs import render_pairs
    from volary.sensors.splat.render import project

    s = random_scene(700, 1, seed=12)
    k = torch.tensor([[30.0, 30.0, 16.0, 12.0]]).expand(2, 4)
    pr = project(s, k, poses(2, 4), 32, 24, near=0.01, far=1e4, blur=0.3, sh_degree=1)
    one = render_pairs(pr, 32, 24, max_pairs=1 << 30)
    many = render_pairs(pr, 32, 24, max_pairs=200)
    for a, b in zip(one, many, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert float(one[2].mean()) > 0.3


@pytest.mark.parametrize("batched", [False, True])
def test_torch_paths_chunked_over_envs_give_the_same_images(monkeypatch, batched):
    """PROJECT_BUDGET bounds the (N, G) projection by rendering envs in chunks; one env per
    chunk gives the all-at-once result (shared and per-env splats)."""
    import importlib

    mod = importlib.import_module("volary.sensors.splat.render")
    s = random_scene(300, 1, seed=6, batch=3 if batched else None)
    k, t = (25.0, 25.0, 12.0, 10.0), poses(3, 8)
    whole = {b: render(s, k, t, 24, 20, backend=b) for b in ("torch", "reference")}
    monkeypatch.setattr(mod, "PROJECT_BUDGET", 1)
    for b, img in whole.items():
        parts = render(s, k, t, 24, 20, backend=b)
        torch.testing.assert_close(parts.rgb, img.rgb)
        torch.testing.assert_close(parts.depth, img.depth, equal_nan=True)


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize(("n", "threads"), [(5, 3), (1, 2), (1, 7), (3, 8)])
def test_fast_path_threads_do_not_change_the_images(batched, n, threads):
    """Work split over torch.get_num_threads() threads (runs of envs, or bands of rows when
    there are fewer envs than threads): same bits as one thread."""
    s = random_scene(400, 2, seed=7, batch=n if batched else None)
    k, t = (25.0, 25.0, 12.0, 10.0), poses(n, 9)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = render(s, k, t, 24, 20, backend="fast")
        torch.set_num_threads(threads)
        many = render(s, k, t, 24, 20, backend="fast")
    finally:
        torch.set_num_threads(before)
    assert float(one.alpha.mean()) > 0.2  # a scene, not the background
    assert torch.equal(one.rgb, many.rgb) and torch.equal(one.alpha, many.alpha)
    torch.testing.assert_close(one.depth, many.depth, rtol=0, atol=0, equal_nan=True)


def test_splat_camera_renders_what_render_gives_for_its_mount_and_checks_its_inputs():
    """``SplatCamera`` (the rigs' callable RGB camera): body poses in, the image ``render``
    gives for the forward mount and the depth camera's pinhole intrinsics, background where no
    Gaussian covers a pixel; clear errors for bad arguments."""
    from volary.sensors.rays import pinhole_intrinsics
    from volary.sensors.splat import SplatCamera, to_uint8

    s = one_gaussian((3.0, 0.0, 1.0), (0.3, 0.3, 0.3), (1.0, 0, 0, 0), 0.9, (0.9, 0.2, 0.1))
    cam = SplatCamera(s, 32, 24, math.pi / 2, background=(0.0, 0.0, 1.0))
    pos = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    quat = torch.tensor([[1.0, 0, 0, 0], [0.0, 0, 0, 1.0]])  # facing it, and facing away
    img = cam(pos, quat)
    k = pinhole_intrinsics(32, 24, math.pi / 2, None).tolist()
    want = render(s, k, camera_poses(pos, quat), 32, 24, background=(0.0, 0.0, 1.0))
    assert torch.equal(img.rgb, want.rgb)
    assert img.rgb[0, 12, 16, 0] > 0.5  # the red Gaussian straight ahead
    assert torch.equal(img.rgb[1], torch.tensor([0.0, 0.0, 1.0]).expand(24, 32, 3))
    px = to_uint8(torch.tensor([-0.1, 0.5, 1.2]))
    assert px.dtype == torch.uint8 and px.tolist() == [0, 128, 255]
    bad = (({"width": 0}, "width"), ({"hfov": 4.0}, "hfov"), ({"backend": "gl"}, "backend"),
           ({"background": (2, 0, 0)}, "background"))  # fmt: skip
    for kw, match in bad:
        args = {"width": 32, "height": 24, "hfov": 1.0} | kw
        with pytest.raises(ConfigError, match=match):
            SplatCamera(s, **args)
    with pytest.raises(ConfigError, match="splats"):
        SplatCamera("scene.ply", 32, 24)
