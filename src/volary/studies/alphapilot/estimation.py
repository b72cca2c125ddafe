"""Error-state EKF for a racer that sees gate beacons: IMU, beacon pixels, a downward range.

The filter a sensors-only AlphaPilot contestant needs (paper 001 Sec. V-C: IMU + IR beacons,
optionally the downward time-of-flight ranger), batched over N envs in float64. The unknown
gate perturbations are part of the state, so it is a small SLAM whose landmarks are the gates:
the gates off the course stand where the nominal map says (known landmarks), each course gate
may differ from its nominal pose and size by an unknown offset of :data:`GATE_PARAMS` values:
a translation, a rotation about its centre and a scale of its opening along its two in-plane
axes (the published bounds give the prior of the horizontal shift and the yaw; the rest have
the racer's own priors: a gate on a real course is not only the nominal one moved rigidly).

State (nominal + error, Sola, "Quaternion kinematics for the error-state Kalman filter", 2017,
Sec. 5-7, local attitude error): p, v (world), q (body -> world), accelerometer bias b_a, gyro
bias b_g; then per course gate l its offset o_l = (t, phi, s_u, s_w): translation t (m),
rotation vector phi (rad, world axes, about the gate's nominal centre) and the relative scales of
its opening along its horizontal in-plane axis u and the axis w = n x u. Error vector
[dp, dv, dtheta, db_a, db_g, do_1 .. do_L], 15 + 8 L.

Propagation with the IMU sample (a_m, w_m) over dt (Sola eq. 260, 268-270):
    a = R (a_m - b_a) + g,  p += v dt + a dt^2 / 2,  v += a dt,  q = q (x) Exp((w_m - b_g) dt)
    F: dp/dv = I, dv/dtheta = -R [a_m - b_a]x, dv/db_a = -R, dtheta/dtheta = -[w_m - b_g]x,
    dtheta/db_g = -I; Phi = I + F dt; Q from the IMU's per-sample noise (briefed) and the bias
    walks the filter assumes (typical MEMS values, :data:`ACCEL_BIAS_STD` ...: not briefed).
Only the 15 x 15 vehicle block and its cross terms change in a prediction (the gates are
static), so it costs O(15^2 (15 + 8 L)) per env, not O((15 + 8 L)^3).

Beacon corner k of gate g (nominal corners c0_k = c_g + a_k u + b_k w; course gates offset by o):
    r_k = (1 + s_u) a_k u + (1 + s_w) b_k w,   c_k = c_g + t + Exp(phi) r_k
    x_c = R_BC^T (R^T (c_k - p) - t_BC),   u = fx x/z + cx,  v = fy y/z + cy   (pinhole)
    d x_c / d dp = -R_BC^T R^T,  d x_c / d dtheta = R_BC^T [R^T (c_k - p)]x,
    d c_k / d t = I,  d c_k / d phi = -[Exp(phi) r_k]x J_l(phi) (J_l: SO(3)'s left Jacobian),
    d c_k / d s_u = a_k Exp(phi) u,  d c_k / d s_w = b_k Exp(phi) w,  d x_c / d c_k = R_BC^T R^T.
A frame fuses the ``MAX_CORNERS`` nearest reported corners (predicted depth), a fixed count so
that an env's update does not depend on the rest of the batch. Each corner's 2-D innovation is
gated by its Mahalanobis distance (chi-square, 2 dof) before the joint update, which rejects
false detections and corners the map does not explain.

Downward range to the floor z = ``floor_z`` along -z_B: r = (p_z - floor_z) / R_33, gated the
same way (a gate or obstacle below the vehicle gives a shorter range and is rejected).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from volary.math.quaternion import hat, quat_integrate, quat_to_rotmat
from volary.studies.alphapilot.interface import PublishedImu

GRAVITY_W = (0.0, 0.0, -9.81)
CHI2_2DOF = 13.82  # 99.9 % gate for a 2-D innovation
CHI2_1DOF = 10.83  # 99.9 % gate for a scalar innovation
CHI2_3DOF = 16.27  # 99.9 % gate for a 3-D innovation (pixel and depth)
VEHICLE = 15  # error-state size of the vehicle block
GATE_PARAMS = 8  # offset values per course gate: translation 3, rotation 3, scale 2
MAX_CORNERS = 16  # beacon corners fused per frame (the nearest; a fixed size per env)
# IMU bias model: assumed (typical MEMS IMU), not briefed (the 2019 challenge published the IMU's
# white noise only). Consumer MEMS parts (InvenSense MPU-6000 class datasheets: zero-g offset
# +-50 mg, zero-rate offset +-20 deg/s before calibration) and the bias walks visual-inertial
# estimators commonly assume for them; the turn-on priors are wide on purpose (the filter
# learns the bias on the start pad), the walks err on the large side.
ACCEL_BIAS_STD = 0.2  # m/s^2 per axis, turn-on bias prior (~20 mg)
GYRO_BIAS_STD = 0.1  # rad/s per axis, turn-on bias prior (~6 deg/s)
ACCEL_BIAS_WALK = 2e-3  # m/s^3/sqrt(Hz)
GYRO_BIAS_WALK = 5e-4  # rad/s^2/sqrt(Hz)


@dataclass(frozen=True)
class Camera:
    """A pinhole camera on the body: (fx, fy, cx, cy) px, R_BC and t_BC (m)."""

    intrinsics: Tensor
    rotation: Tensor
    translation: Tensor

    def as_f64(self) -> Camera:
        f64 = torch.float64
        return Camera(self.intrinsics.to(f64), self.rotation.to(f64), self.translation.to(f64))


@dataclass(frozen=True)
class GateMap:
    """The nominal gates a filter knows: corners (G, 4, 3) m, ids (G,) (beacon object ids),
    and for each gate the index of its offset state (-1: a fixed gate) with the offset's prior
    std (L, GATE_PARAMS) (m, rad, relative scale; module docstring)."""

    corners: Tensor
    ids: Tensor
    state_of: Tensor  # (G,) int64, offset-state index l or -1
    offset_std: Tensor  # (L, GATE_PARAMS)

    @property
    def n_offsets(self) -> int:
        return int(self.offset_std.shape[0])


class GateEkf:
    """Batched error-state EKF over N envs (module docstring). All tensors float64."""

    def __init__(
        self,
        gates: GateMap,
        pos: Tensor,
        quat: Tensor,
        imu: PublishedImu,
        *,
        intrinsics: Tensor,
        camera_rotation: Tensor,
        camera_translation: Tensor,
        pixel_std: float = 1.0,
        range_std: float = 0.05,
        floor_z: float = 0.0,
        process_scale: float = 4.0,
        min_depth: float = 0.5,
        accel_bias_std: float = ACCEL_BIAS_STD,
        gyro_bias_std: float = GYRO_BIAS_STD,
        accel_bias_walk: float = ACCEL_BIAS_WALK,
        gyro_bias_walk: float = GYRO_BIAS_WALK,
        reopen_after: int = 0,
        reopen_scale: float = 3.0,
    ) -> None:
        f64 = torch.float64
        self.n = int(pos.shape[0])
        self.map = GateMap(
            gates.corners.to(f64), gates.ids.long(), gates.state_of.long(),
            gates.offset_std.to(f64),
        )  # fmt: skip
        self.dim = VEHICLE + GATE_PARAMS * self.map.n_offsets
        self.pos, self.vel = pos.to(f64).clone(), torch.zeros(self.n, 3, dtype=f64)
        self.quat = quat.to(f64).clone()
        self.ba, self.bg = torch.zeros(self.n, 3, dtype=f64), torch.zeros(self.n, 3, dtype=f64)
        self.offsets = torch.zeros(self.n, self.map.n_offsets, GATE_PARAMS, dtype=f64)
        std = torch.cat((
            torch.full((6,), 1e-3, dtype=f64),  # position and velocity known at the start
            torch.full((3,), math.radians(1.0), dtype=f64),  # resting on the start pose
            torch.full((3,), max(accel_bias_std, 1e-3), dtype=f64),
            torch.full((3,), max(gyro_bias_std, 1e-4), dtype=f64),
            self.map.offset_std.clamp_min(1e-3).reshape(-1),
        ))  # fmt: skip
        self.P = torch.diag_embed(std * std).expand(self.n, -1, -1).clone()
        self.imu, self.process_scale = imu, process_scale
        self.bias_walk = (accel_bias_walk, gyro_bias_walk)
        self.camera = Camera(intrinsics, camera_rotation, camera_translation).as_f64()
        self.pixel_std, self.range_std, self.floor_z = pixel_std, range_std, floor_z
        self.min_depth = min_depth
        self.g = torch.tensor(GRAVITY_W, dtype=f64)
        self.centres = self.map.corners.mean(1)  # (G, 3)
        self.axes, self.ab = _gate_axes(self.map.corners, self.centres)  # (G, 2, 3), (G, 4, 2)
        # one-hot placement of each gate's offset columns in the error state (G, P, dim)
        g = self.map.corners.shape[0]
        place = torch.zeros(g, GATE_PARAMS, self.dim, dtype=f64)
        for i, l in enumerate(self.map.state_of.tolist()):
            if l >= 0:
                for j in range(GATE_PARAMS):
                    place[i, j, VEHICLE + GATE_PARAMS * l + j] = 1.0
        self._place = place
        self.rejected = torch.zeros(self.n, dtype=torch.int64)  # gated-out corners, running
        # a course gate whose corners are all gated out frame after frame is not where the
        # prior says: its offset is re-opened (_reopen)
        self.reopen_after, self.reopen_scale = int(reopen_after), float(reopen_scale)
        self._missed = torch.zeros(self.n, self.map.n_offsets, dtype=torch.int64)
        self.reopened = torch.zeros(self.n, dtype=torch.int64)  # re-opened gates, running
        self._rotated_of: tuple[Tensor, tuple[Tensor, Tensor]] | None = None  # (_rotated)

    # ---- state views --------------------------------------------------------------------------
    @property
    def rotation(self) -> Tensor:
        return quat_to_rotmat(self.quat)

    def gate_corners(self, offsets: Tensor | None = None) -> Tensor:
        """(N, G, 4, 3) m: every gate's corners as the filter estimates them now (or for the
        per-gate ``offsets`` (N, G, P) of :meth:`_gate_offsets`)."""
        o = self._gate_offsets() if offsets is None else offsets
        rot, rel = self._rotated(o)
        return self.centres[None, :, None, :] + o[..., None, 0:3] + rel

    def _rotated(self, o: Tensor) -> tuple[Tensor, Tensor]:
        """(Exp(phi) (N, G, 3, 3), the corners' rotated and scaled offsets from the nominal
        centre Exp(phi) r_k (N, G, 4, 3)) for offsets ``o`` (N, G, P) (module docstring); a beacon
        frame asks twice for the same offsets (its corners, then their Jacobians): computed once."""
        cached = self._rotated_of
        if cached is not None and cached[0] is o:
            return cached[1]
        n, g = o.shape[:2]
        ident = torch.zeros(n * g, 4, dtype=o.dtype)
        ident[:, 0] = 1.0
        rot = quat_to_rotmat(quat_integrate(ident, o[..., 3:6].reshape(-1, 3), 1.0))
        rot = rot.reshape(n, g, 3, 3)
        a, b = self.ab[None, ..., 0], self.ab[None, ..., 1]  # (1, G, 4)
        u, w = self.axes[None, :, None, 0], self.axes[None, :, None, 1]  # (1, G, 1, 3)
        r = ((1 + o[..., 6:7]) * a)[..., None] * u + ((1 + o[..., 7:8]) * b)[..., None] * w
        out = rot, torch.einsum("ngij,ngkj->ngki", rot, r)
        self._rotated_of = (o, out)
        return out

    def _gate_offsets(self) -> Tensor:
        """(N, G, P) offsets per gate (zeros for the fixed ones)."""
        l = self.map.state_of
        zero = torch.zeros(self.n, 1, GATE_PARAMS, dtype=self.offsets.dtype)
        padded = torch.cat((self.offsets, zero), 1)
        return padded[:, torch.where(l >= 0, l, self.map.n_offsets)]

    # ---- propagation --------------------------------------------------------------------------
    def predict(self, accel: Tensor, gyro: Tensor, dt: float) -> None:
        """Propagate with one IMU sample (body specific force m/s^2, body rate rad/s) over dt."""
        a_b = accel.to(self.pos.dtype) - self.ba
        w_b = gyro.to(self.pos.dtype) - self.bg
        self.quat = quat_integrate(self.quat, w_b, dt)
        R = self.rotation  # the IMU reads at the end of the interval: f = R(t + dt)^T (a - g)
        a_w = (R @ a_b[..., None])[..., 0] + self.g
        self.pos = self.pos + self.vel * dt + 0.5 * a_w * dt * dt
        self.vel = self.vel + a_w * dt
        phi = self._transition(R, a_b, w_b, dt)  # (N, 15, 15)
        P = self.P
        ss = phi @ P[:, :VEHICLE, :VEHICLE] @ phi.transpose(1, 2) + self._process(dt)
        sg = phi @ P[:, :VEHICLE, VEHICLE:]
        P = P.clone()
        P[:, :VEHICLE, :VEHICLE] = 0.5 * (ss + ss.transpose(1, 2))
        P[:, :VEHICLE, VEHICLE:] = sg
        P[:, VEHICLE:, :VEHICLE] = sg.transpose(1, 2)
        self.P = P

    def _transition(self, R: Tensor, a_b: Tensor, w_b: Tensor, dt: float) -> Tensor:
        eye = torch.eye(3, dtype=R.dtype).expand(self.n, 3, 3)
        phi = torch.eye(VEHICLE, dtype=R.dtype).repeat(self.n, 1, 1)
        phi[:, 0:3, 3:6] = eye * dt
        phi[:, 3:6, 6:9] = -(R @ hat(a_b)) * dt
        phi[:, 3:6, 9:12] = -R * dt
        phi[:, 6:9, 6:9] = eye - hat(w_b) * dt
        phi[:, 6:9, 12:15] = -eye * dt
        return phi

    def _process(self, dt: float) -> Tensor:
        """Q (15, 15): per-sample IMU noise integrated over dt (the reading is one sample held
        over the control period), bias random walks; ``process_scale`` inflates the white
        parts for what the model leaves out (held samples, integration)."""
        c, s = self.imu, self.process_scale
        rate = c.rate_hz
        va = (c.accel_noise_density**2 * rate) * dt * dt * s
        vg = (c.gyro_noise_density**2 * rate) * dt * dt * s
        q = torch.zeros(VEHICLE, dtype=self.pos.dtype)
        q[0:3] = va * dt * dt / 4.0
        q[3:6] = va + 1e-6 * dt
        q[6:9] = vg + 1e-8 * dt
        q[9:12] = self.bias_walk[0] ** 2 * dt + 1e-10
        q[12:15] = self.bias_walk[1] ** 2 * dt + 1e-10
        return torch.diag(q)

    # ---- updates ------------------------------------------------------------------------------
    def update_beacons(
        self,
        pixels: Tensor,
        visible: Tensor,
        gate_ids: Tensor,
        corner: Tensor,
        *,
        depth: Tensor | None = None,
        depth_std: Tensor | None = None,
        pixel_std: float | None = None,
        camera: Camera | None = None,
    ) -> Tensor:
        """Fuse one frame of gate corners: ``pixels`` (N, K, 2), ``visible`` (N, K), the gate
        object id and corner index (0..3) of every slot (N, K); optionally each corner's camera
        depth ``depth`` (N, K) m with std ``depth_std`` (N, K) m (a detector that ranges the
        gate, such as stereo). ``pixel_std`` and ``camera`` override the filter's pixel noise and
        camera for this frame (a second camera). Slots of gates not on the map are ignored.
        Returns (N, K) bool: the corners used (gated in)."""
        px_std = self.pixel_std if pixel_std is None else float(pixel_std)
        cam = self.camera if camera is None else camera.as_f64()
        slot_gate = self._gate_index(gate_ids)  # (N, K) index into the map or -1
        use = visible & (slot_gate >= 0) & torch.isfinite(pixels).all(-1)
        if depth is not None:
            if depth_std is None:
                raise ValueError("depth_std: expected (N, K) m with depth")
            use = use & torch.isfinite(depth) & (depth_std > 0)
        if not bool(use.any()):
            return use
        g_all = slot_gate.clamp_min(0)
        offsets = self._gate_offsets()  # (N, G, P), once for this frame
        corners = self.gate_corners(offsets)
        depth_all = self._depths(corners, g_all, corner.long(), cam)  # (N, K) camera z
        use = use & (depth_all > self.min_depth)
        # the MAX_CORNERS nearest usable corners, a fixed count: an env's update never depends
        # on how many corners the other envs of the batch see
        key = torch.where(use, depth_all, torch.full_like(depth_all, math.inf))
        kk = min(MAX_CORNERS, use.shape[1])
        sel = torch.sort(key, dim=1, stable=True).indices[:, :kk]  # (N, k); ties by slot
        m = use.gather(1, sel)
        g = g_all.gather(1, sel)
        k = corner.gather(1, sel).long()
        z = pixels.gather(1, sel[..., None].expand(-1, -1, 2)).to(self.pos.dtype) / px_std
        pred, H, zc, Hz = self._project(g, k, corners, offsets, cam)
        pred, H = pred / px_std, H / px_std  # whitened: unit noise per row
        if depth is not None and depth_std is not None:
            ds = depth_std.gather(1, sel).to(self.pos.dtype).clamp_min(1e-6)
            dz = torch.nan_to_num(depth.gather(1, sel).to(self.pos.dtype)) / ds
            z = torch.cat((z, dz[..., None]), -1)
            pred = torch.cat((pred, (zc / ds)[..., None]), -1)
            H = torch.cat((H, (Hz / ds[..., None])[..., None, :]), -2)
        r = torch.where(m[..., None], z - pred, torch.zeros_like(z))
        # per-corner Mahalanobis gate
        HP = torch.einsum("nkid,nde->nkie", H, self.P)
        rows = H.shape[-2]
        S_kk = torch.einsum("nkie,nkje->nkij", HP, H) + torch.eye(rows, dtype=H.dtype)
        d2 = (r[..., None, :] @ torch.linalg.solve(S_kk, r[..., None]))[..., 0, 0]
        ok = m & (d2 < (CHI2_2DOF if rows == 2 else CHI2_3DOF))
        self.rejected = self.rejected + (m & ~ok).sum(1)
        self._joint_update(H, r, ok, 1.0)
        self._reopen(g, m, ok)
        used = torch.zeros_like(use)
        return used.scatter(1, sel, ok)

    def _reopen(self, g: Tensor, seen: Tensor, ok: Tensor) -> None:
        """Count, per env and course gate, the consecutive frames in which at least three of
        its corners were seen and every one was gated out; after ``reopen_after`` such frames
        (0: never) the gate's offset covariance is reset to its prior inflated by
        ``reopen_scale`` (its correlations with the rest dropped), keeping the estimate: the
        next frames' innovations of a gate far outside its prior then pass the gate (a
        covariance reset, as a filter does after persistent innovation rejections). ``g``
        (N, k) map index, ``seen`` / ``ok`` (N, k) the frame's usable / gated-in corners."""
        n_off = self.map.n_offsets
        if self.reopen_after <= 0 or n_off == 0:
            return
        l = self.map.state_of[g]  # (N, k) offset index or -1
        onehot = torch.nn.functional.one_hot(l.clamp_min(0), n_off) * (l >= 0)[..., None]
        n_seen = (onehot * seen[..., None]).sum(1)  # (N, L)
        n_in = (onehot * (seen & ok)[..., None]).sum(1)
        missed = torch.where(n_in > 0, 0, self._missed + ((n_seen >= 3) & (n_in == 0)).long())
        due = missed >= self.reopen_after
        self._missed = torch.where(due, 0, missed)
        if not bool(due.any()):
            return
        cols = torch.zeros(self.n, self.dim, dtype=torch.bool)  # the re-opened offsets' columns
        cols[:, VEHICLE:] = due.repeat_interleave(GATE_PARAMS, 1)
        var = (self.map.offset_std.clamp_min(1e-3) * self.reopen_scale).reshape(-1) ** 2
        var = torch.cat((torch.zeros(VEHICLE, dtype=var.dtype), var))
        keep = ~cols
        P = self.P * (keep[:, :, None] & keep[:, None, :])
        self.P = P + torch.diag_embed(torch.where(cols, var, 0.0))
        self.reopened = self.reopened + due.sum(1)

    def update_range(self, rng: Tensor, valid: Tensor) -> Tensor:
        """Fuse a downward range (N,) m where ``valid``; returns the (N,) readings used."""
        R = self.rotation
        r33 = R[:, 2, 2]
        ok = valid & (r33 > 0.5) & torch.isfinite(rng)
        h = self.pos[:, 2] - self.floor_z
        pred = h / r33.clamp_min(1e-3)
        H = torch.zeros(self.n, 1, 1, self.dim, dtype=R.dtype)
        H[:, 0, 0, 2] = 1.0 / r33.clamp_min(1e-3)
        # d R33 / d dtheta = -(R^T e_z)^T [e_z]x  (R_true = R Exp(dtheta))
        ez = torch.tensor([0.0, 0.0, 1.0], dtype=R.dtype)
        row = -(R[:, 2, :][:, None, :] @ hat(ez).expand(self.n, 3, 3))[:, 0]
        H[:, 0, 0, 6:9] = -(h / r33.clamp_min(1e-3) ** 2)[:, None] * row
        r = torch.where(ok, rng.to(R.dtype) - pred, torch.zeros_like(pred))[:, None, None]
        S = (H[:, 0] @ self.P @ H[:, 0].transpose(1, 2))[:, 0, 0] + self.range_std**2
        ok = ok & (r[:, 0, 0] ** 2 / S < CHI2_1DOF)
        self._joint_update(H, torch.where(ok[:, None, None], r, 0.0), ok[:, None],
                           self.range_std)  # fmt: skip
        return ok

    def _joint_update(self, H: Tensor, r: Tensor, ok: Tensor, std: float) -> None:
        """Kalman update with the rows of ``ok`` slots (H (N, k, m, dim), r (N, k, m))."""
        n, k, m, d = H.shape
        Hm = torch.where(ok[..., None, None], H, torch.zeros_like(H)).reshape(n, k * m, d)
        rm = torch.where(ok[..., None], r, torch.zeros_like(r)).reshape(n, k * m)
        HP = Hm @ self.P
        S = HP @ Hm.transpose(1, 2) + std * std * torch.eye(k * m, dtype=H.dtype)
        Kt = torch.linalg.solve(S, HP)  # (N, km, dim) = S^-1 H P = K^T
        dx = (Kt * rm[..., None]).sum(1)  # K r, as a sum: a batched matrix-vector product
        # rounds differently for one env and for many
        P = self.P - HP.transpose(1, 2) @ Kt
        # an env with no row in this update keeps its state bit for bit (a null update would
        # still round P's symmetrization and the quaternion's renormalization): whether it is
        # updated must not depend on whether another env of the batch had a measurement
        has = ok.reshape(n, -1).any(1)
        self.P = torch.where(has[:, None, None], 0.5 * (P + P.transpose(1, 2)), self.P)
        self._inject(dx, has)

    def _inject(self, dx: Tensor, has: Tensor | None = None) -> None:
        """Add the error-state correction ``dx`` (N, dim) to the envs where ``has`` (all)."""
        keep = torch.ones(self.n, dtype=torch.bool) if has is None else has
        k1 = keep[:, None]
        self.pos = torch.where(k1, self.pos + dx[:, 0:3], self.pos)
        self.vel = torch.where(k1, self.vel + dx[:, 3:6], self.vel)
        q = quat_integrate(self.quat, dx[:, 6:9], 1.0)
        self.quat = torch.where(k1, q / q.norm(dim=-1, keepdim=True), self.quat)
        self.ba = torch.where(k1, self.ba + dx[:, 9:12], self.ba)
        self.bg = torch.where(k1, self.bg + dx[:, 12:15], self.bg)
        self.offsets = torch.where(keep[:, None, None],
                                   self.offsets + dx[:, VEHICLE:].reshape(self.n, -1,
                                                                          GATE_PARAMS),
                                   self.offsets)  # fmt: skip

    def _gate_index(self, gate_ids: Tensor) -> Tensor:
        """(N, K) index into the map of each slot's gate id, -1 when not on the map."""
        ids = self.map.ids
        eq = gate_ids.long()[..., None] == ids  # (N, K, G)
        return torch.where(eq.any(-1), eq.to(torch.int8).argmax(-1), -1)

    def _depths(self, corners: Tensor, g: Tensor, k: Tensor, cam: Camera) -> Tensor:
        """(N, K) predicted camera-frame z of corner k of gate g per slot (``corners`` of
        :meth:`gate_corners`)."""
        c = corners[torch.arange(self.n)[:, None], g, k]
        x_b = torch.einsum("nji,nkj->nki", self.rotation, c - self.pos[:, None, :])
        return torch.einsum("j,nkj->nk", cam.rotation[:, 2], x_b - cam.translation)

    def _project(
        self,
        g: Tensor,
        k: Tensor,
        corners: Tensor | None = None,
        offsets: Tensor | None = None,
        cam: Camera | None = None,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Predicted pixels (N, k, 2), Jacobians (N, k, 2, dim), depths (N, k) and the depths'
        Jacobians (N, k, dim) of corner k of gate g per selected slot (module docstring);
        ``corners`` and ``offsets`` as :meth:`gate_corners` and :meth:`_gate_offsets` give them
        (computed when None); ``cam`` the filter's camera unless given."""
        cam = self.camera if cam is None else cam
        offsets = self._gate_offsets() if offsets is None else offsets
        corners = self.gate_corners(offsets) if corners is None else corners  # (N, G, 4, 3)
        n = self.n
        c = corners[torch.arange(n)[:, None], g, k]  # (N, k, 3)
        R = self.rotation
        rel = c - self.pos[:, None, :]
        x_b = torch.einsum("nji,nkj->nki", R, rel)  # R^T (c - p)
        x_c = torch.einsum("ji,nkj->nki", cam.rotation, x_b - cam.translation)
        fx, fy, cx, cy = cam.intrinsics.unbind(-1)
        zc = x_c[..., 2]
        zs = torch.where(zc.abs() > 1e-6, zc, torch.full_like(zc, 1e-6))
        pred = torch.stack((fx * x_c[..., 0] / zs + cx, fy * x_c[..., 1] / zs + cy), -1)
        zero = torch.zeros_like(zs)
        J = torch.stack(
            (
                torch.stack((fx / zs, zero, -fx * x_c[..., 0] / zs**2), -1),
                torch.stack((zero, fy / zs, -fy * x_c[..., 1] / zs**2), -1),
            ),
            -2,
        )  # (N, k, 2, 3) fmt: skip
        rbt = cam.rotation.T
        A = rbt @ R.transpose(1, 2)  # (N, 3, 3): d x_c / d c (world)
        Hx = torch.zeros(n, g.shape[1], 3, self.dim, dtype=R.dtype)  # d x_c / d error state
        Hx[..., 0:3] = -A[:, None]
        Hx[..., 6:9] = rbt @ hat(x_b)
        rot, rel = self._rotated(offsets)  # (N, G, 3, 3), (N, G, 4, 3)
        ar = torch.arange(n)[:, None]
        r_k = rel[ar, g, k]  # (N, k, 3) Exp(phi) r_k
        rot_k = rot[ar, g]  # (N, k, 3, 3)
        ab = self.ab[g, k]  # (N, k, 2)
        axes = torch.einsum("nkij,nkaj->nkai", rot_k, self.axes[g])  # (N, k, 2, 3) rotated u, w
        eye = torch.eye(3, dtype=R.dtype).expand(*g.shape, 3, 3)
        phi = offsets.gather(1, g[..., None].expand(-1, -1, GATE_PARAMS))[..., 3:6]
        dcdo = torch.cat(
            (eye, -hat(r_k) @ _left_jacobian(phi), (ab[..., None] * axes).transpose(-1, -2)), -1
        )  # (N, k, 3 world, P offsets) fmt: skip
        Hx = Hx + torch.einsum("nkio,nkod->nkid", A[:, None] @ dcdo, self._place[g])
        return pred, J @ Hx, zc, Hx[..., 2, :]


def _left_jacobian(phi: Tensor) -> Tensor:
    """SO(3)'s left Jacobian (..., 3, 3) of rotation vectors ``phi`` (..., 3): d Exp(phi) r /
    d phi = -[Exp(phi) r]x J_l(phi) (Sola et al., "A micro Lie theory", 2018, eq. 145)."""
    th2 = (phi * phi).sum(-1)[..., None, None]
    th = th2.sqrt()
    small = th < 1e-6
    ths = torch.where(small, torch.ones_like(th), th)
    a = torch.where(small, 0.5 - th2 / 24, (1 - torch.cos(ths)) / (ths * ths))
    b = torch.where(small, 1 / 6 - th2 / 120, (ths - torch.sin(ths)) / (ths**3))
    K = hat(phi)
    return torch.eye(3, dtype=phi.dtype) + a * K + b * (K @ K)


def _gate_axes(corners: Tensor, centres: Tensor) -> tuple[Tensor, Tensor]:
    """Each gate's in-plane axes (G, 2, 3): u horizontal, w = n x u (n the plane normal), and
    its corners' coordinates along them (G, 4, 2): c0_k = c_g + a_k u + b_k w."""
    rel = corners - centres[:, None]
    n = torch.linalg.cross(rel[:, 2] - rel[:, 0], rel[:, 3] - rel[:, 1], dim=-1)
    n = n / n.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    ez = torch.tensor([0.0, 0.0, 1.0], dtype=corners.dtype).expand_as(n)
    u = torch.linalg.cross(n, ez, dim=-1)
    u = u / u.norm(dim=-1, keepdim=True).clamp_min(1e-12)  # gates stand upright: n is not e_z
    w = torch.linalg.cross(n, u, dim=-1)
    axes = torch.stack((u, w), 1)
    return axes, torch.einsum("gkj,gaj->gka", rel, axes)


__all__ = [
    "CHI2_1DOF", "CHI2_2DOF", "CHI2_3DOF", "GATE_PARAMS", "MAX_CORNERS", "VEHICLE", "Camera",
    "GateEkf", "GateMap",
]  # fmt: skip
