"""Gaussian-splat scenes: the 3DGS PLY layout, spherical harmonics and the world alignment.

Layout (Kerbl et al. 2023 reference code, ``save_ply``; Nerfstudio ``ns-export gaussian-splat``
writes the same names): one ``vertex`` element with float properties ``x, y, z`` (mean, m),
optional ``nx, ny, nz`` (unused, zeros), ``f_dc_0..2`` (degree-0 SH coefficient per colour
channel), ``f_rest_0..3(K-1)-1`` (the higher SH coefficients, **channel-major**: index
``c (K - 1) + k - 1`` holds channel c of coefficient k, K = (degree + 1)^2), ``opacity`` (a
logit), ``scale_0..2`` (log standard deviations along the Gaussian's axes) and ``rot_0..3``
(an unnormalized quaternion [w, x, y, z], the Gaussian's rotation). Nerfstudio's ``rgb`` colour
mode writes uint8 ``red, green, blue`` instead of ``f_dc``; those are read as DC colour and kept.

Every property the file holds (normals, red/green/blue, anything else) is kept with its name,
dtype and order, so ``save_ply(load_ply(p))`` writes the same bytes (header comments included).

Alignment: ``world_from_file`` (4 x 4 similarity, ``p_W = s R p_F + t``) is baked in on load:
means, quaternions (``q_R (x) q``), log-scales (+ log s) and the SH coefficients (rotated degree by
degree, see :func:`sh_rotation`) all move to the world frame (z up, DESIGN.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.errors import ConfigError, FileFormatError
from volary.math.quaternion import quat_from_rotmat, quat_mul, quat_normalize, quat_to_rotmat

# Real spherical-harmonic constants of the 3DGS reference code (Sloan, "Stupid spherical
# harmonics tricks", 2008, Appendix 2: Y_lm up to l = 3 with the sign convention used there).
SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199
SH_C2 = (
    1.0925484305920792,
    -1.0925484305920792,
    0.31539156525252005,
    -1.0925484305920792,
    0.5462742152960396,
)
SH_C3 = (
    -0.5900435899266435,
    2.890611442640554,
    -0.4570457994644658,
    0.3731763325901154,
    -0.4570457994644658,
    1.445305721320277,
    -0.5900435899266435,
)
MAX_SH_DEGREE = 3


def sh_basis(dirs: Tensor, degree: int) -> Tensor:
    """Real SH basis ``(..., (degree + 1)^2)`` at unit directions ``dirs (..., 3)``, in the
    coefficient order of the 3DGS PLY (Sloan 2008, App. 2; degree <= 3)."""
    x, y, z = dirs.unbind(-1)
    out = [torch.full_like(x, SH_C0)]
    if degree >= 1:
        out += [-SH_C1 * y, SH_C1 * z, -SH_C1 * x]
    if degree >= 2:
        xx, yy, zz = x * x, y * y, z * z
        c2 = SH_C2
        out += [
            c2[0] * x * y,
            c2[1] * y * z,
            c2[2] * (2 * zz - xx - yy),
            c2[3] * x * z,
            c2[4] * (xx - yy),
        ]
    if degree >= 3:
        c3 = SH_C3
        out += [
            c3[0] * y * (3 * xx - yy),
            c3[1] * x * y * z,
            c3[2] * y * (4 * zz - xx - yy),
            c3[3] * z * (2 * zz - 3 * xx - 3 * yy),
            c3[4] * x * (4 * zz - xx - yy),
            c3[5] * z * (xx - yy),
            c3[6] * x * (xx - 3 * yy),
        ]
    return torch.stack(out, dim=-1)


def sh_colour(sh: Tensor, dirs: Tensor, degree: int) -> Tensor:
    """View-dependent colour ``max(sum_k c_k Y_k(d) + 0.5, 0)`` (3DGS reference,
    ``computeColorFromSH``): ``sh (..., K, 3)``, ``dirs (..., 3)`` unit (from the camera centre
    to the Gaussian) -> ``(..., 3)``. Only the first (degree + 1)^2 coefficients are used."""
    k = (degree + 1) ** 2
    basis = sh_basis(dirs, degree)
    return ((basis[..., None] * sh[..., :k, :]).sum(-2) + 0.5).clamp_min(0.0)


def sh_rotation(rotation: Tensor, degree: int) -> list[Tensor]:
    """Per degree l, the (2l+1) x (2l+1) matrix A_l with ``Y_l(R^T d) = Y_l(d) A_l`` for every
    d (float64). Rotating a Gaussian by R maps its coefficients c_l to ``A_l c_l`` (colour in
    direction d after the rotation = colour in R^T d before). Solved by least squares on 64
    fixed directions; exact up to rounding because each degree's span is rotation invariant."""
    r = rotation.to(torch.float64)
    gen = torch.Generator().manual_seed(0)
    d = torch.randn(64, 3, generator=gen, dtype=torch.float64)
    d = d / d.norm(dim=-1, keepdim=True)
    before, after = sh_basis(d @ r, degree), sh_basis(d, degree)  # (R^T d) as rows: d @ R
    mats = []
    for lvl in range(degree + 1):
        s = slice(lvl * lvl, (lvl + 1) * (lvl + 1))
        mats.append(torch.linalg.lstsq(after[:, s], before[:, s]).solution)
    return mats


def _sh_count(degree: int) -> int:
    return (degree + 1) ** 2


@dataclass(frozen=True, eq=False)
class PlyLayout:
    """The vertex properties of a 3DGS PLY as read: names and numpy dtypes in file order, the
    header comments and the encoding, so a saved file matches the one read."""

    properties: tuple[tuple[str, str], ...]  # (name, numpy dtype string), file order
    comments: tuple[str, ...] = ()
    obj_info: tuple[str, ...] = ()
    text: bool = False
    byte_order: str = "<"


def default_layout(
    sh_degree: int, float_dtype: str = "<f4", extra: dict[str, np.ndarray] | None = None
) -> PlyLayout:
    """The reference code's layout: x y z nx ny nz f_dc_0..2 f_rest_* opacity scale_* rot_*,
    then any ``extra`` properties (name -> column, its dtype kept, little endian)."""
    names = ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
    names += [f"f_rest_{i}" for i in range(3 * (_sh_count(sh_degree) - 1))]
    names += ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    props = [(n, float_dtype) for n in names]
    props += [
        (n, np.asarray(v).dtype.newbyteorder("<").str)
        for n, v in (extra or {}).items()
        if n not in names
    ]
    return PlyLayout(tuple(props))


@dataclass(frozen=True, eq=False)
class GaussianSplats:
    """A Gaussian-splat scene in the world frame (z up, m), in the PLY's parametrization.

    Leading dims ``B`` are optional (``()`` for one scene, ``(N,)`` for one scene per env, as
    built by :mod:`volary.sensors.effects` for moving objects); G Gaussians each.
    """

    means: Tensor  # (*B, G, 3) m
    quats: Tensor  # (*B, G, 4) [w, x, y, z], not necessarily normalized (as stored)
    log_scales: Tensor  # (*B, G, 3) log m, standard deviations along the Gaussian's axes
    opacity_logits: Tensor  # (*B, G) logit of the peak opacity
    sh: Tensor  # (*B, G, K, 3) SH coefficients, K = (degree + 1)^2, [:, 0] is the DC term
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # other PLY properties, (G,)
    layout: PlyLayout | None = None  # the file's layout (None: default_layout on save)

    def __post_init__(self) -> None:
        g = tuple(self.means.shape[:-1])
        expect = {
            "means": (*g, 3),
            "quats": (*g, 4),
            "log_scales": (*g, 3),
            "opacity_logits": g,
        }
        for name, shape in expect.items():
            t = getattr(self, name)
            if not isinstance(t, Tensor) or tuple(t.shape) != shape:
                got = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
                raise ConfigError(f"splats.{name}: expected shape {shape}, got {got}")
        k = self.sh.shape[-2] if self.sh.dim() >= 2 else -1
        if tuple(self.sh.shape) != (*g, k, 3) or k not in (1, 4, 9, 16):
            raise ConfigError(
                f"splats.sh: expected shape {(*g, 'K', 3)} with K in 1, 4, 9, 16, "
                f"got {tuple(self.sh.shape)}"
            )

    @property
    def count(self) -> int:
        """G, Gaussians per scene."""
        return int(self.means.shape[-2])

    @property
    def sh_degree(self) -> int:
        return int(math.isqrt(self.sh.shape[-2])) - 1

    @property
    def opacities(self) -> Tensor:
        """Peak opacity in (0, 1), ``sigmoid(logit)``."""
        return torch.sigmoid(self.opacity_logits)

    @property
    def scales(self) -> Tensor:
        """Standard deviations (m) along the Gaussian's axes."""
        return self.log_scales.exp()

    def covariances(self) -> Tensor:
        """World covariances ``R S S^T R^T`` (*B, G, 3, 3) m^2 (Kerbl et al. 2023, Eq. 6)."""
        r = quat_to_rotmat(quat_normalize(self.quats))
        m = r * self.scales[..., None, :]
        return m @ m.transpose(-1, -2)

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None):
        """The same splats on another device / float dtype (extra and layout are kept)."""

        def mv(t: Tensor) -> Tensor:
            return t.to(device=device, dtype=dtype)

        return replace(
            self,
            means=mv(self.means),
            quats=mv(self.quats),
            log_scales=mv(self.log_scales),
            opacity_logits=mv(self.opacity_logits),
            sh=mv(self.sh),
        )


def splats_from_colours(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    colours: Tensor,
    sh_degree: int = 0,
) -> GaussianSplats:
    """Splats from linear quantities: scales (m), opacities in (0, 1), view-independent RGB
    colours in [0, 1] (DC term ``(c - 0.5) / C0``, higher coefficients zero)."""
    if not 0 <= sh_degree <= MAX_SH_DEGREE:
        raise ConfigError(f"sh_degree: expected 0..{MAX_SH_DEGREE}, got {sh_degree}")
    o = opacities.clamp(1e-6, 1 - 1e-6)
    sh = torch.zeros(*colours.shape[:-1], _sh_count(sh_degree), 3, dtype=colours.dtype)
    sh = sh.to(colours.device)
    sh[..., 0, :] = (colours - 0.5) / SH_C0
    return GaussianSplats(means, quats, scales.log(), torch.log(o / (1 - o)), sh)


# ------------------------------------------------------------------------- PLY read / write


def _core_names(sh_degree: int) -> list[str]:
    k = _sh_count(sh_degree)
    return (
        ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2"]
        + [f"f_rest_{i}" for i in range(3 * (k - 1))]
        + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    )


def _sh_degree_of(path: Path, names: set[str]) -> int:
    n_rest = sum(1 for n in names if n.startswith("f_rest_"))
    for deg in range(MAX_SH_DEGREE + 1):
        if n_rest == 3 * (_sh_count(deg) - 1):
            if all(f"f_rest_{i}" in names for i in range(n_rest)):
                return deg
    raise FileFormatError(
        f"{path}: {n_rest} f_rest_* properties; expected 0, 9, 24 or 45 (SH degree 0-3) "
        "numbered from f_rest_0"
    )


def _read_vertex(path: Path) -> tuple[np.ndarray, PlyLayout]:
    from volary.worlds.io import read_ply_data

    # check_ply first (a header that claims more than the file holds fails before allocating);
    # comment and obj_info lines anywhere in the header, as the PLY format allows
    ply = read_ply_data(path)
    if "vertex" not in ply:
        raise FileFormatError(f"{path}: no 'vertex' element")
    data = ply["vertex"].data
    for prop in ply["vertex"].properties:
        if type(prop).__name__ == "PlyListProperty":
            raise FileFormatError(f"{path}: vertex property {prop.name!r} is a list")
    props = tuple((n, data.dtype[n].str) for n in data.dtype.names or ())
    order = "<" if ply.byte_order in ("<", "=") and not ply.text else ply.byte_order
    layout = PlyLayout(props, tuple(ply.comments), tuple(ply.obj_info), ply.text, order)
    return data, layout


def _check_finite(path: Path, data: np.ndarray, core: Sequence[str]) -> None:
    """Positions, log-scales (-inf would be a zero scale), rotations, opacity logits and colour
    coefficients must be finite, and rotations non-zero: a Gaussian without them renders
    nothing, and a scene of them an empty image without a word."""
    for name in core:
        col = np.asarray(data[name], dtype=np.float64)
        bad = int((~np.isfinite(col)).sum())
        if bad:
            raise FileFormatError(
                f"{path}: vertex property {name!r}: {bad} of {len(col)} values are NaN or infinite"
            )
    if all(f"rot_{i}" in core for i in range(4)):
        q = np.stack([np.asarray(data[f"rot_{i}"], dtype=np.float64) for i in range(4)], -1)
        zero = int((np.abs(q).sum(-1) == 0).sum())
        if zero:
            raise FileFormatError(f"{path}: {zero} Gaussian(s) with a zero rotation quaternion")


def _column(data: np.ndarray, name: str) -> np.ndarray:
    return np.ascontiguousarray(data[name])


def load_ply(
    path: str | Path, world_from_file: Any = None, *, dtype: torch.dtype | None = None
) -> GaussianSplats:
    """Read a 3DGS PLY (INRIA or Nerfstudio export). ``world_from_file``: optional 4 x 4
    similarity (rotation x uniform scale, translation) baked into the returned splats.
    dtype: None keeps the file's float width (float32, or float64 if any core field is).
    Means outside the world extent (``volary.inputs.LIMITS["coordinate"]``) are refused."""
    p = Path(path)
    data, layout = _read_vertex(p)
    fields: tuple[str, ...] = data.dtype.names or ()
    names = set(fields)
    rgb = {"red", "green", "blue"} <= names and "f_dc_0" not in names
    deg = _sh_degree_of(p, names)
    core = [n for n in _core_names(deg) if not (rgb and n.startswith("f_dc_"))]
    missing = [n for n in core if n not in names]
    if missing:
        raise FileFormatError(f"{p}: missing vertex properties {missing}")
    if len(data) == 0:
        raise FileFormatError(f"{p}: the vertex element is empty")
    _check_finite(p, data, core)
    wide = any(data.dtype[n].itemsize == 8 for n in core)
    dt = dtype or (torch.float64 if wide else torch.float32)

    def cols(ns: Sequence[str]) -> Tensor:
        if not ns:
            return torch.zeros(len(data), 0, dtype=dt)
        arr = np.stack([_column(data, n).astype(np.float64) for n in ns], axis=-1)
        return torch.from_numpy(arr).to(dt)

    if rgb:
        dc = (cols(["red", "green", "blue"]) / 255.0 - 0.5) / SH_C0
    else:
        dc = cols(["f_dc_0", "f_dc_1", "f_dc_2"])
    k = _sh_count(deg)
    rest = cols([f"f_rest_{i}" for i in range(3 * (k - 1))]).reshape(len(data), 3, k - 1)
    sh = torch.cat([dc[:, None, :], rest.transpose(1, 2)], dim=1)
    extra = {n: _column(data, n) for n in fields if n not in core}
    splats = GaussianSplats(
        cols(["x", "y", "z"]),
        cols(["rot_0", "rot_1", "rot_2", "rot_3"]),
        cols(["scale_0", "scale_1", "scale_2"]),
        cols(["opacity"])[:, 0],
        sh,
        extra,
        layout,
    )
    if world_from_file is not None:
        splats = align(splats, world_from_file)
    from volary.worlds.io import check_extent

    label = "Gaussian" if world_from_file is None else "Gaussian (after world_from_file)"
    check_extent(p, splats.means.detach().cpu().numpy(), label)  # within the world extent
    return splats


def _fields(splats: GaussianSplats) -> dict[str, np.ndarray]:
    """Every core PLY property of (unbatched) splats as float64 columns."""
    k = splats.sh.shape[-2]
    sh = splats.sh.detach().cpu().to(torch.float64)
    out: dict[str, Tensor] = {}
    for i, n in enumerate("xyz"):
        out[n] = splats.means[:, i]
    for c in range(3):
        out[f"f_dc_{c}"] = sh[:, 0, c]
        for j in range(k - 1):
            out[f"f_rest_{c * (k - 1) + j}"] = sh[:, j + 1, c]
    out["opacity"] = splats.opacity_logits
    for i in range(3):
        out[f"scale_{i}"] = splats.log_scales[:, i]
    for i in range(4):
        out[f"rot_{i}"] = splats.quats[:, i]
    return {n: t.detach().cpu().to(torch.float64).numpy() for n, t in out.items()}


def save_ply(path: str | Path, splats: GaussianSplats) -> None:
    """Write splats in the 3DGS layout: the layout they were read with (same properties, dtypes,
    comments and encoding), or :func:`default_layout` (float32, binary little endian)."""
    from plyfile import PlyData, PlyElement

    if splats.means.dim() != 2:
        raise ConfigError(
            f"splats: expected one scene (G, 3) means to save, got {tuple(splats.means.shape)}"
        )
    layout = splats.layout or default_layout(splats.sh_degree, extra=splats.extra)
    cols = _fields(splats)
    needed = set(_core_names(splats.sh_degree))
    have = {n for n, _ in layout.properties}
    rgb_only = {"red", "green", "blue"} <= have and "f_dc_0" not in have
    if rgb_only:
        needed -= {"f_dc_0", "f_dc_1", "f_dc_2"}
    if not needed <= have:
        raise ConfigError(
            f"splats.layout: lacks properties {sorted(needed - have)} of SH degree "
            f"{splats.sh_degree}; drop the layout to write the default one"
        )
    arr = np.empty(splats.count, dtype=[(n, np.dtype(d)) for n, d in layout.properties])
    for n, _ in layout.properties:
        if n in needed:
            arr[n] = cols[n]
        elif n in splats.extra:
            arr[n] = splats.extra[n]
        elif n in ("nx", "ny", "nz"):
            arr[n] = 0.0
        else:
            raise ConfigError(f"splats.extra: the layout's property {n!r} has no values")
    el = PlyElement.describe(arr, "vertex")
    ply = PlyData(
        [el],
        text=layout.text,
        byte_order=layout.byte_order,
        comments=list(layout.comments),
        obj_info=list(layout.obj_info),
    )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    ply.write(str(path))


# ------------------------------------------------------------------------- alignment


def as_similarity(world_from_file: Any) -> tuple[Tensor, float, Tensor]:
    """(R (3, 3), s, t (3,)) float64 of a 4 x 4 similarity ``[[s R, t], [0, 1]]``; raises
    ConfigError unless the top-left block is a positive multiple of a rotation."""
    m = torch.as_tensor(np.asarray(world_from_file, dtype=np.float64))
    if m.shape != (4, 4) or not bool(torch.isfinite(m).all()):
        raise ConfigError(f"world_from_file: expected a finite 4x4 matrix, got {tuple(m.shape)}")
    a = m[:3, :3]
    s = float(torch.linalg.det(a)) ** (1.0 / 3.0) if float(torch.linalg.det(a)) > 0 else 0.0
    if s <= 0 or not torch.allclose(
        a.T @ a, torch.eye(3, dtype=a.dtype) * s * s, atol=1e-6 * s * s
    ):
        raise ConfigError(
            "world_from_file: expected [[s R, t], [0, 0, 0, 1]] with R a rotation and s > 0"
        )
    if not torch.allclose(m[3], torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=m.dtype)):
        raise ConfigError("world_from_file: expected last row [0, 0, 0, 1]")
    return a / s, s, m[:3, 3]


def align(splats: GaussianSplats, world_from_file: Any) -> GaussianSplats:
    """Move splats by a similarity ``p_W = s R p_F + t``: means, rotations (``q_R (x) q``),
    log-scales (``+ log s``), SH coefficients (:func:`sh_rotation`) and any nx/ny/nz normals."""
    r, s, t = as_similarity(world_from_file)
    dt, dev = splats.means.dtype, splats.means.device
    means = (s * splats.means.to(torch.float64) @ r.T.to(dev) + t.to(dev)).to(dt)
    q_r = quat_from_rotmat(r).to(dev)
    norm = splats.quats.to(torch.float64).norm(dim=-1, keepdim=True)
    quats = (quat_mul(q_r.expand_as(splats.quats), splats.quats.to(torch.float64))).to(dt)
    quats = torch.where(norm > 0, quats, splats.quats)
    sh = splats.sh.to(torch.float64).clone()
    for lvl, a in enumerate(sh_rotation(r, splats.sh_degree)):
        s_l = slice(lvl * lvl, (lvl + 1) * (lvl + 1))
        sh[..., s_l, :] = torch.einsum("ij,...jc->...ic", a.to(dev), sh[..., s_l, :])
    extra = dict(splats.extra)
    if {"nx", "ny", "nz"} <= extra.keys():
        n = np.stack([extra[k].astype(np.float64) for k in ("nx", "ny", "nz")], -1) @ r.numpy().T
        for i, k in enumerate(("nx", "ny", "nz")):
            extra[k] = n[:, i].astype(splats.extra[k].dtype)
    return replace(
        splats,
        means=means,
        quats=quats,
        log_scales=splats.log_scales + math.log(s),
        sh=sh.to(dt),
        extra=extra,
    )


__all__ = [
    "GaussianSplats",
    "MAX_SH_DEGREE",
    "PlyLayout",
    "SH_C0",
    "align",
    "as_similarity",
    "default_layout",
    "load_ply",
    "save_ply",
    "sh_basis",
    "sh_colour",
    "sh_rotation",
    "splats_from_colours",
]
