"""Downwash between vehicles (sim/downwash.py): the jet against the paper's equations computed
here independently, the batched function against a loop, its geometry (only below, no self,
symmetric), the per-platform field, and a World where one vehicle hovers above another; with no
vehicle emitting, a World runs bit for bit as before (world parity)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from volary import platforms
from volary.errors import ConfigError
from volary.platforms import load_file
from volary.sim import World
from volary.sim import downwash as dw

CF = platforms.get("crazyflie")  # 27 g, arm 46 mm, propeller radius 24 mm (collision sphere)
G, RHO = 9.81, 1.225
BD, SR, S0 = 10.11, 0.07668, -5.817  # Bauersfeld et al. far-field fit, written out again here


def _paper(s, r, mass, prop, n_props, l):  # noqa: E741
    """The jet (D1)-(D4) in plain math: velocity magnitude at s m below, r m off the axis."""
    if s <= 0:
        return 0.0
    u_h = math.sqrt(mass * G / (2 * RHO * n_props * math.pi * prop**2))
    u_c = u_h * BD / (s / l - S0)
    half = l * SR * (s / l - S0)
    return u_c / (1 + (math.sqrt(2) - 1) * (r / half) ** 2) ** 2


def _speed(s, r, mass=0.027, prop=0.024, n_props=4, l=0.092):  # noqa: E741
    t = lambda v: torch.tensor(float(v), dtype=torch.float64)  # noqa: E731
    u_h = dw.hover_induced_velocity(t(mass), t(prop), t(n_props))
    return float(dw.jet_speed(t(s), t(r * r), u_h, t(l)))


# ---- the jet ------------------------------------------------------------------------------------
@pytest.mark.parametrize("s", [0.05, 0.3, 1.0, 4.0])
@pytest.mark.parametrize("r", [0.0, 0.02, 0.1, 0.5])
def test_jet_is_the_papers_formula_on_and_off_the_axis(s, r):
    assert _speed(s, r) == pytest.approx(_paper(s, r, 0.027, 0.024, 4, 0.092), rel=1e-12)


def test_jet_shape_centreline_decay_half_width_and_upstream():
    l = 0.092  # noqa: E741
    # hover-induced velocity of a Crazyflie: about 3.9 m/s
    u_h = math.sqrt(0.027 * G / (2 * RHO * 4 * math.pi * 0.024**2))
    assert u_h == pytest.approx(3.87, abs=0.01)
    # centreline ~ 1 / (s - s0): the product is the same at every depth
    prods = [_speed(s, 0.0) * (s / l - S0) for s in (0.1, 0.5, 2.0, 8.0)]
    np.testing.assert_allclose(prods, u_h * BD, rtol=1e-12)
    # at the half width the velocity is half the centreline's
    for s in (0.3, 1.0, 3.0):
        half = SR * (s - S0 * l)
        assert _speed(s, half) == pytest.approx(0.5 * _speed(s, 0.0), rel=1e-12)
    # upstream and level: nothing
    assert _speed(0.0, 0.0) == 0.0 and _speed(-0.5, 0.0) == 0.0


# ---- the batched function ---------------------------------------------------------------------
def _rotmat(q):
    w, x, y, z = q / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _reference(pos, quat, u_h, length, scale, m):
    """Loop over envs, receivers and emitters: the jet of emitter i along its -z_B at j."""
    b = len(pos)
    out = np.zeros((b, 3))
    for env in range(b // m):
        for j in range(env * m, env * m + m):
            for i in range(env * m, env * m + m):
                if i == j or scale[i] <= 0:
                    continue
                down = -_rotmat(quat[i])[:, 2]
                d = pos[j] - pos[i]
                s = float(d @ down)
                if s <= 0:
                    continue
                r = math.sqrt(max(float(d @ d) - s * s, 0.0))
                x = s / length[i] - S0
                half = SR * x * length[i]
                u = u_h[i] * BD / x / (1 + (math.sqrt(2) - 1) * (r / half) ** 2) ** 2
                out[j] += scale[i] * u * down
    return out


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
def test_batched_wake_matches_a_loop(dtype, tol):
    rng = np.random.default_rng(3)
    n, m = 5, 4
    b = n * m
    pos = rng.uniform([-0.3, -0.3, 0.0], [0.3, 0.3, 3.0], (b, 3))
    quat = np.concatenate([np.ones((b, 1)), rng.normal(0, 0.2, (b, 3))], axis=1)
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    u_h = rng.uniform(2, 8, b)
    length = rng.uniform(0.05, 0.5, b)
    scale = rng.uniform(0.5, 1.5, b) * (rng.random(b) > 0.25)
    want = _reference(pos, quat, u_h, length, scale, m)
    t = lambda v: torch.tensor(v, dtype=dtype)  # noqa: E731
    got = dw.downwash_wake(t(pos), t(quat), t(u_h), t(length), t(scale), m)
    assert got.dtype == dtype and got.shape == (b, 3)
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)
    assert np.abs(want).max() > 0.1 and (np.abs(want).sum(1) == 0).any()  # some feel it, some not


def _pair(z_upper=2.0, z_lower=1.0, quat_upper=(1.0, 0, 0, 0), dx=0.0):
    pos = torch.tensor([[0.0, 0.0, z_upper], [dx, 0.0, z_lower]], dtype=torch.float64)
    quat = torch.tensor([quat_upper, (1.0, 0, 0, 0)], dtype=torch.float64)
    return pos, quat


def _wake(pos, quat, m=2, scale=1.0):
    b = len(pos)
    one = torch.ones(b, dtype=torch.float64)
    return dw.downwash_wake(pos, quat, 4.0 * one, 0.1 * one, scale * one, m)


def test_only_the_vehicle_below_feels_it_and_never_its_own():
    pos, quat = _pair()
    v = _wake(pos, quat)
    assert v[0].tolist() == [0.0, 0.0, 0.0]  # the upper vehicle: nothing from below, not itself
    assert v[1, 0] == 0 and v[1, 1] == 0 and v[1, 2] < -1.0  # straight down at the lower one
    assert v[1, 2] == pytest.approx(-_paper(1.0, 0.0, 1, 1, 1, 0.1) * 4.0 / _hover(1, 1, 1))
    # swapping the slots swaps the rows
    torch.testing.assert_close(_wake(pos.flip(0), quat.flip(0)), v.flip(0), rtol=0, atol=0)
    # side by side, level: nothing either way; one vehicle per env: nothing
    level, _ = _pair(z_upper=1.0, dx=0.3)
    assert _wake(level, quat).abs().max() == 0
    assert _wake(pos, quat, m=1).abs().max() == 0
    # a vehicle emitting nothing (scale 0) gives nothing
    assert _wake(pos, quat, scale=0.0).abs().max() == 0


def _hover(mass, prop, n):
    return math.sqrt(mass * G / (2 * RHO * n * math.pi * prop**2))


def test_wake_turns_with_the_emitter_and_stays_in_its_env():
    pos, quat = _pair(dx=0.2)
    v = _wake(pos, quat)
    # yawing the whole pair about the world z axis turns nothing (the jet is vertical)
    c, s = math.cos(0.7), math.sin(0.7)
    rz = torch.tensor([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=torch.float64)
    yawed = _wake(pos @ rz.T, torch.tensor([[math.cos(0.35), 0, 0, math.sin(0.35)]] * 2,
                                           dtype=torch.float64))  # fmt: skip
    torch.testing.assert_close(yawed, v, rtol=1e-12, atol=1e-12)
    # the upper vehicle rolled past 90 degrees blows sideways and up: nothing reaches below
    side = (math.cos(math.radians(50)), math.sin(math.radians(50)), 0.0, 0.0)
    pos0, quat0 = _pair(quat_upper=side)
    assert _wake(pos0, quat0).abs().max() == 0
    # rolled 30 degrees, the wake at a vehicle on the tilted axis points along the axis
    a = math.radians(30)
    q = (math.cos(a / 2), math.sin(a / 2), 0.0, 0.0)  # roll +30: body z toward -y
    axis = torch.tensor([0.0, -math.sin(a), math.cos(a)], dtype=torch.float64)
    pos1 = torch.stack([torch.tensor([0.0, 0.0, 2.0], dtype=torch.float64),
                        torch.tensor([0.0, 0.0, 2.0], dtype=torch.float64) - axis])  # fmt: skip
    v1 = _wake(pos1, torch.tensor([q, (1.0, 0, 0, 0)], dtype=torch.float64))[1]
    torch.testing.assert_close(v1 / v1.norm(), -axis, rtol=0, atol=1e-12)
    # two envs: the pair in env 0 does not reach env 1's vehicles, whatever their positions
    pos2 = torch.cat([pos, pos - torch.tensor([0.0, 0.0, 0.5], dtype=torch.float64)])
    quat2 = torch.cat([quat, quat])
    v2 = _wake(pos2, quat2)
    torch.testing.assert_close(v2[:2], v, rtol=0, atol=0)
    torch.testing.assert_close(v2[2:], v, rtol=0, atol=0)


def test_a_diverged_emitter_adds_nothing():
    pos, quat = _pair()
    pos = torch.cat([pos, torch.tensor([[0.0, 0.0, 1.5]], dtype=torch.float64)])
    quat = torch.cat([quat, torch.tensor([[1.0, 0, 0, 0]], dtype=torch.float64)])
    v = _wake(pos, quat, m=3)
    bad = pos.clone()
    bad[0] = math.nan
    v_bad = _wake(bad, quat, m=3)
    assert torch.isfinite(v_bad[1:]).all()
    only_middle = _wake(pos[1:], quat[1:], m=2)  # the vehicle at 1.5 m above the one at 1 m
    torch.testing.assert_close(v_bad[1:], only_middle, rtol=0, atol=0)
    assert v[1, 2] < v_bad[1, 2]  # the lost upper jet made the wake weaker


def test_wake_checks_its_arguments():
    pos, quat = _pair()
    one = torch.ones(2, dtype=torch.float64)
    with pytest.raises(ConfigError, match="vehicles_per_env"):
        dw.downwash_wake(pos, quat, one, one, one, 3)
    with pytest.raises(ConfigError, match="quat"):
        dw.downwash_wake(pos, quat[:, :3], one, one, one, 2)
    with pytest.raises(ConfigError, match="length"):
        dw.downwash_wake(pos, quat, one, one[:1], one, 2)


# ---- the platform field -----------------------------------------------------------------------
def test_emitter_constants_from_the_platform():
    from volary.dynamics.params import VehicleParams

    afs = [CF.replace(downwash=1.0), CF.replace(downwash=1.0, ground_effect_radius=0.023), CF]
    p = VehicleParams.from_airframes(afs, dtype=torch.float64)
    u_h, length = dw.emitter_constants(p, torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))
    np.testing.assert_allclose(length[:2].numpy(), 2 * CF.arm_length, rtol=1e-12)  # diagonal
    want = [_hover(CF.mass, CF.prop_radius, 4), _hover(CF.mass, 0.023, 4), 0.0]
    np.testing.assert_allclose(u_h.numpy(), want, rtol=1e-12)


def test_airframe_checks_the_downwash_field(tmp_path):
    assert CF.downwash == 0.0
    with pytest.raises(ConfigError, match="downwash"):
        CF.replace(downwash=-1.0)
    with pytest.raises(ConfigError, match="downwash: needs a propeller radius"):
        CF.replace(downwash=1.0, collider_radius=CF.arm_length)
    assert CF.replace(downwash=1.0, collider_radius=CF.arm_length, ground_effect_radius=0.02)
    text = """
[mini]
category = "preset"
layout = {value = "quad_x", source = "test"}
arm = {value = 120, unit = "mm", source = "test"}
mass = {value = 800, unit = "g", source = "test"}
inertia = {value = [4e-3, 4e-3, 7e-3], unit = "kg m^2", source = "test"}
k_f = {value = 3e-6, unit = "N/(rad/s)^2", source = "test"}
k_m = {value = 5e-8, unit = "N m/(rad/s)^2", source = "test"}
max_rotor_speed = {value = 15000, unit = "rpm", source = "test"}
downwash = {value = 1, unit = "1", source = "Bauersfeld et al. 2025, as published"}
"""
    path = tmp_path / "mini.toml"
    path.write_text(text)
    assert load_file(path)["mini"].airframe.downwash == 1.0


# ---- a World ------------------------------------------------------------------------------------
POS = torch.tensor([[0.0, 0.0, 2.0], [0.0, 0.0, 1.0]])  # slot 0 hovers 1 m above slot 1


def _fly(afs, steps=240, monkey=None):
    w = World(afs, n_envs=1, vehicles_per_env=2, stochastic=False, control="position")
    w.reset(pos=POS)
    sp = torch.zeros(2, 4)
    sp[:, :3] = POS
    zs, speeds = [], []
    for _ in range(steps):
        st = w.step(sp)
        zs.append(st.pos.clone())
        speeds.append(st.rotor_speed.clone())
    return w, torch.stack(zs), torch.stack(speeds)


def test_the_vehicle_below_sinks_and_spins_faster():
    """One second of hover, the lower vehicle 1 m under the upper one: with the jet on it feels
    ~2.3 m/s of downwind (0.6 U_H), drops a few centimetres before its position loop catches it
    and needs faster rotors; the upper vehicle flies exactly as without."""
    _, z_off, w_off = _fly([CF])
    w, z_on, w_on = _fly([CF.replace(downwash=1.0)])
    wake = w.sim.disturbance.wake
    assert wake[0].abs().max() == 0 and -2.6 < float(wake[1, 2]) < -2.0
    sink = float((z_on[:, 1, 2] - z_off[:, 1, 2]).min())
    assert sink < -0.02, sink
    assert float(w_on[-1, 1].mean() / w_off[-1, 1].mean()) > 1.01
    assert torch.equal(z_on[:, 0], z_off[:, 0]) and torch.equal(w_on[:, 0], w_off[:, 0])


def test_only_the_emitting_platform_blows():
    # slot 0 (above) emits nothing, slot 1 (below) emits: nobody below slot 1, nothing happens
    _, z_off, _ = _fly([CF], steps=60)
    w, z_mix, _ = _fly([CF, CF.replace(downwash=1.0)], steps=60)
    assert w.sim.disturbance.wake.abs().max() == 0
    assert torch.equal(z_mix, z_off)


def test_no_emitter_no_wake_world_parity(monkeypatch):
    """Every vehicle at downwash 0 (the default): the World never computes a wake nor sets one,
    and flies bit for bit as a World of the default platform."""

    def boom(self):
        raise AssertionError("no vehicle emits: no wake")

    monkeypatch.setattr(World, "_feel_downwash", boom)
    w_ref, z_ref, s_ref = _fly([CF], steps=60)
    w, z, s = _fly([CF.replace(downwash=0.0)], steps=60)
    assert w._downwash is None and w_ref._downwash is None
    assert w.sim.disturbance.wake.abs().max() == 0
    assert torch.equal(z, z_ref) and torch.equal(s, s_ref)
    # one vehicle per env: nothing to blow on, even for an emitting platform
    one = World([CF.replace(downwash=1.0)], n_envs=2, stochastic=False)
    assert one._downwash is None
