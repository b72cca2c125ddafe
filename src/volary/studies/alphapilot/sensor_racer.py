"""The reference contestant of the AlphaPilot challenge: race from sensors, not from the truth.

What it knows is a :class:`~volary.studies.alphapilot.interface.Briefing`; what it senses
arrives in :class:`~volary.studies.alphapilot.interface.ChallengeObservation`. Three parts,
batched over envs:

1. **Estimation** (:class:`volary.studies.alphapilot.estimation.GateEkf`): an error-state EKF
   propagated with every IMU sample and corrected with the IR beacon corners (and the downward
   range when carried and ``use_range``). With the stereo camera, the gates are found in each
   depth image by :class:`volary.studies.alphapilot.gate_detector.GateDetector` (the frame
   model fitted to the point cloud near where the filter expects each gate) and each fitted
   gate's corners are fused as pixels and depths (pixel noise ``camera_pixel_std``, depth noise
   0.05 m plus the camera's quadratic term). With the camera as the only gate sensor the plans
   keep the tilt within ``camera_tilt`` (a forward camera tilted further to accelerate sees the
   floor, not the gates: perception limits the speed). Each course gate's unknown offset is
   state: shift, height, rotation and the size of its opening (8 values,
   :data:`~volary.studies.alphapilot.estimation.GATE_PARAMS`); the horizontal shift and the
   yaw have priors from the published bounds (uniform on +-b: std b / sqrt(3), at least
   ``gate_shift_floor`` / ``gate_yaw_floor``), the rest the racer's own (``gate_height_std``,
   ``gate_tilt_std``, ``gate_scale_std``): a real course's gate need not be the nominal one
   moved within the bounds. The other gates are fixed landmarks. Corners whose innovation
   fails a chi-square gate are ignored, so false detections, mislabelled and dropped beacons
   cost accuracy, not the filter.
2. **Planning**: before the start, volary's minimum-time planner
   (:func:`volary.planning.mintime.min_time`, the oracle racer's settings) on the *nominal*
   course gives segment times and the speed through each gate. In flight, every
   ``replan_every`` control steps, an env whose estimated gates moved more than ``replan_tol``
   since its plan was made is replanned: min-snap from the reference's current position,
   velocity, acceleration and jerk (so the reference stays smooth) through the estimated gate
   centres, crossing each along its estimated normal at the planned speed, with the remaining
   segment times of the nominal plan; a segment the moved gates push past the planning limits
   (``segment_load`` > 1; not the current one, whose time carries over from plan to plan) gets
   up to ``MAX_STRETCH`` times its time per pass, the gates at
   its ends are passed that much slower, and the plan is re-solved (``retime_passes``; the
   later segments restart from the nominal times and speeds at every replan, so the stretch
   never compounds). No replanning within ``freeze_s`` of the next gate (the
   beacons of a gate leave the view as it is reached, paper 001 Fig. 10c). Optionally
   (``resync_m`` > 0; off by default: on the development courses it replanned so often that
   a run took over twice as long, and it was not evaluated to the end), a replan starts from
   the estimated position and velocity when the vehicle is that far from the reference.
3. **Tracking**: the reference's 14-d setpoint (drag-aware feed-forward) and the *estimated*
   state give collective thrust and body rates with the geometric law of ``volary.control``
   (Lee force, Mellinger feed-forward rates, a P law on the attitude error); the acro loop of
   the vehicle tracks the rates. Through that loop the vehicle lagged a reference planned near
   the thrust limit and sagged below it (0.2 m median, 0.8-1 m where it clipped a gate's
   bottom bar, on the development courses), so: the commanded rates lead by ``rate_lead`` s of
   the reference's angular acceleration and the thrust by ``thrust_lead`` s of its rate (the
   published motor time constant), an integral on the height error (``integral_s``) removes
   the sag, and plans keep 15 % of the thrust for feedback (``limits.thrust_margin`` 0.85).
   Plans cross every gate level (``level_normals``: a far gate's pitch is barely observable
   and a tilted crossing direction made plans climb or dive), and a replan still past
   ``max_load`` times the limits after retiming is dropped in favour of the plan being flown.

Differences from a 2019 team: one EKF design, no learned detector, a planner given a few
seconds of CPU before the start (the teams had weeks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch import Tensor

from volary.control import Gains
from volary.control import geometric as geo
from volary.errors import ConfigError
from volary.math.quaternion import quat_from_euler, quat_to_rotmat
from volary.planning.flatness import Limits
from volary.planning.minsnap import SOLVE_METHODS, min_snap
from volary.planning.mintime import min_time
from volary.sensors.rays import pinhole_rays
from volary.studies.alphapilot.estimation import GATE_PARAMS, VEHICLE, Camera, GateEkf, GateMap
from volary.studies.alphapilot.gate_detector import GateDetector, rotate
from volary.studies.alphapilot.interface import Briefing, ChallengeObservation, DepthReport
from volary.studies.alphapilot.racers import (
    CONTROL_MAX_TILT,
    TrajectoryPlan,
    _default_limits,
    _vehicle_key,
    course_gates,
    segment_load,
    travel_planes,
)

HOLD_S = 5.0  # s of hover setpoints tabulated after a plan's end
MAX_PLAN_S = 300.0  # s of a plan tabulated at most (the challenge's course time limit)
_NOMINAL: dict[tuple, tuple[Tensor, Tensor]] = {}  # nominal plans solved in this process
MAX_STRETCH = 1.2  # a replanned segment's time grows by at most this factor per pass


@dataclass
class SensorRacer:
    """The sensors-only reference racer (module docstring)."""

    iters: int = 800  # min-time descent steps on the nominal course (MinTimeRacer's)
    samples: int = 3000  # limit checks per trajectory and step
    overshoot: float = 3.0  # m past the final gate
    tail_weight: float = 0.3
    replan_every: int = 6  # control steps between replanning checks
    replan_tol: float = 0.05  # m (and 0.05 rad of normal) of estimate change that replans
    freeze_s: float = 0.25  # s before the next gate without replanning
    use_range: bool = True
    pixel_std: float = 1.0  # px of a beacon the filter assumes (assumed, not briefed)
    camera_pixel_std: float = 1.5  # px of a gate corner fitted in a stereo depth image
    commit_next_gate: bool | None = None  # None: only with the camera as the gate sensor
    camera_tilt: float = math.radians(30.0)  # rad, the planning tilt cap when the stereo
    # camera is the only gate sensor (the forward camera's 70 deg vertical FOV: tilting
    # further to accelerate points it at the floor and the gates leave the view)
    max_tilt: float = CONTROL_MAX_TILT
    k_att: float = 10.0  # 1/s, body rate commanded per rad of attitude error
    retime_passes: int = 2  # replanned segments past the limits stretched, re-solved
    slow_gates: bool = True  # a stretched segment's gates are passed slower
    scale_by_length: bool = True  # later segment times follow the estimated gate distances
    resync_m: float = 0.0  # m off the reference that replans from the estimate (0: off)
    rate_lead: float = 0.03  # s, feed-forward of the reference's angular acceleration
    thrust_lead: float = 0.02  # s, feed-forward of the reference's thrust rate (the published
    # motor time constant)
    integral_s: tuple[float, float, float] = (0.0, 0.0, 1.0)  # s, integral time per axis (0: off)
    integral_max: float = 3.0  # N, bound on the integral force per axis
    # priors of what the briefing does not bound (a real course's gate is not only the nominal
    # one shifted and turned within the published bounds): assumed, wide
    gate_shift_floor: float = 0.3  # m, least std of a course gate's horizontal shift
    gate_height_std: float = 0.3  # m, of its height
    gate_tilt_std: float = math.radians(5.0)  # rad, of its pitch and roll
    gate_yaw_floor: float = math.radians(3.0)  # rad, least std of its yaw
    gate_scale_std: float = 0.1  # of the relative size of its opening (each in-plane axis)
    level_normals: bool = True  # plans cross every gate horizontally (see _gates_now)
    reopen_after: int = 0  # beacon frames of a course gate all gated out that re-open its
    # offset (GateEkf._reopen; 0: never)
    reopen_scale: float = 3.0  # its prior std times this after re-opening
    max_load: float = 1.5  # a replan still past this load after retiming is dropped
    hold_m: float = 0.0  # m behind the reference (along its velocity) that holds its clock
    snap_method: str = "auto"  # the replans' min-snap solve (planning.minsnap.SOLVE_METHODS):
    # "auto" switches between the dense and the banded solve with the number of envs
    # replanned together, so a pair's plan (last bits) and later its flight depend on its batch
    # (every committed race ran with it); "dense" flies a pair the same alone and in any batch
    limits: Limits = field(default_factory=lambda: replace(_default_limits(), thrust_margin=0.85))

    def __post_init__(self) -> None:
        for name in ("iters", "samples", "replan_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name}: expected an int >= 1, got {v!r}")
        for name in ("overshoot", "replan_tol", "integral_max", "max_load"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"{name}: expected a value > 0, got {v}")
        for name in ("rate_lead", "thrust_lead", "gate_shift_floor", "gate_height_std",
                     "gate_tilt_std", "gate_yaw_floor", "gate_scale_std"):  # fmt: skip
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"{name}: expected a value >= 0, got {v}")
        ra = self.reopen_after
        if isinstance(ra, bool) or not isinstance(ra, int) or ra < 0:
            raise ConfigError(f"reopen_after: expected an int >= 0 (0: never), got {ra!r}")
        if not (math.isfinite(self.reopen_scale) and self.reopen_scale >= 1):
            raise ConfigError(f"reopen_scale: expected a factor >= 1, got {self.reopen_scale}")
        if self.snap_method not in SOLVE_METHODS:
            raise ConfigError(f"snap_method: expected one of {SOLVE_METHODS}, got "
                              f"{self.snap_method!r}")  # fmt: skip
        ti = self.integral_s
        if len(ti) != 3 or not all(math.isfinite(v) and v >= 0 for v in ti):
            raise ConfigError(f"integral_s: expected three times >= 0 s (0: off), got {ti!r}")

    # ---- before the start ---------------------------------------------------------------------
    def reset(self, briefing: Briefing) -> None:
        b = briefing
        self.brief, self.n, self.dt = b, b.n_envs, b.dt
        self.params = b.vehicle.to(dtype=torch.float64)
        self.plan_limits = self.limits
        camera_only = b.camera is None and b.stereo is not None
        if camera_only:  # the gates must stay in the camera's view
            self.plan_limits = replace(self.limits, max_tilt=min(self.limits.max_tilt,
                                                                 self.camera_tilt))  # fmt: skip
        self.commit = camera_only if self.commit_next_gate is None else self.commit_next_gate
        self.gains = Gains.default(self.params).override(max_tilt=self.max_tilt)
        self._integral = torch.zeros(self.n, 3, dtype=torch.float64)  # N, see _integral_force
        ti = torch.tensor(self.integral_s, dtype=torch.float64)  # k_x / T_i per axis, or None
        self._integral_rate = (torch.where(ti > 0, self.gains.k_x / ti.clamp_min(1e-9), 0.0)
                               if bool((ti > 0).any()) else None)  # fmt: skip
        self._ff_prev: tuple[Tensor, Tensor] | None = None  # last step's feed-forward (_lead)
        self.order = list(b.course.meta["order_index"])
        self.ekf = self._filter(b)
        self.detector = None if b.stereo is None else self._detector(b)
        start = torch.tensor(b.start_pos, dtype=torch.float64)
        centres, normals = (torch.as_tensor(x) for x in course_gates(b.course))
        self.yaw = float(b.start_yaw)
        nominal = self._nominal(start, centres, normals)
        self.durations = nominal[0].expand(self.n, -1).clone()  # (N, M) s per segment
        wp0, _ = self._waypoints(start[None], centres[None], normals[None])
        self.nominal_chords = (wp0[0, 1:] - wp0[0, :-1]).norm(dim=-1)  # (M,) m
        self.speeds = nominal[1].expand(self.n, -1).clone()  # (N, L) m/s through each gate
        self.table = torch.zeros(self.n, 0, 14, dtype=torch.float64)  # setpoints per step
        self.flat = torch.zeros(self.n, 0, 15, dtype=torch.float64)  # p, v, a, jerk, yaw, its
        # rate and acceleration per step
        self.knots = torch.zeros(self.n, centres.shape[0] + 2, dtype=torch.float64)
        self.plan_gates = torch.zeros(self.n, centres.shape[0], 2, 3, dtype=torch.float64)
        first = torch.ones(self.n, dtype=torch.int64)  # every env heads for waypoint 1
        everyone = torch.ones(self.n, dtype=torch.bool)
        self.clock = torch.zeros(self.n, dtype=torch.int64)  # each env's reference step
        self._replan(everyone, True, self._rest_reference(start), self._gates_now(), first)

    def _filter(self, b: Briefing) -> GateEkf:
        spec = b.course
        corners = torch.tensor(np.stack([np.asarray(g.corners) for g in spec.gates]))
        ids = torch.tensor([g.object_id for g in spec.gates])
        bounds = b.bounds
        state_of = torch.full((len(spec.gates),), -1, dtype=torch.int64)
        std = []
        for l, gi in enumerate(self.order):
            state_of[gi] = l
            bx, by, byaw = bounds.get(spec.gates[gi].name, (0.0, 0.0, 0.0))
            sx, sy = (max(v / math.sqrt(3), self.gate_shift_floor) for v in (bx, by))
            syaw = max(math.radians(byaw) / math.sqrt(3), self.gate_yaw_floor)
            tilt, scale = self.gate_tilt_std, self.gate_scale_std
            std.append([sx, sy, self.gate_height_std, tilt, tilt, syaw, scale, scale])
        cam = b.camera
        if cam is None:
            intr, rot, trans = torch.tensor([1.0, 1.0, 0.0, 0.0]), torch.eye(3), torch.zeros(3)
        else:
            intr, rot = cam.intrinsics, cam.mount.matrix()
            trans = torch.tensor(cam.mount.translation, dtype=torch.float64)
        q0 = quat_from_euler(*(torch.tensor([v], dtype=torch.float64) for v in (0, 0, b.start_yaw)))
        return GateEkf(
            GateMap(corners, ids, state_of, torch.tensor(std, dtype=torch.float64)),
            torch.tensor(b.start_pos, dtype=torch.float64).expand(self.n, 3),
            q0.expand(self.n, 4),
            b.imu,
            intrinsics=intr,
            camera_rotation=rot,
            camera_translation=trans,
            pixel_std=max(self.pixel_std, 0.5),
            range_std=0.05 if b.rangefinder is None else max(b.rangefinder.noise_std, 0.01),
            floor_z=b.floor_z,
            reopen_after=self.reopen_after,
            reopen_scale=self.reopen_scale,
        )  # fmt: skip

    def _detector(self, b: Briefing) -> GateDetector:
        spec, cam = b.course, b.stereo
        assert cam is not None
        corners = torch.tensor(np.stack([np.asarray(g.corners) for g in spec.gates]))
        border = torch.tensor([g.border for g in spec.gates], dtype=torch.float64)
        depth = torch.tensor([g.depth for g in spec.gates], dtype=torch.float64)
        self.cam_rays = pinhole_rays(cam.width, cam.height, cam.hfov, cam.vfov).reshape(-1, 3)
        rot = cam.mount.matrix().to(torch.float64)
        trans = torch.tensor(cam.mount.translation, dtype=torch.float64)
        self.stereo_cam = Camera(cam.intrinsics, rot, trans).as_f64()
        return GateDetector(corners, border, depth, max_range=min(cam.max_range, 25.0),
                            floor_z=b.floor_z)  # fmt: skip

    def _nominal(self, start: Tensor, centres: Tensor, normals: Tensor) -> tuple[Tensor, Tensor]:
        """(segment times (1, M), gate speeds (1, L)) of the min-time plan on the nominal course,
        solved once per process for a course, vehicle and settings (the same computation)."""
        key = (start.numpy().tobytes(), centres.numpy().tobytes(), normals.numpy().tobytes(),
               _vehicle_key(self.params, 0), self.iters, self.samples, self.overshoot,
               self.tail_weight, repr(self.plan_limits), self.yaw)  # fmt: skip
        if key not in _NOMINAL:
            _NOMINAL[key] = self._solve_nominal(start, centres, normals)
        durations, speeds = _NOMINAL[key]
        return durations.clone(), speeds.clone()

    def _solve_nominal(
        self, start: Tensor, centres: Tensor, normals: Tensor
    ) -> tuple[Tensor, Tensor]:
        wp, dirs = self._waypoints(start[None], centres[None], normals[None])
        der = torch.full((*wp.shape[:2], 3, 4), math.nan, dtype=torch.float64)
        der[:, 0] = 0.0
        weights = torch.ones(wp.shape[1] - 1, dtype=torch.float64)
        weights[-1] = self.tail_weight
        yaw = self._yaws(wp, dirs)
        res = min_time(
            wp, self.params.index([0]), self.plan_limits, yaw=yaw, derivatives=der,
            directions=dirs, weights=weights, iters=self.iters, samples=self.samples,
        )  # fmt: skip
        assert res.speeds is not None
        return res.durations, res.speeds[:, 1:-1]

    def _waypoints(self, start: Tensor, centres: Tensor, normals: Tensor) -> tuple[Tensor, Tensor]:
        """(N, L + 2, 3) start, gate centres, overshoot; directions (normals at the gates)."""
        over = centres[:, -1:] + self.overshoot * normals[:, -1:]
        wp = torch.cat((start[:, None], centres, over), 1)
        dirs = torch.full_like(wp, math.nan)
        dirs[:, 1:-1] = normals
        return wp, dirs

    def _yaws(self, wp: Tensor, dirs: Tensor) -> Tensor:
        """(N, W) rad: the camera's heading at each waypoint. At a gate it bisects the gate
        normal and the direction to the next waypoint (the gate stays in view on the approach,
        the next one comes into view as it is passed); the start keeps the start yaw, the last
        point the final gate's."""
        n = wp.shape[0]
        yaw = torch.full(wp.shape[:2], self.yaw, dtype=torch.float64)
        to_next = wp[:, 2:] - wp[:, 1:-1]
        to_next = to_next / to_next.norm(dim=-1, keepdim=True).clamp_min(1e-9)
        look = torch.nan_to_num(dirs[:, 1:-1], nan=0.0) + to_next
        yaw[:, 1:-1] = torch.atan2(look[..., 1], look[..., 0])
        yaw[:, -1] = yaw[:, -2]
        return yaw[:n]

    def _rest_reference(self, pos: Tensor) -> Tensor:
        """(N, 5, 3) a reference at rest at ``pos`` facing the start yaw (see _reference)."""
        ref = torch.zeros(self.n, 5, 3, dtype=torch.float64)
        ref[:, 0] = pos
        ref[:, 4, 0] = self.yaw
        return ref

    # ---- every control step -------------------------------------------------------------------
    def act(self, obs: ChallengeObservation) -> Tensor:
        k = obs.step
        self._estimate(obs)
        if k > 0:
            self._advance()
        if k > 0 and k % self.replan_every == 0:
            self._maybe_replan()
        sp = self.table[torch.arange(self.n), self.clock.clamp_max(self.table.shape[1] - 1)]
        return self._ctbr(sp)

    def _advance(self) -> None:
        """Advance each env's reference clock one step, or hold it where the vehicle (as
        estimated) is more than ``hold_m`` behind the reference along its velocity: a
        reference that runs away from a lagging vehicle makes it cut the next corner."""
        if self.hold_m <= 0:
            self.clock += 1
            return
        ref = self._reference()
        speed = ref[:, 1].norm(dim=-1)
        lag = ((ref[:, 0] - self.ekf.pos) * ref[:, 1]).sum(-1) / speed.clamp_min(1e-6)
        self.clock += ~((lag > self.hold_m) & (speed > 1.0))

    def estimate(self) -> dict[str, Tensor]:
        """The racer's belief now: position, velocity, attitude, course gate corners (L, 4, 3)."""
        e = self.ekf
        return {
            "pos": e.pos.clone(),
            "vel": e.vel.clone(),
            "quat": e.quat.clone(),
            "gate_corners": e.gate_corners()[:, self.order].clone(),
        }

    def _estimate(self, obs: ChallengeObservation) -> None:
        e = self.ekf
        if obs.accel is not None and obs.gyro is not None:
            e.predict(obs.accel, obs.gyro, self.dt)
        if obs.beacons is not None:
            bc = obs.beacons
            e.update_beacons(bc.pixels, bc.visible, bc.gate_id, bc.corner)
        if obs.range is not None and self.use_range:
            e.update_range(obs.range.range, obs.range.valid)
        if obs.depth is not None and self.detector is not None:
            self._update_stereo(obs.depth)

    def _update_stereo(self, frame: DepthReport) -> None:
        """Find the gates in a depth frame and fuse their corners (module docstring)."""
        e, cam = self.ekf, self.brief.stereo
        assert cam is not None and self.detector is not None
        n = self.n
        z = frame.depth.to(torch.float64).reshape(n, -1)
        ok = frame.valid.reshape(n, -1) & torch.isfinite(z)
        x_c = self.cam_rays[None] * torch.where(ok, z, math.nan)[..., None]  # (N, P, 3)
        R = e.rotation
        sc = self.stereo_cam
        r_wc = rotate(R, sc.rotation.T[None].expand(n, 3, 3)).transpose(1, 2)  # R R_BC
        cam_pos = e.pos + rotate(R, sc.translation.expand(n, 1, 3))[:, 0]
        points = cam_pos[:, None] + rotate(r_wc, x_c)
        predicted = e.gate_corners()
        det = self.detector(points, predicted, self._gate_sigma(), cam_pos, r_wc,
                            sc.intrinsics, (cam.width, cam.height))  # fmt: skip
        c = det.corners.reshape(n, -1, 3)  # (N, C*4, 3) in the estimated world frame
        x = rotate(r_wc.transpose(1, 2), c - cam_pos[:, None])
        fx, fy, cx, cy = sc.intrinsics.unbind(-1)
        depth = x[..., 2]
        zs = depth.clamp_min(1e-6)
        pixels = torch.stack((fx * x[..., 0] / zs + cx, fy * x[..., 1] / zs + cy), -1)
        slots = det.ok[..., None].expand(-1, -1, 4).reshape(n, -1) & (depth > 0)
        ids = e.map.ids[det.gate.clamp_min(0)][..., None].expand(-1, -1, 4).reshape(n, -1)
        corner = torch.arange(4).repeat(det.ok.shape[1])[None].expand(n, -1)
        depth_std = 0.05 + cam.noise_quadratic * depth * depth
        e.update_beacons(pixels, slots, ids, corner, depth=depth, depth_std=depth_std,
                         pixel_std=self.camera_pixel_std, camera=self.stereo_cam)  # fmt: skip

    def _gate_sigma(self) -> Tensor:
        """(N, G) m: the std of each gate's horizontal position relative to the vehicle as the
        filter sees it (its offset's and the vehicle position's variances)."""
        e = self.ekf
        P = e.P
        pos_var = torch.maximum(P[:, 0, 0], P[:, 1, 1])  # (N,)
        l = e.map.state_of
        idx = torch.arange(e.map.n_offsets) * GATE_PARAMS + VEHICLE
        off_var = torch.maximum(P[:, idx, idx], P[:, idx + 1, idx + 1])  # (N, L)
        padded = torch.cat((off_var, torch.zeros(self.n, 1, dtype=P.dtype)), 1)
        per_gate = padded[:, torch.where(l >= 0, l, e.map.n_offsets)]
        return torch.sqrt(per_gate + pos_var[:, None])

    def _gates_now(self) -> Tensor:
        """(N, L, 2, 3) estimated centre and travel-direction normal of every course gate."""
        corners = self.ekf.gate_corners()[:, self.order]  # (N, L, 4, 3)
        start = torch.tensor(self.brief.start_pos, dtype=corners.dtype).expand(self.n, 3)
        centres, normals = travel_planes(corners, start)
        if self.level_normals:  # cross every gate level: a far gate's pitch is barely
            normals = normals.clone()  # observable, and a tilted crossing direction turns the
            normals[..., 2] = 0.0  # plan into a climb or a dive; a gate tilted by t is
            normals = normals / normals.norm(dim=-1, keepdim=True).clamp_min(1e-9)  # crossed
        return torch.stack((centres, normals), 2)  # level with its opening shrunk by cos t

    def _next_waypoint(self, t: Tensor) -> Tensor:
        """(N,) index of each env's next waypoint at its reference time t (N,) s (the first
        knot after it)."""
        return (self.knots > t[:, None] + 1e-9).to(torch.int8).argmax(1)

    def _maybe_replan(self) -> None:
        t = self.clock.to(torch.float64) * self.dt  # (N,) each env's reference time
        gates = self._gates_now()
        nxt = self._next_waypoint(t)
        live = (self.knots[:, -1] > t) & (nxt >= 1) & (nxt <= gates.shape[1])
        close = self.knots.gather(1, nxt[:, None])[:, 0] - t < self.freeze_s
        moved = (gates - self.plan_gates).norm(dim=-1).amax(-1)  # (N, L)
        ahead = torch.arange(gates.shape[1])[None] >= (nxt[:, None] - 1)
        moved = torch.where(ahead, moved, 0.0).amax(-1) > self.replan_tol
        ref = self._reference()
        e = self.ekf
        lag = (e.pos - ref[:, 0]).norm(dim=-1) > self.resync_m  # fell off the reference
        lag = lag & (self.resync_m > 0)
        if bool(lag.any()):  # replan from where the vehicle is
            ref = ref.clone()
            ref[:, 0] = torch.where(lag[:, None], e.pos, ref[:, 0])
            ref[:, 1] = torch.where(lag[:, None], e.vel, ref[:, 1])
        want = live & ~close & (moved | lag)
        if bool(want.any()):
            self._replan(want, False, ref, gates, nxt)

    def _reference(self) -> Tensor:
        """(N, 5, 3) the reference trajectory at each env's clock: position, velocity,
        acceleration, jerk and (yaw, yaw rate, yaw acceleration): the flat outputs, not the
        setpoint's drag-compensated feed-forward."""
        j = self.clock.clamp_max(self.flat.shape[1] - 1)
        return self.flat[torch.arange(self.n), j].reshape(self.n, 5, 3)

    def _replan(self, mask: Tensor, initial: bool, ref: Tensor, gates: Tensor, nxt: Tensor) -> None:
        """Replan the masked envs from reference ``ref`` at their clocks through ``gates``
        (N, L, 2, 3), ``nxt`` (N,) their next waypoints (module docstring); one batch per next
        waypoint; ``initial``: the plan before the start."""
        for s in sorted(set(nxt[mask].tolist())):
            envs = torch.nonzero(mask & (nxt == s))[:, 0]
            self._replan_group(envs, int(s), initial, ref[envs], gates[envs])

    def _replan_group(
        self, envs: Tensor, s: int, initial: bool, ref: Tensor, gates: Tensor
    ) -> None:
        t = self.clock[envs].to(torch.float64) * self.dt  # (n,) reference times
        n = len(envs)
        start = torch.tensor(self.brief.start_pos, dtype=torch.float64).expand(n, 3)
        wp_all, dirs_all = self._waypoints(start, gates[:, :, 0], gates[:, :, 1])
        wp = torch.cat((ref[:, 0:1], wp_all[:, s:]), 1)
        dirs = torch.cat((torch.full_like(ref[:, 0:1], math.nan), dirs_all[:, s:]), 1)
        free = torch.full((n, 1), math.nan, dtype=torch.float64)  # speed free: reference, end
        sp = torch.cat((free, self.speeds[envs, s - 1 :], free), 1)  # gates s-1.. ahead
        first = self.durations[envs, 0] if initial else self.knots[envs, s] - t
        later = self.durations[envs, s:]  # nominal times, restarted at every replan
        if self.scale_by_length:  # first-order re-allocation: time in proportion to length
            chord = (wp_all[:, s + 1 :] - wp_all[:, s:-1]).norm(dim=-1)
            ratio = (chord / self.nominal_chords[s:]).clamp(1 / MAX_STRETCH, MAX_STRETCH)
            later = later * ratio
        dur = torch.cat((first[:, None].clamp_min(0.05), later), 1)
        der = torch.full((*wp.shape[:2], 3, 4), math.nan, dtype=torch.float64)
        der[:, 0, :, :3] = ref[:, 1:4]  # velocity, acceleration, jerk of the reference now
        has = torch.isfinite(dirs).all(-1)
        unit = torch.nan_to_num(dirs, nan=0.0)

        def gate_velocities(speed: Tensor) -> Tensor:
            d = der.clone()
            d[:, :, 0, :3] = torch.where(has[..., None], speed[..., None] * unit, der[:, :, 0, :3])
            return d

        der = gate_velocities(sp)
        yaw_all = self._yaws(wp_all, dirs_all)
        yaw = torch.cat((ref[:, 4, :1], yaw_all[:, s:]), 1)  # from the reference's yaw now
        der[:, 0, :2, 3] = ref[:, 4, 1:]  # its yaw rate and yaw acceleration
        der[:, 0, 2, 3] = math.nan
        vehicle = self.params.index(envs.tolist())
        traj = min_snap(wp, dur, yaw=yaw, derivatives=der, method=self.snap_method)
        for _ in range(self.retime_passes):  # segments past the limits get more time
            load = segment_load(traj, vehicle, self.plan_limits)
            if not bool((load > 1.0).any()):
                break
            f = torch.where(load > 1.0, load.sqrt().clamp_max(MAX_STRETCH), 1.0)  # (n, S)
            f[:, 0] = 1.0  # the current segment keeps its time: stretching it at every replan
            # would compound (its time is carried from plan to plan, the others restart)
            dur = dur * f
            if self.slow_gates:  # a slower segment passes its gates slower: each gate's speed
                # over the larger stretch of its two segments (else the plan must spend the
                # time on a detour)
                g = torch.ones_like(sp)
                g[:, 1:] = torch.maximum(f, torch.cat((f[:, 1:], torch.ones_like(f[:, :1])), 1))
                if self.commit:  # the gate that ends the current segment keeps its speed: the
                    g[:, 1] = 1.0  # vehicle is committed to it; braking late for it carries
                    # on past the gate (min-snap keeps the deceleration continuous)
                sp = sp / g
                der = gate_velocities(sp)
            traj = min_snap(wp, dur, yaw=yaw, derivatives=der, method=self.snap_method)
        if not initial and self.max_load > 0:  # a plan the vehicle cannot fly is worse than
            keep = segment_load(traj, vehicle, self.plan_limits).amax(1) <= self.max_load
            if not bool(keep.all()):
                if not bool(keep.any()):
                    return
                idx = torch.nonzero(keep)[:, 0]
                envs, dur, gates, t = envs[idx], dur[idx], gates[idx], t[idx]  # the old one
                traj = traj.index(idx)
                vehicle = vehicle.index(idx.tolist())
        self._tabulate(envs, TrajectoryPlan(traj, vehicle, traj.duration))
        self.knots[envs, s:] = t[:, None] + torch.cumsum(dur, 1)
        if initial:
            self.knots[envs, 0] = 0.0
        self.plan_gates[envs] = gates

    def _tabulate(self, envs: Tensor, plan: TrajectoryPlan) -> None:
        """Write the plan's setpoints from each env's clock on into its row of the table, then
        hover at its end for HOLD_S."""
        longest = min(float(plan.duration.max()), MAX_PLAN_S)  # a runaway plan cannot eat RAM
        steps = int(math.ceil(longest / self.dt)) + 1
        hold = int(HOLD_S / self.dt)
        j = self.clock[envs]
        need = int(j.max()) + steps + hold
        have = self.table.shape[1]
        if need > have:
            self.table = _extend(self.table, need)
            self.flat = _extend(self.flat, need)
        ts = (torch.arange(steps, dtype=torch.float64) * self.dt)[:, None]
        ts = torch.minimum(ts.expand(steps, len(envs)), plan.duration[None])
        sp, f = plan.tabulate(ts)  # the setpoints, and the flat outputs themselves (the
        rows = sp.transpose(0, 1)  # setpoint's acc and jerk carry the drag terms): (n, steps, .)
        yaw = torch.stack((f.yaw, f.yaw_rate, f.yaw_acc), -1)
        flat = torch.cat((f.pos, f.vel, f.acc, f.jerk, yaw), -1)
        end = rows[:, -1].clone()
        end[:, 3:12] = 0.0  # hover where the plan ends
        end[:, 13] = 0.0
        end_flat = flat[:, -1].clone()
        end_flat[:, 3:12] = 0.0
        end_flat[:, 13:] = 0.0
        cols = j[:, None] + torch.arange(steps)[None]  # (n, steps)
        at = envs[:, None].expand_as(cols)
        self.table[at, cols] = rows
        self.flat[at, cols] = flat
        lo = int(j.min()) + steps  # every env's hover from its own plan's end on
        tail = (torch.arange(lo, self.table.shape[1])[None] >= (j + steps)[:, None])[..., None]
        self.table[envs, lo:] = torch.where(tail, end[:, None], self.table[envs, lo:])
        self.flat[envs, lo:] = torch.where(tail, end_flat[:, None], self.flat[envs, lo:])

    def _ctbr(self, sp: Tensor) -> Tensor:
        """Collective thrust + body rates from setpoint ``sp`` (N, 14) and the estimated state
        (Lee force eq. 12, Mellinger flat rates, W = R^T R_d W_d - k e_R)."""
        e, g, p = self.ekf, self.gains, self.params
        F = geo.desired_force(p.mass, e.pos - sp[:, 0:3], e.vel - sp[:, 3:6], sp[:, 6:9],
                              g.k_x, g.k_v)  # fmt: skip
        F = F + self._integral_force(e.pos - sp[:, 0:3])
        F = geo.limit_force(F, p.mass, p.max_thrust, g.max_tilt)
        R = quat_to_rotmat(e.quat)
        R_d = geo.rotation_from_thrust_yaw(F, sp[:, 12])
        thrust = geo.collective_thrust(F, R, p.max_thrust)
        w_d = geo.flat_body_rates(R_d, F.norm(dim=-1), p.mass, sp[:, 9:12], sp[:, 13])
        e_R = geo.attitude_error(R, R_d)
        rates = geo._bmv(geo.mtm(R, R_d), w_d) - self.k_att * e_R
        if self.rate_lead > 0 or self.thrust_lead > 0:
            rates, thrust = self._lead(sp, rates, thrust)
        return torch.cat((thrust[:, None], rates), -1)

    def _integral_force(self, e_x: Tensor) -> Tensor:
        """(N, 3) N: the bounded integral of the position error ``e_x`` (N, 3) m over the axes
        with an integral time (``integral_s``; I = -k_x / T_i \\int e_x dt, per axis)."""
        if self._integral_rate is None:
            return torch.zeros_like(e_x)
        acc = self._integral - self._integral_rate * e_x * self.dt
        self._integral = acc.clamp(-self.integral_max, self.integral_max)
        return self._integral

    def _lead(self, sp: Tensor, rates: Tensor, thrust: Tensor) -> tuple[Tensor, Tensor]:
        """Rates and thrust led by the reference's own change over the last control step:
        w + tau_w dw_ff/dt, f + tau_f df_ff/dt (the acro loop and the motors lag)."""
        w_ff, f_ff = self._feedforward(sp)
        prev, self._ff_prev = self._ff_prev, (w_ff, f_ff)
        if prev is None:
            return rates, thrust
        rates = rates + self.rate_lead * (w_ff - prev[0]) / self.dt
        thrust = thrust + self.thrust_lead * (f_ff - prev[1]) / self.dt
        return rates, thrust.clamp(0.0).minimum(self.params.max_thrust)

    def _feedforward(self, sp: Tensor) -> tuple[Tensor, Tensor]:
        """(body rates (N, 3), thrust (N,)) of the setpoint alone (no feedback terms)."""
        p = self.params
        F = geo.desired_force(p.mass, torch.zeros_like(sp[:, 0:3]), torch.zeros_like(sp[:, 0:3]),
                              sp[:, 6:9], 0.0, 0.0)  # fmt: skip
        R_d = geo.rotation_from_thrust_yaw(F, sp[:, 12])
        f = F.norm(dim=-1)
        return geo.flat_body_rates(R_d, f, p.mass, sp[:, 9:12], sp[:, 13]), f


def _extend(table: Tensor, rows: int) -> Tensor:
    """``table`` (N, T, C) grown to ``rows`` steps by repeating its last row (zeros if empty)."""
    n, have, c = table.shape
    pad = (table[:, -1:].expand(-1, rows - have, -1) if have
           else torch.zeros(n, rows, c, dtype=table.dtype))  # fmt: skip
    return torch.cat((table, pad), 1)


__all__ = ["SensorRacer"]
