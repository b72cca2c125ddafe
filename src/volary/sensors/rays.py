"""Shared pieces of the ray-cast sensors: mounts (T_BC), ray patterns, pose transforms, noise.

Frames (DESIGN.md): world W z-up; body B FLU; a camera frame C is OpenCV (x right, y down,
z along the optical axis); a LiDAR / range-sensor frame S is FLU like the body (x forward,
z up). A mount is the transform T_BS of the sensor frame in the body frame: ``p_B = R_BS p_S +
t_BS``. Rays are built once in the sensor frame, moved once into the body frame with the mount,
and per call rotated into the world by one batched matrix product with R_WB.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
from torch import Tensor

from volary.device import resolve as resolve_device
from volary.errors import ConfigError
from volary.math import random as vrandom
from volary.math.quaternion import quat_from_euler, quat_normalize, quat_to_rotmat
from volary.registry import Registry

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]


def check_finite(owner: str, **values: float) -> None:
    """ConfigError naming ``owner.field`` for any NaN/inf value."""
    for name, v in values.items():
        if not math.isfinite(float(v)):
            raise ConfigError(f"{owner}.{name}: expected a finite value, got {v}")


def check_positive_int(owner: str, **values: int) -> None:
    for name, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ConfigError(f"{owner}.{name}: expected a positive integer, got {v!r}")


def check_nonneg(owner: str, **values: float) -> None:
    check_finite(owner, **values)
    for name, v in values.items():
        if v < 0:
            raise ConfigError(f"{owner}.{name}: expected a value >= 0, got {v}")


def check_range_limits(owner: str, min_range: float, max_range: float) -> None:
    """0 <= min_range < max_range, both finite (m)."""
    check_nonneg(owner, min_range=min_range, max_range=max_range)
    if min_range >= max_range:
        raise ConfigError(
            f"{owner}.min_range: expected min_range < max_range, got {min_range} >= {max_range}"
        )


def check_ray_config(owner: str, c: Any, **nonneg: float) -> None:
    """The fields every ray sensor's config shares: range limits (m), noise terms (>= 0, and
    any ``nonneg`` extras), the dropout probability, an invalid_value that is not infinite,
    and the mount (a (translation, rotation) pair becomes a :class:`Mount`)."""
    check_range_limits(owner, c.min_range, c.max_range)
    check_nonneg(owner, noise_std=c.noise_std, noise_quadratic=c.noise_quadratic, **nonneg)
    check_probability(owner, "dropout", c.dropout)
    if c.invalid_value is not None and math.isinf(c.invalid_value):
        check_finite(owner, invalid_value=c.invalid_value)
    if not isinstance(c.mount, Mount):
        object.__setattr__(c, "mount", as_mount(c.mount))


def check_fov(owner: str, name: str, value: float, upper: float = math.pi) -> None:
    """A field of view in the open interval (0, upper) rad."""
    check_finite(owner, **{name: value})
    if not 0.0 < value < upper:
        raise ConfigError(f"{owner}.{name}: expected a FOV in (0, {upper:.6g}) rad, got {value}")


def check_probability(owner: str, name: str, value: float) -> None:
    check_finite(owner, **{name: value})
    if not 0.0 <= value < 1.0:
        raise ConfigError(f"{owner}.{name}: expected a probability in [0, 1), got {value}")


# R_BC of a camera looking along +x_B: z_C -> +x_B, x_C -> -y_B, y_C -> -z_B (DESIGN.md).
_FORWARD_CAMERA_QUAT: Quat = (0.5, -0.5, 0.5, -0.5)


@dataclass(frozen=True)
class Mount:
    """T_BS: the sensor frame's pose in the body frame.

    translation: (3,) m, sensor origin in the body frame.
    rotation: [w, x, y, z] unit quaternion of R_BS (sensor-to-body).
    """

    translation: Vec3 = (0.0, 0.0, 0.0)
    rotation: Quat = (1.0, 0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        t, q = tuple(float(v) for v in self.translation), tuple(float(v) for v in self.rotation)
        if len(t) != 3 or len(q) != 4:
            raise ConfigError("mount: expected a 3-vector translation and a [w,x,y,z] quaternion")
        check_finite("mount", **{f"translation[{i}]": v for i, v in enumerate(t)})
        check_finite("mount", **{f"rotation[{i}]": v for i, v in enumerate(q)})
        n = math.sqrt(sum(v * v for v in q))
        if n < 1e-9:
            raise ConfigError("mount.rotation: expected a non-zero quaternion")
        object.__setattr__(self, "translation", t)
        object.__setattr__(self, "rotation", tuple(v / n for v in q))

    @staticmethod
    def camera(
        translation: Sequence[float] = (0.0, 0.0, 0.0),
        *,
        roll: float = 0.0,
        pitch: float = 0.0,
        yaw: float = 0.0,
    ) -> Mount:
        """An OpenCV camera looking along +x_B, then turned by body-frame roll/pitch/yaw (rad,
        ZYX about the body axes; pitch > 0 tilts the optical axis down, yaw > 0 to the left)."""
        q_turn = quat_from_euler(
            *(torch.tensor(v, dtype=torch.float64) for v in (roll, pitch, yaw))
        )
        r = quat_to_rotmat(q_turn) @ quat_to_rotmat(
            torch.tensor(_FORWARD_CAMERA_QUAT, dtype=torch.float64)
        )
        return Mount.from_matrix(translation, r)

    @staticmethod
    def from_matrix(translation: Sequence[float], rotation: Any) -> Mount:
        """From a 3x3 rotation matrix R_BS (array-like)."""
        from volary.math.quaternion import quat_from_rotmat

        r = torch.as_tensor(rotation, dtype=torch.float64)
        if r.shape != (3, 3):
            raise ConfigError(f"mount rotation: expected a 3x3 matrix, got {tuple(r.shape)}")
        q = quat_from_rotmat(r)
        return Mount(tuple(float(v) for v in translation), tuple(float(v) for v in q))  # type: ignore[arg-type]

    def matrix(self, dtype: torch.dtype = torch.float64) -> Tensor:
        """R_BS (3, 3)."""
        return quat_to_rotmat(torch.tensor(self.rotation, dtype=torch.float64)).to(dtype)


FORWARD_CAMERA = Mount(rotation=_FORWARD_CAMERA_QUAT)
"""Camera at the body origin looking along +x_B (OpenCV axes)."""
DOWNWARD = Mount(rotation=(0.0, 1.0, 0.0, 0.0))
"""FLU sensor frame turned upside down: its +z points along -z_B (x stays forward)."""


def as_mount(mount: Mount | Any) -> Mount:
    """A Mount, or a (translation, quaternion | 3x3 rotation) pair."""
    if isinstance(mount, Mount):
        return mount
    try:
        t, r = mount
    except (TypeError, ValueError) as e:
        raise ConfigError("mount: expected a Mount or (translation, rotation)") from e
    rr = torch.as_tensor(r, dtype=torch.float64)
    if rr.shape == (3, 3):
        return Mount.from_matrix(t, rr)
    return Mount(tuple(t), tuple(float(v) for v in rr.reshape(-1)))  # type: ignore[arg-type]


# ---------------------------------------------------------------- ray patterns (sensor frame)


def pinhole_intrinsics(width: int, height: int, hfov: float, vfov: float | None) -> Tensor:
    """(fx, fy, cx, cy) px of a pinhole camera: f = (size / 2) / tan(fov / 2) (Hartley &
    Zisserman, Sec. 6.1), principal point at the image centre; square pixels when vfov is None."""
    fx = (width / 2.0) / math.tan(hfov / 2.0)
    fy = fx if vfov is None else (height / 2.0) / math.tan(vfov / 2.0)
    return torch.tensor([fx, fy, width / 2.0, height / 2.0], dtype=torch.float64)


def pinhole_rays(width: int, height: int, hfov: float, vfov: float | None) -> Tensor:
    """Unnormalized rays ((u - cx)/fx, (v - cy)/fy, 1) through the pixel centres (u = j + 0.5,
    v = i + 0.5), OpenCV camera frame, shape (H, W, 3) float64; z = 1 so range = z * |d|."""
    fx, fy, cx, cy = pinhole_intrinsics(width, height, hfov, vfov).tolist()
    u = (torch.arange(width, dtype=torch.float64) + 0.5 - cx) / fx
    v = (torch.arange(height, dtype=torch.float64) + 0.5 - cy) / fy
    vv, uu = torch.meshgrid(v, u, indexing="ij")
    return torch.stack((uu, vv, torch.ones_like(uu)), dim=-1)


def spherical_rays(elevation: Tensor, azimuth: Tensor) -> Tensor:
    """Unit rays of an FLU sensor frame for every (elevation, azimuth) pair, shape (E, A, 3):
    d = (cos el cos az, cos el sin az, sin el); azimuth counter-clockwise from +x about +z."""
    el, az = torch.meshgrid(elevation.double(), azimuth.double(), indexing="ij")
    return torch.stack((el.cos() * az.cos(), el.cos() * az.sin(), el.sin()), dim=-1)


# ---------------------------------------------------------------- poses and casting


def pose_args(
    pose: Any, quat: Tensor | None, n_envs: int, device: torch.device, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """(pos (N,3), quat (N,4)) from tensors or from a state with ``.pos``/``.quat``; checks shape,
    device and finiteness, naming the argument."""
    if quat is None:
        if not (hasattr(pose, "pos") and hasattr(pose, "quat")):
            raise ConfigError("pos: expected (pos, quat) tensors or a state with .pos and .quat")
        pose, quat = pose.pos, pose.quat
    for name, t, k in (("pos", pose, 3), ("quat", quat, 4)):
        if not isinstance(t, Tensor):
            raise ConfigError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.shape != (n_envs, k):
            raise ConfigError(f"{name}: expected shape ({n_envs}, {k}), got {tuple(t.shape)}")
        if not _same_device(t.device, device):
            raise ConfigError(f"{name}: expected device {device}, got {t.device}")
        if not t.is_floating_point():
            raise ConfigError(f"{name}: expected a floating dtype, got {t.dtype}")
    assert isinstance(pose, Tensor) and isinstance(quat, Tensor)
    return pose.to(dtype), quat.to(dtype)


def _same_device(a: torch.device, b: torch.device) -> bool:
    """Same device type, and the same index where both name one ("cuda" matches "cuda:0")."""
    if a.type != b.type:
        return False
    return a.index is None or b.index is None or a.index == b.index


class RayBundle:
    """Rays fixed in a sensor frame, moved to the world for a batch of body poses.

    ``dirs_s`` (R, 3) unit rays in the sensor frame. Per call: R_WS = R_WB R_BS (N, 3, 3),
    origin o = p + R_WB t_BS (N, 3), world rays d_W = R_WS d_S as one (R,3)x(N,3,3) matmul.
    """

    def __init__(
        self, dirs_s: Tensor, mount: Mount, device: torch.device | str, dtype: torch.dtype
    ) -> None:
        self.device, self.dtype = resolve_device(device), dtype
        self.dirs_s = dirs_s.to(device=self.device, dtype=dtype).contiguous()  # (R, 3)
        r_bs = mount.matrix()
        self.r_bs = r_bs.to(device=self.device, dtype=dtype)  # (3, 3)
        self.t_bs = torch.tensor(mount.translation, dtype=dtype, device=self.device)
        # rays in the body frame, transposed for row-vector products: d_W = d_B @ R_WB^T
        self.dirs_b = (dirs_s.double() @ r_bs.T).to(device=self.device, dtype=dtype)

    def world(self, pos: Tensor, quat: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(origin (N, 3), directions (N, R, 3), R_WS (N, 3, 3)) for body poses."""
        r_wb = quat_to_rotmat(quat_normalize(quat))
        origin = pos + (r_wb @ self.t_bs[:, None])[..., 0]
        dirs = rotate_rows(self.dirs_b, r_wb.transpose(-1, -2))
        return origin, dirs, r_wb @ self.r_bs


def rotate_rows(a: Tensor, m: Tensor) -> Tensor:
    """``a @ m`` for row vectors ``a`` (R, 3) or (N, R, 3) and matrices ``m`` (N, 3, 3):
    (N, R, 3), as ``torch.matmul`` computes it.

    On the CPU one compiled loop (:mod:`volary.sensors._rotate_rows`) that sums in one fixed
    order, the order of the pinned torch CPU wheel's batched product, whose generic loop takes
    about 1 ms for 8 cameras of 64 x 64 rays (several times the compiled loop). So the bits are
    that build's, and the same on every machine; torch builds whose BLAS takes this product
    (an MKL build on an Intel Xeon did) round some results differently, by an ulp or two.
    Anything else (another device, autograd, other shapes or dtypes) goes to ``torch.matmul``."""
    if not _rotate_rows_fast(a, m):
        return torch.matmul(a, m)
    from volary.sensors._rotate_rows import rotate_rows_kernel

    n, r = m.shape[0], a.shape[-2]
    out = torch.empty(n, r, 3, dtype=a.dtype)
    a3 = a if a.dim() == 3 else a[None]
    o = out.numpy()
    rotate_rows_kernel(a3.contiguous().numpy(), m.contiguous().numpy(), o.dtype.type(0), o)
    return out


def _rotate_rows_fast(a: Tensor, m: Tensor) -> bool:
    """Whether :func:`rotate_rows` can take its compiled path."""
    return (
        a.device.type == "cpu"
        and m.device.type == "cpu"
        and a.dtype == m.dtype
        and a.dtype in (torch.float32, torch.float64)
        and not (a.requires_grad or m.requires_grad)
        and m.dim() == 3
        and m.shape[1:] == (3, 3)
        and a.shape[-1] == 3
        and (a.dim() == 2 or (a.dim() == 3 and a.shape[0] == m.shape[0]))
    )


def cast_bundle(caster: Any, origin: Tensor, dirs: Tensor, max_range: float) -> Any:
    """One cast of all rays of a bundle from one origin per env."""
    return caster.cast(origin[:, None, :].expand_as(dirs), dirs, max_range)


def preset_config(presets: Registry[Any], spec: Any, cls: type, overrides: dict) -> Any:
    """``spec`` as is when it is a ``cls``, else the preset of that name, with field overrides;
    an unknown name raises an error listing the presets."""
    cfg = presets.resolve(spec, cls)
    return replace(cfg, **overrides) if overrides else cfg


class RaySensor:
    """What every ray-cast sensor does first: resolve its config (preset name or config, with an
    optional ``mount`` override), bind to a caster (device, dtype and env count come from it),
    build its rays (:meth:`_build`) and open its per-env noise stream. A sensor class names its
    config resolver (``_resolve``) and noise salt (``_salt``, distinct per sensor kind)."""

    config: Any
    caster: Any
    device: torch.device
    dtype: torch.dtype
    n_envs: int
    bundle: RayBundle
    noise: NoiseStream
    _resolve: ClassVar[staticmethod[[Any], Any]]
    _salt: ClassVar[int]

    def __init__(
        self,
        config: Any,
        caster: Any,
        *,
        mount: Any = None,
        seed: int = 0,
        env_ids: Sequence[int] | None = None,
    ) -> None:
        """``config``: a preset name or the sensor's config; ``mount`` overrides its mount;
        ``caster``: a :class:`RayCaster` (device, dtype, env count); ``seed`` and ``env_ids``
        (per-env stream ids) key the noise (:class:`NoiseStream`)."""
        resolved = type(self)._resolve(config)
        self.config = resolved if mount is None else replace(resolved, mount=as_mount(mount))
        self.caster = caster
        self.device, self.dtype, self.n_envs = check_caster(caster)
        self._build()
        self.noise = NoiseStream(seed, self._salt, self.n_envs, self.device, env_ids)

    def _build(self) -> None:
        """Set ``self.bundle`` (and any per-ray constants) from ``self.config``."""
        raise NotImplementedError


def check_caster(caster: Any) -> tuple[torch.device, torch.dtype, int]:
    for attr in ("cast", "n_envs", "device", "dtype"):
        if not hasattr(caster, attr):
            raise ConfigError(
                f"caster: expected a RayCaster (missing .{attr}), got {type(caster).__name__}"
            )
    return torch.device(caster.device), caster.dtype, int(caster.n_envs)


# ---------------------------------------------------------------- noise


def range_noise_std(distance: Tensor, std: float, std_quadratic: float) -> Tensor:
    """sigma(d) = std + std_quadratic * d^2 (m): a constant floor plus the quadratic growth of
    triangulation error, sigma_z = z^2 sigma_disparity / (f b) (Keselman et al. 2017, "Intel
    RealSense Stereoscopic Depth Cameras", Eq. 3; used for every range sensor here)."""
    return std + std_quadratic * distance * distance


def stream_ids(env_ids: Sequence[int] | None, n_envs: int, device: Any) -> Tensor:
    """(N,) int64 stream ids: ``env_ids`` checked (one int per env), or 0..N-1."""
    if env_ids is None:
        return torch.arange(n_envs, device=device)
    ids = list(env_ids)
    if len(ids) != n_envs or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ConfigError(f"env_ids: expected {n_envs} ints (one per env), got {env_ids!r}")
    return torch.tensor(ids, dtype=torch.int64, device=device)


class NoiseStream:
    """Per-env counter-based draws (volary.math.random): env i's draws depend only on (seed, i,
    call count), never on the batch size."""

    def __init__(
        self,
        seed: int,
        salt: int,
        n_envs: int,
        device: torch.device,
        env_ids: Sequence[int] | None = None,
    ) -> None:
        """``env_ids``: each env's stream id (default its index 0..N-1); give ids that follow
        the env's content (a course's number, say) to draw the same noise at any batch
        position."""
        ids = stream_ids(env_ids, n_envs, device)
        self.keys = vrandom.env_keys(int(seed) ^ salt, ids)
        self.tick = torch.zeros(n_envs, dtype=torch.int64, device=device)

    def draw(self, n: int, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """(normal (N, n), uniform (N, n)) for this call, then advance the counter."""
        z = vrandom.normal(self.keys, 2 * self.tick, n, dtype=dtype)
        u = vrandom.uniform(self.keys, 2 * self.tick + 1, n, dtype=dtype).to(dtype)
        self.tick = self.tick + 1
        return z, u

    def normal(self, n: int, dtype: torch.dtype) -> Tensor:
        z = vrandom.normal(self.keys, 2 * self.tick, n, dtype=dtype)
        self.tick = self.tick + 1
        return z

    def restart(self, mask: Tensor) -> None:
        """The masked envs' counters back at zero: they draw again what they drew first."""
        self.tick = torch.where(mask, torch.zeros_like(self.tick), self.tick)


def noise_streams(sensor: Any) -> list[NoiseStream]:
    """A sensor's noise streams: the :class:`NoiseStream` attributes it holds."""
    return [v for v in vars(sensor).values() if isinstance(v, NoiseStream)]


def in_range(distance: Tensor, min_range: float, max_range: float) -> Tensor:
    """(N, R) bool: a return within [min_range, max_range] (misses are +inf, so they fail)."""
    ok = distance <= max_range
    if min_range > 0:
        ok &= distance >= min_range
    return ok


def noisy_ranges(
    distance: Tensor,
    valid: Tensor,
    *,
    std: float,
    std_quadratic: float,
    dropout: float,
    stream: NoiseStream | None,
) -> tuple[Tensor, Tensor]:
    """Measured value and validity (N, R): ``valid`` loses a random fraction ``dropout``; valid
    values get Gaussian noise of sigma(d) per :func:`range_noise_std`. Without noise the inputs
    are returned as they are (no copy)."""
    if stream is None or (std == 0 and std_quadratic == 0 and dropout == 0):
        return distance, valid
    n = distance.shape[-1]
    if dropout > 0:
        z, u = stream.draw(n, distance.dtype)
        valid = valid & (u >= dropout)
    else:
        z = stream.normal(n, distance.dtype)
    d = torch.where(valid, distance, torch.zeros_like(distance))
    return d + range_noise_std(d, std, std_quadratic) * z, valid


def to_points(
    rng: Tensor, valid: Tensor, dirs_s: Tensor, origin: Tensor, r_ws: Tensor, frame: str
) -> Tensor:
    """Points (N, R, 3) p_S = r d_S (sensor frame) or p_W = o + R_WS p_S (world); NaN where
    invalid."""
    p = rng[..., None] * dirs_s
    if frame == "world":
        p = origin[:, None, :] + rotate_rows(p, r_ws.transpose(-1, -2))
    elif frame != "sensor":
        raise ConfigError(f"frame: expected 'sensor' or 'world', got {frame!r}")
    return torch.where(valid[..., None], p, torch.full_like(p, math.nan))


class RangePoints:
    """``points(frame)`` of a range reading: one point per ray (a LiDAR beam, a ToF zone's
    centre ray, the rangefinder's beam) from its ``range`` and ``valid`` (N, ...) along
    ``rays`` (R, 3), in the sensor or world frame."""

    range: Tensor
    valid: Tensor
    origin: Tensor
    rotation: Tensor
    rays: Tensor

    def points(self, frame: str = "sensor") -> Tensor:
        """Points (N, R, 3) in the sensor or world frame; NaN where invalid."""

        def rows(x: Tensor) -> Tensor:
            return x.flatten(1) if x.dim() > 1 else x[:, None]

        return to_points(
            rows(self.range), rows(self.valid), self.rays, self.origin, self.rotation, frame
        )
