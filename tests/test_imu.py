"""IMU: ideal readings, noise statistics from the noise density, bias random walk, rates."""

from __future__ import annotations

import math

import pytest
import torch

from volary.errors import ConfigError, UnknownNameError
from volary.math.quaternion import quat_from_euler, quat_identity
from volary.sensors import IMU_PRESETS, Imu, ImuConfig, specific_force


def test_level_vehicle_at_rest_reads_plus_g():
    q = quat_identity(2)
    f = specific_force(q, torch.zeros(2, 3))
    torch.testing.assert_close(f, torch.tensor([[0.0, 0.0, 9.81]] * 2))


def test_free_fall_reads_zero_and_tilt_rotates_gravity():
    q = quat_from_euler(torch.tensor([math.pi / 2]), torch.tensor([0.0]), torch.tensor([0.0]))
    torch.testing.assert_close(
        specific_force(q, torch.tensor([[0.0, 0.0, -9.81]])), torch.zeros(1, 3), atol=1e-6, rtol=0
    )
    # rolled +90 deg about x: body y points down... gravity reaction appears on body +y
    f = specific_force(q, torch.zeros(1, 3))
    torch.testing.assert_close(f, torch.tensor([[0.0, 9.81, 0.0]]), atol=1e-5, rtol=0)


def test_white_noise_std_follows_density_and_rate():
    cfg = ImuConfig(accel_noise_density=0.01, gyro_noise_density=0.002, rate_hz=400.0)
    imu = Imu(20000, cfg, seed=1)
    r = imu(quat_identity(20000), torch.zeros(20000, 3), torch.zeros(20000, 3), 1 / 400)
    assert r.gyro.std().item() == pytest.approx(0.002 * math.sqrt(400), rel=0.03)
    assert (r.accel - torch.tensor([0, 0, 9.81])).std().item() == pytest.approx(
        0.01 * math.sqrt(400), rel=0.03
    )


def test_bias_random_walk_grows_with_sqrt_time():
    cfg = ImuConfig(gyro_bias_random_walk=0.01, rate_hz=100.0)
    n = 4000
    imu = Imu(n, cfg, seed=2)
    for _ in range(400):  # 4 s
        imu(quat_identity(n), torch.zeros(n, 3), torch.zeros(n, 3), 0.01)
    assert imu.gyro_bias.std().item() == pytest.approx(0.01 * math.sqrt(4.0), rel=0.05)


def test_readings_held_between_samples_at_lower_rate():
    imu = Imu(3, ImuConfig(gyro_noise_density=0.01, rate_hz=100.0), seed=0)
    z = torch.zeros(3, 3)
    first = imu(quat_identity(3), z, z, 1 / 400).gyro.clone()
    later = [imu(quat_identity(3), z, z, 1 / 400).gyro.clone() for _ in range(4)]
    assert all(torch.equal(first, h) for h in later[:3])  # held for 3 ticks of 2.5 ms
    assert not torch.equal(first, later[3])  # a new sample every 10 ms


def test_env_readings_do_not_depend_on_batch_size_and_seed_repeats():
    def run(n, seed):
        imu = Imu(n, "bmi085", seed=seed)
        for _ in range(5):
            r = imu(quat_identity(n), torch.zeros(n, 3), torch.zeros(n, 3), 1 / 400)
        return r.gyro[0]

    torch.testing.assert_close(run(1, 7), run(500, 7), rtol=0, atol=0)
    assert not torch.equal(run(1, 7), run(1, 8))


def test_presets_and_errors():
    assert {"bmi085", "vn100", "flightgoggles", "ideal"} <= set(IMU_PRESETS)
    with pytest.raises(UnknownNameError, match="bmi085"):
        Imu(1, "mpu9999")
    with pytest.raises(ConfigError, match="rate_hz"):
        ImuConfig(rate_hz=0.0)
    with pytest.raises(ConfigError, match="gyro_noise_density"):
        ImuConfig(gyro_noise_density=-1.0)


def test_an_envs_readings_do_not_depend_on_when_other_envs_reset() -> None:
    """Resetting env 1 leaves env 0's noise stream where it was (a served slot's join, an env's
    auto-reset): env 0 reads the same with or without env 1's resets."""
    import torch

    from volary.sensors.imu import Imu

    def readings(reset_other: bool) -> torch.Tensor:
        imu = Imu(2, "bmi085", dtype=torch.float64)
        imu.reseed([11, 12])
        q = torch.tensor([[1.0, 0, 0, 0]] * 2, dtype=torch.float64)
        z = torch.zeros(2, 3, dtype=torch.float64)
        out = []
        for k in range(20):
            if reset_other and k % 5 == 2:
                imu.reset(torch.tensor([False, True]))
            out.append(imu(q, z, z, 1e-3).gyro[0].clone())
        return torch.stack(out)

    assert torch.equal(readings(False), readings(True))
