"""The SOUS VIDE flight scene: gate, ladder, pillars and a monitor in a room, its splat and the
15-second desired trajectory (paper 000, Sec. VI-A: "a 15-second trajectory that guides the
drone through a gate and under a ladder before ending facing a monitor").

The paper flew a Gaussian splat captured in a lab; volary stands in a synthesized room whose
splat comes from :func:`volary.sensors.splat.synthesize` over the same primitives the collision
queries use, so an RGB frame and a collision test see one world. Layout (world frame, z up, m):

- room: floor z = 0 (checkerboard splat; a collision plane), walls at x = -2 and x = 12,
  y = -4 and y = 4, 3 m high (thin boxes, in the collision scene too);
- gate (id 1) in the plane x = 3, opening y in [-0.8, 0.8], z in [0.55, 2.05];
- pillars (ids 2, 3) beside the gate at y = +-1.45;
- ladder (id 4): two rails at y = -0.9 and 1.5 and two rungs (the lower bottom at z = 1.75)
  across x = 6.5 -- the drone passes under it;
- two boxes (ids 5, 6) along the route as clutter;
- monitor (id 7): a dark panel at y = 3.05 facing -y, the trajectory ends facing it.

The desired trajectory is the min-snap spline (``volary.planning.min_snap``, rest to rest)
through eight position-yaw waypoints in ``duration`` s (see :func:`desired_trajectory`). The
objective O of SV-Net (Sec. V) is [first waypoint (3), last waypoint (3), total time] (7,).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.planning.minsnap import min_snap, rest_to_rest
from volary.planning.trajectory import PolyTrajectory
from volary.sensors.rays import Mount, pinhole_intrinsics
from volary.sensors.splat import GaussianSplats, SynthConfig, camera_poses, render, synthesize
from volary.worlds.primitives import Box, Cylinder, Gate, Plane, Scene, SceneSpec

GATE_ID, LADDER_ID, MONITOR_ID = 1, 4, 7
LANDMARK_IDS = (GATE_ID, LADDER_ID, MONITOR_ID)  # removed by the "static" disturbance
WAYPOINTS = (
    (0.0, 0.0, 1.0),
    (1.5, 0.0, 1.15),
    (3.0, 0.0, 1.3),  # gate centre
    (4.8, 0.15, 1.1),
    (6.5, 0.3, 0.95),  # under the ladder
    (7.9, 0.55, 1.1),
    (8.8, 1.1, 1.2),
    (9.0, 1.6, 1.25),  # facing the monitor
)
YAWS = (0.0, 0.0, 0.0, 0.0, 0.0, 0.3, 1.1, math.pi / 2)  # rad at the waypoints
CEILING = (0.55, 0.55, 0.6)  # RGB behind every splat (the room has no ceiling splats)
BOUNDS_MIN, BOUNDS_MAX = (-2.0, -4.0, 0.0), (12.0, 4.0, 3.0)


@dataclass(frozen=True)
class SousVideScene:
    """Everything a SOUS VIDE rollout needs about its world."""

    spec: SceneSpec  # primitives (without the floor plane), the splat's source
    collision: SceneSpec  # spec + the floor plane: what collision queries test
    splats: GaussianSplats  # (G, ...) synthesized from ``spec`` (``extra["object_id"]``)
    trajectory: PolyTrajectory  # float64 min-snap desired trajectory, duration s
    waypoints: Tensor  # (W, 3) m
    yaws: Tensor  # (W,) rad
    objective: Tensor  # (7,) float32: first waypoint, last waypoint, total time (s)
    intrinsics: Tensor  # (4,) float64 fx, fy, cx, cy px
    mount: Mount  # T_BC of the forward OpenCV camera
    width: int  # px
    height: int  # px

    @property
    def duration(self) -> float:
        """Total time of the desired trajectory (s)."""
        return float(self.trajectory.duration)

    def to(self, device: torch.device | str) -> SousVideScene:
        """The scene with what batched rollouts compute on (splats, desired trajectory,
        intrinsics) on ``device``; the small metadata (waypoints, yaws, objective) stays on
        the CPU, where metrics and dataset rows are computed."""
        dev = torch.device(device)
        if self.splats.means.device == dev:
            return self
        return replace(
            self,
            splats=self.splats.to(dev),
            trajectory=self.trajectory.to(dev),
            intrinsics=self.intrinsics.to(dev),
        )

    def camera(self, pos: Tensor, quat: Tensor) -> Tensor:
        """T_WC (N, 4, 4) of the onboard camera for bodies at ``pos`` (N, 3), ``quat`` (N, 4)."""
        return camera_poses(pos.float(), quat.float(), self.mount)

    def render(
        self, pos: Tensor, quat: Tensor, splats: GaussianSplats | None = None, backend: str = "auto"
    ) -> Tensor:
        """Onboard RGB (N, H, W, 3) float in [0, 1] from the scene's splats (or ``splats``,
        shared (G, ...) or per env (N, G, ...)); one batched render call for all N bodies.
        Above the 3 m walls the camera sees the grey :data:`CEILING` background."""
        img = render(
            self.splats if splats is None else splats,
            self.intrinsics,
            self.camera(pos, quat),
            self.width,
            self.height,
            backend=backend,
            background=CEILING,
        )
        return img.rgb

    def collision_scene(
        self, n_envs: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
    ) -> Scene:
        """The collision world stacked for ``n_envs`` envs."""
        return Scene.stack(self.collision, n_envs, device=device, dtype=dtype)


def _box(c: tuple[float, float, float], s: tuple[float, float, float], oid: int) -> Box:
    return Box(center=c, size=s, object_id=oid)


def room_obstacles() -> tuple:
    """Pillars, ladder, clutter, monitor and walls (ids >= 2; the gate is a Gate, id 1)."""
    ladder = (
        _box((6.5, -0.9, 1.2), (0.08, 0.08, 2.4), LADDER_ID),  # rails
        _box((6.5, 1.5, 1.2), (0.08, 0.08, 2.4), LADDER_ID),
        _box((6.5, 0.3, 1.8), (0.1, 2.32, 0.1), LADDER_ID),  # rungs
        _box((6.5, 0.3, 2.25), (0.1, 2.32, 0.1), LADDER_ID),
    )
    walls = (
        _box((-2.0, 0.0, 1.5), (0.1, 8.0, 3.0), 8),
        _box((12.0, 0.0, 1.5), (0.1, 8.0, 3.0), 8),
        _box((5.0, -4.0, 1.5), (14.0, 0.1, 3.0), 9),
        _box((5.0, 4.0, 1.5), (14.0, 0.1, 3.0), 9),
    )
    return (
        Cylinder(center=(3.0, 1.45, 1.25), radius=0.15, length=2.5, object_id=2),
        Cylinder(center=(3.0, -1.45, 1.25), radius=0.15, length=2.5, object_id=3),
        *ladder,
        _box((5.0, -1.6, 0.5), (0.8, 0.8, 1.0), 5),
        _box((7.8, 2.2, 0.4), (0.6, 0.9, 0.8), 6),
        _box((9.0, 3.05, 1.25), (1.2, 0.06, 0.75), MONITOR_ID),  # panel facing -y
        _box((9.0, 3.1, 0.45), (0.1, 0.1, 0.9), MONITOR_ID),  # its stand
        *walls,
    )


def scene_spec() -> SceneSpec:
    """The room's primitives (no floor plane: the splat dresses the floor itself)."""
    gate = Gate(
        corners=((3.0, 0.8, 2.05), (3.0, -0.8, 2.05), (3.0, -0.8, 0.55), (3.0, 0.8, 0.55)),
        name="gate",
        border=0.12,
        depth=0.12,
        object_id=GATE_ID,
    )
    return SceneSpec(
        "sousvide_room",
        BOUNDS_MIN,
        BOUNDS_MAX,
        obstacles=room_obstacles(),
        gates=(gate,),
        start=WAYPOINTS[0],
        goal=WAYPOINTS[-1],
    )


def with_floor(spec: SceneSpec) -> SceneSpec:
    """``spec`` plus the floor z = bounds_min z as a collision plane (object id 0)."""
    floor = Plane(point=(0.0, 0.0, spec.bounds_min[2]), normal=(0.0, 0.0, 1.0), object_id=0)
    return SceneSpec(
        spec.name,
        spec.bounds_min,
        spec.bounds_max,
        obstacles=(*spec.obstacles, floor),
        gates=spec.gates,
        start=spec.start,
        goal=spec.goal,
    )


def desired_trajectory(duration: float) -> tuple[PolyTrajectory, Tensor, Tensor]:
    """Min-snap spline through :data:`WAYPOINTS` / :data:`YAWS` (SOUS VIDE Sec. IV: X_des from
    min-snap), rest to rest in ``duration`` s.

    Segment times are proportional to length, the first and last segment counted 1 m longer
    (they accelerate from and brake to rest). Interior waypoint velocities and yaw rates are
    fixed to central differences (Catmull-Rom tangents) and acceleration/jerk left free: with
    every interior derivative free, the spline through these unevenly spaced waypoints swings
    up to 1.5 m sideways between them (measured), which would graze the ladder.
    """
    wp = torch.tensor(WAYPOINTS, dtype=torch.float64)
    yaw = torch.tensor(YAWS, dtype=torch.float64)
    length = (wp[1:] - wp[:-1]).norm(dim=-1)
    length[0] += 1.0
    length[-1] += 1.0
    dur = duration * length / length.sum()
    knots = torch.cat((dur.new_zeros(1), dur.cumsum(0)))
    der = rest_to_rest(len(wp))
    span = (knots[2:] - knots[:-2])[:, None]
    der[1:-1, 0, :3] = (wp[2:] - wp[:-2]) / span
    der[1:-1, 0, 3] = (yaw[2:] - yaw[:-2]) / span[:, 0]
    return min_snap(wp, dur, yaw=yaw, derivatives=der), wp, yaw


def objective_vector(waypoints: Tensor, duration: float) -> Tensor:
    """SV-Net's objective O (Sec. V): first waypoint, last waypoint, total time -> (7,)."""
    d = torch.tensor([duration], dtype=torch.float32)
    return torch.cat((waypoints[0].float(), waypoints[-1].float(), d))


def make_scene(
    *,
    duration: float = 15.0,
    width: int = 64,
    height: int = 64,
    hfov_deg: float = 87.0,
    spacing: float = 0.12,
    seed: int = 0,
) -> SousVideScene:
    """The deterministic SOUS VIDE scene: same arguments, same splats and trajectory.

    duration: s of the desired trajectory; width, height: camera image size (px); hfov_deg:
    horizontal field of view (the paper's RealSense D435 colour camera is ~87 deg wide);
    spacing: m between Gaussians on obstacles (the floor uses 2x); seed: splat synthesis seed.
    """
    if not (math.isfinite(duration) and duration >= 5.0):
        raise ConfigError(f"duration: expected a finite time >= 5 s, got {duration}")
    for name, v in (("width", width), ("height", height)):
        if isinstance(v, bool) or not isinstance(v, int) or not 8 <= v <= 1024:
            raise ConfigError(f"{name}: expected an integer in [8, 1024] px, got {v!r}")
    if not 20.0 <= hfov_deg <= 150.0:
        raise ConfigError(f"hfov_deg: expected 20..150 deg, got {hfov_deg}")
    if not (math.isfinite(spacing) and 0.03 <= spacing <= 1.0):
        raise ConfigError(f"spacing: expected 0.03..1 m, got {spacing}")
    spec = scene_spec()
    synth = SynthConfig(spacing=spacing, floor_spacing=2 * spacing)
    splats = synthesize(spec, seed, synth)
    traj, wp, yaw = desired_trajectory(duration)
    return SousVideScene(
        spec=spec,
        collision=with_floor(spec),
        splats=splats,
        trajectory=traj,
        waypoints=wp,
        yaws=yaw,
        objective=objective_vector(wp, duration),
        intrinsics=pinhole_intrinsics(width, height, math.radians(hfov_deg), None),
        mount=Mount.camera((0.1, 0.0, 0.02)),
        width=width,
        height=height,
    )


__all__ = [
    "CEILING",
    "GATE_ID",
    "LADDER_ID",
    "LANDMARK_IDS",
    "MONITOR_ID",
    "SousVideScene",
    "desired_trajectory",
    "make_scene",
    "objective_vector",
    "scene_spec",
    "with_floor",
]
