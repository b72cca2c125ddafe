"""IR beacons (FlightGoggles Sec. III-C2): gate corners seen as pixel measurements with ids.

Model: every gate corner X (world) is moved into the camera frame, p_C = R_WC^T (X - o), and
projected with the pinhole model u = fx x / z + cx, v = fy y / z + cy (OpenCV convention; fx,
fy, cx, cy from the camera config's FOV and resolution, pixel centres at half-integers so the
image spans [0, W) x [0, H)). A corner is kept when it is in front of the camera (z > 0), its
noise-free projection lies inside the image, and it is not occluded: the ray from the camera
centre toward X (length L) hits nothing closer than L - eps, hits on the gate's own frame within
``frame_margin`` m of the corner excepted (the corner lies on its own frame, FlightGoggles tests
"occlusion before being included in the IR sensor output"). Gaussian pixel noise of std
``pixel_noise_std`` px is added to kept corners from a per-env counter-based stream.

Faults (a detector's failures; none by default): each kept corner is dropped with probability
``dropout``; each report that remains is, with probability ``false_rate``, a false detection:
its pixel is uniform over the image, unrelated to the corner its id names (a reflection or
another light read as that beacon). Both come from a second per-env stream, so a reading
without faults is the same as before they existed. Each report (a false one included) is, with
probability ``mislabel_rate``, mislabelled: its pixel is the one it would have, its label is
wrong: half of the time another corner index of the same gate (uniform over the other three),
otherwise another valid gate of the scene (uniform over the others; the corner index kept).
The mislabels come from a third per-env stream, drawn only when ``mislabel_rate`` > 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.sensors.camera import CameraConfig, camera_config
from volary.sensors.rays import (
    NoiseStream,
    RayBundle,
    as_mount,
    check_caster,
    check_nonneg,
    pose_args,
)
from volary.worlds.primitives import Scene, SceneSpec


@dataclass(frozen=True)
class BeaconReading:
    """Padded beacon measurements, K = 4 G slots in the fixed order (gate g, corner k) -> 4g+k."""

    pixels: Tensor  # (N, K, 2) px (u right, v down), with noise; NaN where not visible
    visible: Tensor  # (N, K) bool: valid gate, in front, inside the image, not occluded
    gate_index: Tensor  # (N, K) int64 gate index in the scene (g)
    corner: Tensor  # (N, K) int64 corner index 0..3 in the gate's corner order
    object_id: Tensor  # (N, K) int64 the gate's object id (-1 when unknown)
    depth: Tensor  # (N, K) m, z of the corner in the camera frame (noise-free)
    false: Tensor | None = None  # (N, K) bool: the report is a false detection (faults)
    mislabelled: Tensor | None = None  # (N, K) bool: the report's label is wrong (faults)


def project_pinhole(points_c: Tensor, intrinsics: Tensor) -> Tensor:
    """Pixels (..., 2) of camera-frame points (..., 3): u = fx x/z + cx, v = fy y/z + cy
    (Hartley & Zisserman Eq. 6.4, OpenCV axes)."""
    fx, fy, cx, cy = intrinsics.unbind(-1)
    z = points_c[..., 2]
    return torch.stack((fx * points_c[..., 0] / z + cx, fy * points_c[..., 1] / z + cy), -1)


def _gates(
    scene: Any, n_envs: int, device: torch.device, dtype: torch.dtype
) -> tuple[Tensor, Tensor, Tensor]:
    """(corners (N, G, 4, 3), valid (N, G), object ids (N, G) or -1 when unknown)."""
    if isinstance(scene, Scene):
        corners, valid = scene.gate_corners, scene.gate_valid
        ids = torch.full(valid.shape, -1, dtype=torch.int64, device=valid.device)
    else:
        items = [scene] if isinstance(scene, SceneSpec) else list(scene)
        if not items or not all(isinstance(s, SceneSpec) for s in items):
            raise ConfigError("scene: expected a Scene, a SceneSpec or a list of SceneSpec")
        per = [items[i % len(items)] for i in range(n_envs)]
        g = max(1, max(len(s.gates) for s in per))
        corners = torch.zeros(n_envs, g, 4, 3, dtype=torch.float64)
        valid = torch.zeros(n_envs, g, dtype=torch.bool)
        ids = torch.full((n_envs, g), -1, dtype=torch.int64)
        for i, s in enumerate(per):
            for j, gate in enumerate(s.gates):
                corners[i, j] = torch.tensor(gate.corners, dtype=torch.float64)
                valid[i, j], ids[i, j] = True, gate.object_id
    if corners.shape[0] != n_envs:
        raise ConfigError(f"scene: expected {n_envs} envs (the caster's), got {corners.shape[0]}")
    return corners.to(device, dtype), valid.to(device), ids.to(device)


class IrBeacons:
    """Gate-corner beacons seen by a camera: ``beacons(pos (N,3), quat (N,4))`` or a state."""

    def __init__(
        self,
        camera: str | CameraConfig,
        caster: Any,
        scene: Scene | SceneSpec | Sequence[SceneSpec],
        *,
        mount: Any = None,
        seed: int = 0,
        pixel_noise_std: float = 0.0,
        frame_margin: float = 0.3,
        eps: float = 1e-3,
        dropout: float = 0.0,
        false_rate: float = 0.0,
        mislabel_rate: float = 0.0,
        env_ids: Sequence[int] | None = None,
    ) -> None:
        self.config = camera_config(camera)
        if mount is not None:
            self.config = replace(self.config, mount=as_mount(mount))
        check_nonneg("beacons", pixel_noise_std=pixel_noise_std, frame_margin=frame_margin, eps=eps)
        self.pixel_noise_std, self.frame_margin, self.eps = pixel_noise_std, frame_margin, eps
        rates = (("dropout", dropout), ("false_rate", false_rate), ("mislabel_rate", mislabel_rate))
        for name, v in rates:
            if not (isinstance(v, int | float) and 0.0 <= v < 1.0):
                raise ConfigError(f"beacons.{name}: expected a probability in [0, 1), got {v!r}")
        self.dropout, self.false_rate = float(dropout), float(false_rate)
        self.mislabel_rate = float(mislabel_rate)
        self.caster = caster
        self.device, self.dtype, self.n_envs = check_caster(caster)
        corners, self.gate_valid, ids = _gates(scene, self.n_envs, self.device, self.dtype)
        n, g = self.gate_valid.shape
        self.corners = corners.reshape(n, 4 * g, 3)
        self.slot_valid = self.gate_valid.repeat_interleave(4, dim=1)
        self.object_id = ids.repeat_interleave(4, dim=1)
        k = torch.arange(4 * g, device=self.device)
        self.gate_index = (k // 4).expand(n, -1).contiguous()
        self.corner = (k % 4).expand(n, -1).contiguous()
        self.intrinsics = self.config.intrinsics.to(self.device, self.dtype)
        self._pose = RayBundle(
            torch.tensor([[0.0, 0.0, 1.0]]), self.config.mount, self.device, self.dtype
        )
        self.noise = NoiseStream(seed, 0xBEAC0, self.n_envs, self.device, env_ids)
        self.faults = NoiseStream(seed, 0xBEAC1, self.n_envs, self.device, env_ids)
        self.labels = NoiseStream(seed, 0xBEAC2, self.n_envs, self.device, env_ids)

    def __call__(self, pos: Any, quat: Tensor | None = None) -> BeaconReading:
        """Visible corners and their pixels for body poses (or a state)."""
        p, q = pose_args(pos, quat, self.n_envs, self.device, self.dtype)
        c = self.config
        origin, _, r_wc = self._pose.world(p, q)
        rel = self.corners - origin[:, None, :]  # (N, K, 3) world
        pc = torch.matmul(rel, r_wc)  # camera frame, row vectors
        front = pc[..., 2] > 1e-6
        uv = project_pinhole(
            torch.where(front[..., None], pc, torch.ones_like(pc)), self.intrinsics
        )
        inside = (
            (uv[..., 0] >= 0) & (uv[..., 0] < c.width) & (uv[..., 1] >= 0) & (uv[..., 1] < c.height)
        )
        keep = self.slot_valid & front & inside
        keep = keep & ~self._occluded(origin, rel)
        if self.pixel_noise_std > 0:
            z = self.noise.normal(2 * uv.shape[1], self.dtype).reshape(uv.shape)
            uv = uv + self.pixel_noise_std * z
        false = None
        if self.dropout > 0 or self.false_rate > 0:
            keep, uv, false = self._faults(keep, uv)
        uv = torch.where(keep[..., None], uv, torch.full_like(uv, math.nan))
        gate, corner, ids, wrong = self.gate_index, self.corner, self.object_id, None
        if self.mislabel_rate > 0:
            gate, corner, wrong = self._mislabels(keep)
            ids = torch.gather(self.object_id[:, ::4], 1, gate)
        return BeaconReading(uv, keep, gate, corner, ids, pc[..., 2], false, wrong)

    def _faults(self, keep: Tensor, uv: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Dropped reports and false detections (module docstring)."""
        k = keep.shape[1]
        _, u = self.faults.draw(4 * k, self.dtype)
        u_drop, u_false, u_px = u[:, :k], u[:, k : 2 * k], u[:, 2 * k :].reshape(-1, k, 2)
        keep = keep & (u_drop >= self.dropout)
        false = keep & (u_false < self.false_rate)
        size = torch.tensor([self.config.width, self.config.height], dtype=uv.dtype,
                            device=uv.device)  # fmt: skip
        uv = torch.where(false[..., None], u_px * size, uv)
        return keep, uv, false

    def _mislabels(self, keep: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(gate index, corner, mislabelled) per slot: the reported labels with the mislabel
        fault (module docstring); a gate with no other valid gate keeps its gate label."""
        k = keep.shape[1]
        _, u = self.labels.draw(3 * k, self.dtype)
        u_wrong, u_kind, u_pick = u[:, :k], u[:, k : 2 * k], u[:, 2 * k :]
        wrong = keep & (u_wrong < self.mislabel_rate)
        valid = self.gate_valid  # (N, G)
        n_other = valid.sum(1, keepdim=True) - 1  # (N, 1) other valid gates
        other_gate = wrong & (u_kind < 0.5) & (n_other > 0)
        shift = 1 + (u_pick * 3).long().clamp(max=2)  # 1..3: another corner of the gate
        corner = torch.where(wrong & ~other_gate, (self.corner + shift) % 4, self.corner)
        # the r-th valid gate other than the true one, r uniform in 0..n_other-1
        r = (u_pick * n_other.clamp_min(1)).long().clamp(max=n_other.clamp_min(1) - 1)
        rank = valid.long().cumsum(1) - 1  # (N, G) rank of each valid gate
        true_rank = torch.gather(rank, 1, self.gate_index)
        want = torch.where(r >= true_rank, r + 1, r)  # skip the true gate's rank
        hit = valid[:, None, :] & (rank[:, None, :] == want[..., None])  # (N, K, G)
        picked = hit.long().argmax(-1)
        gate = torch.where(other_gate, picked, self.gate_index)
        return gate, corner, wrong

    def _occluded(self, origin: Tensor, rel: Tensor) -> Tensor:
        """(N, K) True where the segment camera -> corner is blocked (see module docstring)."""
        length = rel.norm(dim=-1)
        ok = length > 1e-6
        safe = torch.where(ok, length, torch.ones_like(length))
        dirs = torch.where(
            ok[..., None],
            rel / safe[..., None],
            torch.zeros_like(rel)
            + torch.tensor([1.0, 0.0, 0.0], device=rel.device, dtype=rel.dtype),
        )
        max_len = float(safe.max()) if safe.numel() else 1.0
        hits = self.caster.cast(origin[:, None, :].expand_as(dirs), dirs, max_len)
        t = hits.distance
        closer = t < safe - self.eps
        own = (t > safe - self.frame_margin) & (
            (self.object_id < 0) | (hits.object_id == self.object_id)
        )
        return closer & ~own
