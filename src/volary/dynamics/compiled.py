"""A fused, optionally compiled multi-substep physics stepper (the fast path of ``rollout``).

``make_stepper(cfg, substeps, compile)`` returns ``step(params, state, command, dist, keys)``
that runs ``substeps`` physics steps with the command held, exactly what
:func:`volary.dynamics.step.rollout` does (that is the reference; ``tests/test_compiled.py``
checks parity).

Why a second formulation: inductor's CPU code generator vectorizes a loop only when its loads are
contiguous along the loop, and it fuses loops only over equal iteration ranges. The reference
code works on ``(N, 3)``/``(N, 4)``/``(N, 6, R)`` tensors (vectors innermost), which compiles to
dozens of scalar loops. Here the same equations are written on *components*: every quantity is a
tuple of ``(N,)`` rows taken from structure-of-arrays buffers ``(K, N)``, so the whole multi-substep
RK4 step becomes a few vectorized loops over N. Packing ``(N, K)`` -> ``(K, N)`` happens once per
call outside the graph (parameters and disturbances are packed once and cached while unchanged).

Compiling (:func:`compile_graph`): the SoA function is traced once per input signature (shapes,
dtypes, device) with ``make_fx`` and compiled by inductor directly, without dynamo: dynamo's
per-call guards and wrappers cost about 90 us, a fifth of a 4-substep call at N = 1,024 on the
2-core machine (benchmarks/README.md). Every shape is static, so a new batch size N (or rotor
count) compiles once more. A compile or run failure of the compiled function warns and falls
back to eager for the stepper's lifetime. The thrust-rate model is compiled through the
reference ``rollout`` with ``torch.compile`` as it is.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

import volary.dynamics.aero as aero
from volary.dynamics.models import GRAVITY
from volary.dynamics.params import VehicleParams
from volary.dynamics.state import MultirotorState
from volary.dynamics.step import Disturbance, DynamicsConfig, Model, rollout
from volary.math.integrators import Integrator
from volary.math.random import hash32
from volary.registry import check_name

Rows = tuple[Tensor, ...]  # components, each (N,)
Stepper = Callable[[VehicleParams, MultirotorState, Tensor, Disturbance, Tensor], MultirotorState]

_PARAM_FIELDS = (
    "mass",
    "inertia",
    "inertia_inv",
    "k_f",
    "alloc",
    "w_min",
    "w_max",
    "tau_up",
    "tau_down",
    "drag_lin",
    "drag_quad",
    "drag_moment",
    "force_noise",
    "moment_noise",
    "aero",  # rotor aerodynamics (aero.py): read only by steppers built with aero on
    "rotor_pos",
    "rotor_axis",
)
_DIST_FIELDS = ("wind", "gust_std", "gust_tau", "force", "moment", "surface", "wake")


# ---- component math (each row tensor is (N,)) --------------------------------------------------


def _cross(a: Rows, b: Rows) -> Rows:
    """a x b."""
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _norm(v: Rows) -> Tensor:
    """||v||."""
    return torch.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])


def _rotate(w: Tensor, u: Rows, v: Rows) -> Rows:
    """R(q) v = v + 2w (u x v) + u x (2 u x v), q = [w, u] (quaternion.quat_rotate)."""
    t = tuple(2.0 * c for c in _cross(u, v))
    ut = _cross(u, t)
    return tuple(v[i] + w * t[i] + ut[i] for i in range(3))


def _matvec(m: Rows, v: Rows) -> Rows:
    """M v for a row-major 3x3 matrix given as 9 rows."""
    return tuple(m[3 * i] * v[0] + m[3 * i + 1] * v[1] + m[3 * i + 2] * v[2] for i in range(3))


def _quat_derivative(q: Rows, om: Rows) -> Rows:
    """dq/dt = 0.5 q (x) [0, W] (FlightGoggles IV)."""
    w, x, y, z = q
    return (
        0.5 * (-x * om[0] - y * om[1] - z * om[2]),
        0.5 * (w * om[0] + y * om[2] - z * om[1]),
        0.5 * (w * om[1] - x * om[2] + z * om[0]),
        0.5 * (w * om[2] + x * om[1] - y * om[0]),
    )


# ---- the rigid-body model on components (models.rigid_body_derivative) ------------------------


def _wrench(p: dict[str, Rows], w: Rows) -> Rows:
    """[f; m] = B T, T_i = k_f w_i |w_i| (models.rotor_wrench)."""
    return _allocate(p, [p["k_f"][j] * w[j] * w[j].abs() for j in range(len(w))])


def _allocate(p: dict[str, Rows], t: Sequence[Tensor]) -> Rows:
    """[f; m] = B T for per-rotor thrusts T."""
    r = len(t)
    a = p["alloc"]
    return tuple(_total([a[i * r + j] * t[j] for j in range(r)]) for i in range(6))


def _total(terms: list[Tensor]) -> Tensor:
    """t_0 + t_1 + ... in order (``sum`` would start from the int 0)."""
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


def _acceleration(p: dict[str, Rows], q: Rows, vel: Rows, f_rot: Rows, ext: dict[str, Rows]):
    """dv/dt = g + (R (f_rotors + f_drag) + f_ext) / m, body drag of models.body_drag."""
    vb = _rotate(q[0], tuple(-c for c in q[1:]), tuple(vel[i] - ext["wind"][i] for i in range(3)))
    speed = _norm(vb)
    f_b = tuple(
        f_rot[i] + (-(p["drag_lin"][i] + p["drag_quad"][i] * speed) * vb[i]) for i in range(3)
    )
    f_w = _rotate(q[0], q[1:], f_b)
    g = (0.0, 0.0, -GRAVITY)
    return tuple(g[i] + (f_w[i] + ext["force"][i]) / p["mass"][0] for i in range(3))


def _omega_dot(p: dict[str, Rows], om: Rows, m_rot: Rows, ext: dict[str, Rows]) -> Rows:
    """J dW/dt = m_rotors - ||W|| C_a W + m_ext - W x J W (models.euler_rotation, aero_moment)."""
    n = _norm(om)
    m = tuple(m_rot[i] + (-n * p["drag_moment"][i] * om[i]) + ext["moment"][i] for i in range(3))
    jw_x = _cross(om, _matvec(p["inertia"], om))
    return _matvec(p["inertia_inv"], tuple(m[i] - jw_x[i] for i in range(3)))


def _motor_lag(p: dict[str, Rows], w: Rows, cmd: Rows) -> Rows:
    """dw/dt = (w_cmd - w) / tau, tau_up when speeding up (models.motor_lag)."""
    out = []
    for j in range(len(w)):
        tau = torch.where(cmd[j].abs() > w[j].abs(), p["tau_up"][j], p["tau_down"][j])
        out.append((cmd[j] - w[j]) / tau)
    return tuple(out)


def _aero_wrench(p: dict[str, Rows], x: tuple[Rows, ...], ext: dict[str, Rows], ground) -> Rows:
    """Rotor wrench with aero.rotor_aero (A1-A6) per rotor (models.rigid_body_derivative with
    ``params.has_aero``): hub heights over the surface at ``z = ground`` (a row; -inf: none),
    thrusts through the allocation plus the H-forces and moments."""
    pos, vel, q, om, w = x
    r, a, rp, ra = len(w), p["aero"], p["rotor_pos"], p["rotor_axis"]
    vb = _rotate(q[0], tuple(-c for c in q[1:]), tuple(vel[i] - ext["wind"][i] for i in range(3)))
    lo = torch.clamp_min(0.5 * a[5], aero.H_MIN)
    thrusts, extra = [], []
    for j in range(r):
        rj, nj = rp[3 * j : 3 * j + 3], ra[3 * j : 3 * j + 3]
        h = pos[2] + _rotate(q[0], q[1:], rj)[2] - ground
        h = torch.clamp_max(torch.maximum(h, lo), aero.H_MAX)
        t = p["k_f"][j] * w[j] * w[j].abs()
        out = aero.rotor_aero(w[j], t, *vb, *om, *rj, *nj, h, *a)
        thrusts.append(out[0])
        extra.append(out[1:])
    wr = _allocate(p, thrusts)
    return tuple(_total([wr[i]] + [e[i] for e in extra]) for i in range(6))


def _derivative(
    p: dict[str, Rows], x: tuple[Rows, ...], cmd: Rows, ext: dict[str, Rows], aero_on=False,
    ground=None,
):  # fmt: skip
    """Rigid-body derivative (FlightGoggles IV) of x = (pos, vel, quat, omega, rotor_speed)."""
    _, vel, q, om, w = x
    wr = _aero_wrench(p, x, ext, ground) if aero_on else _wrench(p, w)
    acc = _acceleration(p, q, vel, wr[:3], ext)
    return vel, acc, _quat_derivative(q, om), _omega_dot(p, om, wr[3:], ext), _motor_lag(p, w, cmd)


def _axpy(x: tuple[Rows, ...], a: float, d: tuple[Rows, ...]) -> tuple[Rows, ...]:
    return tuple(
        tuple(xi + a * di for xi, di in zip(xf, df, strict=True))
        for xf, df in zip(x, d, strict=True)
    )


def _integrate(method: Integrator, f, x: tuple[Rows, ...], dt: float) -> tuple[Rows, ...]:
    """Euler or classic RK4 (math.integrators), same operation order."""
    if method == Integrator.EULER:
        return _axpy(x, dt, f(x))
    k1 = f(x)
    k2 = f(_axpy(x, 0.5 * dt, k1))
    k3 = f(_axpy(x, 0.5 * dt, k2))
    k4 = f(_axpy(x, dt, k3))
    return tuple(
        tuple(
            xi + (dt / 6.0) * (a + 2.0 * b + 2.0 * c + d)
            for xi, a, b, c, d in zip(xf, af, bf, cf, df, strict=True)
        )
        for xf, af, bf, cf, df in zip(x, k1, k2, k3, k4, strict=True)
    )


# ---- stages on components (step.py) ------------------------------------------------------------


def _normal(keys: Tensor, tick: Tensor, n: int, dtype: torch.dtype) -> Rows:
    """random.normal(keys, tick, n) on components: Box-Muller of counter-hashed uniforms."""
    m = (n + 1) // 2
    base = keys ^ (tick * 0x85EBCA6B)
    h0 = hash32(base)
    u = [(hash32(h0 + j * 0xC2B2AE35).to(dtype) + 0.5) / 2.0**32 for j in range(2 * m)]
    r = [torch.sqrt(-2.0 * torch.log(u[i])) for i in range(m)]
    th = [2.0 * math.pi * u[m + i] for i in range(m)]
    return tuple(
        [r[i] * torch.cos(th[i]) for i in range(m)] + [r[i] * torch.sin(th[i]) for i in range(m)]
    )[:n]


def _external(cfg: DynamicsConfig, p, d, gust: Rows, keys: Tensor, tick: Tensor):
    """Wind, world force and body moment with the step's noise (step.draw_noise), next gust."""
    if cfg.stochastic:
        n = _normal(keys, tick, 9, gust[0].dtype)
        sq = math.sqrt(cfg.dt)
        fn = tuple(p["force_noise"][0] * n[i] / sq for i in range(3))
        mn = tuple(p["moment_noise"][0] * n[3 + i] / sq for i in range(3))
        a = torch.exp(-cfg.dt / d["gust_tau"][0])
        s = d["gust_std"][0] * torch.sqrt(1 - a * a)
        gust = tuple(a * gust[i] + s * n[6 + i] for i in range(3))
    else:
        fn = tuple(torch.zeros_like(c) for c in d["force"])
        mn = tuple(torch.zeros_like(c) for c in d["moment"])
    return {
        "wind": tuple(d["wind"][i] + d["wake"][i] + gust[i] for i in range(3)),
        "force": tuple(d["force"][i] + fn[i] for i in range(3)),
        "moment": tuple(d["moment"][i] + mn[i] for i in range(3)),
    }, gust


def _command(p, u: Rows) -> tuple[Rows, Tensor]:
    """step.sanitize_command + clamp_command: non-finite rows -> 0, then into [w_min, w_max]."""
    bad = ~torch.isfinite(u[0])
    for c in u[1:]:
        bad = bad | ~torch.isfinite(c)
    u = tuple(torch.where(bad, torch.zeros_like(c), c) for c in u)
    lo, hi = p["w_min"], p["w_max"]
    return tuple(torch.minimum(torch.maximum(c, lo[j]), hi[j]) for j, c in enumerate(u)), bad


def _ground(cfg: DynamicsConfig, s: dict) -> dict:
    """step.ground_contact: clamp z to the ground, stop the vehicle, flag landed/crashed."""
    z = s["pos"][2]
    below = z < cfg.ground_height
    impact = below & (s["vel"][2] < -cfg.crash_speed)
    zero = torch.zeros_like(z)
    pos = (*s["pos"][:2], torch.where(below, torch.full_like(z, cfg.ground_height), z))
    vel = tuple(torch.where(below, zero, c) for c in s["vel"])
    om = tuple(torch.where(below, zero, c) for c in s["omega"])
    landed = below | (s["landed"] & (z <= cfg.ground_height + 1e-6))
    return {
        **s,
        "pos": pos,
        "vel": vel,
        "omega": om,
        "landed": landed,
        "crashed": s["crashed"] | impact,
    }


def _guard(prev: dict, s: dict, bad_cmd: Tensor) -> dict:
    """step.divergence_guard: non-finite envs keep their previous state and are flagged."""
    finite = torch.ones_like(bad_cmd)
    for k in ("pos", "vel", "quat", "omega", "rotor"):
        for c in s[k]:
            finite = finite & torch.isfinite(c)
    bad = ~finite | bad_cmd | prev["diverged"]
    out: dict[str, Any] = {}
    for k, v in s.items():
        if isinstance(v, tuple):
            out[k] = tuple(torch.where(bad, a, b) for a, b in zip(prev[k], v, strict=True))
        else:
            out[k] = torch.where(bad, prev[k], v)
    out["diverged"] = bad
    return out


def _physics_step(
    cfg: DynamicsConfig, p, d, s: dict, u: Rows, keys: Tensor, aero_on: bool = False
) -> dict:
    """step.physics_step (rigid-body model) on components."""
    cmd, bad_cmd = _command(p, u)
    ext, gust = _external(cfg, p, d, s["gust"], keys, s["tick"])
    ground = torch.clamp_min(d["surface"][0], cfg.ground_height) if cfg.ground else d["surface"][0]

    def f(x):
        return _derivative(p, x, cmd, ext, aero_on, ground)

    x0 = (s["pos"], s["vel"], s["quat"], s["omega"], s["rotor"])
    pos, vel, q, om, w = _integrate(Integrator(cfg.integrator), f, x0, cfg.dt)
    qn = torch.clamp_min(torch.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]), 1e-12)
    new = {
        **s,
        "pos": pos,
        "vel": vel,
        "quat": tuple(c / qn for c in q),
        "omega": om,
        "rotor": w,
        "gust": gust,
        "time": s["time"] + cfg.dt,
        "tick": s["tick"] + 1,
    }
    if cfg.ground:
        new = _ground(cfg, new)
    return _guard(s, new, bad_cmd)


# ---- structure-of-arrays packing ---------------------------------------------------------------


def _widths(n_rotors: int) -> dict[str, int]:
    r = n_rotors
    return {
        "mass": 1,
        "inertia": 9,
        "inertia_inv": 9,
        "k_f": r,
        "alloc": 6 * r,
        "w_min": r,
        "w_max": r,
        "tau_up": r,
        "tau_down": r,
        "drag_lin": 3,
        "drag_quad": 3,
        "drag_moment": 3,
        "force_noise": 1,
        "moment_noise": 1,
        "aero": 6,
        "rotor_pos": 3 * r,
        "rotor_axis": 3 * r,
        "wind": 3,
        "gust_std": 1,
        "gust_tau": 1,
        "force": 3,
        "moment": 3,
        "surface": 1,
        "wake": 3,
        "pos": 3,
        "vel": 3,
        "quat": 4,
        "omega": 3,
        "rotor": r,
        "gust": 3,
        "time": 1,
    }


# One loop over N for the whole step: inductor's default caps a fused kernel at 64 nodes.
# inductor options: fuse the whole step into one loop; no size/stride asserts in the wrapper
# (the inputs' signature is fixed by the caller's key or dynamo's guards).
_OPTS: dict[str, Any] = {
    "max_fusion_size": 100_000,
    "aggressive_fusion": True,
    "size_asserts": False,
    # "#pragma omp parallel" without num_threads(...): the kernel takes the count set when it is
    # called (torch.set_num_threads), so a step can use fewer threads when others are busy
    # (volary.cpu); inductor otherwise hard-codes the count it saw at compile time unless it
    # equals os.cpu_count()
    "cpp.dynamic_threads": True,
}
_STATE_FLOATS = ("pos", "vel", "quat", "omega", "rotor", "gust", "time")


def _pack(tensors: Sequence[Tensor]) -> Tensor:
    """(N, ...) tensors -> one contiguous (K, N) structure-of-arrays buffer."""
    n = tensors[0].shape[0]
    aos = torch.cat([t.reshape(n, -1) for t in tensors], dim=1)
    return aos.new_empty(aos.shape[1], n).copy_(aos.t())  # standard strides even for N = 1


def _unpack(buf: Tensor, names: Sequence[str], widths: dict[str, int]) -> dict[str, Rows]:
    rows, out, i = buf.unbind(0), {}, 0
    for k in names:
        out[k] = rows[i : i + widths[k]]
        i += widths[k]
    return out


def _soa_step(cfg: DynamicsConfig, n_rotors: int, aero_on: bool = False):
    """One physics step on SoA buffers: (params, dist, x, u, tick, flags, keys) -> x, tick,
    flags; ``aero_on``: with the rotor aerodynamics of aero.py."""
    wd = _widths(n_rotors)

    def run(
        pbuf: Tensor,
        dbuf: Tensor,
        xbuf: Tensor,
        ubuf: Tensor,
        tick: Tensor,
        flags: Tensor,
        keys: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        p, d = _unpack(pbuf, _PARAM_FIELDS, wd), _unpack(dbuf, _DIST_FIELDS, wd)
        s: dict[str, Any] = {
            k: (v[0] if k == "time" else v) for k, v in _unpack(xbuf, _STATE_FLOATS, wd).items()
        }
        s.update(tick=tick, landed=flags[0], crashed=flags[1], diverged=flags[2])
        s = _physics_step(cfg, p, d, s, ubuf.unbind(0), keys, aero_on)
        rows = [c for k in _STATE_FLOATS[:-1] for c in s[k]] + [s["time"]]
        return (
            torch.stack(rows, 0),
            s["tick"],
            torch.stack((s["landed"], s["crashed"], s["diverged"]), 0),
        )

    return run


def _soa_rollout(cfg: DynamicsConfig, substeps: int, n_rotors: int, aero_on: bool = False):
    """``substeps`` SoA steps: one step as is, more inside a ``while_loop`` (one compiled body,
    no Python between substeps, compile time independent of ``substeps``)."""
    step = _soa_step(cfg, n_rotors, aero_on)
    if substeps == 1:
        return step

    def run(pbuf, dbuf, xbuf, ubuf, tick, flags, keys):
        from torch._higher_order_ops.while_loop import while_loop, while_loop_op

        def cond(i, x, t, f, *consts):
            return i < substeps

        i0 = torch.zeros((), dtype=torch.int64, device=xbuf.device)
        if torch.compiler.is_dynamo_compiling():  # dynamo lifts the closure's tensors itself

            def body(i, x, t, f):
                return (i + 1, *step(pbuf, dbuf, x, ubuf, t, f, keys))

            return tuple(while_loop(cond, body, (i0, xbuf, tick, flags))[1:])

        # eager and make_fx (compile_graph): the operator itself, constant inputs explicit.
        # The public while_loop runs through dynamo here, whose cached frame makes a second
        # make_fx trace in the same process fail inside inductor.
        def body_explicit(i, x, t, f, p, d, u, k):
            return (i + 1, *step(p, d, x, u, t, f, k))

        out = while_loop_op(cond, body_explicit, (i0, xbuf, tick, flags), (pbuf, dbuf, ubuf, keys))
        return tuple(out[1:])

    return run


class _Cached:
    """The packed (K, N) buffer of a parameter object, rebuilt when the object or a tensor's
    in-place version counter changes."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self.obj: object = None
        self.tensors: list[Tensor] = []
        self.versions: tuple[int, ...] | None = None
        self.buf = torch.empty(0)

    def get(self, obj) -> Tensor:
        if obj is not self.obj:  # a frozen dataclass: same object, same tensors
            self.obj, self.tensors, self.versions = obj, [getattr(obj, k) for k in self.names], None
        if any(t.is_inference() for t in self.tensors):  # no version counter: pack every call
            self.versions = None
            return _pack(self.tensors)
        versions = tuple(t._version for t in self.tensors)
        if versions != self.versions:
            self.versions, self.buf = versions, _pack(self.tensors)
        return self.buf


# Envs per compiled call. Above this the batch is cut into chunks whose working set (state +
# params, about 1 kB per env) fits in cache for all fused substeps; measured on the 2-core dev
# machine: 16384 envs run at 2x the per-env rate of 65536 in one piece (benchmarks/README.md).
CHUNK = 16384


def _columns(args: tuple, a: int, b: int) -> tuple:
    """Envs a..b of (K, N) buffers and (N,) vectors, contiguous (``while_loop`` carries its
    buffers with their own strides)."""
    return tuple((t[:, a:b] if t.dim() == 2 else t[a:b]).contiguous() for t in args)


def compile_graph(fn: Callable[..., Any], args: Sequence[Tensor]) -> Callable[..., Any]:
    """``fn`` (a pure function of tensors, ``while_loop`` allowed) compiled by inductor for the
    exact signature of ``args`` (shapes, strides, dtypes, device), without dynamo: traced once
    with ``make_fx``, so a call runs no guards and no Python of ``fn``. The caller keys compiled
    functions by signature (:func:`signature`); tensors ``fn`` reads from its closure become
    constants of the graph."""
    from torch._inductor import config as inductor_config
    from torch._inductor import standalone_compile
    from torch.fx.experimental.proxy_tensor import make_fx

    quiet = logging.getLogger("torch._inductor.standalone_compile")  # "cannot save": expected,
    level = quiet.level  # inductor does not serialize while_loop graphs
    quiet.setLevel(logging.ERROR)
    try:
        with torch.no_grad():
            gm = make_fx(fn, tracing_mode="fake")(*args)
            with inductor_config.patch(_OPTS):
                art = standalone_compile(gm, list(args), dynamic_shapes="from_example_inputs")
    finally:
        quiet.setLevel(level)

    def call(*a: Tensor) -> Any:
        return art(*a)

    return call


def signature(args: Sequence[Tensor]) -> tuple:
    """What a :func:`compile_graph` function is specialized on (the stride of a size-1 dim
    indexes nothing and is left out)."""
    out = []
    for a in args:
        strides = tuple(st if n != 1 else 0 for n, st in zip(a.shape, a.stride(), strict=True))
        out.append((tuple(a.shape), strides, a.dtype, a.device))
    return tuple(out)


class _SoAStepper:
    """Packs to SoA, calls the fused function (inductor-compiled or the numba kernel), unpacks
    to a MultirotorState."""

    def __init__(self, cfg: DynamicsConfig, substeps: int, backend: str) -> None:
        self.cfg, self.substeps, self.backend = cfg, substeps, backend
        self.params, self.dist = _Cached(_PARAM_FIELDS), _Cached(_DIST_FIELDS)
        self.fns: dict[Any, Callable] = {}
        self.last: tuple | None = None  # (returned state, its buffers and their versions)
        self.chunks: tuple[tuple, int, dict[int, tuple]] | None = None  # constant inputs per chunk

    def _fn(self, n_rotors: int, args: tuple, aero_on: bool = False) -> Callable:
        """The fused function for these inputs: numba and eager per rotor count, inductor per
        input signature; each with or without the rotor aerodynamics."""
        key: Any = (n_rotors if self.backend != "inductor" else signature(args), aero_on)
        if key not in self.fns:
            if self.backend == "numba":
                from volary.dynamics.numba_step import soa_rollout

                fn = soa_rollout(self.cfg, self.substeps)
            elif self.backend == "warp":
                import volary.dynamics.warp_step as warp_step

                fn = warp_step.soa_rollout(self.cfg, self.substeps, aero_on)
            else:
                fn = _soa_rollout(self.cfg, self.substeps, n_rotors, aero_on)
                if self.backend == "inductor":
                    fn = compile_graph(fn, args)
            self.fns[key] = fn
        return self.fns[key]

    def __call__(self, params, state, command, dist, keys) -> MultirotorState:
        xbuf, flags = self._state_buffers(state)
        args = (
            self.params.get(params),
            self.dist.get(dist),
            xbuf,
            command if self.backend in ("numba", "warp") else command.t().contiguous(),
            state.tick,
            flags,
            keys,
        )
        n, r, on = params.n_envs, params.n_rotors, params.has_aero
        if n <= CHUNK or self.backend in ("numba", "warp"):
            x, tick, fl = self._fn(r, args, on)(*args)
        else:  # cache-sized chunks: a chunk's state and params stay resident across substeps
            chunks = [self._chunk(args, a, min(a + CHUNK, n)) for a in range(0, n, CHUNK)]
            parts = [self._fn(r, c, on)(*c) for c in chunks]
            x = torch.cat([p[0] for p in parts], dim=1)
            tick = torch.cat([p[1] for p in parts], dim=0)
            fl = torch.cat([p[2] for p in parts], dim=1)
        out = _state_from(x, tick, fl, params.n_rotors)
        # Reuse the buffers next call only if a write to them would show: tensors made under
        # torch.inference_mode (rsl_rl's rollouts) have no version counter, so they are repacked.
        tracked = not (x.is_inference() or fl.is_inference())
        self.last = (out, x, fl, x._version, fl._version) if tracked else None
        return out

    def _chunk(self, args: tuple, a: int, b: int) -> tuple:
        """Envs a..b of the call's buffers; the parameter, disturbance and key slices are kept
        while those buffers are the same objects (they rarely change between calls)."""
        const = (args[0], args[1], args[6])
        untracked = args[6].is_inference()  # no version counter: slice again every call
        version = -1 if untracked else args[6]._version
        if (
            untracked
            or self.chunks is None
            or self.chunks[1] != version
            or any(x is not y for x, y in zip(const, self.chunks[0], strict=True))
        ):
            self.chunks = (const, version, {})
        cached = self.chunks[2]
        if a not in cached:
            cached[a] = _columns(const, a, b)
        p, d, k = cached[a]
        x, u, t, f = _columns((args[2], args[3], args[4], args[5]), a, b)
        return p, d, x, u, t, f, k

    def _state_buffers(self, state: MultirotorState) -> tuple[Tensor, Tensor]:
        """The SoA buffers of ``state``: reused when it is this stepper's unmodified output."""
        if self.last is not None and state is self.last[0]:
            _, x, fl, xv, fv = self.last
            if x._version == xv and fl._version == fv:
                return x, fl
        return pack_state(state)


def pack_state(state: MultirotorState) -> tuple[Tensor, Tensor]:
    """A state as a (K, N) structure-of-arrays float buffer and its (3, N) flags
    [landed, crashed, diverged]."""
    xbuf = _pack([getattr(state, "rotor_speed" if k == "rotor" else k) for k in _STATE_FLOATS])
    return xbuf, torch.stack((state.landed, state.crashed, state.diverged), 0)


def _state_from(x: Tensor, tick: Tensor, flags: Tensor, r: int) -> MultirotorState:
    """(K, N) SoA state -> MultirotorState of (N, k) views (env stride 1) into that buffer.

    One ``split`` and one ``unbind`` make every view (a slice per field costs about 1 us each,
    which is the whole budget of a small-batch step)."""
    pos, vel, quat, om, w, gust, time = torch.split_with_sizes(x.t(), (3, 3, 4, 3, r, 3, 1), 1)
    landed, crashed, diverged = flags.unbind(0)
    return MultirotorState(
        pos=pos,
        vel=vel,
        quat=quat,
        omega=om,
        rotor_speed=w,
        gust=gust,
        time=time[:, 0],
        tick=tick,
        landed=landed,
        crashed=crashed,
        diverged=diverged,
    )


def _reference(cfg: DynamicsConfig, substeps: int) -> Stepper:
    def step(params, state, command, dist, keys):
        return rollout(params, state, command, dist, keys, cfg, substeps)

    return step


class _Fallback:
    """Runs ``fast``; on its first failure warns once and runs ``safe`` from then on."""

    def __init__(self, fast: Stepper, safe: Stepper) -> None:
        self.fast, self.safe, self.failed = fast, safe, False

    def __call__(self, params, state, command, dist, keys) -> MultirotorState:
        if not self.failed:
            try:
                return self.fast(params, state, command, dist, keys)
            except Exception as e:  # noqa: BLE001 - any compiler error means: use eager
                self.failed = True
                warnings.warn(
                    f"compiled physics step failed ({type(e).__name__}: {e}); "
                    "falling back to eager",
                    RuntimeWarning,
                    stacklevel=2,
                )
        return self.safe(params, state, command, dist, keys)


STEP_BACKENDS = ("eager", "inductor", "numba", "warp")

# Envs; from here the inductor-compiled (SIMD over envs) step and closed loop beat the numba
# kernels (a scalar loop over envs) on the CPU (benchmarks/README.md, closed_loop.py).
INDUCTOR_MIN = 1024


def auto_backend(device: torch.device | str, model: Any, n_envs: int) -> str:
    """The backend ``"auto"`` picks: for the rigid-body model on the CPU, numba below
    ``INDUCTOR_MIN`` envs and inductor from there; on CUDA the Warp kernel where Warp is
    installed; eager for the thrust-rate model (no fused kernel) and otherwise."""
    kind = torch.device(device).type
    if Model(model) != Model.RIGID_BODY:
        return "eager"
    if kind == "cuda":
        import importlib.util

        return "warp" if importlib.util.find_spec("warp") is not None else "eager"
    if kind != "cpu":
        return "eager"
    if n_envs >= INDUCTOR_MIN:
        return "inductor"
    try:
        import numba  # noqa: F401
    except ImportError:  # pragma: no cover - numba is a core dependency
        return "eager"
    return "numba"


def _backend(compile: bool | str) -> str:
    if compile is True or compile is False:
        return "inductor" if compile else "eager"
    return check_name("step backend (compile=)", compile, STEP_BACKENDS)


def make_stepper(cfg: DynamicsConfig, substeps: int = 1, compile: bool | str = False) -> Stepper:
    """``step(params, state, command, dist, keys) -> state``: ``substeps`` physics steps of
    ``cfg`` with ``command`` held, like ``rollout``.

    ``compile`` picks the backend:

    - ``False`` / ``"eager"``: the reference (``rollout``), any device.
    - ``True`` / ``"inductor"``: the whole fused multi-substep function compiled with
      ``torch.compile(dynamic=False)``; any device, fastest for large batches. The batch size
      is static, so each new N (or rotor count) triggers one more compile.
    - ``"numba"``: the rigid-body step as one numba kernel over envs and substeps (CPU only),
      fastest for small batches, where torch's per-op dispatch dominates.
    - ``"warp"``: the rigid-body step as one Warp kernel, a thread per env with the state in
      registers across substeps (any CUDA device, or Warp's single-threaded CPU device); the
      fastest path on a GPU (``pip install volary[warp]``).

    Floats agree with the reference to float32 rounding; if a fast backend fails to compile or
    run it warns and runs eager.
    """
    from volary.errors import ConfigError

    if substeps < 1:
        raise ConfigError(f"substeps: expected >= 1, got {substeps}")
    backend = _backend(compile)
    eager = _reference(cfg, substeps)
    if backend == "eager":
        return eager
    rigid = Model(cfg.model) == Model.RIGID_BODY
    if backend in ("numba", "warp") and not rigid:
        raise ConfigError(f"compile={backend!r}: only the rigid_body model has a {backend} kernel")
    fast: Stepper = (
        _SoAStepper(cfg, substeps, backend) if rigid else torch.compile(eager, dynamic=False)
    )
    return _Fallback(fast, eager)
