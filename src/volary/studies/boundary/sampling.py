"""Cost-minimizing sampling of BoundaryPredictor labels (paper 002 Sec. V-A/B, Algorithm 1).

Frame of one input E_i (eq. 6), volary conventions (z up, headings measured from +x towards +y):

- gate i-1 at (0, 0, z_{i-1}) with heading psi_{i-1} = 0; the vehicle starts there at rest in
  attitude, moving at v_{i-1} along +x (eq. 5 with psi_{i-1}; the paper writes eq. 5 as
  (s sin psi, s cos psi, 0), a heading measured from +y: the same vector rotated);
- gate i at polar (d_0, theta_0) around gate i-1 relative to psi_{i-1} (assumption 1);
- gate i+1 at polar (d_f, theta_f) around gate i relative to gate i's heading psi_i;
- gate normals bisect the incoming and outgoing legs (as in ``volary.worlds`` courses), which
  fixes psi_i = theta_0 + theta_f; gate i+1 is the end of the window, heading psi_{i+1} =
  psi_i + theta_f (its one leg).

Candidates (Algorithm 1): v_i in linspace(0, 2, 10), t_lin = 1.5 s if v_{i-1} + v_i < 1e-10 else
2 d_0 / (v_{i-1} + v_i), t_0 in linspace(0.5, 1.1, 7) t_lin, t_f = 2 d_f / v_i (2 d_f for v_i =
0). Boundary conditions (eq. 1) are [p, v, 0, 0] at each gate (assumption 3) with v_i = v_i
(cos psi_i, sin psi_i, 0) perpendicular to gate i (assumption 2, eq. 5) and rest at gate i+1
(assumption 5); two eq. 2 segments of durations t_0 and t_f. A candidate is simulated only if
the acceleration limit eq. 3 holds along it; its cost is eq. 7, the label the cheapest (v_i, t_0).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.planning import single_segment
from volary.studies.boundary.grid import check_inputs

EPS = 1e-10  # Algorithm 1
N_SPEEDS, N_TIMES = 10, 7  # Algorithm 1: 70 candidates per input
N_CANDIDATES = N_SPEEDS * N_TIMES
V_MAX = 2.0  # m/s, Algorithm 1 speed range
T_LIN_REST = 1.5  # s, t_lin when both speeds are zero
T_SCALE = (0.5, 1.1)  # t_0 range as multiples of t_lin
YAW_RATIO = 0.25  # R of eq. 4
W_CRASH, W_SKIP, W_TRACK = 1e6, 100.0, 4.0  # eq. 7


@dataclass(frozen=True)
class CandidateSet:
    """The 70 candidates of each of K inputs."""

    speed: Tensor  # (K, 70) m/s, v_i
    t0: Tensor  # (K, 70) s, time from gate i-1 to gate i
    tf: Tensor  # (K, 70) s, time from gate i to gate i+1


@dataclass(frozen=True)
class Window:
    """Three gates of each input in its local frame."""

    centres: Tensor  # (K, 3, 3) m, gates i-1, i, i+1
    headings: Tensor  # (K, 3) rad, psi_{i-1} (= 0), psi_i, psi_{i+1}


# ---- Algorithm 1 ----------------------------------------------------------------------------
def candidates(e: Tensor) -> CandidateSet:
    """The (v_i, t_0) grid of Algorithm 1 and the deceleration time t_f for inputs (K, 8)."""
    e = check_inputs(e)
    v_prev, d0, df = e[:, 0:1, None], e[:, 2:3, None], e[:, 5:6, None]
    v = torch.linspace(0.0, V_MAX, N_SPEEDS, dtype=e.dtype)[None, :, None]
    vsum = v_prev + v
    t_lin = torch.where(vsum < EPS, torch.full_like(vsum, T_LIN_REST), 2 * d0 / vsum.clamp_min(EPS))
    scale = torch.linspace(*T_SCALE, N_TIMES, dtype=e.dtype)[None, None, :]
    t0 = t_lin * scale
    tf = torch.where(v < EPS, 2 * df, 2 * df / v.clamp_min(EPS)).expand_as(t0)
    k = e.shape[0]
    return CandidateSet(
        speed=v.expand_as(t0).reshape(k, -1), t0=t0.reshape(k, -1), tf=tf.reshape(k, -1)
    )


def window(e: Tensor) -> Window:
    """Gate centres and headings of inputs (K, 8) in the local frame (module docstring)."""
    e = check_inputs(e)
    z = e[:, [1, 4, 7]]
    d0, th0, df, thf = e[:, 2], e[:, 3], e[:, 5], e[:, 6]
    psi_i = th0 + thf
    leg = psi_i + thf
    gi = torch.stack((d0 * torch.cos(th0), d0 * torch.sin(th0)), dim=-1)
    gn = gi + df[:, None] * torch.stack((torch.cos(leg), torch.sin(leg)), dim=-1)
    xy = torch.stack((torch.zeros_like(gi), gi, gn), dim=1)
    return Window(torch.cat((xy, z[..., None]), dim=-1), torch.stack((0 * psi_i, psi_i, leg), -1))


def gate_velocity(speed: Tensor, heading: Tensor) -> Tensor:
    """Eq. 5: the velocity (..., 3) of magnitude ``speed`` perpendicular to a gate whose normal
    has ``heading`` (rad from +x), level."""
    return torch.stack((speed * torch.cos(heading), speed * torch.sin(heading), 0 * speed), -1)


def candidate_coefficients(e: Tensor, cand: CandidateSet) -> tuple[Tensor, Tensor]:
    """Coefficients (K, 70, 2, 3, 8) (ascending powers, x/y/z) and durations (K, 70, 2) of the
    two eq. 2 segments gate i-1 -> gate i -> gate i+1 of every candidate (eq. 1, 5)."""
    w = window(e)
    k, c = cand.speed.shape
    zero = torch.zeros(k, c, 3, dtype=e.dtype)
    v_prev = gate_velocity(e[:, 0:1].expand(k, c), torch.zeros(k, c, dtype=e.dtype))
    v_i = gate_velocity(cand.speed, w.headings[:, 1:2].expand(k, c))
    pos = w.centres[:, None].expand(k, c, 3, 3)
    b0 = torch.stack((pos[:, :, 0], v_prev, zero, zero), dim=-1)  # (K, C, 3 axes, 4)
    b1 = torch.stack((pos[:, :, 1], v_i, zero, zero), dim=-1)
    b2 = torch.stack((pos[:, :, 2], zero, zero, zero), dim=-1)
    c1 = single_segment(b0, b1, cand.t0[..., None].expand(k, c, 3))
    c2 = single_segment(b1, b2, cand.tf[..., None].expand(k, c, 3))
    return torch.stack((c1, c2), dim=2), torch.stack((cand.t0, cand.tf), dim=-1)


# ---- eq. 3 and eq. 4 --------------------------------------------------------------------------
def acceleration_limit(speed: Tensor) -> Tensor:
    """Eq. 3's bound on the acceleration magnitude, -0.3 v^3 + 2.0 (m/s^2), for speed v (m/s)."""
    return -0.3 * speed**3 + 2.0


def satisfies_acceleration_limit(coeffs: Tensor, durations: Tensor, samples: int = 64) -> Tensor:
    """(...) bool: eq. 3, |a(t)| < -0.3 |v(t)|^3 + 2, at ``samples`` evenly spread times of every
    segment (ends included) of trajectories ``coeffs (..., M, 3, 8)``, ``durations (..., M)``.

    Each segment is rescaled to unit time (c_k T^k), so one (8, S) power basis serves the whole
    batch (two matmuls, float32) instead of a per-trajectory basis."""
    if samples < 2:
        raise ConfigError(f"samples: expected >= 2, got {samples}")
    k = torch.arange(coeffs.shape[-1], dtype=coeffs.dtype, device=coeffs.device)
    t = durations[..., None, None]  # (..., M, 1, 1)
    unit = (coeffs * t**k).float()  # p(s T) for s in [0, 1]: O(metres), float32 suffices
    t, k = t.float(), k.float()
    s = torch.linspace(0.0, 1.0, samples, device=coeffs.device)
    basis = s[None, :] ** k[:, None]  # (D, S)
    d1 = torch.cat((unit[..., 1:] * k[1:], torch.zeros_like(unit[..., :1])), dim=-1)
    d2 = torch.cat((d1[..., 1:] * k[1:], torch.zeros_like(d1[..., :1])), dim=-1)
    vel = (d1 @ basis) / t  # (..., M, 3, S)
    acc = (d2 @ basis) / t**2
    speed = (vel * vel).sum(-2).sqrt()  # (sum over the axis dim: faster than norm(dim=-2))
    ok = (acc * acc).sum(-2).sqrt() < acceleration_limit(speed)
    return ok.flatten(-2).all(-1)


def _poly_derivative(coeffs: Tensor, tau: Tensor, order: int) -> Tensor:
    """d^order/dtau^order of sum_k c_k tau^k; coeffs (..., A, D), tau (...) -> (..., A)."""
    d = coeffs.shape[-1]
    k = torch.arange(d, dtype=coeffs.dtype, device=coeffs.device)
    fall = torch.ones_like(k)
    for i in range(order):
        fall = fall * (k - i)
    powers = tau[..., None] ** (k - order).clamp_min(0)
    basis = torch.where(k >= order, fall * powers, torch.zeros_like(powers))
    return (coeffs * basis[..., None, :]).sum(-1)


def interpolated_yaw(t: Tensor, duration: Tensor, psi0: Tensor, psi1: Tensor, ratio: float):
    """Eq. 4: yaw (rad) and yaw rate (rad/s) at segment time ``t`` in [0, T]: linear from psi0
    to psi1 over the first ``ratio`` T, then psi1 (psi1 - psi0 taken the short way round)."""
    if not 0 < ratio <= 1:
        raise ConfigError(f"ratio: expected R in (0, 1], got {ratio}")
    delta = torch.remainder(psi1 - psi0 + math.pi, 2 * math.pi) - math.pi
    rt = ratio * duration
    frac = (t / rt).clamp(0.0, 1.0)
    rate = torch.where((t >= 0) & (t < rt), delta / rt, torch.zeros_like(delta))
    return psi0 + frac * delta, rate


# ---- eq. 7 ------------------------------------------------------------------------------------
def trajectory_cost(n_crash: Tensor, n_skipped: Tensor, e_tracking: Tensor, t0: Tensor) -> Tensor:
    """Eq. 7: C = 1e6 N_crash + 100 N_skipped + 4 E_tracking + T, with T = t_0 (s), E_tracking
    the mean position error (m)."""
    return W_CRASH * n_crash + W_SKIP * n_skipped + W_TRACK * e_tracking + t0


def select_optimal(cost: Tensor, cand: CandidateSet) -> tuple[Tensor, Tensor, Tensor]:
    """Algorithm 1's argmin over each input's candidates: (v_opt, t0_opt, C_min), each (K,);
    NaN/inf where no candidate has a finite cost."""
    c = torch.where(torch.isnan(cost), math.inf, cost)
    cmin, j = c.min(dim=-1)
    ok = torch.isfinite(cmin)
    v = torch.where(ok, cand.speed.gather(1, j[:, None])[:, 0], math.nan)
    t0 = torch.where(ok, cand.t0.gather(1, j[:, None])[:, 0], math.nan)
    return v, t0, cmin


@dataclass(frozen=True)
class SamplingConfig:
    """How candidates are flown and scored (module docstring; Table I randomization)."""

    platform: str = "crazyflie"
    physics_hz: float = 240.0  # safe-control-gym's default PyBullet rate (the paper's simulator)
    control_hz: float = 60.0  # safe-control-gym's default control rate
    tail_s: float | None = None  # s scored past gate i (None: the whole deceleration, Alg. 1)
    yaw_ratio: float = YAW_RATIO
    accel_samples: int = 32  # eq. 3 check points per segment
    grace_s: float = 0.25  # s flown after the plan ends (reaching gate i+1)
    gate_opening: float = 0.4  # m (volary.worlds.GateCourseConfig, assumed)
    gate_border: float = 0.05  # m frame bar width
    gate_depth: float = 0.05  # m frame thickness
    passage_width: float = 0.1  # m, |distance to the gate plane| that counts as in the gate
    passage_inflation: float = 0.05  # m, slack of the gate's corner box
    randomize: bool = True  # Table I
    mass_range: float = 0.01  # kg, uniform +- (Table I)
    inertia_range: float = 1e-6  # kg m^2, uniform +- per diagonal moment (Table I)
    force_range: float = 1e-6  # N, uniform +- per axis, constant per flight (Table I)
    thrust_noise_std: float = 1e-6  # N, white noise per motor (Table I)
    prune: bool = True  # fly only candidates that can still win (C >= t_0; dataset.label_inputs)
    first_round: int = 1  # candidates of smallest t_0 flown first per input when pruning
    chunk: int = 16384  # most candidates flown at once
    min_chunk: int = 256  # fewest candidates flown at once (unless fewer are left)
    bucket_ratio: float = 1.2  # longest / shortest flight in a chunk (flight.length_buckets)
    compile: str = "auto"  # Simulator fast path: numba on CPU, eager on CUDA ("auto"), or named

    def __post_init__(self) -> None:
        for name in ("physics_hz", "control_hz", "gate_opening", "passage_width", "grace_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"{name}: expected a value > 0, got {v}")
        if self.tail_s is not None and not (math.isfinite(self.tail_s) and self.tail_s > 0):
            raise ConfigError(f"tail_s: expected a time > 0 s or None, got {self.tail_s}")
        if not (math.isfinite(self.bucket_ratio) and self.bucket_ratio >= 1):
            raise ConfigError(f"bucket_ratio: expected a ratio >= 1, got {self.bucket_ratio}")
        if not 0 < self.yaw_ratio <= 1:
            raise ConfigError(f"yaw_ratio: expected R in (0, 1], got {self.yaw_ratio}")
        for name, low in (("chunk", 1), ("min_chunk", 1), ("accel_samples", 2), ("first_round", 1)):
            v = getattr(self, name)
            if not isinstance(v, int) or v < low:
                raise ConfigError(f"{name}: expected an integer >= {low}, got {v!r}")
        if self.compile not in COMPILE_MODES:
            raise ConfigError(
                f"compile: expected one of {sorted(COMPILE_MODES)}, got {self.compile!r}"
            )
        for name in ("mass_range", "inertia_range", "force_range", "thrust_noise_std"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"{name}: expected >= 0, got {getattr(self, name)}")

    def to_dict(self) -> dict:
        return asdict(self)


COMPILE_MODES: dict[str, bool | str] = {
    "auto": "auto",
    "inductor": True,
    "numba": "numba",
    "eager": False,
}


def simulator_compile(mode: str, device: str) -> bool | str:
    """The Simulator ``compile`` argument of a SamplingConfig ``compile`` mode on ``device``:
    "auto" is the numba kernel on CPU and eager torch elsewhere (numba is CPU-only)."""
    if mode not in COMPILE_MODES:
        raise ConfigError(f"compile: expected one of {sorted(COMPILE_MODES)}, got {mode!r}")
    if mode == "numba" and not str(device).startswith("cpu"):
        raise ConfigError(f"compile: 'numba' runs on CPU only, got device {device!r}")
    if mode == "auto":
        return "numba" if str(device).startswith("cpu") else False
    return COMPILE_MODES[mode]


__all__ = [
    "N_CANDIDATES",
    "YAW_RATIO",
    "CandidateSet",
    "SamplingConfig",
    "Window",
    "acceleration_limit",
    "candidate_coefficients",
    "candidates",
    "gate_velocity",
    "interpolated_yaw",
    "satisfies_acceleration_limit",
    "select_optimal",
    "simulator_compile",
    "trajectory_cost",
    "window",
]
