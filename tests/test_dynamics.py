"""Analytic and robustness checks of the physics step (issue: simulator core)."""

from __future__ import annotations

import math

import pytest
import torch

from volary.dynamics import (
    Airframe,
    Disturbance,
    DynamicsConfig,
    MultirotorState,
    VehicleParams,
    hover_speeds,
    physics_step,
    rollout,
)
from volary.errors import ConfigError, UnknownNameError
from volary.math.quaternion import quat_from_euler, quat_rotate, quat_to_rotmat
from volary.platforms import layout

G = 9.81


def quad(**over) -> Airframe:
    pos, axes, dirs = layout("quad_x", 0.08)
    base = dict(
        name="fg",
        mass=1.0,
        inertia=(0.0049, 0.0049, 0.0049),
        rotor_positions=pos,
        rotor_axes=axes,
        rotor_directions=dirs,
        k_f=1.91e-6,
        k_m=2.6e-7,
        max_rotor_speed=2200.0,
    )
    base.update(over)
    return Airframe(**base)


def setup(af: Airframe, n: int, dtype=torch.float32, **cfg):
    p = VehicleParams.from_airframes(af, n, dtype=dtype)
    s = MultirotorState.create(n, af.n_rotors, dtype=dtype, pos=[0.0, 0.0, 10.0])
    d = Disturbance.create(n, dtype=dtype)
    keys = torch.arange(n)
    c = DynamicsConfig(**{"stochastic": False, "ground": False, **cfg})
    return p, s, d, keys, c


def test_free_fall_matches_closed_form():
    p, s, d, k, c = setup(quad(), 3, torch.float64)
    w = torch.zeros(3, 4, dtype=torch.float64)
    s = s.replace(vel=torch.tensor([[1.0, -2.0, 3.0]] * 3, dtype=torch.float64))
    steps = 960
    s = rollout(p, s, w, d, k, c, steps)
    t = steps * c.dt
    want = torch.tensor([1.0 * t, -2.0 * t, 10.0 + 3.0 * t - 0.5 * G * t * t], dtype=torch.float64)
    torch.testing.assert_close(s.pos[0], want, rtol=0, atol=1e-9)
    torch.testing.assert_close(s.time[0].item(), t, rtol=0, atol=1e-9)


def test_constant_thrust_vertical_motion():
    af = quad()
    w_const = 1500.0
    p, s, d, k, c = setup(af, 2, torch.float64)
    s = s.replace(rotor_speed=torch.full((2, 4), w_const, dtype=torch.float64))
    s = rollout(p, s, s.rotor_speed.clone(), d, k, c, 1920)
    a = 4 * af.k_f[0] * w_const**2 / af.mass - G
    t = 1920 * c.dt
    torch.testing.assert_close(
        s.pos[:, 2],
        torch.full((2,), 10.0 + 0.5 * a * t * t, dtype=torch.float64),
        rtol=0,
        atol=1e-9,
    )
    torch.testing.assert_close(
        s.vel[:, 2], torch.full((2,), a * t, dtype=torch.float64), rtol=0, atol=1e-9
    )


def test_torque_free_body_conserves_angular_momentum():
    af = quad(inertia=(0.01, 0.02, 0.03))  # rotors stopped: torque-free
    # RK4 at 250 Hz: the drift over 10 s is ~5e-12, far inside the bound (1 kHz: 2e-14)
    p, s, d, k, c = setup(af, 1, torch.float64, dt=4e-3)
    s = s.replace(
        omega=torch.tensor([[1.0, 0.1, -0.8]], dtype=torch.float64),
        quat=quat_from_euler(*torch.tensor([[0.3], [-0.2], [1.0]], dtype=torch.float64)),
    )

    def momentum(st):
        jw = (p.inertia @ st.omega[..., None])[..., 0]
        return quat_rotate(st.quat, jw)

    l0 = momentum(s)
    w = torch.zeros(1, 4, dtype=torch.float64)
    s = rollout(p, s, w, d, k, c, 2_500)  # 10 s
    rel = (momentum(s) - l0).norm() / l0.norm()
    assert rel < 1e-9, f"angular momentum drift {rel:.3e}"
    e0 = (
        0.5
        * (
            torch.tensor([0.01, 0.02, 0.03], dtype=torch.float64)
            * torch.tensor([1.0, 0.1, -0.8], dtype=torch.float64) ** 2
        ).sum()
    )
    e1 = 0.5 * (p.inertia[0].diagonal() * s.omega[0] ** 2).sum()
    assert abs(e1 - e0) / e0 < 1e-9


@pytest.mark.parametrize("tau_up,tau_down", [(0.02, 0.02), (0.01, 0.04)])
def test_motor_lag_step_response_is_exponential(tau_up, tau_down):
    af = quad(motor_tau_up=tau_up, motor_tau_down=tau_down)
    p, s, d, k, c = setup(af, 1, torch.float64)
    cmd = torch.full((1, 4), 2000.0, dtype=torch.float64)
    s = rollout(p, s, cmd, d, k, c, 48)
    t = 48 * c.dt
    torch.testing.assert_close(
        s.rotor_speed[0, 0].item(), 2000.0 * (1 - math.exp(-t / tau_up)), rtol=1e-6, atol=0
    )  # RK4 truncation
    s = rollout(p, s.replace(rotor_speed=cmd.clone()), cmd * 0.5, d, k, c, 48)
    want = 1000.0 + 1000.0 * math.exp(-t / tau_down)
    torch.testing.assert_close(
        s.rotor_speed[0, 0].item(), want, rtol=1e-6, atol=0
    )  # RK4 truncation


def test_rotor_speed_command_is_clamped_to_limits():
    af = quad(min_rotor_speed=100.0)
    p, s, d, k, c = setup(af, 1)
    # 0.5 s each way: 25 motor time constants, ample for an unclamped speed to pass the limit
    s = rollout(p, s, torch.full((1, 4), 1e6), d, k, c, 480)
    assert s.rotor_speed.max() <= 2200.0 + 1e-3
    s = rollout(p, s, torch.full((1, 4), -5.0), d, k, c, 480)
    assert s.rotor_speed.min() >= 100.0 - 1e-3


def test_hover_equilibrium_is_exact():
    p, s, d, k, c = setup(quad(drag_quadratic=(0.1, 0.1, 0.1)), 4)
    w = hover_speeds(p)
    s = rollout(p, s.replace(rotor_speed=w), w, d, k, c, 960)
    assert s.pos.sub(torch.tensor([0.0, 0.0, 10.0])).abs().max() < 1e-4


def test_quadratic_drag_gives_terminal_velocity():
    af = quad(drag_quadratic=(0.1, 0.1, 0.1))
    # 10 s at 100 Hz (RK4): the same final speed as at 960 Hz within 5e-15 m/s
    p, s, d, k, c = setup(af, 1, torch.float64, dt=0.01)
    s = rollout(p, s, torch.zeros(1, 4, dtype=torch.float64), d, k, c, 1000)
    # m g = c v^2  ->  v = sqrt(m g / c)
    assert s.vel[0, 2].item() == pytest.approx(-math.sqrt(G / 0.1), rel=1e-4)


def test_wind_pushes_a_hovering_vehicle_downwind():
    p, s, d, k, c = setup(quad(drag_linear=(0.3, 0.3, 0.3)), 1)
    d = Disturbance(
        wind=torch.tensor([[5.0, 0.0, 0.0]]),
        gust_std=d.gust_std,
        gust_tau=d.gust_tau,
        force=d.force,
        moment=d.moment,
    )
    w = hover_speeds(p)
    s = rollout(p, s.replace(rotor_speed=w), w, d, k, c, 96)
    assert s.vel[0, 0] > 0.1 and abs(s.vel[0, 1]) < 1e-6


def test_external_force_and_moment():
    p, s, d, k, c = setup(quad(), 1, torch.float64)
    d = Disturbance(
        wind=d.wind,
        gust_std=d.gust_std,
        gust_tau=d.gust_tau,
        force=torch.tensor([[0.0, 2.0, 0.0]], dtype=torch.float64),
        moment=torch.tensor([[0.0, 0.0, 0.0049]], dtype=torch.float64),
    )
    w = hover_speeds(p)
    s = rollout(p, s.replace(rotor_speed=w), w, d, k, c, 960)
    assert s.vel[0, 1].item() == pytest.approx(2.0, rel=1e-6)  # a = F/m for 1 s
    assert s.omega[0, 2].item() == pytest.approx(1.0, rel=1e-6)  # alpha = M/J


def test_ground_contact_lands_softly_and_flags_crashes():
    p, s, d, k, c = setup(quad(), 2, ground=True)
    s = s.replace(pos=torch.tensor([[0.0, 0.0, 0.05], [0.0, 0.0, 5.0]]))
    s = rollout(p, s, torch.zeros(2, 4), d, k, c, 1920)
    assert (s.pos[:, 2] >= 0).all()
    assert s.landed.all()
    assert s.crashed.tolist() == [False, True]  # 5 m drop hits at ~9.9 m/s > 2 m/s


def test_nan_command_flags_only_that_env():
    p, s, d, k, c = setup(quad(), 4)
    w = hover_speeds(p)
    s = s.replace(rotor_speed=w)
    ref = rollout(p, s, w, d, k, c, 10)
    bad = w.clone()
    bad[2, 1] = float("nan")
    out = rollout(p, s, bad, d, k, c, 10)
    assert out.diverged.tolist() == [False, False, True, False]
    for name in ("pos", "vel", "quat", "omega", "rotor_speed"):
        a, b = getattr(out, name), getattr(ref, name)
        assert torch.equal(a[[0, 1, 3]], b[[0, 1, 3]])
        assert torch.isfinite(a).all()
    torch.testing.assert_close(out.pos[2], s.pos[2])  # frozen at its last finite state


def test_inf_state_is_caught():
    p, s, d, k, c = setup(quad(), 3)
    s = s.replace(vel=torch.tensor([[0.0, 0.0, 0.0], [float("inf"), 0.0, 0.0], [0.0, 0.0, 0.0]]))
    out = physics_step(p, s, torch.zeros(3, 4), d, k, c)
    assert out.diverged.tolist() == [False, True, False]
    assert torch.isfinite(out.pos[[0, 2]]).all()


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("mass", 0.0, "mass"),
        ("mass", float("nan"), "mass"),
        ("inertia", (0.01, -0.01, 0.02), "inertia"),
        ("k_f", -1.0, "k_f"),
        ("max_rotor_speed", float("inf"), "max_rotor_speed"),
        ("rotor_directions", (1, 1, 1, 1), "allocation"),
        ("rotor_positions", [(0, 0, 0)] * 4, "allocation"),
        ("rotor_axes", [(0, 0, 1)] * 3, "rotor_axes"),
        ("motor_tau_up", 0.0, "motor_tau_up"),
    ],
)
def test_invalid_airframe_parameters_name_the_field(field, value, match):
    with pytest.raises(ConfigError, match=match):
        quad(**{field: value})


def test_unknown_names_list_valid_ones():
    with pytest.raises(UnknownNameError, match="rk4"):
        DynamicsConfig(integrator="rk5")
    with pytest.raises(UnknownNameError, match="rigid_body"):
        DynamicsConfig(model="blimp")
    with pytest.raises(ConfigError, match="dt"):
        DynamicsConfig(dt=0.0)


def noisy_run(n: int, dtype=torch.float32, steps: int = 200):
    af = quad(force_noise=0.05, moment_noise=0.002, drag_quadratic=(0.1, 0.1, 0.1))
    p, s, d, k, c = setup(af, n, dtype, stochastic=True, integrator="rk4")
    d = Disturbance(
        wind=torch.tensor([[1.0, 0.5, 0.0]], dtype=dtype).expand(n, 3),
        gust_std=torch.full((n,), 0.5, dtype=dtype),
        gust_tau=d.gust_tau,
        force=d.force,
        moment=d.moment,
    )
    w = hover_speeds(p) * 1.01
    s = s.replace(
        rotor_speed=w,
        quat=quat_from_euler(*(torch.full((n,), a, dtype=dtype) for a in (0.1, -0.05, 0.3))),
    )
    return rollout(p, s, w, d, k, c, steps)


def test_env_trajectory_does_not_depend_on_batch_size():
    one = noisy_run(1)
    big = noisy_run(4096)
    for name in ("pos", "vel", "quat", "omega", "rotor_speed", "gust"):
        assert torch.equal(getattr(big, name)[0], getattr(one, name)[0]), name  # bitwise


def test_same_seed_same_result_and_envs_differ():
    a, b = noisy_run(8), noisy_run(8)
    assert torch.equal(a.pos, b.pos)
    assert not torch.equal(a.pos[0], a.pos[1])  # each env has its own noise stream


def test_float32_matches_float64_reference():
    lo, hi = noisy_run(16, torch.float32), noisy_run(16, torch.float64)
    torch.testing.assert_close(lo.pos.double(), hi.pos, rtol=0, atol=2e-4)
    torch.testing.assert_close(
        quat_to_rotmat(lo.quat).double(), quat_to_rotmat(hi.quat), rtol=0, atol=2e-4
    )


def test_mixed_rotor_counts_in_one_batch():
    hexa = Airframe(
        name="hexa",
        mass=2.0,
        inertia=(0.03, 0.03, 0.05),
        rotor_positions=layout("hexa", 0.25)[0],
        rotor_axes=layout("hexa", 0.25)[1],
        rotor_directions=layout("hexa", 0.25)[2],
        k_f=2e-6,
        k_m=3e-8,
        max_rotor_speed=2000.0,
    )
    p = VehicleParams.from_airframes([quad(), hexa], 4)
    assert p.n_rotors == 6 and p.k_f[0, 4:].abs().sum() == 0
    s = MultirotorState.create(4, 6, pos=[0.0, 0.0, 5.0])
    w = hover_speeds(p)
    assert w[0, 4:].abs().sum() == 0
    s = rollout(
        p,
        s.replace(rotor_speed=w),
        w,
        Disturbance.create(4),
        torch.arange(4),
        DynamicsConfig(stochastic=False),
        960,
    )
    assert s.pos.sub(torch.tensor([0.0, 0.0, 5.0])).abs().max() < 1e-3
