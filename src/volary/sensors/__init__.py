"""Layer 3 sensors: IMU (more sensors arrive with the worlds issue)."""

from volary.sensors.imu import IMU_PRESETS, Imu, ImuConfig, ImuReading, imu_config, specific_force

__all__ = ["IMU_PRESETS", "Imu", "ImuConfig", "ImuReading", "imu_config", "specific_force"]
