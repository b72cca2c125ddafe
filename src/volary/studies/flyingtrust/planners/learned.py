"""``learned``: a NavRL-like learned planner: a PPO policy on depth + goal that commands
velocities, behind a velocity-obstacle safety shield (NavRL's structure: Xu et al., "NavRL:
Learning Safe Flight in Dynamic Environments", RA-L 2025; written from its description, the
paper is not among ``shared/papers``).

**The policy** is trained in ``volary.envs``' ``navigate`` task (one command:
``volary rl train --recipe learned-planner``, see :mod:`volary.studies.rl.recipes`) and ships
as plain arrays (``data/learned_planner.npz``, written by :func:`volary.studies.rl.export.mlp_npz`,
read here without pickle by :class:`NumpyMLP`; 18 k parameters). Its observation is rebuilt
from the benchmark's :class:`~volary.planning.navigation.NavObservation` exactly as ``navigate``
builds it (:func:`observation`; a test checks the two against each other): in the yaw-aligned
body frame the goal vector (length clipped to 10 m) and the velocity, the body-to-world rotation
(9, row-major), the body rates, the previous action, and the forward depth image as z-depth
over the range (no return: 1), min-pooled to the policy's grid (the benchmark's 48 x 64 image
pools 4 x 4 to 12 x 16; the policy trained on 24 x 32 images pooled 2 x 2, same field of view:
each cell covers the same solid angle, the finer image can only see more of it). Its action
is a velocity in the yaw-aligned frame (x ``max_speed``) and a yaw step (x ``max_yaw_rate`` /
decision rate), decided at the benchmark's 10 Hz planning rate (the recipe trains at 10 Hz).

**The shield** (NavRL's velocity obstacles, for the static obstacles this benchmark has): the
depth pixels within ``shield_range`` are back-projected to world points; a velocity v is unsafe
when the straight flight p + v t, t in [0, ``horizon``] s, passes within ``plan_radius +
margin`` of a point (the truncated velocity obstacle of a point obstacle; for a point behind
the vehicle, or one the flight only approaches after ``horizon``, none). An unsafe command is
replaced by the closest safe one among candidates (the command's direction turned by up to 90
degrees horizontally and 30 vertically, at 1, 0.75, 0.5 and 0.25 of its speed), or zero
velocity (hover) when none is safe. NavRL solves a small optimization over its velocity
obstacles instead of sampling them, and keeps a map of the static obstacles; this shield sees
only the current frame (obstacles that left the field of view are the policy's to remember).
``shield=False`` flies the bare policy (the ablation). The flight volume's faces (floor,
ceiling, sides: bounds the camera does not see) limit each velocity component so that
``horizon`` s of it keeps the vehicle ``plan_radius + margin`` inside (always on: the policy
trained where only its centre had to stay inside the volume, and learned to fly near the
ceiling).

**Arrival**: the policy trained on episodes that end within 1 m of the goal, so it never
learned to stop there, and the benchmark's success needs the vehicle to stay within the goal
radius for a second below 1 m/s. Within ``arrive`` m (3) of the goal the velocity command is
therefore ``arrive_gain`` (goal - p), capped at the policy's speed (still shielded): a
proportional arrival law, not learned (NavRL's policy is trained to reach and hold its goal).

The reference is the velocity held for ``hold`` s from the current position (p0 + v (t - t0)),
at the policy's yaw setpoint; the position controller tracks it until the next call.
"""

from __future__ import annotations

import json
import math
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numba
import numpy as np

from volary.errors import ConfigError
from volary.planning.navigation import NavObservation, NavReference, NavTask, pooled_depth
from volary.studies.flyingtrust.planners.occupancy import DepthProjector, quat_to_matrix

WEIGHTS = "learned_planner.npz"  # in volary/studies/flyingtrust/planners/data
ENCODER = "learned_rgb_encoder.npz"  # the learned_rgb planner's RGB depth encoder, there too
GOAL_CLIP = 10.0  # m, the navigate task's goal-vector clip
STATS = ("calls", "shielded", "stopped", "arriving", "volume")  # LearnedPlanner.stats


# ---------------------------------------------------------------------------- the network
class NumpyMLP:
    """The deterministic policy of an MLP exported by ``volary.studies.rl.export.mlp_npz``:
    numpy float32, no pickle. ``meta`` holds what the exporter was told (observation layout).
    Small convolutional nets (the RGB depth encoder) also run: their input is (N, C, H, W)."""

    KINDS = ("norm", "linear", "tanh", "relu", "elu", "clamp", "conv", "coords", "sigmoid")

    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"weights: {str(p)!r} does not exist")
        if not zipfile.is_zipfile(p):  # numpy would read it as a pickle and suggest loading one
            raise ConfigError(f"weights: {str(p)!r} is not an mlp_npz file (not a zip archive)")
        try:
            with np.load(p, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
            stages = json.loads(str(data["stages"]))
            self.meta: dict[str, Any] = json.loads(str(data["meta"]))
        except (ValueError, KeyError, OSError) as exc:
            raise ConfigError(f"weights: {str(p)!r} is not an mlp_npz file ({exc})") from exc
        self.stages: list[tuple[str, tuple[float, ...], dict[str, np.ndarray]]] = []
        for k, st in enumerate(stages):
            if st["kind"] not in self.KINDS:
                raise ConfigError(f"weights: {str(p)!r} stage {k}: unknown kind {st['kind']!r}")
            arrays = {n: data[f"{k}_{n}"].astype(np.float32) for n in st["arrays"]}
            self.stages.append((st["kind"], tuple(st["params"]), arrays))
        first = next(((k, a) for k, _, a in self.stages if k in ("norm", "linear", "conv")), None)
        if first is None:
            raise ConfigError(f"weights: {str(p)!r} has no layer")
        kind, a = first
        # the observation size of an MLP; a convolutional net's input is an image (None)
        size = a["mean" if kind == "norm" else "W"].shape[-1]
        self.obs_dim: int | None = None if kind == "conv" else int(size)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Actions (..., A) from observations (..., obs_dim), float32 as torch computes them."""
        x = np.asarray(obs, dtype=np.float32)
        for kind, params, a in self.stages:
            if kind == "norm":
                x = np.clip((x - a["mean"]) / a["std"], -params[0], params[0])
            elif kind == "linear":
                x = x @ a["W"].T + a["b"]
            elif kind == "tanh":
                x = np.tanh(x)
            elif kind == "relu":
                x = np.maximum(x, np.float32(0))
            elif kind == "elu":
                x = np.where(x > 0, x, np.float32(params[0]) * np.expm1(x))
            elif kind == "clamp":
                x = np.clip(x, params[0], params[1])
            elif kind == "conv":
                x = conv2d(x, a["W"], a["b"], *(int(v) for v in params))
            elif kind == "coords":
                x = with_coords(x)
            else:  # sigmoid
                x = np.float32(1) / (np.float32(1) + np.exp(-x))
        return x


def conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, padding: int,
           dilation: int) -> np.ndarray:  # fmt: skip
    """torch.nn.functional.conv2d of (N, C, H, W) with weights (O, C, kh, kw): zero padding,
    one group; out[n, o, i, j] = b[o] + sum_{c,p,q} x[n, c, s i + d p, s j + d q] w[o, c, p, q]
    over the padded input."""
    _, _, kh, kw = w.shape
    if padding:
        x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    span_h, span_w = dilation * (kh - 1) + 1, dilation * (kw - 1) + 1
    win = np.lib.stride_tricks.sliding_window_view(x, (span_h, span_w), axis=(2, 3))
    win = win[:, :, ::stride, ::stride, ::dilation, ::dilation]  # (N, C, H', W', kh, kw)
    out = np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3]))  # (N, H', W', O)
    return (out.transpose(0, 3, 1, 2) + b[None, :, None, None]).astype(np.float32)


def with_coords(x: np.ndarray) -> np.ndarray:
    """(N, C, H, W) -> (N, C + 2, H, W): the column and the row, each scaled to [-1, 1]."""
    n, _, h, w = x.shape
    yy, xx = np.meshgrid(np.linspace(-1, 1, h, dtype=np.float32),
                         np.linspace(-1, 1, w, dtype=np.float32), indexing="ij")  # fmt: skip
    grids = np.broadcast_to(np.stack((xx, yy))[None], (n, 2, h, w))
    return np.concatenate((x.astype(np.float32), grids), axis=1)


def default_weights(name: str = WEIGHTS) -> Path:
    """The path of a shipped file (default: the policy)."""
    return Path(str(resources.files("volary.studies.flyingtrust.planners").joinpath("data", name)))


# ---------------------------------------------------------------------------- observation
def yaw_of(quat: np.ndarray) -> float:
    """Heading (rad) of a [w, x, y, z] body-to-world quaternion (ZYX yaw)."""
    r = quat_to_matrix(quat)
    return math.atan2(r[1, 0], r[0, 0])


def to_yaw_frame(v: np.ndarray, yaw: float) -> np.ndarray:
    """World vector(s) (..., 3) in the yaw-aligned frame (x forward, z up)."""
    c, s = math.cos(yaw), math.sin(yaw)
    v = np.asarray(v, dtype=np.float64)
    return np.stack((c * v[..., 0] + s * v[..., 1], -s * v[..., 0] + c * v[..., 1], v[..., 2]), -1)


def observation(
    obs: NavObservation, goal: np.ndarray, prev_action: np.ndarray, depth_range: float,
    grid: tuple[int, int], pooled: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """The ``navigate`` task's observation (float32, 22 + h w) of a benchmark observation
    (module docstring); ``pooled``: the depth grid if not from ``obs.depth`` (predicted)."""
    yaw = yaw_of(obs.quat)
    g = to_yaw_frame(np.asarray(goal) - obs.position, yaw)
    g = g * (GOAL_CLIP / max(float(np.linalg.norm(g)), GOAL_CLIP))
    rot = quat_to_matrix(obs.quat).reshape(-1)
    if pooled is None:
        assert obs.depth is not None
        pooled = pooled_depth(obs.depth, depth_range, grid)
    parts = (g, to_yaw_frame(obs.velocity, yaw), rot, obs.omega, prev_action, pooled)
    out = np.concatenate([np.asarray(x, dtype=np.float32).reshape(-1) for x in parts])
    return np.nan_to_num(out, nan=0.0, posinf=1e3, neginf=-1e3)


# ---------------------------------------------------------------------------- the shield
def unsafe(points: np.ndarray, p0: np.ndarray, vels: np.ndarray, horizon: float, r: float
           ) -> np.ndarray:  # fmt: skip
    """(V,) bool: velocity v (V, 3) flown straight from p0 for ``horizon`` s passes within r
    of a point (P, 3) (the truncated velocity obstacle, module docstring). Compiled: each
    velocity stops at its first point within r; :func:`unsafe_reference` is the same test in
    array form."""
    pts, p, v = (np.ascontiguousarray(a, dtype=np.float64) for a in (points, p0, vels))
    return _unsafe(pts, p, v, float(horizon), float(r))


@numba.njit(cache=True, nogil=True)
def _unsafe(points, p0, vels, horizon, r):  # pragma: no cover - compiled
    """:func:`unsafe`: the point nearest to p0 on the segment p0 + s v horizon, s in [0, 1],
    s = clip(rel . d / |d|^2) (d = v horizon, rel = point - p0), against r."""
    out = np.zeros(vels.shape[0], np.bool_)
    r2 = r * r
    for i in range(vels.shape[0]):
        dx, dy, dz = vels[i, 0] * horizon, vels[i, 1] * horizon, vels[i, 2] * horizon
        ll = max(dx * dx + dy * dy + dz * dz, 1e-12)
        for k in range(points.shape[0]):
            rx, ry, rz = points[k, 0] - p0[0], points[k, 1] - p0[1], points[k, 2] - p0[2]
            t = min(max((rx * dx + ry * dy + rz * dz) / ll, 0.0), 1.0)
            cx, cy, cz = t * dx - rx, t * dy - ry, t * dz - rz
            if cx * cx + cy * cy + cz * cz < r2:
                out[i] = True
                break
    return out


def unsafe_reference(points: np.ndarray, p0: np.ndarray, vels: np.ndarray, horizon: float,
                     r: float) -> np.ndarray:  # fmt: skip
    """:func:`unsafe` with (P, V, 3) arrays: the slow reference of its parity test."""
    if len(points) == 0:
        return np.zeros(len(vels), dtype=bool)
    rel = points - p0  # (P, 3)
    seg = vels * horizon  # (V, 3): the flight's displacement
    ll = (seg**2).sum(-1)  # (V,)
    s = np.clip((rel @ seg.T) / np.maximum(ll, 1e-12)[None], 0.0, 1.0)  # (P, V)
    closest = s[..., None] * seg[None] - rel[:, None]  # (P, V, 3)
    return ((closest**2).sum(-1) < r * r).any(axis=0)


def candidates(v: np.ndarray) -> np.ndarray:
    """Velocities near v (C, 3): its direction turned by up to 90 deg in yaw and 30 in
    pitch, at 1, 0.75, 0.5 and 0.25 of its speed."""
    speed = float(np.linalg.norm(v))
    if speed < 1e-6:
        return np.zeros((0, 3))
    yaw, pitch = math.atan2(v[1], v[0]), math.asin(max(-1.0, min(1.0, v[2] / speed)))
    dy = np.radians(np.arange(-90, 91, 15))
    dp = np.radians(np.array([-30.0, -15.0, 0.0, 15.0, 30.0]))
    yy, pp, ss = np.meshgrid(yaw + dy, np.clip(pitch + dp, -1.2, 1.2), [1.0, 0.75, 0.5, 0.25],
                             indexing="ij")  # fmt: skip
    d = np.stack((np.cos(pp) * np.cos(yy), np.cos(pp) * np.sin(yy), np.sin(pp)), -1)
    return (d * (ss * speed)[..., None]).reshape(-1, 3)


def shield(points: np.ndarray, p0: np.ndarray, v: np.ndarray, horizon: float, r: float
           ) -> tuple[np.ndarray, bool]:  # fmt: skip
    """The safe velocity closest to v (v itself when safe; zero when no candidate is), and
    whether v was changed."""
    if not unsafe(points, p0, v[None], horizon, r)[0]:
        return v, False
    cand = candidates(v)
    ok = cand[~unsafe(points, p0, cand, horizon, r)]
    if len(ok) == 0:
        return np.zeros(3), True
    return ok[int(np.argmin(((ok - v) ** 2).sum(-1)))], True


def volume_clamp(v: np.ndarray, p: np.ndarray, lo: np.ndarray, hi: np.ndarray, r: float,
                 horizon: float) -> np.ndarray:  # fmt: skip
    """v with each component limited so that ``horizon`` s of it keeps p at least r inside the
    box [lo, hi] (the flight volume's faces: the floor, the ceiling and the sides, which the
    camera does not see; a vehicle already closer is sent back inside)."""
    up = (np.asarray(hi) - r - p) / horizon
    down = (np.asarray(lo) + r - p) / horizon
    return np.minimum(np.maximum(v, np.minimum(down, up)), np.maximum(up, down))


# ---------------------------------------------------------------------------- the planner
@dataclass(frozen=True)
class LearnedOptions:
    """Keyword options of the ``learned`` planner."""

    weights: str = ""  # an mlp_npz file; "": the shipped policy
    shield: bool = True  # the velocity-obstacle safety shield
    horizon: float = 1.0  # s, the velocity obstacles' time horizon
    margin: float = 0.15  # m beyond the plan radius
    shield_range: float = 5.0  # m, depth points considered by the shield
    pixel_stride: int = 2  # depth pixels back-projected for the shield (every n-th)
    hold: float = 0.5  # s, length of the emitted reference
    arrive: float = 3.0  # m from the goal where the arrival law takes over from the policy
    arrive_gain: float = 1.0  # 1/s, the arrival law's velocity per metre to the goal


class LearnedPlanner:
    """NavRL-like learned planner (module docstring). Keyword options: :class:`LearnedOptions`."""

    name = "learned"
    needs: frozenset[str] = frozenset({"depth"})

    def __init__(self, **options: Any) -> None:
        known = set(LearnedOptions.__dataclass_fields__)
        bad = sorted(set(options) - known)
        if bad:
            raise ConfigError(f"learned options {bad}: unknown; valid: {sorted(known)}")
        o = LearnedOptions(**options)
        for k in ("horizon", "margin", "shield_range", "hold", "arrive", "arrive_gain"):
            v = getattr(o, k)
            ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            if not (ok and v > 0):
                raise ConfigError(f"learned option {k}: expected a finite number > 0, got {v!r}")
        st = o.pixel_stride
        if isinstance(st, bool) or not isinstance(st, int) or st < 1:
            raise ConfigError(f"learned option pixel_stride: expected an int >= 1, got {st!r}")
        if not isinstance(o.shield, bool):
            raise ConfigError(f"learned option shield: expected a bool, got {o.shield!r}")
        self.options = o
        self.policy = NumpyMLP(o.weights or default_weights())
        m = self.policy.meta
        try:
            self.grid = (int(m["depth_obs"][0]), int(m["depth_obs"][1]))
            self.max_speed, self.max_yaw_rate = float(m["max_speed"]), float(m["max_yaw_rate"])
            self.decision_hz, self.depth_range = float(m["decision_hz"]), float(m["depth_range"])
            self.hfov = float(m["hfov"])
            obs_dim = int(m["obs_dim"])
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ConfigError(f"weights: meta lacks the navigate layout ({exc!r}); export with "
                              "volary rl train --recipe learned-planner") from exc  # fmt: skip
        want = 22 + self.grid[0] * self.grid[1]
        if obs_dim != want or self.policy.obs_dim != want:
            got = self.policy.obs_dim
            raise ConfigError(f"weights: the network takes {got} values, its layout says "
                              f"{obs_dim}; navigate with {self.grid} depth: {want}")  # fmt: skip
        self.stats: dict[str, float] = dict.fromkeys(STATS, 0)

    def reset(self, task: NavTask) -> None:
        cam = task.depth
        if cam is None:
            raise ConfigError("task.depth: the learned planner needs a depth camera, got None")
        self._check_camera(cam, "task.depth")
        self._reset(task, cam)

    def _check_camera(self, cam: Any, where: str) -> None:
        hfov = 2.0 * math.atan(cam.width / (2.0 * cam.fx))
        if abs(hfov - self.hfov) > math.radians(2.0):
            want = math.degrees(self.hfov)
            raise ConfigError(f"{where}: the policy was trained with a {want:.0f} deg "
                              f"camera, got {math.degrees(hfov):.0f} deg")  # fmt: skip
        if cam.height % self.grid[0] or cam.width % self.grid[1]:
            raise ConfigError(f"{where}: expected an image whose size is a multiple of "
                              f"{self.grid}, got {cam.height} x {cam.width}")  # fmt: skip

    def _reset(self, task: NavTask, cam: Any) -> None:
        """What every reset does once the camera is checked; ``cam`` is the depth camera the
        shield back-projects from."""
        if abs(task.planner_rate_hz - self.decision_hz) > 0.01 * self.decision_hz:
            hz = self.decision_hz
            raise ConfigError(f"task.planner_rate_hz: the policy decides at {hz:g} Hz (its "
                              f"yaw step and dynamics), got {task.planner_rate_hz:g}")  # fmt: skip
        self.task = task
        self.projector = DepthProjector(cam, self.options.pixel_stride)
        self.radius = task.limits.plan_radius
        self.prev_action = np.zeros(4, dtype=np.float32)
        self.stats = dict.fromkeys(STATS, 0)

    def _perceive(self, obs: NavObservation) -> tuple[np.ndarray, np.ndarray]:
        """The policy's depth grid (h w,) and the z-depth image the shield back-projects."""
        if obs.depth is None:
            raise ConfigError("obs.depth: the learned planner needs a depth image, got None")
        return pooled_depth(obs.depth, self.depth_range, self.grid), obs.depth

    def plan(self, obs: NavObservation) -> NavReference:
        o = self.options
        pooled, depth = self._perceive(obs)
        x = observation(obs, self.task.goal, self.prev_action, self.depth_range, self.grid,
                        pooled)  # fmt: skip
        a = self.policy(x[None])[0].astype(np.float64)
        yaw = yaw_of(obs.quat)
        c, s = math.cos(yaw), math.sin(yaw)
        vb = a[:3] * self.max_speed
        v = np.array([c * vb[0] - s * vb[1], s * vb[0] + c * vb[1], vb[2]])
        self.stats["calls"] += 1
        replaced = False
        to_goal = np.asarray(self.task.goal) - obs.position
        dist = float(np.linalg.norm(to_goal))
        if dist < o.arrive:  # the arrival law (module docstring)
            v = to_goal * min(o.arrive_gain, self.max_speed / max(dist, 1e-9))
            replaced = True
            self.stats["arriving"] += 1
        if o.shield:
            pts = self.projector.points(depth, obs.position, obs.quat)
            near = pts[np.linalg.norm(pts - obs.position, axis=1) < o.shield_range]
            v, changed = shield(near, obs.position, v, o.horizon, self.radius + o.margin)
            if changed:
                self.stats["shielded"] += 1
                self.stats["stopped"] += int(not v.any())
                replaced = True
        v_vol = volume_clamp(v, obs.position, self.task.bounds_min, self.task.bounds_max,
                             self.radius + o.margin, o.horizon)  # fmt: skip
        if not np.array_equal(v_vol, v):
            v, replaced = v_vol, True
            self.stats["volume"] += 1
        if replaced:  # the action flown, as navigate would have seen it
            a[:3] = to_yaw_frame(v, yaw) / self.max_speed
        self.prev_action = np.clip(a, -1.0, 1.0).astype(np.float32)
        yaw_sp = yaw + float(a[3]) * self.max_yaw_rate / self.decision_hz
        times = obs.t + np.linspace(0.0, o.hold, 6)
        pos = obs.position + (times - obs.t)[:, None] * v
        return NavReference(
            t0=obs.t, times=times, positions=pos, velocities=np.tile(v, (6, 1)),
            accelerations=np.zeros((6, 3)), yaws=np.full(6, yaw_sp),
        )  # fmt: skip


class LearnedRgbPlanner(LearnedPlanner):
    """``learned_rgb``: the learned planner flown from RGB alone (issue 21). A small CNN (the
    RGB depth encoder, :mod:`volary.studies.rl.rgb_depth`, shipped as
    ``data/learned_rgb_encoder.npz``) predicts the policy's min-pooled depth grid from the
    forward RGB frame; the policy, the arrival law and the volume clamp are the ``learned``
    planner's, and the shield back-projects the predicted grid (each cell's depth over its
    pixel block) instead of a measured image. Its depth twin is ``learned``. Keyword options:
    :class:`LearnedOptions` and ``encoder`` (an ``mlp_npz`` RGB depth encoder; "": the
    shipped one)."""

    name = "learned_rgb"
    needs: frozenset[str] = frozenset({"rgb"})

    def __init__(self, encoder: str = "", **options: Any) -> None:
        super().__init__(**options)
        if not isinstance(encoder, str):
            raise ConfigError(f"learned_rgb option encoder: expected a path, got {encoder!r}")
        self.encoder = NumpyMLP(encoder or default_weights(ENCODER))
        m = self.encoder.meta
        want = {"kind": "rgb_depth", "grid": list(self.grid), "depth_range": self.depth_range}
        fits = all(m.get(k) == v for k, v in want.items())
        hfov = m.get("hfov")
        fits = fits and isinstance(hfov, float) and abs(hfov - self.hfov) < 1e-6
        if not (fits and isinstance(m.get("height"), int) and isinstance(m.get("width"), int)):
            raise ConfigError(
                f"encoder: expected an RGB depth encoder (volary rl rgb-encoder) for the "
                f"policy's {self.grid} grid, {self.depth_range:g} m range and "
                f"{math.degrees(self.hfov):.0f} deg camera; its meta says {m}"
            )
        self.size = (int(m["height"]), int(m["width"]))

    def reset(self, task: NavTask) -> None:
        from volary.planning.navigation import DepthCameraInfo

        cam = task.rgb
        if cam is None:
            raise ConfigError("task.rgb: the learned_rgb planner needs an RGB camera, got None")
        self._check_camera(cam, "task.rgb")
        if (cam.height, cam.width) != self.size:
            raise ConfigError(f"task.rgb: the encoder was trained on {self.size[0]} x "
                              f"{self.size[1]} images, got {cam.height} x {cam.width}")  # fmt: skip
        depth = DepthCameraInfo(
            width=cam.width, height=cam.height, fx=cam.fx, fy=cam.fy, cx=cam.cx, cy=cam.cy,
            max_range=self.depth_range, rate_hz=cam.rate_hz, t_body_cam=cam.t_body_cam,
            q_body_cam=cam.q_body_cam,
        )  # fmt: skip
        self._reset(task, depth)

    def _perceive(self, obs: NavObservation) -> tuple[np.ndarray, np.ndarray]:
        """The predicted grid, and as the shield's image each cell's depth over its block
        (no return where the prediction is at the range)."""
        img = obs.rgb
        h, w = self.size
        if img is None or img.shape != (h, w, 3) or img.dtype != np.uint8:
            got = None if img is None else f"{img.shape} {img.dtype}"
            raise ConfigError(f"obs.rgb: expected an ({h}, {w}, 3) uint8 image, got {got}")
        x = img.transpose(2, 0, 1)[None].astype(np.float32) / np.float32(255)
        pooled = self.encoder(x)[0].reshape(self.grid).astype(np.float32)
        gh, gw = self.grid
        z = np.where(pooled >= 0.999, np.inf, pooled * self.depth_range)
        image = np.repeat(np.repeat(z, h // gh, axis=0), w // gw, axis=1)
        return pooled.reshape(-1), image


__all__ = [
    "LearnedOptions",
    "LearnedPlanner",
    "LearnedRgbPlanner",
    "NumpyMLP",
    "conv2d",
    "observation",
    "shield",
    "unsafe",
    "volume_clamp",
]
