"""Rotor aerodynamics (dynamics/aero.py): each effect against its paper's formula, every backend
against the one source term by term and over whole flights, and the off switch (world parity)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from volary import platforms
from volary.dynamics import aero, models
from volary.dynamics.compiled import make_stepper
from volary.dynamics.params import VehicleParams
from volary.dynamics.state import MultirotorState
from volary.dynamics.step import Disturbance, DynamicsConfig, physics_step, rollout
from volary.errors import ConfigError
from volary.math.random import env_keys
from volary.sim import Simulator

CF = platforms.get("crazyflie")
# each effect at a size where it matters on a 27 g Crazyflie (hover ~2,300 rad/s)
EFFECTS = {
    "rotor_drag_inplane": 1e-6,
    "rotor_drag_axial": 5e-7,
    "flapping": 2e-8,
    "inflow_axial": 2e-7,
    "translational_lift": 5e-8,
    "ground_effect_radius": 0.023,
}
W = 2300.0  # rad/s, every rotor


def _wrench(af, vel=(0, 0, 0), omega=(0, 0, 0), z=10.0, quat=(1, 0, 0, 0), ground=0.0):
    """(per-rotor thrusts (R,), body wrench (6,)) of the reference at rotor speed W."""
    p = VehicleParams.from_airframes(af, 1, dtype=torch.float64)
    t = lambda v: torch.tensor(np.asarray([v], float))  # noqa: E731
    q = t(quat)
    w = torch.full((1, af.n_rotors), W, dtype=torch.float64)
    h = models.rotor_heights(p, t((0, 0, z)), q, ground)
    thrust, extra = models.rotor_aero_wrench(p, w, t(vel), t(omega), h)
    total = (p.alloc @ thrust[..., None])[..., 0] + extra
    return thrust[0].numpy(), total[0].numpy()


def _with(**coeffs):
    return CF.replace(**coeffs)


def test_rotor_drag_is_rotorpys_h_force():
    """H = -|w| diag(k_d, k_d, k_z) u per rotor (RotorPy's rotor drag): with no rates every hub
    sees the body velocity, so the total is -R |w| (k_d v_x, k_d v_y, k_z v_z)."""
    kd, kz, v = 1e-6, 5e-7, np.array([2.0, -1.0, 0.5])
    _, base = _wrench(CF, vel=v)
    _, got = _wrench(_with(rotor_drag_inplane=kd, rotor_drag_axial=kz), vel=v)
    want = -4 * W * np.array([kd * v[0], kd * v[1], kz * v[2]])
    np.testing.assert_allclose(got[:3] - base[:3], want, rtol=1e-12)
    np.testing.assert_allclose(got[3:], base[3:], atol=1e-15)  # symmetric frame: no net r x H


def test_rotor_drag_of_a_spinning_body_acts_at_the_hubs():
    """Yawing at W_z, hub i moves at W x r_i: the H-forces cancel and their moments sum to
    -k_d |w| W_z sum |r_i,xy|^2 about z."""
    kd, wz = 1e-6, 3.0
    _, base = _wrench(CF, omega=(0, 0, wz))
    _, got = _wrench(_with(rotor_drag_inplane=kd), omega=(0, 0, wz))
    r2 = sum(p[0] ** 2 + p[1] ** 2 for p in CF.rotor_positions)
    np.testing.assert_allclose(got[:3] - base[:3], 0.0, atol=1e-15)
    np.testing.assert_allclose(got[5] - base[5], -kd * W * wz * r2, rtol=1e-12)


def test_blade_flapping_pitches_nose_up_flying_forward():
    """M = k_flap |w| (u_p x n): flying forward (+x) the discs tilt back and the moment about
    +y (FLU: positive pitches the nose down) is -k_flap R |w| v_x; flying left, +x roll."""
    k = 2e-8
    _, base = _wrench(CF, vel=(3.0, 0, 0))
    _, got = _wrench(_with(flapping=k), vel=(3.0, 0, 0))
    np.testing.assert_allclose(got - base, [0, 0, 0, 0, -k * 4 * W * 3.0, 0], atol=1e-15)
    _, base = _wrench(CF, vel=(0, 2.0, 0))
    _, got = _wrench(_with(flapping=k), vel=(0, 2.0, 0))
    np.testing.assert_allclose(got - base, [0, 0, 0, k * 4 * W * 2.0, 0, 0], atol=1e-15)


def test_inflow_thrust_falls_climbing_and_rises_edgewise():
    """T = k_f w^2 - k_ax |w| u_a + k_tl |w| |u_p|^2 (blade-element theory about hover)."""
    kax, ktl = 2e-7, 5e-8
    af = _with(inflow_axial=kax, translational_lift=ktl)
    t0 = CF.k_f[0] * W * W
    t, _ = _wrench(af, vel=(0, 0, 1.5))
    np.testing.assert_allclose(t, t0 - kax * W * 1.5, rtol=1e-12)
    t, _ = _wrench(af, vel=(3.0, 4.0, 0))
    np.testing.assert_allclose(t, t0 + ktl * W * 25.0, rtol=1e-12)


@pytest.mark.parametrize("ratio", [0.6, 1.0, 2.0, 5.0])
def test_ground_effect_is_cheeseman_bennett(ratio):
    """T_IGE / T_OGE = 1 / (1 - (rho / 4h)^2) at rotor height h over the ground plane."""
    rho = 0.023
    af = _with(ground_effect_radius=rho)
    h = ratio * rho
    t, _ = _wrench(af, z=h)
    np.testing.assert_allclose(
        t / (CF.k_f[0] * W * W), 1 / (1 - (1 / (4 * ratio)) ** 2), rtol=1e-12
    )


def test_ground_effect_is_capped_follows_the_surface_and_tilts():
    rho, t0 = 0.023, CF.k_f[0] * W * W
    af = _with(ground_effect_radius=rho)
    t, _ = _wrench(af, z=0.001)  # below rho / 2: the cap, 4/3 of free air
    np.testing.assert_allclose(t / t0, 4 / 3, rtol=1e-12)
    t, _ = _wrench(af, z=2.0 + 2 * rho, ground=2.0)  # a raised ground plane
    np.testing.assert_allclose(t / t0, 1 / (1 - (1 / 8) ** 2), rtol=1e-12)
    t, _ = _wrench(af, z=0.05, ground=None)  # no ground: free air (1 within 1e-9)
    np.testing.assert_allclose(t / t0, 1.0, rtol=1e-9)
    s = math.sin(0.2)  # rolled 0.4 rad: the rotors on the low side feel more ground
    t, _ = _wrench(af, z=0.04, quat=(math.cos(0.2), s, 0, 0))
    low = [i for i, p in enumerate(CF.rotor_positions) if p[1] < 0]
    high = [i for i, p in enumerate(CF.rotor_positions) if p[1] > 0]
    assert min(t[low]) > max(t[high]) > t0


def test_coefficients_are_checked_and_catalogue_platforms_have_none():
    with pytest.raises(ConfigError, match="flapping"):
        CF.replace(flapping=-1e-8)
    for name in platforms.names():
        p = VehicleParams.from_airframes(platforms.get(name), 1)
        assert p.has_aero == any(platforms.get(name).aero), name


# ---- backends ---------------------------------------------------------------------------------


def _random_inputs(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(21, n))
    x[1] = np.abs(x[1])  # thrust
    x[14] = 0.05 + np.abs(x[14])  # height > rho / 2
    x[15:20] = np.abs(x[15:20]) * 1e-3  # coefficients >= 0
    x[20] = 0.05 * np.abs(x[20])  # rho
    return list(x)


def test_numba_and_warp_compile_the_source_term_by_term():
    """The one source of the equations, compiled: numba's njit and Warp's generic wp.func of
    aero.rotor_aero give each of its 7 outputs as the Python function does (float64)."""
    from volary.dynamics import numba_kernels

    args = _random_inputs(64, 1)
    want = np.stack(aero.rotor_aero(*args))
    got = np.array([numba_kernels.rotor_aero(*(a[i] for a in args)) for i in range(64)]).T
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    wp = pytest.importorskip("warp")
    from volary.dynamics import _warp_physics

    f = _warp_physics.rotor_aero

    @wp.kernel(module="unique")
    def run(a: wp.array2d(dtype=wp.float64), out: wp.array2d(dtype=wp.float64)):
        i = wp.tid()
        o = f(a[0, i], a[1, i], a[2, i], a[3, i], a[4, i], a[5, i], a[6, i], a[7, i], a[8, i],
              a[9, i], a[10, i], a[11, i], a[12, i], a[13, i], a[14, i], a[15, i], a[16, i],
              a[17, i], a[18, i], a[19, i], a[20, i])  # fmt: skip
        for k in range(7):
            out[k, i] = o[k]

    a = wp.array(np.stack(args), dtype=wp.float64, device="cpu")
    out = wp.zeros((7, 64), dtype=wp.float64, device="cpu")
    wp.launch(run, 64, inputs=[a, out], device="cpu")
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-13, atol=1e-15)


def _flight(af, n: int, dtype: torch.dtype):
    """Vehicles near the ground, moving, spinning, in wind and gusts, with noise."""
    g = torch.Generator().manual_seed(7)
    p = VehicleParams.from_airframes(af, n, dtype=dtype)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64).to(dtype)  # noqa: E731
    s = MultirotorState.create(n, af.n_rotors, dtype=dtype, rotor_speed=af.hover_rotor_speed)
    q = torch.nn.functional.normalize(torch.tensor([[1.0, 0, 0, 0]]) + 0.1 * r(n, 4) - 0.05, dim=1)
    s = s.replace(
        pos=torch.cat((r(n, 2), 0.01 + 0.05 * r(n, 1)), 1),
        vel=2 * r(n, 3) - 1,
        omega=4 * r(n, 3) - 2,
        quat=q.to(dtype),
    )
    d = Disturbance.create(n, dtype=dtype)
    d = Disturbance(
        wind=r(n, 3) - 0.5,
        gust_std=torch.full((n,), 0.3, dtype=dtype),
        gust_tau=torch.full((n,), 0.5, dtype=dtype),
        force=d.force,
        moment=d.moment,
    )
    cmd = af.hover_rotor_speed * (1.0 + 0.1 * r(n, af.n_rotors))
    return p, s, cmd, d, env_keys(3, torch.arange(n))


def _compare(out, ref, tol: float) -> None:
    for f in ("pos", "vel", "quat", "omega", "rotor_speed"):
        x, y = getattr(out, f), getattr(ref, f)
        scale = max(1.0, float(y.abs().max()))
        assert torch.allclose(x, y, rtol=0, atol=tol * scale), (f, float((x - y).abs().max()))
    for f in ("landed", "crashed", "diverged"):
        assert torch.equal(getattr(out, f), getattr(ref, f)), f


BACKENDS = ["numba", "warp"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("effect", [*EFFECTS, "all"])
def test_fused_kernels_match_the_reference_with_each_effect(effect, backend):
    """100 steps (RK4, noise, gusts, ground contact) near the ground: numba and Warp within
    1e-12 of eager in float64, with each effect alone and all together."""
    if backend == "warp":
        pytest.importorskip("warp")
    af = _with(**(EFFECTS if effect == "all" else {effect: EFFECTS[effect]}))
    p, s, cmd, d, keys = _flight(af, 6, torch.float64)
    assert p.has_aero
    cfg = DynamicsConfig()
    ref = rollout(p, s, cmd, d, keys, cfg, 100)
    _compare(make_stepper(cfg, 100, backend)(p, s, cmd, d, keys), ref, 1e-12)
    off = rollout(
        VehicleParams.from_airframes(CF, 6, dtype=torch.float64), s, cmd, d, keys, cfg, 100
    )
    assert float((off.vel - ref.vel).abs().max()) > 1e-4  # the effect changed the flight


@pytest.mark.parametrize(
    "backend", [pytest.param("inductor", marks=pytest.mark.slow), *BACKENDS]
)  # inductor: a compile of 1-2 minutes on 2 cores
def test_every_backend_matches_the_reference_in_float32_with_all_effects(backend):
    if backend == "warp":
        pytest.importorskip("warp")
    p, s, cmd, d, keys = _flight(_with(**EFFECTS), 6, torch.float32)
    cfg = DynamicsConfig()
    ref = rollout(p, s, cmd, d, keys, cfg, 100)
    step, out = make_stepper(cfg, 1, backend), s  # one step per call: the quickest compile
    for _ in range(100):
        out = step(p, out, cmd, d, keys)
    _compare(out, ref, 2e-5)


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_a_vehicle_without_coefficients_flies_bitwise_the_same_beside_one_with_them(backend):
    """World parity: the effects off change nothing, to the bit, even in a batch where another
    vehicle has them (and a batch with none runs the ideal-rotor code unchanged)."""
    p, s, cmd, d, keys = _flight(CF, 4, torch.float32)
    mixed = VehicleParams.from_airframes([CF, _with(**EFFECTS)], 4)
    plain = VehicleParams.from_airframes([CF, CF], 4)
    assert mixed.has_aero and not plain.has_aero
    step = make_stepper(DynamicsConfig(), 20, backend)
    a, b = step(mixed, s, cmd, d, keys), step(plain, s, cmd, d, keys)
    for f in ("pos", "vel", "quat", "omega", "rotor_speed"):
        assert torch.equal(getattr(a, f)[0::2], getattr(b, f)[0::2]), f
    for f in ("pos", "vel", "quat", "omega"):  # rotor speeds follow the command alone
        assert not torch.equal(getattr(a, f)[1::2], getattr(b, f)[1::2]), f


def test_the_fused_closed_loop_flies_the_effects_like_eager():
    """The numba closed loop (the CPU Simulator's default) with every effect on, position
    control near the ground in wind: same trajectory as the eager Simulator."""
    af = _with(**EFFECTS)
    args = dict(n_envs=4, control="position", dtype=torch.float64, seed=3)
    fused, eager = Simulator([af], **args), Simulator([af], compile=False, **args)
    assert fused._fused is not None
    sp = torch.tensor([[0.3, -0.2, 0.08, 0.2]], dtype=torch.float64).expand(4, 4)
    for sim in (fused, eager):
        sim.set_wind([1.0, -0.5, 0.0], gust_std=0.3, gust_tau=0.5)
    for _ in range(120):
        a, b = fused.step(sp), eager.step(sp)
    _compare(a, b, 1e-9)
    plain = Simulator([CF], compile=False, **args)
    plain.set_wind([1.0, -0.5, 0.0], gust_std=0.3, gust_tau=0.5)
    for _ in range(120):
        c = plain.step(sp)
    assert float((c.pos - b.pos).abs().max()) > 1e-4


def test_physics_step_passes_the_ground_plane_and_the_surface_to_the_effects():
    """cfg.ground off: no ground effect; on: the effect over cfg.ground_height; a surface under
    the vehicle (Disturbance.surface) counts too, on every backend."""
    af = _with(ground_effect_radius=0.023)
    p, s, cmd, d, keys = _flight(af, 2, torch.float64)
    s = s.replace(pos=torch.tensor([[0.0, 0, 1.02], [0, 0, 1.03]], dtype=torch.float64))
    lifted = physics_step(p, s, cmd, d, keys, DynamicsConfig(ground_height=1.0, stochastic=False))
    free = physics_step(p, s, cmd, d, keys, DynamicsConfig(ground=False, stochastic=False))
    assert (lifted.vel[:, 2] > free.vel[:, 2]).all()
    assert (
        free.vel[:, 2]
        < physics_step(
            p,
            s,
            cmd,
            dataclasses.replace(d, surface=torch.full((2,), 1.0, dtype=torch.float64)),
            keys,
            DynamicsConfig(ground=False, stochastic=False),
        ).vel[:, 2]
    ).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_surface_under_the_vehicle_gives_ground_effect_on_every_backend(backend):
    if backend == "warp":
        pytest.importorskip("warp")
    p, s, cmd, d, keys = _flight(_with(**EFFECTS), 6, torch.float64)
    s = s.replace(pos=s.pos + torch.tensor([0, 0, 2.0], dtype=torch.float64))  # above a table
    d = dataclasses.replace(d, surface=torch.tensor([2.0, 2.0, 2.0, -math.inf, 1.0, 2.01]).double())
    cfg = DynamicsConfig()
    ref = rollout(p, s, cmd, d, keys, cfg, 100)
    _compare(make_stepper(cfg, 100, backend)(p, s, cmd, d, keys), ref, 1e-12)
    free = rollout(p, s, cmd, dataclasses.replace(d, surface=None), keys, cfg, 100)
    assert (ref.vel[:3, 2] > free.vel[:3, 2] + 1e-3).all()  # the table's ground effect lifts
    assert torch.equal(ref.vel[3], free.vel[3])  # no surface: as without


def test_a_world_gives_its_scene_surfaces_ground_effect():
    """A World casts down from each vehicle: hovering over a table at a rotor radius feels the
    table, beside it only the floor far below (Cheeseman-Bennett over the scene, issue 61)."""
    from volary.sim.world import World
    from volary.worlds.primitives import Box, SceneSpec

    table = SceneSpec(
        name="table",
        bounds_min=(-3.0, -3.0, 0.0),
        bounds_max=(3.0, 3.0, 3.0),
        obstacles=(Box(center=(0.0, 0.0, 0.5), size=(1.0, 1.0, 1.0), object_id=1),),
    )
    af = _with(ground_effect_radius=0.023)
    world = World([af], table, n_envs=2, control="rotor_speeds", dtype=torch.float64,
                  compile=False)  # fmt: skip
    world.reset(pos=torch.tensor([[0.0, 0.0, 1.03], [2.0, 0.0, 1.03]], dtype=torch.float64))
    w = torch.full((2, 4), af.hover_rotor_speed, dtype=torch.float64)
    world.sim.state = world.sim.state.replace(rotor_speed=w.clone())
    for _ in range(5):
        state = world.step(w)
    surf = world.sim.disturbance.surface
    assert surf[0] == pytest.approx(1.0, abs=1e-6) and surf[1] == -math.inf
    assert state.vel[0, 2] > state.vel[1, 2] + 1e-3  # the table lifts, the floor is far


@pytest.mark.parametrize(
    "backend", ["eager", pytest.param("inductor", marks=pytest.mark.slow), *BACKENDS]
)  # inductor: the aero graph compiles for 1-2 minutes on 2 cores
def test_a_wake_is_air_like_wind_on_every_backend(backend):
    """Disturbance.wake (other vehicles' downwash) adds to the wind: a vehicle in a wake w and
    no wind flies bitwise as one in wind w, on every backend (and w = 0 changes nothing)."""
    if backend == "warp":
        pytest.importorskip("warp")
    p, s, cmd, d, keys = _flight(_with(**EFFECTS), 4, torch.float64)
    w = torch.tensor([[0.0, 0.0, -2.0], [0.5, 0, -1], [0, 0, 0], [1, 1, -3]], dtype=torch.float64)
    step = make_stepper(DynamicsConfig(), 1 if backend == "inductor" else 20, backend)
    zero = torch.zeros_like(w)
    a = step(p, s, cmd, dataclasses.replace(d, wind=zero, wake=w), keys)
    b = step(p, s, cmd, dataclasses.replace(d, wind=w, wake=zero), keys)
    for f in ("pos", "vel", "quat", "omega"):
        assert torch.equal(getattr(a, f), getattr(b, f)), f
