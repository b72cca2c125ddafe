"""Racing gates found in a depth image: a model-based detector for a sensors-only racer.

A 2019 AlphaPilot team with a (stereo) camera had to find the gates in its images (paper 001
Sec. V-C; Table III's teams used learned or hand-made detectors). This detector works on the
point cloud a stereo depth image gives, expressed in the racer's *estimated* world frame, and on
what the racer believes about each gate (the map corners with its current offsets, and how
uncertain they are). It never sees object ids or the true poses.

For each gate predicted in view (centre in front of the camera, inside the image, within
``max_range``), the nearest ``max_candidates`` first:

1. **Points**: the cloud points within the gate's half-diagonal plus its search radius
   ``rho = clamp(3 sigma, 0, max_search)`` of the predicted centre (``sigma``: the gate's
   position std), above the floor; at most ``max_points`` of them (a fixed pseudo-random
   priority per pixel, so a gate's fit never depends on the rest of the batch).
2. **Coarse search** (only when ``rho`` > ``fine_radius``): the frame model is slid over a grid
   of horizontal translations (step ``grid_step``) within ``rho``, scoring the points within
   ``inlier_m`` of its surface (by voting, :meth:`GateDetector._coarse`). The best cell is kept
   only when it is unambiguous: the best score beyond 1.5 m of it must be below ``ambiguity``
   times its own (a neighbouring gate or a wall would otherwise be taken for the one sought).
3. **Fit**: Gauss-Newton on the point-to-frame signed distances over the gate's pose (dx, dy,
   dz, a turn about the vertical, and a pitch about its top bar and a roll in its plane from
   the believed ones: :func:`fitted`, at most ``max_tilt``), damped, with shrinking inlier
   bands. Until 2026-11-30 the frame model stood upright at the believed yaw (as the world
   drew every gate's bars then, whatever its corners): once the bars of a ``moved`` course's
   gate (pitched and rolled up to 15 deg) stood where its corners are, that model returned
   them 0.14-0.56 m off at 6 m, this one within 0.1 m (``tests/test_gate_detector.py``).
   Before each step the opening is measured from its **inner edges**
   (:meth:`GateDetector._edges`): a real course's gate need not be the size the racer
   believes (the ``resized`` courses scale each opening's width and height by U(0.8, 1.2) and
   widen its bars up to 3x). Where both side bars hold points, the half width is half the
   distance between their inner edges and the frame is centred between them; the same for the
   height with the top and the bottom bar; one bar alone trades size against a shift, so the
   size then stays the believed one. The bar width stays the briefed one: points on a bar's
   face cannot tell a wider bar from a wider opening, its inner edge can. A fit is kept when at
   least ``min_inliers`` points lie within ``inlier_m`` of the fitted frame, some of them on a
   horizontal and some on a vertical bar (a lone bar could slide along its length: not a
   detection).
4. **Corners**: the believed corners scaled in the gate's plane to the measured opening,
   turned from the believed frame to the fitted one and shifted, so the filter's size and
   tilt states learn from the images.
   Before (until 2026-11-30) the detector fitted the briefed size and returned the believed
   corners moved: a resized gate's corners came back at the believed size, 0.2-0.4 m off at
   6 m, a bias the filter (1.5 px assumed) absorbed into the vehicle's attitude and position.

The frame model is the gate's opening (width x height: the believed corners') with bars of
``border`` width (the briefed one) and ``depth`` thickness, as
:func:`volary.worlds.primitives.gate_boxes` builds it: its signed distance is that of a
rectangular ring extruded along the gate normal (Quilez's box and ring distances; exact outside,
a lower bound inside).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.sensors.rays import check_positive_int

POSE = 6  # fitted pose parameters: dx, dy, dz (m), dyaw, dpitch, droll (rad)


@dataclass(frozen=True)
class GateDetections:
    """Gates found in one frame, C candidate slots per env."""

    corners: Tensor  # (N, C, 4, 3) m, fitted corners in the racer's estimated world frame
    gate: Tensor  # (N, C) int64, the map index of the gate sought in that slot (-1: none)
    ok: Tensor  # (N, C) bool, a detection
    inliers: Tensor  # (N, C) int64, points within inlier_m of the fitted frame


@functools.lru_cache(maxsize=8)
def _priority(p: int) -> Tensor:
    """(P,) float32: each pixel's fixed sampling priority, a seeded random permutation of the
    pixels (no ties, well mixed over the image, the same for every env and batch)."""
    gen = torch.Generator().manual_seed(0x6A7E)
    return torch.randperm(p, generator=gen).float()  # exact in float32 below 2^24 pixels


def rotate(R: Tensor, v: Tensor) -> Tensor:
    """``R (..., 3, 3)`` applied to vectors ``v (..., P, 3)``, elementwise (no batched BLAS,
    whose summation order can follow the batch size): an env's result never depends on the
    batch."""
    rows = [R[..., i, 0, None] * v[..., 0] + R[..., i, 1, None] * v[..., 1]
            + R[..., i, 2, None] * v[..., 2] for i in range(3)]  # fmt: skip
    return torch.stack(rows, -1)


def _mm(A: Tensor, B: Tensor) -> Tensor:
    """``A @ B`` for stacks of 3 x 3 matrices, elementwise (no batched BLAS: see :func:`rotate`)."""
    return (A[..., :, :, None] * B[..., None, :, :]).sum(-2)


def gate_axes(corners: Tensor) -> Tensor:
    """(..., 3, 3) a gate's frame from its corners (..., 4, 3), batched (the torch form of
    :func:`volary.worlds.primitives.gate_frame`; corners top-left, top-right,
    bottom-right, bottom-left): the columns are the unit vector along the top bar, the normal
    and the in-plane up (orthogonal to the first), a right-handed frame (upright: the normal is
    horizontal, ``up`` is +z)."""
    a = corners[..., 1, :] - corners[..., 0, :]
    a = a / a.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    u = (corners[..., 0, :] - corners[..., 3, :]) + (corners[..., 1, :] - corners[..., 2, :])
    u = u - (u * a).sum(-1, keepdim=True) * a
    u = u / u.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    n = torch.linalg.cross(u, a)
    return torch.stack((a, n, u), -1)


def _turn(angle: Tensor, i: int, j: int) -> Tensor:
    """(..., 3, 3) the rotation by ``angle`` (...,) in the plane of axes i -> j."""
    c, s = torch.cos(angle), torch.sin(angle)
    R = torch.zeros(*angle.shape, 3, 3, dtype=angle.dtype)
    k = 3 - i - j
    R[..., k, k] = 1.0
    R[..., i, i], R[..., j, j], R[..., j, i], R[..., i, j] = c, c, s, -s
    return R


def fitted(axes: Tensor, theta: Tensor) -> Tensor:
    """(..., 3, 3) the fitted frame's axes: the believed ``axes`` (..., 3, 3) turned by
    ``theta[..., 3]`` about the world vertical, then pitched by ``theta[..., 4]`` about the top
    bar and rolled by ``theta[..., 5]`` about the normal (both in the gate's own frame).
    ``theta`` (..., 8) = (dx, dy, dz, dyaw, dpitch, droll, d half width, d half height)."""
    world = _turn(theta[..., 3], 0, 1)
    own = _mm(_turn(theta[..., 4], 1, 2), _turn(theta[..., 5], 2, 0))
    return _mm(_mm(world, axes), own)


def _to_local(pts: Tensor, centre: Tensor, frame: Tensor, theta: Tensor) -> Tensor:
    """(..., P, 3) world points ``pts`` (..., P, 3) in a frame of axes ``frame`` (..., 3, 3) at
    ``centre`` (..., 3) shifted by ``theta[..., :3]``: (along the top bar, along the normal,
    up)."""
    return rotate(frame.transpose(-1, -2), pts - (centre + theta[..., :3])[..., None, :])


def _box2(a: Tensor, z: Tensor, ha: Tensor, hz: Tensor) -> Tensor:
    """Signed distance to a centred rectangle of half sizes (ha, hz) in the (a, z) plane."""
    dx, dz = a.abs() - ha, z.abs() - hz
    out = torch.sqrt(dx.clamp_min(0) ** 2 + dz.clamp_min(0) ** 2)
    return out + torch.maximum(dx, dz).clamp_max(0)


def frame_sdf(local: Tensor, half_w: Tensor, half_h: Tensor, border: Tensor, half_d: Tensor
              ) -> Tensor:  # fmt: skip
    """Signed distance (m) of gate-local points (..., 3) = (along the top bar, along the normal,
    up) to a gate frame: the ring between the opening (2 half_w x 2 half_h) and the outer edge
    (``border`` wider) extruded over +-half_d along the normal (module docstring). Sizes
    broadcast against ``local[..., 0]``."""
    a, n, z = local.unbind(-1)
    outer = _box2(a, z, half_w + border, half_h + border)
    ring = torch.maximum(outer, -_box2(a, z, half_w, half_h))
    slab = n.abs() - half_d
    out = torch.sqrt(ring.clamp_min(0) ** 2 + slab.clamp_min(0) ** 2)
    return out + torch.maximum(ring, slab).clamp_max(0)


class GateDetector:
    """Model-based gate detection in a world-frame point cloud (module docstring).

    ``corners`` (G, 4, 3): the map's gate corners (nominal; only the frame sizes are taken from
    them), ``border`` and ``depth`` (G,) m: each frame's bar width and thickness."""

    def __init__(
        self,
        corners: Tensor,
        border: Tensor,
        depth: Tensor,
        *,
        max_candidates: int = 3,
        max_range: float = 25.0,
        min_range: float = 1.0,
        max_points: int = 768,
        max_search: float = 5.0,
        fine_radius: float = 0.3,
        grid_step: float = 0.25,
        inlier_m: float = 0.15,
        min_inliers: int = 25,
        ambiguity: float = 0.7,
        floor_z: float = 0.0,
        floor_margin: float = 0.3,
        iters: int = 6,
        max_resize: float = 0.3,
        max_border: float = 4.0,
        edge_quantile: float = 0.05,
        damping: float = 1.0,
        max_tilt: float = 0.5,
    ) -> None:
        if corners.ndim != 3 or tuple(corners.shape[1:]) != (4, 3):
            raise ConfigError(f"corners: expected (G, 4, 3), got {tuple(corners.shape)}")
        for name, x, lo, hi in (("max_resize", max_resize, 0.0, 0.99),
                                ("max_border", max_border, 1.0, math.inf),
                                ("edge_quantile", edge_quantile, 0.0, 0.5),
                                ("damping", damping, 0.0, math.inf),
                                ("max_tilt", max_tilt, 0.0, math.pi / 4)):  # fmt: skip
            if not (math.isfinite(x) and lo <= x <= hi):
                raise ConfigError(f"{name}: expected a value in [{lo}, {hi}], got {x!r}")
        check_positive_int("gate detector", max_candidates=max_candidates,
                           max_points=max_points, min_inliers=min_inliers, iters=iters)  # fmt: skip
        for name, x in (("max_range", max_range), ("grid_step", grid_step),
                        ("inlier_m", inlier_m)):  # fmt: skip
            if not (math.isfinite(x) and x > 0):
                raise ConfigError(f"{name}: expected a value > 0, got {x!r}")
        c = corners.to(torch.float64)
        half_w = (c[:, 1] - c[:, 0]).norm(dim=-1) / 2  # the nominal opening: only the reach
        half_h = (c[:, 2] - c[:, 1]).norm(dim=-1) / 2  # (the fit starts from the believed one)
        self.border = torch.as_tensor(border, dtype=torch.float64).expand(c.shape[0])
        self.half_d = torch.as_tensor(depth, dtype=torch.float64).expand(c.shape[0]) / 2
        self.c, self.max_range, self.min_range = max_candidates, max_range, min_range
        self.max_points, self.max_search, self.fine_radius = max_points, max_search, fine_radius
        self.grid_step, self.inlier_m, self.min_inliers = grid_step, inlier_m, min_inliers
        self.ambiguity, self.iters = ambiguity, iters
        self.max_resize, self.edge_quantile, self.damping = max_resize, edge_quantile, damping
        self.max_tilt = max_tilt  # rad, the fitted pitch and roll from the believed ones
        # a Gauss-Newton step moves the frame at most 1 m and turns it at most 0.2 rad
        self._step_max = torch.tensor([1.0, 1.0, 1.0, 0.2, 0.2, 0.2], dtype=torch.float64)
        # points are gathered as far as the largest frame the fit may reach: the opening
        # max_resize larger, bars up to max_border times the briefed width
        self.reach_radius = torch.sqrt(
            ((1 + max_resize) * half_w + max_border * self.border) ** 2
            + ((1 + max_resize) * half_h + max_border * self.border) ** 2 + self.half_d**2
        )  # fmt: skip
        self.floor = floor_z + floor_margin

    # ---- the frame model ----------------------------------------------------------------------
    def _sdf(
        self, pts: Tensor, g: Tensor, centre: Tensor, axes: Tensor, theta: Tensor, size: Tensor
    ) -> Tensor:
        """(..., P) signed distances of world points ``pts`` (..., P, 3) to gate ``g``'s frame
        at ``centre`` (..., 3) with the believed ``axes`` (..., 3, 3) and believed half width,
        half height and bar width ``size`` (..., 3), moved by ``theta`` (..., 8) (:func:`fitted`)
        and its opening resized by (d half width, d half height)."""
        local = _to_local(pts, centre, fitted(axes, theta), theta)
        dims = torch.cat((size[..., :2] + theta[..., 6:8], size[..., 2:]), -1)[..., None, :]
        return frame_sdf(local, dims[..., 0], dims[..., 1], dims[..., 2],
                         self.half_d[g][..., None])  # fmt: skip

    # ---- detection ----------------------------------------------------------------------------
    def __call__(
        self,
        points: Tensor,
        predicted: Tensor,
        sigma: Tensor,
        cam_pos: Tensor,
        r_wc: Tensor,
        intrinsics: Tensor,
        size: tuple[int, int],
    ) -> GateDetections:
        """Detect gates in ``points`` (N, P, 3) world frame, NaN where a pixel has no depth.

        ``predicted`` (N, G, 4, 3): each gate's corners as the racer believes them; ``sigma``
        (N, G) m: the std of each gate's horizontal position; ``cam_pos`` (N, 3), ``r_wc``
        (N, 3, 3), ``intrinsics`` (fx, fy, cx, cy) and ``size`` (width, height) px: the camera
        as estimated, for the in-view test."""
        pts = points.to(torch.float64)
        n = pts.shape[0]
        g, centre, axes, rho = self._candidates(predicted, sigma, cam_pos, r_wc, intrinsics, size)
        yaw = torch.atan2(axes[..., 1, 0], axes[..., 0, 0])
        sel, have = self._points(pts, g, centre, rho)  # (N, C, M, 3), (N, C, M)
        believed = self._believed(predicted, g.clamp_min(0))  # (N, C, 3)
        theta = torch.zeros(n, self.c, 8, dtype=torch.float64)
        coarse = (g >= 0) & (rho > self.fine_radius)
        found = g >= 0
        if bool(coarse.any()):
            shift, unique = self._coarse(sel[coarse], have[coarse], g[coarse], centre[coarse],
                                         yaw[coarse], rho[coarse], believed[coarse])  # fmt: skip
            theta[coarse] = torch.cat((shift, torch.zeros_like(shift)), -1)
            found = found.clone()
            found[coarse] = unique
        theta, inl, pinned = self._fit(sel, have, g.clamp_min(0), centre, axes, theta, believed)
        ok = found & (inl >= self.min_inliers) & pinned
        ok = ok & (theta[..., :2].norm(dim=-1) <= rho + 2 * self.inlier_m)
        corners = self._moved(predicted, g.clamp_min(0), centre, axes, theta, believed)
        return GateDetections(corners, g, ok, inl)

    def _believed(self, predicted: Tensor, g: Tensor) -> Tensor:
        """(N, C, 3) each candidate's believed half width and half height (from the believed
        corners: the filter's size estimate) and its briefed bar width."""
        p = predicted.to(torch.float64).gather(1, g[..., None, None].expand(-1, -1, 4, 3))
        hw = (p[:, :, 1] - p[:, :, 0]).norm(dim=-1) / 2
        hh = (p[:, :, 2] - p[:, :, 1]).norm(dim=-1) / 2
        return torch.stack((hw, hh, self.border[g]), -1)

    def _candidates(
        self, predicted: Tensor, sigma: Tensor, cam_pos: Tensor, r_wc: Tensor,
        intrinsics: Tensor, size: tuple[int, int],
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:  # fmt: skip
        """The nearest ``max_candidates`` gates in view: map index (N, C) (-1: none), predicted
        centre (N, C, 3), believed axes (N, C, 3, 3) (:func:`gate_axes`) and search radius
        (N, C)."""
        p = predicted.to(torch.float64)
        centre = p.mean(2)  # (N, G, 3)
        x_c = rotate(r_wc.to(torch.float64).transpose(1, 2), centre - cam_pos[:, None])
        z = x_c[..., 2]
        fx, fy, cx, cy = intrinsics.to(torch.float64).tolist()
        zs = z.clamp_min(1e-6)
        u, v = fx * x_c[..., 0] / zs + cx, fy * x_c[..., 1] / zs + cy
        w, h = size
        inside = (u > -0.1 * w) & (u < 1.1 * w) & (v > -0.1 * h) & (v < 1.1 * h)
        view = (z > self.min_range) & (z < self.max_range) & inside
        key = torch.where(view, z, torch.full_like(z, math.inf))
        kk = min(self.c, key.shape[1])
        near = torch.topk(key, kk, dim=1, largest=False, sorted=True)
        g = torch.where(torch.isfinite(near.values), near.indices, -1)
        if kk < self.c:
            g = torch.cat((g, torch.full((g.shape[0], self.c - kk), -1, dtype=g.dtype)), 1)
        gi = g.clamp_min(0)
        cen = centre.gather(1, gi[..., None].expand(-1, -1, 3))
        axes = gate_axes(p.gather(1, gi[..., None, None].expand(-1, -1, 4, 3)))
        rho = (3 * sigma.to(torch.float64).gather(1, gi)).clamp(0.0, self.max_search)
        return g, cen, axes, rho

    def _points(self, pts: Tensor, g: Tensor, centre: Tensor, rho: Tensor) -> tuple[Tensor, Tensor]:
        """Up to ``max_points`` cloud points near each candidate (N, C, M, 3) and which of the M
        slots hold one (N, C, M)."""
        n, p = pts.shape[:2]
        good = torch.isfinite(pts).all(-1) & (pts[..., 2] > self.floor)  # (N, P)
        safe = torch.where(good[..., None], pts, torch.zeros_like(pts))
        reach = (self.reach_radius[g.clamp_min(0)] + rho + self.inlier_m).float()  # (N, C)
        s32, c32 = safe.float(), centre.float()
        d2 = torch.zeros(n, self.c, p, dtype=torch.float32)
        for i in range(3):  # per axis: no (N, C, P, 3) temporary
            d2 += (s32[:, None, :, i] - c32[:, :, None, i]) ** 2
        near = good[:, None] & (d2 < reach[..., None] ** 2) & (g[..., None] >= 0)
        key = torch.where(near, _priority(p), torch.full_like(d2, -1.0))
        m = min(self.max_points, p)
        top = torch.topk(key, m, dim=-1).indices  # (N, C, M)
        have = near.gather(2, top)
        idx = top[..., None].expand(-1, -1, -1, 3)
        sel = safe[:, None].expand(-1, self.c, -1, -1).gather(2, idx)
        return sel, have

    def _coarse(
        self, pts: Tensor, have: Tensor, g: Tensor, centre: Tensor, yaw: Tensor, rho: Tensor,
        size: Tensor,
    ) -> tuple[Tensor, Tensor]:  # fmt: skip
        """Best horizontal shift (K, 4) of each of K candidates on the grid within its radius,
        and whether it is unambiguous (K,), for the believed frame ``size`` (K, 3) (module
        docstring).

        Votes instead of trying every cell: in gate-local axes (a along the top bar, n along
        the normal) a point lies within ``inlier_m`` of a frame shifted by (da, dn) when dn is
        within the bar thickness of its n and da puts its (a, z) on a bar, a box-shaped band
        (the corners' rounding left out), so each point adds one vote to a rectangle of cells
        (two for the side bars) through a difference array and two cumulative sums: O(points +
        cells), not O(points x cells)."""
        k, m = pts.shape[:2]
        steps = int(math.ceil(self.max_search / self.grid_step))  # one grid for every batch
        side = 2 * steps + 1
        rel = pts - centre[:, None]
        cy, sy = torch.cos(yaw)[:, None], torch.sin(yaw)[:, None]
        a = cy * rel[..., 0] + sy * rel[..., 1]
        nn = -sy * rel[..., 0] + cy * rel[..., 1]
        z = rel[..., 2].abs()
        hw, hh, b = (size[:, i, None] for i in range(3))  # the believed frame
        hd, tau = self.half_d[g][:, None], self.inlier_m
        bars = have & (z >= hh - tau) & (z <= hh + b + tau)  # the top or bottom bar's height
        sides = have & (z < hh - tau)  # between them: the side bars
        n_lo, n_hi = nn - hd - tau, nn + hd + tau
        boxes = [  # (mask, da_lo, da_hi): shifts that put the point on a bar
            (bars, a - hw - b - tau, a + hw + b + tau),
            (sides, a - hw - b - tau, a - hw + tau),  # on the +a side bar
            (sides, a + hw - tau, a + hw + b + tau),  # on the -a side bar
        ]
        diff = torch.zeros(k, side + 1, side + 1, dtype=torch.float64)
        flat = diff.view(k, -1)
        row = torch.arange(k)[:, None].expand(k, m)

        def cell(x: Tensor, up: bool) -> Tensor:
            """First (``up`` False) or last cell index of an interval's end, clamped."""
            if up:
                return (torch.floor(x / self.grid_step) + steps).clamp(-1, side - 1).long()
            return (torch.ceil(x / self.grid_step) + steps).clamp(0, side).long()

        j0, j1 = cell(n_lo, False), cell(n_hi, True)
        for mask, lo, hi in boxes:
            i0, i1 = cell(lo, False), cell(hi, True)
            ok = mask & (i0 <= i1) & (j0 <= j1)
            w = ok.double()
            for ii, jj, sgn in ((i0, j0, 1.0), (i1 + 1, j0, -1.0), (i0, j1 + 1, -1.0),
                                (i1 + 1, j1 + 1, 1.0)):  # fmt: skip
                idx = ii.clamp(0, side) * (side + 1) + jj.clamp(0, side)
                flat.index_put_((row, idx), sgn * w, accumulate=True)
        score = diff.cumsum(1).cumsum(2)[:, :side, :side].reshape(k, -1)
        ax = torch.arange(-steps, steps + 1, dtype=torch.float64) * self.grid_step
        ga, gn = torch.meshgrid(ax, ax, indexing="ij")
        cells = torch.stack((ga.reshape(-1), gn.reshape(-1)), -1)  # (T, 2) = (da, dn)
        reach = cells.norm(dim=-1)[None] <= rho[:, None] + 1e-9
        score = torch.where(reach, score, -1.0)
        best = score.argmax(1)
        top = score.gather(1, best[:, None])[:, 0]
        far = (cells[None] - cells[best][:, None]).norm(dim=-1) > 1.5
        second = torch.where(far & reach, score, -1.0).amax(1)
        unique = (top > 0) & (second < self.ambiguity * top)
        da, dn = cells[best].unbind(-1)
        shift = torch.zeros(k, 4, dtype=torch.float64)
        shift[:, 0] = da * cy[:, 0] - dn * sy[:, 0]
        shift[:, 1] = da * sy[:, 0] + dn * cy[:, 0]
        return shift, unique

    def _fit(
        self,
        pts: Tensor,
        have: Tensor,
        g: Tensor,
        centre: Tensor,
        axes: Tensor,
        theta: Tensor,
        size: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Gauss-Newton on the frame distances over the pose part of ``theta`` (N, C, 8), each
        step followed by the opening's edges (:meth:`_edges`), from the believed ``size``
        (N, C, 3): the fit, its inlier count, and whether it is pinned in every direction
        (inliers on a horizontal and on a vertical bar: a frame seen only along its top bar
        could slide along it)."""
        eps = 1e-5
        eye = torch.eye(POSE, dtype=torch.float64)
        unit = torch.eye(theta.shape[-1], dtype=torch.float64)  # the pose's columns first
        bands = torch.linspace(0.5, self.inlier_m, self.iters, dtype=torch.float64).tolist()
        for band in bands:
            theta = self._edges(pts, have, g, centre, axes, theta, size, max(band, self.inlier_m))
            r = self._sdf(pts, g, centre, axes, theta, size)  # (N, C, M)
            w = (have & (r.abs() < max(band, self.inlier_m))).double()
            J = torch.stack(
                [
                    (self._sdf(pts, g, centre, axes, theta + eps * unit[j], size) - r) / eps
                    for j in range(POSE)
                ],
                -1,
            )  # (N, C, M, POSE) fmt: skip
            Jw = J * w[..., None]
            A = (Jw[..., :, None] * J[..., None, :]).sum(-3) + self.damping * eye  # no BLAS:
            # the sums do not depend on the batch's shape. Damped (Levenberg): once the edges
            # have sized the opening, the points on the bars' faces hardly pin the frame along
            # them, and an undamped step there follows noise
            b = (Jw * r[..., None]).sum(-2)
            step = torch.linalg.solve(A, -b[..., None])[..., 0]
            pose = theta[..., :POSE] + step.clamp(-self._step_max, self._step_max)
            tilt = pose[..., 4:POSE].clamp(-self.max_tilt, self.max_tilt)
            theta = torch.cat((pose[..., :4], tilt, theta[..., POSE:]), -1)
        theta = self._edges(pts, have, g, centre, axes, theta, size, self.inlier_m)
        r = self._sdf(pts, g, centre, axes, theta, size)
        inl = have & (r.abs() < self.inlier_m)
        a, z = self._local(pts, centre, axes, theta)
        hw, hh = (size[..., :2] + theta[..., 6:8]).unbind(-1)
        few = self.min_inliers // 5

        def seen(mask: Tensor) -> Tensor:
            return (inl & mask).sum(-1) >= few

        horizontal = seen(z.abs() > hh[..., None] - self.inlier_m)
        vertical = seen(a.abs() > hw[..., None] - self.inlier_m)
        return theta, inl.sum(-1), horizontal & vertical

    def _local(self, pts: Tensor, centre: Tensor, axes: Tensor, theta: Tensor
               ) -> tuple[Tensor, Tensor]:  # fmt: skip
        """(N, C, M) each point's coordinates along the moved frame's top bar and its up."""
        local = _to_local(pts, centre, fitted(axes, theta), theta)
        return local[..., 0], local[..., 2]

    def _edges(self, pts: Tensor, have: Tensor, g: Tensor, centre: Tensor, axes: Tensor,
               theta: Tensor, size: Tensor, band: float) -> Tensor:  # fmt: skip
        """``theta`` with the opening re-measured from its inner edges: where both side bars
        hold ``min_inliers // 5`` points within ``band`` of the frame (on the middle of the
        bar, clear of the crossing bars at any size within ``max_resize``), the half width is half
        the distance between their inner edges (the ``edge_quantile`` of the points nearest
        the centre) and the centre moves to their middle; the same with the top and the bottom
        bar for the half height. The bar width stays the briefed one: the points on a bar's
        face cannot tell a wider bar from a wider opening, its inner edge can."""
        r = self._sdf(pts, g, centre, axes, theta, size)
        near = have & (r.abs() < band)
        a, z = self._local(pts, centre, axes, theta)
        hw, hh = (size[..., :2] + theta[..., 6:8]).unbind(-1)
        few = self.min_inliers // 5
        out = theta.clone()
        frame = fitted(axes, theta)
        along, up = frame[..., 0], frame[..., 2]
        for k, (x, other, half_other, axis) in enumerate(((a, z, hh, along), (z, a, hw, up))):
            # a bar's middle part only: clear of the crossing bars whatever the size
            clear = (1 - self.max_resize) * half_other[..., None] - self.inlier_m
            on = near & (other.abs() < clear)
            lo_edge, n_lo = self._inner(x, on & (x < 0), low_side=True)
            hi_edge, n_hi = self._inner(x, on & (x > 0), low_side=False)
            half = (hi_edge - lo_edge) / 2
            base = size[..., k]
            half = torch.minimum(torch.maximum(half, (1 - self.max_resize) * base),
                                 (1 + self.max_resize) * base)  # fmt: skip
            both = (n_lo >= few) & (n_hi >= few)
            mid = torch.where(both, (hi_edge + lo_edge) / 2, 0.0)
            out[..., 6 + k] = torch.where(both, half - base, theta[..., 6 + k])
            out[..., :3] = out[..., :3] + mid[..., None] * axis
        return out

    def _inner(self, x: Tensor, mask: Tensor, low_side: bool) -> tuple[Tensor, Tensor]:
        """(N, C) the inner edge of the bar whose points ``mask`` are on the negative
        (``low_side``) or positive side of the centre along coordinate ``x`` (N, C, M): the
        ``edge_quantile`` of their |x| from the smallest; and their count."""
        n = mask.sum(-1)
        mag = torch.where(mask, x.abs(), math.inf)
        ordered = mag.sort(-1).values
        j = (self.edge_quantile * (n - 1).clamp_min(0).double()).long()
        edge = ordered.gather(-1, j[..., None])[..., 0]
        edge = torch.where(n > 0, edge, 0.0)
        return (-edge if low_side else edge), n

    def _moved(self, predicted: Tensor, g: Tensor, centre: Tensor, axes: Tensor, theta: Tensor,
               size: Tensor) -> Tensor:  # fmt: skip
        """(N, C, 4, 3) the predicted corners of each candidate scaled in the gate's plane to
        the fitted opening, turned about its centre from the believed ``axes`` to the fitted
        ones and shifted by (dx, dy, dz)."""
        p = predicted.to(torch.float64).gather(1, g[..., None, None].expand(-1, -1, 4, 3))
        rel = p - centre[:, :, None]
        for i, (j0, j1) in enumerate(((0, 1), (1, 2))):  # along the top bar, then the side
            axis = p[:, :, j1] - p[:, :, j0]
            axis = axis / axis.norm(dim=-1, keepdim=True).clamp_min(1e-9)
            along = (rel * axis[:, :, None]).sum(-1, keepdim=True)
            grow = (theta[..., 6 + i] / size[..., i].clamp_min(1e-9))[..., None, None]
            rel = rel + along * grow * axis[:, :, None]
        turn = _mm(fitted(axes, theta), axes.transpose(-1, -2))  # believed -> fitted, world
        return centre[:, :, None] + theta[:, :, None, :3] + rotate(turn, rel)


__all__ = ["GateDetections", "GateDetector", "frame_sdf", "rotate"]
