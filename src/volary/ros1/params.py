"""FlightGoggles' ROS parameters for a volary World (pure: no rospy, no ROS master).

What FlightGoggles' launch files loaded (the vehicle, IMU, laser, rate-loop and camera
settings; the gates' nominal corners and perturbation bounds; the challenge file's course order,
start pose, time limit and gate width), with the values of the World the bridge flies: the
vehicle's from its platform (``flightgoggles``: FlightGoggles' own vehicle file), the noise from
its IMU and rangefinder presets, the rate loop's from the ``ctbr`` controller's gains, the gates
from the course. Where volary's value differs from FlightGoggles' (the rangefinder), the
parameter tells what volary simulates, since that is what a stack reading it should know.

Corner k of ``/uav/<gate>/nominal_location`` is IR marker ``k + 1`` of that gate.
"""

from __future__ import annotations

import math
from typing import Any

MIN_ARMING_THRUST = 9.9  # N (AlphaPilot-era dynamics node)
RESET_TIMEOUT = 0.1  # s sim time after a reset before a command may arm
CHALLENGE_NAME = "Challenge Final"
STEREO_BASELINE = 0.32  # m (flightgoggles_ros_bridge/baseline; only the right P matrix uses it)


def _f(x: Any) -> float:
    return float(x.item()) if hasattr(x, "item") else float(x)


def init_pose(spec: Any) -> list[float]:
    """[x, y, z, qx, qy, qz, qw] of the course's start (FlightGoggles' init_pose layout)."""
    yaw = float(spec.start_yaw)
    return [*map(float, spec.start), 0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)]


def gate_params(spec: Any) -> dict[str, Any]:
    """Every gate's ``nominal_location`` (the course ``spec`` was perturbed from, or ``spec``),
    ``perturbation_bound`` and (the reporter's ground truth, which stacks were not allowed to
    read) ``location``, where ``spec`` has the gate; the course."""
    from volary.worlds import unperturbed

    nominal = unperturbed(spec)
    out: dict[str, Any] = {
        "/uav/gate_names": list(spec.meta["order"]),
        "/uav/challenge_name": CHALLENGE_NAME,
        "/uav/timeout": float(spec.meta["timeout_s"]),
        "/uav/gate_width": float(spec.meta["gate_width"]),
        "/uav/inflation": float(spec.meta["inflation"]),
    }
    pert = spec.meta.get("perturbation", {})
    for gate, nominal_gate in zip(spec.gates, nominal.gates, strict=True):
        out[f"/uav/{gate.name}/nominal_location"] = [
            [float(v) for v in c] for c in nominal_gate.corners
        ]
        out[f"/uav/{gate.name}/location"] = [[float(v) for v in c] for c in gate.corners]
        bound = pert.get(gate.name, (0.0, 0.0, 0.0))
        out[f"/uav/{gate.name}/perturbation_bound"] = [float(v) for v in bound]
    return out


def vehicle_params(world: Any, spec: Any) -> dict[str, Any]:
    """``/uav/flightgoggles_uav_dynamics/*`` from vehicle 0's parameters."""
    p = world.params
    arm = float(p.rotor_pos[0, 0, :2].norm())
    j = p.inertia[0]
    ns = "/uav/flightgoggles_uav_dynamics/"
    values = {
        "init_pose": init_pose(spec),
        "ignore_collisions": False,
        "vehicle_mass": _f(p.mass[0]),
        "vehicle_inertia_xx": _f(j[0, 0]),
        "vehicle_inertia_yy": _f(j[1, 1]),
        "vehicle_inertia_zz": _f(j[2, 2]),
        "max_prop_speed": _f(p.w_max[0, 0]),
        "moment_arm": arm,
        "motor_time_constant": _f(p.tau_up[0, 0]),
        "thrust_coefficient": _f(p.k_f[0, 0]),
        "torque_coefficient": _f(p.k_m[0, 0]),
        "drag_coefficient": _f(p.drag_quad[0, 0]),
        "angular_process_noise": _f(p.moment_noise[0]) ** 2,
        "linear_process_noise": _f(p.force_noise[0]) ** 2,
        "reset_timeout": RESET_TIMEOUT,
        "min_arming_thrust": MIN_ARMING_THRUST,
    }
    return {ns + k: v for k, v in values.items()}


def loop_params(world: Any) -> dict[str, Any]:
    """``/uav/flightgoggles_lpf/*`` and ``/uav/flightgoggles_pid/*``: the acro loop's gains."""
    g = world.sim.controller.gains
    out: dict[str, Any] = {
        "/uav/flightgoggles_lpf/gain_p": _f(g.lpf_stiffness[0]),
        "/uav/flightgoggles_lpf/gain_q": _f(g.lpf_damping[0]),
    }
    for i, axis in enumerate(("roll", "pitch", "yaw")):
        for term, t in (("p", g.rate_p), ("i", g.rate_i), ("d", g.rate_d)):
            out[f"/uav/flightgoggles_pid/gain_{term}_{axis}"] = _f(t[0, i])
        out[f"/uav/flightgoggles_pid/int_bound_{axis}"] = _f(g.rate_i_bound[0, i])
    return out


def sensor_params(world: Any, camera: Any, ranger: Any) -> dict[str, Any]:
    """IMU, laser and camera parameters from the World's IMU and the given camera and
    rangefinder configs (variances per published sample)."""
    imu = world.sim.imu.config
    return {
        "/uav/flightgoggles_imu/accelerometer_variance": imu.accel_noise_density**2 * imu.rate_hz,
        "/uav/flightgoggles_imu/gyroscope_variance": imu.gyro_noise_density**2 * imu.rate_hz,
        "/uav/flightgoggles_laser/rangefinder_variance": float(ranger.noise_std) ** 2,
        "/uav/flightgoggles_laser/rangefinder_max_range": float(ranger.max_range),
        "/uav/flightgoggles_ros_bridge/image_width": int(camera.width),
        "/uav/flightgoggles_ros_bridge/image_height": int(camera.height),
        "/uav/flightgoggles_ros_bridge/baseline": STEREO_BASELINE,
        "/uav/flightgoggles_ros_bridge/collider_radius": _f(world.params.radius[0]),
        "/uav/flightgoggles_ros_bridge/render_stereo": False,
        "/uav/camera/render_stereo": False,
    }


def fg_params(world: Any, spec: Any, camera: Any, ranger: Any, results: str) -> dict[str, Any]:
    """Every parameter the bridge sets (module docstring); ``results``: the path written at
    the end of the lap (``/uav/results_location``)."""
    return {
        "/use_sim_time": True,
        "/uav/results_location": str(results),
        **gate_params(spec),
        **vehicle_params(world, spec),
        **loop_params(world),
        **sensor_params(world, camera, ranger),
    }
