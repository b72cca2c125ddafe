"""Export a trained policy for deployment: ONNX (checked against onnxruntime) and a C header.

What is exported is the policy's deterministic action, exactly what volary runs at evaluation:
for a PPO :class:`~volary.studies.rl.ppo.ActorCritic` that is ``clamp(mu(norm(o)), -1, 1)``
(``ActorCritic.act(deterministic=True)``: running observation normalization, the actor MLP, the
clamp to the env's action box). Any other ``nn.Module`` mapping observations (B, D) float32 to
actions (B, A) is exported as it is (in its current train/eval mode).

- :func:`export_onnx`: ONNX through ``torch.onnx.export`` (the torch.export-based exporter),
  input ``"obs"`` (B, D), output ``"action"`` (B, A), dynamic batch ``B``; checked with
  ``onnx.checker``. Needs ``pip install volary[export]``.
- :func:`onnx_parity`: max |torch - onnxruntime| on given observations (CPU provider).
- :func:`c_header`: a self-contained C99 header (weights as ``static const float`` arrays and a
  ``NAME_forward(obs, action)`` of plain loops, ``<math.h>`` only, no allocation) for MLPs made
  of ``nn.Linear``, ``nn.Tanh``, ``nn.ReLU``, ``nn.ELU``, ``nn.Identity`` and ``RunningNorm``.

Design notes: ``DESIGN.md`` beside this file ("Export").
"""

from __future__ import annotations

import copy
import importlib
import logging
import math
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from volary.errors import ConfigError, MissingDependencyError
from volary.studies.rl.layers import Coords
from volary.studies.rl.ppo import ActorCritic, RunningNorm

EXTRA = "export"  # pip install volary[export]
_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# ---- the deterministic policy ------------------------------------------------------------------
class DeterministicActor(nn.Module):
    """``clamp(actor(obs_norm(obs)), -1, 1)``: a PPO policy's mean action, as volary acts."""

    def __init__(self, obs_norm: RunningNorm, actor: nn.Sequential, obs_dim: int, act_dim: int):
        super().__init__()
        self.obs_norm, self.actor = obs_norm, actor
        self.obs_dim, self.act_dim = obs_dim, act_dim

    def forward(self, obs: Tensor) -> Tensor:
        """Actions (B, A) in [-1, 1] from raw observations (B, D)."""
        return self.actor(self.obs_norm(obs)).clamp(-1.0, 1.0)


def deterministic_actor(policy: nn.Module) -> nn.Module:
    """The module that maps observations (B, obs_dim) float32 to deterministic actions.

    An ``ActorCritic`` gives a :class:`DeterministicActor` (a CPU, eval-mode snapshot of its
    normalizer and actor; equal to ``policy.act(obs, deterministic=True)``); any other
    ``nn.Module`` is returned as it is.
    """
    if isinstance(policy, ActorCritic):
        norm, actor = copy.deepcopy(policy.obs_norm).cpu(), copy.deepcopy(policy.actor).cpu()
        return DeterministicActor(norm, actor, policy.obs_dim, policy.act_dim).eval()
    if isinstance(policy, nn.Module):
        return policy
    raise ConfigError(f"policy: expected an nn.Module or an ActorCritic, got {type(policy)!r}")


def parity_observations(policy: nn.Module, n: int, seed: int = 0) -> Tensor:
    """``n`` float32 observations (n, obs_dim) for a parity check: drawn from the policy's
    running observation statistics N(mean, var) when it has some, else standard normal."""
    if not isinstance(policy, ActorCritic | DeterministicActor):
        raise ConfigError(f"policy: expected an ActorCritic, got {type(policy).__name__}")
    norm, dim = policy.obs_norm, policy.obs_dim
    _check_positive_int("n", n)
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(n, dim, generator=gen, dtype=torch.float64)
    if norm.enabled and float(norm.count) > 0:
        z = norm.mean.cpu() + norm.var.cpu().sqrt() * z
    return z.float()


# ---- checks at the boundary ----------------------------------------------------------------------
def _module(module_or_policy: Any) -> nn.Module:
    if not isinstance(module_or_policy, nn.Module):
        got = type(module_or_policy).__name__
        raise ConfigError(f"module_or_policy: expected an nn.Module or an ActorCritic, got {got}")
    return deterministic_actor(module_or_policy)


def _check_positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}: expected an int >= 1, got {value!r}")
    return value


def _check_out_path(path: str | Path, name: str = "path") -> Path:
    out = Path(path)
    if not out.parent.is_dir():
        raise ConfigError(f"{name}: directory {str(out.parent)!r} does not exist")
    if out.is_dir():
        raise ConfigError(f"{name}: {str(out)!r} is a directory, expected a file path")
    return out


def _check_obs(obs: Any) -> Tensor:
    x = torch.as_tensor(obs) if isinstance(obs, np.ndarray | Tensor) else None
    if x is None or x.ndim != 2 or x.shape[0] < 1 or not x.is_floating_point():
        got = f"shape {tuple(x.shape)}, {x.dtype}" if x is not None else type(obs).__name__
        raise ConfigError(f"obs: expected a float array of shape (N >= 1, obs_dim), got {got}")
    return x.detach().cpu().float()


def _require(package: str) -> ModuleType:
    try:
        return importlib.import_module(package)
    except ImportError as err:
        raise MissingDependencyError(package, EXTRA) from err


def _device_of(module: nn.Module) -> torch.device:
    p = next(module.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def _probe(module: nn.Module, obs_dim: int) -> None:
    """Run the module once on (2, obs_dim) zeros: a wrong ``obs_dim`` is caught here."""
    try:
        with torch.no_grad():
            out = module(torch.zeros(2, obs_dim, device=_device_of(module)))
    except (RuntimeError, ValueError, TypeError, IndexError) as err:
        raise ConfigError(
            f"obs_dim: the module does not take a (2, {obs_dim}) float32 input: {err}"
        ) from err
    if not isinstance(out, Tensor) or out.ndim < 1 or out.shape[0] != 2:
        got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
        raise ConfigError(f"module_or_policy: expected a (2, A) tensor for a batch of 2, got {got}")


# ---- ONNX ----------------------------------------------------------------------------------------
def export_onnx(
    module_or_policy: nn.Module, path: str | Path, obs_dim: int, *, opset: int | None = None
) -> Path:
    """Write the deterministic policy as ONNX: input ``"obs"`` (B, obs_dim) float32, output
    ``"action"`` (B, A), B dynamic; weights inside the file. ``opset``: the ai.onnx opset
    (None: torch's default). Returns the path; the file passes ``onnx.checker``."""
    module = _module(module_or_policy)
    dim = _check_positive_int("obs_dim", obs_dim)
    if isinstance(module, DeterministicActor) and dim != module.obs_dim:
        raise ConfigError(f"obs_dim: the policy takes {module.obs_dim} observations, got {dim}")
    if opset is not None:
        _check_positive_int("opset", opset)
    out = _check_out_path(path)
    _probe(module, dim)
    onnx = _require("onnx")
    _require("onnxscript")  # torch.onnx's exporter translates through ONNX Script
    _torch_export(module, out, dim, opset)
    onnx.checker.check_model(str(out), full_check=True)
    return out


def _torch_export(module: nn.Module, out: Path, obs_dim: int, opset: int | None) -> None:
    batch = torch.export.Dim("batch", min=1)
    example = torch.zeros(2, obs_dim, device=_device_of(module))  # not 1: a size-1 dim is fixed
    try:
        with _quiet_exporter():
            torch.onnx.export(
                module,
                (example,),
                str(out),
                input_names=["obs"],
                output_names=["action"],
                opset_version=opset,
                dynamo=True,
                external_data=False,
                dynamic_shapes=({0: batch},),
                verbose=False,
            )
    except Exception as err:  # the exporter raises many types; keep the cause chained
        raise ConfigError(f"module_or_policy: torch.onnx.export failed: {err}") from err


@contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Hide the exporter's noise that says nothing about this model: one log line per
    torchvision op it could not register, and a FutureWarning from torch.export's pytree."""
    log = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*LeafSpec", category=FutureWarning)
            yield
    finally:
        log.setLevel(level)


def onnx_session(path: str | Path) -> Any:
    """An ``onnxruntime.InferenceSession`` of the file on the CPU provider, one thread."""
    ort = _require("onnxruntime")
    src = Path(path)
    if not src.is_file():
        raise ConfigError(f"path: no such file {str(src)!r}")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    return ort.InferenceSession(str(src), opts, providers=["CPUExecutionProvider"])


def onnx_parity(module_or_policy: nn.Module, path: str | Path, obs: Tensor | np.ndarray) -> float:
    """max |torch - onnxruntime| over the actions of ``obs`` (N, obs_dim), float32 inputs."""
    module = _module(module_or_policy)
    x = _check_obs(obs)
    sess = onnx_session(path)
    inp = sess.get_inputs()[0]
    if isinstance(inp.shape[1], int) and inp.shape[1] != x.shape[1]:
        raise ConfigError(f"obs: the ONNX model takes {inp.shape[1]} columns, got {x.shape[1]}")
    with torch.no_grad():
        ref = module(x.to(_device_of(module))).cpu().numpy().astype(np.float64)
    got = np.asarray(sess.run(None, {inp.name: x.numpy()})[0], dtype=np.float64)
    if got.shape != ref.shape:
        raise ConfigError(f"path: ONNX output shape {got.shape}, torch's is {ref.shape}")
    return float(np.max(np.abs(got - ref)))


# ---- C header ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Stage:
    """One stage of the forward pass the header computes."""

    kind: str  # "norm", "linear", "tanh", "relu", "elu", "clamp"
    arrays: dict[str, Tensor] = field(default_factory=dict)  # float32, CPU
    params: tuple[float, ...] = ()  # norm: (clip,), elu: (alpha,), clamp: (lo, hi)


def _stages(module: nn.Module, npz: bool = False) -> list[_Stage]:
    """The stages of an MLP (with ``npz``, also of the small convolutional nets ``mlp_npz``
    writes: conv, coords, sigmoid); ``ConfigError`` naming the first unsupported layer type."""
    kinds = _STAGES | (_npz_stages() if npz else {})
    make = kinds.get(type(module))  # exact types: a subclass may override forward
    if make is None:
        who = "mlp_npz" if npz else "c_header"
        raise ConfigError(
            f"module_or_policy: {who} does not support layer type {type(module).__name__}; "
            f"supported: {', '.join(t.__name__ for t in kinds)}"
        )
    return make(module, npz)


_STAGES: dict[type, Callable[[Any, bool], list[_Stage]]] = {
    DeterministicActor: lambda m, npz: [
        *_stages(m.obs_norm, npz),
        *_stages(m.actor, npz),
        _Stage("clamp", params=(-1.0, 1.0)),
    ],
    nn.Sequential: lambda m, npz: [s for child in m for s in _stages(child, npz)],
    nn.Linear: lambda m, npz: [_linear(m)],
    RunningNorm: lambda m, npz: [_norm(m)] if m.enabled else [],
    nn.Tanh: lambda m, npz: [_Stage("tanh")],
    nn.ReLU: lambda m, npz: [_Stage("relu")],
    nn.ELU: lambda m, npz: [_Stage("elu", params=(float(m.alpha),))],
    nn.Identity: lambda m, npz: [],
}


def _conv(conv: nn.Conv2d) -> _Stage:
    """A 2-D convolution: W (out, in, kh, kw), b, params (stride, padding, dilation); square
    strides, paddings and dilations, one group, zero padding (what the numpy runtime does)."""
    square = len({*conv.stride}) == len({*conv.padding}) == len({*conv.dilation}) == 1
    ok = conv.groups == 1 and conv.padding_mode == "zeros" and isinstance(conv.padding, tuple)
    if not (ok and square):
        raise ConfigError(f"module_or_policy: mlp_npz supports Conv2d with square stride, "
                          f"padding and dilation, one group, zero padding; got {conv}")  # fmt: skip
    w = conv.weight.detach().cpu().float().contiguous()
    b = conv.bias.detach().cpu().float() if conv.bias is not None else torch.zeros(w.shape[0])
    geometry = (float(conv.stride[0]), float(conv.padding[0]), float(conv.dilation[0]))
    return _Stage("conv", {"W": w, "b": b}, geometry)


def _npz_stages() -> dict[type, Callable[[Any, bool], list[_Stage]]]:
    return {
        nn.Conv2d: lambda m, npz: [_conv(m)],
        nn.Sigmoid: lambda m, npz: [_Stage("sigmoid")],
        Coords: lambda m, npz: [_Stage("coords")],
    }


def _linear(lin: nn.Linear) -> _Stage:
    w = lin.weight.detach().cpu().float()
    b = lin.bias.detach().cpu().float() if lin.bias is not None else torch.zeros(w.shape[0])
    return _Stage("linear", {"W": w.contiguous(), "b": b})


def _norm(norm: RunningNorm) -> _Stage:
    """mean and std exactly as ``RunningNorm.forward`` computes them for float32 input."""
    mean = norm.mean.detach().cpu().float()
    std = torch.sqrt(norm.var.detach().cpu().float() + norm.eps)
    return _Stage("norm", {"mean": mean, "std": std}, (norm.bound,))


def _c_float(v: float) -> str:
    s = format(v, ".9g")  # 9 significant digits round-trip float32
    return (s if any(c in s for c in ".en") else s + ".0") + "f"


def _c_array(name: str, t: Tensor) -> str:
    vals = [_c_float(v) for v in t.reshape(-1).tolist()]
    rows = [", ".join(vals[i : i + 6]) for i in range(0, len(vals), 6)]
    body = ",\n    ".join(rows)
    return f"static const float {name}[{len(vals)}] = {{\n    {body}\n}};\n"


def _c_clamp(lo: float, hi: float) -> str:
    a, b = _c_float(lo), _c_float(hi)
    return f"x[i] < {a} ? {a} : (x[i] > {b} ? {b} : x[i])"


def _c_elementwise(st: _Stage, width: int) -> str:
    expr = {
        "tanh": lambda: "tanhf(x[i])",
        "relu": lambda: "x[i] > 0.0f ? x[i] : 0.0f",
        "elu": lambda: f"x[i] > 0.0f ? x[i] : {_c_float(st.params[0])} * expm1f(x[i])",
        "clamp": lambda: _c_clamp(*st.params),
    }[st.kind]()
    return f"    for (int i = 0; i < {width}; ++i) x[i] = {expr};\n"


def _c_norm(name: str, width: int, clip: float) -> str:
    """(x - mean) / std, then clamped to +-clip unless clip is infinite (not clipped)."""
    code = (f"    for (int i = 0; i < {width}; ++i) x[i] = (x[i] - {name}_obs_mean[i]) / "
            f"{name}_obs_std[i];\n")  # fmt: skip
    if math.isfinite(clip):
        code += _c_elementwise(_Stage("clamp", {}, (-clip, clip)), width)
    return code


def _c_linear(name: str, k: int, n_in: int, n_out: int) -> str:
    return (
        f"    for (int i = 0; i < {n_out}; ++i) {{\n"
        f"        float s = {name}_b{k}[i];\n"
        f"        for (int j = 0; j < {n_in}; ++j) s += {name}_W{k}[i * {n_in} + j] * x[j];\n"
        f"        y[i] = s;\n    }}\n    t = x; x = y; y = t;\n"
    )


@dataclass
class _Emitted:
    """What the header is made of, collected stage by stage."""

    obs_dim: int
    width: int  # current vector width
    max_width: int
    arrays: list[str] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    sizes: list[str] = field(default_factory=list)  # one entry per stage, for the comment
    linears: int = 0


def _emit(stages: list[_Stage], name: str) -> _Emitted:
    first = next((s for s in stages if s.kind in ("linear", "norm")), None)
    if first is None or not any(s.kind == "linear" for s in stages):
        raise ConfigError("module_or_policy: c_header needs at least one nn.Linear")
    dim = first.arrays["W"].shape[1] if first.kind == "linear" else first.arrays["mean"].shape[0]
    em = _Emitted(obs_dim=dim, width=dim, max_width=dim)
    for st in stages:
        for key, arr in st.arrays.items():
            if not bool(torch.isfinite(arr).all()):
                raise ConfigError(f"module_or_policy: {st.kind} {key} has non-finite values")
        _emit_stage(em, st, name)
    return em


def _emit_stage(em: _Emitted, st: _Stage, name: str) -> None:
    if st.kind == "linear":
        _emit_linear(em, st, name)
    elif st.kind == "norm":
        _emit_norm(em, st, name)
    else:
        label = f"clamp [{st.params[0]:g}, {st.params[1]:g}]" if st.kind == "clamp" else st.kind
        em.code.append(f"    /* {label} */\n" + _c_elementwise(st, em.width))
        em.sizes.append(label)


def _emit_linear(em: _Emitted, st: _Stage, name: str) -> None:
    k, (n_out, n_in) = em.linears, st.arrays["W"].shape
    if n_in != em.width:
        raise ConfigError(f"module_or_policy: Linear {k} takes {n_in} inputs, gets {em.width}")
    em.arrays.append(_c_array(f"{name}_W{k}", st.arrays["W"]))
    em.arrays.append(_c_array(f"{name}_b{k}", st.arrays["b"]))
    em.code.append(f"    /* Linear {k}: {n_in} -> {n_out} */\n" + _c_linear(name, k, n_in, n_out))
    em.sizes.append(f"Linear({n_in}, {n_out}) [{name}_W{k}, {name}_b{k}]")
    em.width, em.max_width, em.linears = n_out, max(em.max_width, n_out), k + 1


def _emit_norm(em: _Emitted, st: _Stage, name: str) -> None:
    n, clip = st.arrays["mean"].shape[0], st.params[0]
    if n != em.width:
        raise ConfigError(f"module_or_policy: RunningNorm of {n} dims gets {em.width}")
    em.arrays.append(_c_array(f"{name}_obs_mean", st.arrays["mean"]))
    em.arrays.append(_c_array(f"{name}_obs_std", st.arrays["std"]))
    clipped = f"clipped to +-{clip:g}" if math.isfinite(clip) else "not clipped"
    em.code.append(f"    /* RunningNorm ({n}): (x - mean) / std, {clipped} */\n")
    em.code.append(_c_norm(name, n, clip))
    what = f"clip {clip:g}" if math.isfinite(clip) else "not clipped"
    em.sizes.append(f"RunningNorm({n}, {what}) [{name}_obs_mean, {name}_obs_std]")


def _c_text(em: _Emitted, name: str, filename: str) -> str:
    guard, upper = f"{name.upper()}_H", name.upper()
    layers = "\n".join(f" *   {s}" for s in em.sizes)
    return (
        f"/* {filename}: a deterministic policy, generated by volary.studies.rl.export.c_header.\n"
        f" *\n * {name}_forward(obs, action): obs ({em.obs_dim}) -> action ({em.width}), float32, "
        "C99,\n * no allocation, <math.h> only (link with -lm). Weights are row-major:\n"
        f" * W[i * n_in + j] multiplies input j into output i. Stages, in order:\n{layers}\n */\n"
        f"#ifndef {guard}\n#define {guard}\n\n#include <math.h>\n\n"
        f"#define {upper}_OBS_DIM {em.obs_dim}\n#define {upper}_ACT_DIM {em.width}\n\n"
        + "\n".join(em.arrays)
        + f"\nstatic inline void {name}_forward(const float *obs, float *action)\n{{\n"
        f"    float a[{em.max_width}], b[{em.max_width}];\n    float *x = a, *y = b, *t;\n"
        f"    for (int i = 0; i < {em.obs_dim}; ++i) x[i] = obs[i];\n"
        + "".join(em.code)
        + f"    for (int i = 0; i < {em.width}; ++i) action[i] = x[i];\n}}\n\n"
        f"#endif /* {guard} */\n"
    )


def c_header(module_or_policy: nn.Module, path: str | Path, *, name: str = "policy") -> Path:
    """Write a self-contained C99 header computing the deterministic policy of a small MLP:
    ``static const float NAME_W0[]``, ``NAME_b0[]``, ... and ``static inline void
    NAME_forward(const float *obs, float *action)``. ``ConfigError`` names any layer type other
    than nn.Sequential, nn.Linear, nn.Tanh, nn.ReLU, nn.ELU, nn.Identity and RunningNorm."""
    if not isinstance(name, str) or not _C_NAME.fullmatch(name):
        raise ConfigError(f"name: expected a C identifier, got {name!r}")
    stages = _stages(_module(module_or_policy))
    out = _check_out_path(path)
    em = _emit(stages, name)
    out.write_text(_c_text(em, name, out.name))
    return out


# ---- plain arrays (npz) --------------------------------------------------------------------------
def mlp_npz(
    module_or_policy: nn.Module, path: str | Path, *, meta: dict[str, Any] | None = None
) -> Path:
    """Write the deterministic policy of a small MLP as plain arrays in an ``.npz`` that numpy
    reads without pickle (``np.load(path, allow_pickle=False)``): ``stages`` (a JSON string:
    per stage its kind, parameters and array names), the arrays ``"{k}_{name}"`` (float32) and
    ``meta`` (a JSON string, e.g. the observation layout a deployment must rebuild). The stages
    are the C header's (norm, linear, tanh, relu, elu, clamp) and, for small convolutional nets
    such as the RGB depth encoder (:mod:`volary.studies.rl.rgb_depth`), conv, coords and sigmoid;
    the numpy runtime that reads them is
    :class:`volary.studies.flyingtrust.planners.learned.NumpyMLP`."""
    import json

    stages = _stages(_module(module_or_policy), npz=True)
    out = _check_out_path(path)
    arrays: dict[str, np.ndarray] = {}
    layout = []
    for k, st in enumerate(stages):
        names = []
        for name, t in st.arrays.items():
            arrays[f"{k}_{name}"] = t.numpy().astype(np.float32)
            names.append(name)
        layout.append({"kind": st.kind, "params": list(st.params), "arrays": names})
    try:
        meta_json = json.dumps(meta or {}, sort_keys=True)
    except TypeError as exc:
        raise ConfigError(f"meta: expected JSON-able values: {exc}") from exc
    with out.open("wb") as f:
        payload = {"stages": np.array(json.dumps(layout)), "meta": np.array(meta_json), **arrays}
        np.savez(f, **payload)  # type: ignore[arg-type]  # numpy's stub types **kwds as bool
    return out


__all__ = [
    "DeterministicActor",
    "c_header",
    "mlp_npz",
    "deterministic_actor",
    "export_onnx",
    "onnx_parity",
    "onnx_session",
    "parity_observations",
]
