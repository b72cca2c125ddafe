"""Ray casting: closed-form distances, backend parity, batching of scenes, input checks."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from volary.errors import ConfigError, MissingDependencyError, UnknownNameError
from volary.sensors.raycast import FLOOR_ID, make_raycaster
from volary.sensors.raycast.base import tessellation_tolerance, world_triangles
from volary.worlds import Box, Cylinder, Plane, Scene, SceneSpec, Sphere, make_scenario, scene_sdf

torch.set_num_threads(1)
SEG = 64
MESH = ("embree", "warp")
ALL = ("torch", *MESH)

# One object of each kind around the origin; every ray starts at (0, 0, 1).
YAW = 0.4
SPEC = SceneSpec(
    "analytic",
    (-10.0, -10.0, 0.0),
    (10.0, 10.0, 6.0),
    obstacles=(
        Plane((8.0, 0.0, 0.0), (-1.0, 0.0, 0.0), object_id=1),  # wall x = 8
        Sphere((0.0, 5.0, 1.0), 0.7, object_id=2),
        Cylinder((5.0, 0.0, 1.0), 0.5, 2.0, object_id=3),  # upright, z in [0, 2]
        Cylinder((-3.0, 0.0, 1.0), 0.5, 2.0, (1.0, 0.0, 1.0), object_id=4),  # tilted 45 deg
        Box((0.0, -5.0, 1.0), (2.0, 1.0, 2.0), YAW, object_id=5),
    ),
)
S21 = math.sqrt(0.21)
# (origin, direction, distance, object id, normal facing the origin, kind: flat or curved radius)
CASES = [
    ((0, 0, 1), (0, 0, -1), 1.0, FLOOR_ID, (0, 0, 1), 0.0),
    ((0, 0.2, 4), (1, 0, 0), 8.0, 1, (-1, 0, 0), 0.0),  # wall, above the cylinder
    ((0, 0, 1), (0, 1, 0), 5 - 0.7, 2, (0, -1, 0), 0.7),
    ((0.3, 0, 1), (0, 1, 0), 5 - math.sqrt(0.49 - 0.09), 2, (0.3 / 0.7, -0.4 / 0.7 * 1, 0), 0.7),
    ((0, 0.2, 1), (1, 0, 0), 5 - S21, 3, (-S21 / 0.5, 0.2 / 0.5, 0), 0.5),
    ((5, 0.1, 4), (0, 0, -1), 2.0, 3, (0, 0, 1), 0.0),  # top cap
    ((0, 0, 1), (-1, 0, 0), 3 - 0.5 * math.sqrt(2), 4, (math.sqrt(0.5), 0, -math.sqrt(0.5)), 0.5),
    ((0, 0, 1), (0, -1, 0), 5 - 0.5 / math.cos(YAW), 5, (-math.sin(YAW), math.cos(YAW), 0), 0.0),
]
# the sphere normal at the off-centre hit: (x, y - 5, 0) / r with y - 5 = -sqrt(0.4)
CASES[3] = (*CASES[3][:4], (0.3 / 0.7, -math.sqrt(0.4) / 0.7, 0.0), 0.7)


def _rays(cases, dtype=torch.float64):
    o = torch.tensor([[c[0] for c in cases]], dtype=dtype)
    d = torch.nn.functional.normalize(torch.tensor([[c[1] for c in cases]], dtype=dtype), dim=-1)
    return o, d


def test_torch_reference_matches_closed_form(device):
    caster = make_raycaster(SPEC, backend="torch", device=device, dtype=torch.float64)
    hits = caster.cast(*(x.to(device) for x in _rays(CASES)), 50.0)
    assert hits.distance.device.type == torch.device(device).type
    want = torch.tensor([[c[2] for c in CASES]], dtype=torch.float64)
    torch.testing.assert_close(hits.distance.cpu(), want, atol=1e-9, rtol=0)
    assert hits.object_id.tolist() == [[c[3] for c in CASES]]
    normals = torch.tensor([[c[4] for c in CASES]], dtype=torch.float64)
    torch.testing.assert_close(hits.normal.cpu(), normals, atol=1e-9, rtol=0)


@pytest.mark.parametrize(
    ("backend", "device"),
    [("embree", "cpu"), ("warp", "cpu")]
    + [pytest.param("warp", "cuda", marks=pytest.mark.gpu)] * torch.cuda.is_available(),
)
def test_mesh_backends_match_closed_form_within_tessellation_bound(backend, device):
    caster = make_raycaster(SPEC, backend=backend, device=device, segments=SEG)
    hits = caster.cast(*(x.to(device) for x in _rays(CASES, torch.float32)), 50.0)
    hits = type(hits)(hits.distance.cpu(), hits.object_id.cpu(), hits.normal.cpu())
    assert hits.object_id.tolist() == [[c[3] for c in CASES]]
    for i, (*_, dist, _, normal, radius) in enumerate(CASES):
        # hit lies beyond the true one by at most the chord of one facet (base.py), never nearer
        bound = 2 * radius * math.sin(2 * math.pi / SEG) + 1e-5
        err = float(hits.distance[0, i]) - dist
        assert -1e-5 <= err <= bound, (i, err, bound)
        cos = float((hits.normal[0, i] * torch.tensor(normal)).sum())
        assert cos >= math.cos(2 * math.pi / SEG) - 1e-6 if radius else cos > 1 - 1e-6


def _free_origins(spec: SceneSpec, n: int, clearance: float, gen: torch.Generator) -> torch.Tensor:
    """n points in the bounds at least `clearance` from every obstacle (plus the start)."""
    lo, hi = torch.tensor(spec.bounds_min), torch.tensor(spec.bounds_max)
    p = lo + (hi - lo) * torch.rand(4 * n, 3, generator=gen, dtype=torch.float64)
    p[:, 2] = p[:, 2].clamp(min=0.1)
    sdf = scene_sdf(Scene.stack(spec, dtype=torch.float64), p[None]).distance[0]
    p = torch.cat([torch.tensor([spec.start], dtype=torch.float64), p[sdf > clearance]])
    return p[:n]


def _scenario_rays(spec: SceneSpec, n_origins: int, per_origin: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    o = _free_origins(spec, n_origins, 0.05, gen).repeat_interleave(per_origin, 0)
    d = torch.nn.functional.normalize(torch.randn(len(o), 3, generator=gen, dtype=torch.float64))
    return o[None], d[None]


SCENARIOS = [
    ("forest", 0),
    ("urban", 1),
    ("maze", 2),
    ("random_cylinders", 3),
    ("perlin", 4),
    ("narrow_gap", 5),
    ("sudden_drop", 6),
]


@pytest.mark.parametrize(("kind", "seed"), SCENARIOS)
def test_embree_agrees_with_torch_reference(kind, seed):
    spec = make_scenario(kind, seed)
    o, d = _scenario_rays(spec, 16, 256, seed)
    ref = make_raycaster(spec, backend="torch", dtype=torch.float64).cast(o, d, 60.0)
    emb = make_raycaster(spec, backend="embree", segments=SEG).cast(o.float(), d.float(), 60.0)
    assert (ref.hit == emb.hit).double().mean() >= 0.995
    err = emb.distance.double() - ref.distance
    f32 = 1e-4 + 2e-6 * ref.distance  # float32 rounding of the mesh backend, m
    both = ref.hit & emb.hit
    assert (err >= -f32)[both].all()  # the mesh solid lies inside the true one
    # same object, or coincident faces of touching objects (maze walls): either id is right
    same = both & ((ref.object_id == emb.object_id) | (err.abs() <= f32))
    assert same.double().sum() >= 0.995 * both.double().sum()
    assert (err <= tessellation_tolerance(spec, SEG) + f32)[same].all()
    assert (emb.normal.double() * ref.normal).sum(-1)[same].quantile(0.01) > 0.99


@pytest.mark.parametrize("backend", MESH)
def test_gate_frames_are_the_same_bars_for_every_backend(backend):
    """Gates are cast as their four frame boxes (worlds.primitives.gate_boxes) by every backend."""
    from volary.worlds import alphapilot_2019

    spec = alphapilot_2019()
    gen = torch.Generator().manual_seed(0)
    centers = torch.tensor([g.center.tolist() for g in spec.gates])  # free: inside the opening
    o = centers.repeat_interleave(200, 0)[None]
    d = torch.nn.functional.normalize(torch.randn(o.shape, generator=gen), dim=-1)
    ref = make_raycaster(spec, backend="torch", dtype=torch.float64).cast(
        o.double(), d.double(), 30.0
    )
    got = make_raycaster(spec, backend=backend).cast(o, d, 30.0)
    gate_hit = ref.object_id >= 1
    assert gate_hit.sum() > 100  # rays in the gate plane end on a bar
    assert (ref.object_id == got.object_id).double().mean() >= 0.999
    both = ref.hit & got.hit
    assert (ref.distance - got.distance.double())[both].abs().max() <= 1e-4 + 2e-6 * 30


@pytest.mark.parametrize(("kind", "seed"), [("forest", 3), ("random_cylinders", 3)])
def test_torch_reference_float32_is_within_1e4_m_of_float64(kind, seed):
    """Curved surfaces are solved from the ray's closest approach (no |o - c|^2 - r^2
    cancellation), so float32 stays close to float64 even for distant trunks."""
    spec = make_scenario(kind, seed)
    o, d = _scenario_rays(spec, 16, 256, seed)
    a = make_raycaster(spec, backend="torch", dtype=torch.float64).cast(o, d, 80.0)
    b = make_raycaster(spec, backend="torch").cast(o.float(), d.float(), 80.0)
    assert torch.equal(a.hit, b.hit) and torch.equal(a.object_id, b.object_id)
    assert (a.distance - b.distance.double())[a.hit].abs().max() <= 1e-4


@pytest.mark.parametrize(("kind", "seed"), SCENARIOS[:3])
def test_warp_cpu_agrees_with_embree_to_1e4_m(kind, seed):
    spec = make_scenario(kind, seed)
    o, d = _scenario_rays(spec, 16, 256, seed)
    o, d = o.float(), d.float()
    emb = make_raycaster(spec, backend="embree").cast(o, d, 60.0)
    wrp = make_raycaster(spec, backend="warp").cast(o, d, 60.0)
    assert (emb.hit == wrp.hit).double().mean() >= 0.9995
    both = emb.hit & wrp.hit
    assert (emb.distance - wrp.distance)[both].abs().max() <= 1e-4
    # ids agree except on coincident faces of touching objects (either id is right there)
    assert ((emb.object_id == wrp.object_id) | both).all()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_warp_cuda_agrees_with_embree_to_1e4_m():
    spec = make_scenario("forest", 0)
    o, d = _scenario_rays(spec, 64, 1024, 0)
    o, d = o.float(), d.float()
    emb = make_raycaster(spec, backend="embree").cast(o, d, 60.0)
    wrp = make_raycaster(spec, backend="warp", device="cuda").cast(o.cuda(), d.cuda(), 60.0)
    assert wrp.distance.device.type == "cuda"
    assert (emb.hit == wrp.hit.cpu()).double().mean() >= 0.9995
    both = emb.hit & wrp.hit.cpu()
    assert (emb.distance - wrp.distance.cpu())[both].abs().max() <= 1e-4


def test_torch_triangles_agree_with_embree():
    """Mesh obstacles reach the reference as Scene.tri_* and go through Moller-Trumbore."""
    from volary.worlds.primitives import Mesh

    spec = SceneSpec("t", (-10, -10, 0), (10, 10, 6), obstacles=SPEC.obstacles[1:])
    tris, _ = world_triangles(spec, 16, ground=False)
    tri_index = np.arange(3 * len(tris)).reshape(-1, 3)
    as_mesh = SceneSpec(
        "m",
        spec.bounds_min,
        spec.bounds_max,
        obstacles=(Mesh(tris.reshape(-1, 3).astype(float), tri_index, 9),),
    )
    gen = torch.Generator().manual_seed(0)
    o = torch.tensor([[[0.0, 0.0, 1.0]]]).expand(1, 2000, 3)
    d = torch.nn.functional.normalize(torch.randn(1, 2000, 3, generator=gen), dim=-1)
    ref = make_raycaster(as_mesh, backend="torch").cast(o, d, 30.0)
    emb = make_raycaster(spec, backend="embree", segments=16).cast(o, d, 30.0)
    assert (ref.hit == emb.hit).double().mean() >= 0.999
    both = ref.hit & emb.hit
    assert ref.hit.any() and (ref.distance - emb.distance)[both].abs().max() <= 1e-4
    assert ((ref.object_id == 9) == (emb.object_id > 0)).double().mean() >= 0.999


@pytest.mark.parametrize("backend", ALL)
def test_each_env_sees_only_its_own_scene(backend):
    specs = [make_scenario("forest", 0), make_scenario("urban", 1), make_scenario("maze", 2)]
    gen = torch.Generator().manual_seed(1)
    o = torch.tensor([s.start for s in specs])[:, None].expand(3, 300, 3).contiguous()
    d = torch.nn.functional.normalize(torch.randn(3, 300, 3, generator=gen), dim=-1)
    batched = make_raycaster(specs, backend=backend).cast(o, d, 40.0)
    for i, spec in enumerate(specs):
        alone = make_raycaster(spec, backend=backend).cast(o[i : i + 1], d[i : i + 1], 40.0)
        torch.testing.assert_close(batched.distance[i], alone.distance[0], atol=1e-5, rtol=0)
        assert torch.equal(batched.object_id[i], alone.object_id[0])
    # the scenes differ, so the envs' answers to the same rays differ
    assert not torch.equal(batched.object_id[0], batched.object_id[1])


@pytest.mark.parametrize("backend", ALL)
def test_batch_of_one_equals_env_0_of_many_identical(backend):
    one = make_raycaster(make_scenario("forest", 5), backend=backend)
    many = make_raycaster([make_scenario("forest", 5) for _ in range(4)], backend=backend)
    o = torch.tensor([[make_scenario("forest", 5).start]]).expand(4, 500, 3).contiguous()
    d = torch.nn.functional.normalize(
        torch.randn(4, 500, 3, generator=torch.Generator().manual_seed(2)), dim=-1
    )
    a, b = one.cast(o[:1], d[:1], 30.0), many.cast(o, d, 30.0)
    torch.testing.assert_close(a.distance[0], b.distance[0], atol=1e-6, rtol=0)
    assert torch.equal(a.object_id[0], b.object_id[0])
    if backend != "torch":  # equal specs share one BVH
        assert len(getattr(many, "_meshes", getattr(many, "_groups", []))) == 1


# ------------------------------------------------------------------------------- bad input
@pytest.fixture(params=ALL)
def caster(request):
    return make_raycaster(SPEC, 2, backend=request.param)


def _good():
    o = torch.zeros(2, 3, 3)
    o[..., 1:] = torch.tensor([2.0, 1.0])  # clear of the cylinder at y = 0
    d = torch.zeros(2, 3, 3)
    d[..., 0] = 1.0
    return o, d


@pytest.mark.parametrize(
    ("which", "bad", "words"),
    [
        ("origins", torch.zeros(2, 3), "origins: expected shape (2, R, 3)"),
        ("origins", torch.zeros(3, 3, 3), "origins: expected shape (2, R, 3), got (3, 3, 3)"),
        ("directions", torch.zeros(2, 4, 3), "directions"),
        ("directions", torch.zeros(2, 3, 3, dtype=torch.float64), "expected dtype torch.float32"),
        ("origins", torch.zeros(2, 3, 3, device="meta"), "origins: expected device cpu, got meta"),
        ("origins", [[0.0]], "origins: expected a torch.Tensor"),
    ],
)
def test_bad_arrays_raise_config_error_naming_the_argument(caster, which, bad, words):
    o, d = _good()
    args = {"origins": o, "directions": d, which: bad}
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        caster.cast(args["origins"], args["directions"], 10.0)


@pytest.mark.parametrize("max_range", [0.0, -1.0, math.inf, math.nan])
def test_bad_max_range_raises(caster, max_range):
    with pytest.raises(ConfigError, match="max_range"):
        caster.cast(*_good(), max_range)


def test_non_finite_rays_miss_without_spoiling_the_batch(caster):
    o, d = _good()
    o[0, 0, 0] = math.nan
    d[0, 1, 1] = math.nan
    o[1, 0, 2] = math.inf
    d[1, 1] = 0.0  # zero direction
    hits = caster.cast(o, d, 20.0)
    bad = torch.tensor([[True, True, False], [True, True, False]])
    assert torch.isinf(hits.distance[bad]).all() and (hits.object_id[bad] == -1).all()
    assert (hits.normal[bad] == 0).all()
    assert torch.allclose(hits.distance[~bad], torch.tensor(8.0))  # the wall x = 8


def test_max_range_is_honoured(caster):
    o, d = _good()
    assert caster.cast(o, d, 7.99).hit.sum() == 0
    assert (caster.cast(o, d, 8.01).object_id == 1).all()


@pytest.mark.parametrize("backend", ALL)
def test_ray_starting_inside_an_obstacle_reports_its_exit_surface(backend):
    """Documented in DESIGN.md: no solid test; the first surface crossed is the exit face."""
    spec = SceneSpec("in", (-5, -5, 0), (5, 5, 5), obstacles=(Box((0, 0, 2), (2, 2, 2), 0.0, 7),))
    o = torch.tensor([[[0.0, 0.0, 2.0], [0.5, 0.0, 2.0]]])
    d = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]])
    hits = make_raycaster(spec, backend=backend).cast(o, d, 10.0)
    torch.testing.assert_close(hits.distance, torch.tensor([[1.0, 1.0]]), atol=1e-5, rtol=0)
    assert hits.object_id.tolist() == [[7, 7]]
    torch.testing.assert_close(hits.normal, torch.tensor([[[-1.0, 0, 0], [0, 0, 1.0]]]))


@pytest.mark.parametrize("backend", ALL)
def test_results_come_back_in_the_casters_dtype(backend):
    caster = make_raycaster(SPEC, backend=backend, dtype=torch.float64)
    hits = caster.cast(*_rays(CASES), 50.0)
    assert hits.distance.dtype == torch.float64 and hits.normal.dtype == torch.float64
    assert hits.object_id.dtype == torch.int64


@pytest.mark.parametrize("backend", ALL)
def test_ground_false_removes_the_floor(backend):
    o, d = torch.tensor([[[0.0, 0.0, 1.0]]]), torch.tensor([[[0.0, 0.0, -1.0]]])
    assert make_raycaster(SPEC, backend=backend).cast(o, d, 5.0).object_id.item() == FLOOR_ID
    assert not make_raycaster(SPEC, backend=backend, ground=False).cast(o, d, 5.0).hit.any()


def test_unknown_backend_lists_the_valid_names():
    with pytest.raises(UnknownNameError, match="auto, embree, torch, warp"):
        make_raycaster(SPEC, backend="optix")


def test_auto_picks_embree_on_cpu():
    assert make_raycaster(SPEC).name == "embree"


@pytest.mark.parametrize(
    ("backend", "module", "extra"), [("embree", "embreex", "sensors"), ("warp", "warp", "warp")]
)
def test_missing_package_names_the_extra(monkeypatch, backend, module, extra):
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.setitem(sys.modules, name, None)  # makes `import module` fail
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingDependencyError, match=rf"volary\[{extra}\]"):
        make_raycaster(SPEC, backend=backend)


def test_importing_raycast_loads_no_backend_package():
    code = (
        "import sys, volary.sensors.raycast; print(sorted({'warp', 'embreex'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_embree_numpy_post_processing_matches_the_numba_kernel():
    """The fallback used when numba is missing gives the same hits as the fused kernel."""
    from volary.sensors.raycast.embree_backend import _post_numpy

    spec = make_scenario("forest", 0)
    o, d = _scenario_rays(spec, 4, 500, 0)
    o, d = o.float(), d.float()
    fast = make_raycaster(spec, 2, backend="embree")
    slow = make_raycaster(spec, 2, backend="embree")
    slow._post = _post_numpy  # type: ignore[attr-defined]
    a, b = (
        fast.cast(o.expand(2, -1, -1), d.expand(2, -1, -1), 30.0),
        slow.cast(o.expand(2, -1, -1), d.expand(2, -1, -1), 30.0),
    )
    assert torch.equal(a.distance, b.distance) and torch.equal(a.object_id, b.object_id)
    torch.testing.assert_close(a.normal, b.normal, atol=1e-6, rtol=0)


class _CountingScene:
    """Wraps an EmbreeScene and counts `run` calls and rays."""

    def __init__(self, scene):
        self.scene, self.calls = scene, []

    def run(self, origins, directions, **kw):
        self.calls.append(len(origins))
        return self.scene.run(origins, directions, **kw)


def test_embree_casts_all_envs_of_one_scene_in_one_run_call():
    forest, urban = make_scenario("forest", 0), make_scenario("urban", 1)
    specs = [forest, urban, make_scenario("forest", 0), forest, urban]  # 2 distinct scenes
    caster = make_raycaster(specs, backend="embree")
    groups = caster._groups  # type: ignore[attr-defined]
    assert len(groups) == 2
    groups[:] = [(_CountingScene(g[0]), *g[1:]) for g in groups]
    o = torch.zeros(5, 10, 3) + torch.tensor([5.0, 5.0, 1.0])
    d = torch.zeros(5, 10, 3) + torch.tensor([1.0, 0.0, 0.0])
    caster.cast(o, d, 10.0)
    assert [g[0].calls for g in groups] == [[30], [20]]
    one = make_raycaster([forest] * 4, backend="embree")
    one._groups[:] = [(_CountingScene(g[0]), *g[1:]) for g in one._groups]  # type: ignore[attr-defined]
    one.cast(o[:4], d[:4], 10.0)
    assert one._groups[0][0].calls == [40]  # type: ignore[attr-defined]


def test_max_range_accepts_numpy_scalars(caster):
    import numpy as np

    assert caster.cast(*_good(), np.float32(9.0)).hit.all()


@pytest.mark.parametrize("backend", ALL)
def test_zero_rays_and_non_unit_directions(backend):
    caster = make_raycaster(SPEC, 2, backend=backend)
    empty = caster.cast(torch.zeros(2, 0, 3), torch.zeros(2, 0, 3), 5.0)
    assert empty.distance.shape == (2, 0) and empty.normal.shape == (2, 0, 3)
    o, d = _good()
    hits = caster.cast(o, 2 * d, 20.0)  # t is in multiples of |d| on every backend
    assert torch.allclose(hits.distance, torch.tensor(4.0))


@pytest.mark.parametrize("backend", ALL)
def test_mesh_obstacle_is_cast_like_the_box_it_tessellates(backend):
    """A worlds Mesh obstacle (the triangles of a yawed box) gives the box's analytic hits."""
    from volary.worlds.io import box_mesh
    from volary.worlds.primitives import Mesh

    box = Box((0.0, -5.0, 1.0), (2.0, 1.0, 2.0), YAW, object_id=5)
    v, t = box_mesh(box)
    spec = SceneSpec("mesh", SPEC.bounds_min, SPEC.bounds_max, obstacles=(Mesh(v, t, 5),))
    o, d = _rays([CASES[-1], CASES[0]], torch.float32)
    hits = make_raycaster(spec, backend=backend).cast(o, d, 50.0)
    assert hits.object_id.tolist() == [[5, FLOOR_ID]]
    torch.testing.assert_close(hits.distance[0], torch.tensor([CASES[-1][2], 1.0]))
    torch.testing.assert_close(hits.normal[0, 0], torch.tensor(CASES[-1][4], dtype=torch.float32))


@pytest.mark.parametrize("backend", ALL)
def test_every_backend_satisfies_the_raycaster_protocol(backend):
    from volary.sensors.raycast import RayCaster

    caster = make_raycaster(SPEC, 3, backend=backend, dtype=torch.float64)
    assert isinstance(caster, RayCaster) and caster.name == backend
    assert caster.n_envs == 3 and caster.device == torch.device("cpu")
    assert caster.dtype == torch.float64


def test_full_frame_batch_warp_cpu_agrees_with_embree():
    """The benchmark's workload (256 envs x 64x64 frame, forest) on both mesh backends."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "raycast.py"
    module_spec = importlib.util.spec_from_file_location("raycast_bench", path)
    bench = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
    module_spec.loader.exec_module(bench)  # type: ignore[union-attr]
    spec = make_scenario("forest", 0)
    o, d = bench.frame_rays(spec, 256, "cpu")
    emb = make_raycaster(spec, 256, backend="embree").cast(o, d, 20.0)
    wrp = make_raycaster(spec, 256, backend="warp").cast(o, d, 20.0)
    assert torch.equal(emb.hit, wrp.hit) and torch.equal(emb.object_id, wrp.object_id)
    assert (emb.distance - wrp.distance)[emb.hit].abs().max() <= 1e-4
