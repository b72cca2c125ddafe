"""Gate passage in course order with the official AlphaPilot rule, batched over envs.

Rule (FlightGoggles/AlphaPilot reporter, restated in the header of ``alphapilot_2019.toml``):
the vehicle position lies inside the axis-aligned bounding box of the gate's four corners
inflated by ``inflation`` m on every axis, AND its distance to the gate plane is below
``gate_width`` m. Gates count only in order: passing a later gate marks every gate skipped
before it as missed, and gates already behind the vehicle in the order are not checked again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.worlds.primitives import Scene, SceneSpec


def gate_planes(corners: Tensor) -> tuple[Tensor, Tensor]:
    """Centre (..., 3) and unit normal (..., 3) of the best-fit plane of ``corners (..., 4, 3)``
    (independent of the corner order; the normal's sign is arbitrary)."""
    center = corners.mean(dim=-2)
    x = (corners - center[..., None, :]).double()
    _, vec = torch.linalg.eigh(x.transpose(-1, -2) @ x)
    return center, vec[..., :, 0].to(corners.dtype)


def inside_passage(pos: Tensor, corners: Tensor, gate_width: Tensor, inflation: Tensor) -> Tensor:
    """The passage rule for ``pos (..., 3)`` against gates ``corners (..., 4, 3)`` (broadcast):
    inside the inflated corner bounding box and closer than ``gate_width`` to the gate plane."""
    lo = corners.amin(dim=-2) - inflation[..., None]
    hi = corners.amax(dim=-2) + inflation[..., None]
    return _passage(pos, lo, hi, *gate_planes(corners), gate_width)


def _passage(
    pos: Tensor, lo: Tensor, hi: Tensor, center: Tensor, normal: Tensor, gate_width: Tensor
) -> Tensor:
    in_box = ((pos >= lo) & (pos <= hi)).all(dim=-1)
    return in_box & (((pos - center) * normal).sum(-1).abs() < gate_width)


def _corners(scene_or_corners: Scene | Tensor) -> tuple[Tensor, Tensor]:
    """Gate corners (N, G, 4, 3) and their valid mask; NaN or inf corners are a ConfigError
    (the plane fit's eigensolver fails on them)."""
    if isinstance(scene_or_corners, Scene):
        c, valid = scene_or_corners.gate_corners, scene_or_corners.gate_valid
    else:
        c = scene_or_corners
        if not isinstance(c, Tensor) or c.dim() != 4 or c.shape[-2:] != (4, 3):
            shape = tuple(c.shape) if isinstance(c, Tensor) else type(c).__name__
            raise ConfigError(
                f"scene_or_corners: expected a Scene or corners of shape (N, G, 4, 3), got {shape}"
            )
        if not c.dtype.is_floating_point:
            raise ConfigError(f"scene_or_corners: expected floating-point corners, got {c.dtype}")
        valid = torch.ones(c.shape[:2], dtype=torch.bool, device=c.device)
    if not bool(torch.isfinite(c).all()):
        raise ConfigError("scene_or_corners: expected finite gate corners (m), got NaN or inf")
    return c, valid


def _order(order: Any, valid: Tensor) -> Tensor:
    """Course order as (N, L) gate indices, -1 for padding."""
    n, g = valid.shape
    if order is None:
        idx = torch.arange(g, device=valid.device).expand(n, g)
        return torch.where(valid, idx, -1)
    o = torch.as_tensor(order, device=valid.device)
    if o.dim() == 1:
        o = o.expand(n, -1)
    if o.dim() != 2 or o.shape[0] != n or o.dtype.is_floating_point or o.dtype == torch.bool:
        raise ConfigError(
            f"order: expected integer gate indices of shape (L,) or ({n}, L), "
            f"got {o.dtype} {tuple(o.shape)}"
        )
    if bool(((o < -1) | (o >= g)).any()):
        raise ConfigError(f"order: expected indices in [0, {g}) (or -1 for padding)")
    ok = valid.gather(1, o.clamp_min(0)) | (o < 0)
    if not bool(ok.all()):
        raise ConfigError("order: names a padded (invalid) gate")
    return o


def _per_env(value: Any, n: int, name: str, ref: Tensor, positive: bool) -> Tensor:
    v = torch.as_tensor(value, device=ref.device, dtype=ref.dtype)
    v = v.expand(n) if v.dim() == 0 else v
    if v.shape != (n,):
        raise ConfigError(f"{name}: expected a scalar or shape ({n},), got {tuple(v.shape)}")
    bad = (v <= 0) if positive else (v < 0)
    if bool(bad.any()) or not bool(torch.isfinite(v).all()):
        raise ConfigError(f"{name}: expected finite values {'>' if positive else '>='} 0 m")
    return v


class GateTracker:
    """Which gates of each env's course have been passed, in order.

    ``order``: gate indices (L,) or (N, L) into the scene's gates, -1 padding (default: every
    valid gate in stored order). ``passed``/``missed`` are indexed by course position.

    >>> tracker = GateTracker(scene, order=spec.meta["order_index"], gate_width=0.3,
    ...                       inflation=0.1)
    >>> passed_now = tracker.update(state.pos)
    """

    def __init__(
        self,
        scene_or_corners: Scene | Tensor,
        order: Sequence[int] | Tensor | None = None,
        gate_width: float | Tensor = 0.3,
        inflation: float | Tensor = 0.1,
    ) -> None:
        corners, valid = _corners(scene_or_corners)
        n = corners.shape[0]
        o = _order(order, valid)
        self.course_valid = o >= 0  # (N, L) bool
        idx = o.clamp_min(0)[..., None, None].expand(*o.shape, 4, 3)
        self.corners = corners.gather(1, idx)  # (N, L, 4, 3) m, course order
        self.gate_width = _per_env(gate_width, n, "gate_width", corners, True)
        self.inflation = _per_env(inflation, n, "inflation", corners, False)
        self.n_gates = self.course_valid.sum(-1)  # (N,) int64 gates on each env's course
        infl = self.inflation[:, None, None]
        self._lo = self.corners.amin(dim=-2) - infl  # (N, L, 3) inflated corner box
        self._hi = self.corners.amax(dim=-2) + infl
        self._center, self._normal = gate_planes(self.corners)  # (N, L, 3) each
        self.reset()

    @classmethod
    def for_courses(cls, scene: Scene, specs: Sequence[SceneSpec]) -> GateTracker:
        """The tracker of race courses: env i of ``scene`` flies ``specs[i]``'s course
        (``meta["order_index"]``, padded with -1) with its ``gate_width`` and ``inflation``
        (0.3 and 0.1 m when the spec does not say)."""
        length = max(len(s.meta["order_index"]) for s in specs)
        order = torch.full((len(specs), length), -1, dtype=torch.int64)
        for i, s in enumerate(specs):
            order[i, : len(s.meta["order_index"])] = torch.tensor(s.meta["order_index"])
        return cls(
            scene,
            order=order.to(scene.gate_corners.device),
            gate_width=torch.tensor([s.meta.get("gate_width", 0.3) for s in specs]),
            inflation=torch.tensor([s.meta.get("inflation", 0.1) for s in specs]),
        )

    def reset(self, mask: Tensor | None = None) -> None:
        """Start the masked envs' courses again (all when None)."""
        n, ln = self.course_valid.shape
        dev = self.corners.device
        if mask is None:
            m = torch.ones(n, dtype=torch.bool, device=dev)
        else:
            m = torch.as_tensor(mask, device=dev)
            if m.shape != (n,) or m.dtype != torch.bool:
                raise ConfigError(
                    f"mask: expected a bool tensor of shape ({n},), got {m.dtype} {tuple(m.shape)}"
                )
        zero = torch.zeros(n, ln, dtype=torch.bool, device=dev)
        if mask is None:
            self.next_gate = torch.zeros(n, dtype=torch.int64, device=dev)  # (N,) course index
            self.passed, self.missed = zero.clone(), zero.clone()  # (N, L) bool
            return
        self.next_gate = torch.where(m, 0, self.next_gate)
        self.passed = torch.where(m[:, None], zero, self.passed)
        self.missed = torch.where(m[:, None], zero, self.missed)

    @property
    def finished(self) -> Tensor:
        """(N,) bool: every course gate is passed or missed."""
        return self.next_gate >= self.n_gates

    def update(self, pos: Tensor) -> Tensor:
        """Advance with vehicle positions ``pos (N, 3)`` (m, world); returns ``passed_now (N,)``."""
        n, ln = self.course_valid.shape
        if not isinstance(pos, Tensor) or pos.shape != (n, 3):
            shape = tuple(pos.shape) if isinstance(pos, Tensor) else type(pos).__name__
            raise ConfigError(f"pos: expected a tensor of shape ({n}, 3), got {shape}")
        if pos.device != self.corners.device:
            raise ConfigError(f"pos: expected device {self.corners.device}, got {pos.device}")
        pos = pos.to(self.corners.dtype)
        k = torch.arange(ln, device=pos.device)
        ahead = self.course_valid & (k >= self.next_gate[:, None])
        inside = ahead & _passage(
            pos[:, None], self._lo, self._hi, self._center, self._normal, self.gate_width[:, None]
        )
        now = inside.any(dim=-1)
        first = torch.where(now, inside.int().argmax(dim=-1), ln)  # first gate passed, or L
        self.passed = self.passed | (now[:, None] & (k == first[:, None]))
        self.missed = self.missed | (ahead & (k < first[:, None]) & now[:, None])
        self.next_gate = torch.where(now, first + 1, self.next_gate)
        return now
