"""volary.fc.ned: the one conversion between volary's frames (ENU world, FLU body) and the NED
firmwares' (NED world, FRD body), and the vehicle those firmwares fly."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from volary.errors import ConfigError
from volary.fc import ned
from volary.inputs import validated
from volary.math.quaternion import quat_to_rotmat

H = math.sqrt(0.5)
M_NE = np.array([[0.0, 1, 0], [1, 0, 0], [0, 0, -1]])  # ENU coordinates -> NED coordinates
M_LF = np.diag([1.0, -1, -1])  # FRD coordinates -> FLU coordinates

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
vec3 = st.lists(finite, min_size=3, max_size=3).map(np.array)
unit_quat = (
    st.lists(st.floats(-1, 1, allow_nan=False), min_size=4, max_size=4)
    .map(np.array)
    .filter(lambda q: np.linalg.norm(q) > 0.1)
    .map(lambda q: q / np.linalg.norm(q))
)


def rot(q: np.ndarray) -> np.ndarray:
    return quat_to_rotmat(torch.as_tensor(q, dtype=torch.float64)).numpy()


def test_known_vectors() -> None:
    assert ned.enu_to_ned([1.0, 2.0, 3.0]).tolist() == [2.0, 1.0, -3.0]  # east 1, north 2, up 3
    assert ned.flu_to_frd([1.0, 2.0, 3.0]).tolist() == [1.0, -2.0, -3.0]
    # volary's IMU at rest reads +9.81 along body up; a NED firmware expects -9.81 along down
    assert ned.flu_to_frd([0.0, 0.0, 9.81]).tolist() == [0.0, 0.0, -9.81]


@pytest.mark.parametrize(
    ("q_enu", "q_ned"),
    [
        ([1, 0, 0, 0], [H, 0, 0, H]),  # level, nose east: NED yaw +90 deg
        ([H, 0, 0, H], [1, 0, 0, 0]),  # level, nose north: NED identity
        ([H, 0, 0, -H], [0, 0, 0, 1]),  # nose south: yaw 180 deg
    ],
)
def test_known_attitudes(q_enu: list[float], q_ned: list[float]) -> None:
    got = ned.quat_to_ned(np.array(q_enu, dtype=float))
    assert np.allclose(got, q_ned) or np.allclose(got, -np.array(q_ned))


def test_roll_right_wing_down_in_both_frames() -> None:
    """FLU roll +30 deg (left side up) is FRD roll +30 deg (right wing down); nose north."""
    a = math.radians(30)
    q_enu = np.array([H, 0, 0, H])  # nose north
    q_roll = np.array([math.cos(a / 2), math.sin(a / 2), 0, 0])
    w1, x1, y1, z1 = q_enu
    w2, x2, y2, z2 = q_roll
    q = np.array([
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    ])  # fmt: skip
    assert np.allclose(ned.quat_to_ned(q), q_roll)


@given(vec3)
def test_vector_round_trips(v: np.ndarray) -> None:
    assert np.array_equal(ned.ned_to_enu(ned.enu_to_ned(v)), v)
    assert np.array_equal(ned.frd_to_flu(ned.flu_to_frd(v)), v)
    t = torch.as_tensor(v)
    assert torch.equal(ned.ned_to_enu(ned.enu_to_ned(t)), t)


@given(unit_quat)
def test_quaternion_round_trip(q: np.ndarray) -> None:
    back = ned.quat_from_ned(ned.quat_to_ned(q))
    assert np.allclose(back, q, atol=1e-12)
    assert math.isclose(float(np.linalg.norm(ned.quat_to_ned(q))), 1.0, rel_tol=1e-12)


@given(unit_quat, vec3)
def test_rotation_consistency(q: np.ndarray, v_body: np.ndarray) -> None:
    """A body vector rotated to the world in volary's frames, then converted, equals the
    converted vector rotated by the converted quaternion: R_ned = M_ne R_enu M_lf."""
    q_ned = ned.quat_to_ned(q)
    lhs = ned.enu_to_ned(rot(q) @ v_body)
    rhs = rot(q_ned) @ ned.flu_to_frd(v_body)
    assert np.allclose(lhs, rhs, atol=1e-9 * (1 + np.abs(v_body).max()))
    assert np.allclose(rot(q_ned), M_NE @ rot(q) @ M_LF, atol=1e-12)


def test_batched_torch_and_numpy_agree() -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(5, 7, 4, generator=g, dtype=torch.float64)
    q = q / q.norm(dim=-1, keepdim=True)
    v = torch.randn(5, 7, 3, generator=g, dtype=torch.float32)
    assert ned.quat_to_ned(q).shape == (5, 7, 4)
    assert ned.flu_to_frd(v).dtype == torch.float32
    assert np.allclose(ned.quat_to_ned(q).numpy(), ned.quat_to_ned(q.numpy()))
    assert np.allclose(ned.enu_to_ned(v).numpy(), ned.enu_to_ned(v.numpy()))


@given(vec3.map(lambda v: v * 3))
def test_geodetic_round_trip(p: np.ndarray) -> None:
    home = ned.Home()
    lat, lon, alt = ned.ned_to_geodetic(p, home)
    assert np.allclose(ned.geodetic_to_ned(lat, lon, alt, home), p, atol=1e-6)


def test_geodetic_known_values() -> None:
    home = ned.Home(0.0, 0.0, 100.0)
    lat, lon, alt = ned.ned_to_geodetic(np.array([111_319.49, 0.0, -10.0]), home)
    assert math.isclose(lat, 1.0, abs_tol=1e-6) and lon == 0.0 and alt == 110.0
    lat, lon, _ = ned.ned_to_geodetic(np.array([0.0, 1000.0, 0.0]), ned.Home(60.0, 0.0, 0.0))
    assert math.isclose(lon, 2 * 1000 / 111_319.49, rel_tol=1e-6)  # cos 60 = 1/2


def test_isa() -> None:
    assert math.isclose(ned.pressure_hpa(0.0), 1013.25)
    assert math.isclose(ned.temperature_c(0.0), 15.0)
    assert math.isclose(ned.pressure_hpa(1000.0), 898.75, abs_tol=0.05)  # ISA table
    assert math.isclose(ned.temperature_c(1000.0), 8.5)


def test_quad_x_order() -> None:
    from volary.platforms import get

    a = get("research_quad_1kg")
    order = ned.quad_x_order(a.rotor_positions, a.rotor_directions, "PX4")
    corners = [np.sign(a.rotor_positions[i][:2]).tolist() for i in order]
    assert corners == [[1, -1], [-1, 1], [1, 1], [-1, -1]]  # FR, RL, FL, RR
    assert [a.rotor_directions[i] for i in order] == [-1, -1, 1, 1]  # CCW, CCW, CW, CW
    hexa = get("hexa")
    with pytest.raises(ConfigError, match="--motor-map: PX4's quad-X needs 4 rotors"):
        ned.quad_x_order(hexa.rotor_positions, hexa.rotor_directions, "PX4")
    flipped = [-d for d in a.rotor_directions]
    with pytest.raises(ConfigError, match=r"rotor_directions\.\d: expected"):
        ned.quad_x_order(a.rotor_positions, flipped, "ArduPilot")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"rate_hz": 400.0, "physics_hz": 1000.0}, "physics_hz: expected a whole multiple"),
        ({"bind": "localhost:1"}, "bind: .*an IP address such as 127.0.0.1, got .localhost:1.$"),
        ({"home": [91.0, 0.0, 0.0]}, r"home\.0"),
        ({"rate_hz": "400"}, "rate_hz"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_vehicle_config_errors(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        validated(ned.VehicleConfig, data, "link", error=ConfigError)
    assert "\n" not in str(err.value)


def test_vehicle_at_rest_and_falling() -> None:
    """On the ground the accelerometer reads -9.81 along FRD z; in free fall about 0 and the
    NED velocity grows downwards at g."""
    cfg = ned.VehicleConfig(imu="ideal", rate_hz=250.0, physics_hz=1000.0)
    v = ned.NedVehicle("research_quad_1kg", cfg, "PX4")
    for _ in range(10):
        v.step([0.0] * 4, armed=False)
    r = v.reading()
    assert np.allclose(r.accel, [0, 0, -9.81], atol=1e-6) and np.allclose(r.pos, 0, atol=1e-9)
    v.place([0.0, 0.0, 5.0], [1.0, 0.0, 0.0, 0.0])
    for _ in range(25):
        v.step([0.0] * 4, armed=False)
    r = v.reading()
    assert abs(r.accel[2]) < 0.1 and math.isclose(r.vel[2], 9.81 * 0.1, rel_tol=0.02)
    assert r.pos[2] < -4.9 and math.isclose(r.alt, 488.0 - r.pos[2])
