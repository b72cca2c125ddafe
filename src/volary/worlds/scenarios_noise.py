"""Seeded 3-D gradient (Perlin) noise and voxel-to-box merging for the Perlin scenario."""

from __future__ import annotations

import numpy as np

from volary.worlds.primitives import Box, Primitive
from volary.worlds.scenarios_common import vec


def _fade(t: np.ndarray) -> np.ndarray:
    """Perlin's quintic fade 6t^5 - 15t^4 + 10t^3 (Perlin 2002, "Improving noise")."""
    return t * t * t * (t * (t * 6 - 15) + 10)


def _grad(h: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Dot product with one of the 12 cube-edge gradients picked by the low 4 hash bits."""
    h = h & 15
    u = np.where(h < 8, x, y)
    v = np.where(h < 4, y, np.where((h == 12) | (h == 14), x, z))
    return np.where(h & 1, -u, u) + np.where(h & 2, -v, v)


def perlin3(perm: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Improved Perlin noise at points ``p (..., 3)``, roughly in [-1, 1]; ``perm (512,)``."""
    fl = np.floor(p)
    i = fl.astype(np.int64) & 255
    f = p - fl
    u = _fade(f)
    x, y, z = f[..., 0], f[..., 1], f[..., 2]
    xi, yi, zi = i[..., 0], i[..., 1], i[..., 2]
    a = perm[xi] + yi
    b = perm[xi + 1] + yi
    aa, ab, ba, bb = perm[a] + zi, perm[a + 1] + zi, perm[b] + zi, perm[b + 1] + zi

    def lerp(t: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return lo + t * (hi - lo)

    x0 = lerp(u[..., 0], _grad(perm[aa], x, y, z), _grad(perm[ba], x - 1, y, z))
    x1 = lerp(u[..., 0], _grad(perm[ab], x, y - 1, z), _grad(perm[bb], x - 1, y - 1, z))
    x2 = lerp(u[..., 0], _grad(perm[aa + 1], x, y, z - 1), _grad(perm[ba + 1], x - 1, y, z - 1))
    x3 = lerp(
        u[..., 0], _grad(perm[ab + 1], x, y - 1, z - 1), _grad(perm[bb + 1], x - 1, y - 1, z - 1)
    )
    return lerp(u[..., 2], lerp(u[..., 1], x0, x1), lerp(u[..., 1], x2, x3))


def fbm3(rng: np.random.Generator, p: np.ndarray, octaves: int) -> np.ndarray:
    """Fractal sum of ``octaves`` Perlin octaves (lacunarity 2, gain 0.5) with a seeded
    permutation table and a seeded offset, at points ``p (..., 3)``."""
    perm = rng.permutation(256)
    perm = np.concatenate([perm, perm]).astype(np.int64)
    offset = rng.uniform(0.0, 256.0, size=3)
    out = np.zeros(p.shape[:-1])
    for o in range(octaves):
        out += 0.5**o * perlin3(perm, p * 2.0**o + offset)
    return out


def merge_voxels(solid: np.ndarray, voxel: float) -> list[Primitive]:
    """Greedy merge of a boolean voxel grid ``(nx, ny, nz)`` into axis-aligned boxes: runs
    along x, then equal runs on consecutive y rows, then equal rectangles on consecutive z."""
    rects: dict[tuple[int, int, int, int], list[int]] = {}  # (x0, x1, y0, y1) -> z layers
    for k in range(solid.shape[2]):
        open_runs: dict[tuple[int, int], list[int]] = {}  # (x0, x1) -> [y0, y1]
        layer: list[tuple[int, int, int, int]] = []
        for j in range(solid.shape[1] + 1):
            row = solid[:, j, k] if j < solid.shape[1] else np.zeros(solid.shape[0], bool)
            d = np.diff(np.concatenate([[0], row.astype(int), [0]]))
            runs = set(
                zip(
                    np.flatnonzero(d == 1).tolist(),
                    (np.flatnonzero(d == -1) - 1).tolist(),
                    strict=True,
                )
            )
            for key in sorted(open_runs):
                if key not in runs:
                    y0, y1 = open_runs.pop(key)
                    layer.append((key[0], key[1], y0, y1))
            for key in sorted(runs):
                if key in open_runs:
                    open_runs[key][1] = j
                else:
                    open_runs[key] = [j, j]
        for r in layer:
            rects.setdefault(r, []).append(k)
    out: list[Primitive] = []
    for (x0, x1, y0, y1), zs in sorted(rects.items()):
        for z0, z1 in _consecutive(zs):
            lo = np.array([x0, y0, z0]) * voxel
            hi = (np.array([x1, y1, z1]) + 1) * voxel
            out.append(Box(vec(*(lo + hi) / 2), vec(*(hi - lo)), object_id=len(out) + 1))
    return out


def _consecutive(values: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for v in values:
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out
