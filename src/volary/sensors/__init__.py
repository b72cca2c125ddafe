"""Layer 3 sensors: IMU and the ray-cast sensors (cameras, LiDAR, ToF, rangefinder, IR beacons).

Ray-casting backends live in ``volary.sensors.raycast`` and are imported on first use.
"""

from volary.sensors.beacons import BeaconReading, IrBeacons, project_pinhole
from volary.sensors.camera import (
    CAMERA_PRESETS,
    CameraConfig,
    CameraReading,
    DepthCamera,
    camera_config,
)
from volary.sensors.imu import IMU_PRESETS, Imu, ImuConfig, ImuReading, imu_config, specific_force
from volary.sensors.lidar import LIDAR_PRESETS, Lidar, LidarConfig, LidarReading, lidar_config
from volary.sensors.rangefinder import (
    RANGEFINDER_PRESETS,
    TOF_PRESETS,
    MultiZoneTof,
    Rangefinder,
    RangefinderConfig,
    RangeReading,
    TofConfig,
    TofReading,
    rangefinder_config,
    tof_config,
)
from volary.sensors.rays import DOWNWARD, FORWARD_CAMERA, Mount

__all__ = [
    "BeaconReading",
    "CAMERA_PRESETS",
    "CameraConfig",
    "CameraReading",
    "DOWNWARD",
    "DepthCamera",
    "FORWARD_CAMERA",
    "IMU_PRESETS",
    "Imu",
    "ImuConfig",
    "ImuReading",
    "IrBeacons",
    "LIDAR_PRESETS",
    "Lidar",
    "LidarConfig",
    "LidarReading",
    "Mount",
    "MultiZoneTof",
    "RANGEFINDER_PRESETS",
    "RangeReading",
    "Rangefinder",
    "RangefinderConfig",
    "TOF_PRESETS",
    "TofConfig",
    "TofReading",
    "camera_config",
    "imu_config",
    "lidar_config",
    "project_pinhole",
    "rangefinder_config",
    "specific_force",
    "tof_config",
]
