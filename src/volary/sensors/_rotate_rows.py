"""Numba kernel of :func:`volary.sensors.rays.rotate_rows` on the CPU.

Imported on first use (it imports numba); compiled once, cached on disk by numba.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def rotate_rows_kernel(
    a: np.ndarray,  # (1 or N, R, 3) row vectors; a batch of 1 is shared by every n
    m: np.ndarray,  # (N, 3, 3)
    zero: np.floating,  # 0 in the arrays' dtype (so no sum is promoted to float64)
    out: np.ndarray,  # (N, R, 3) out: a[n] @ m[n]
) -> None:  # pragma: no cover
    """out[n, i, j] = ((0 + a_i0 m_0j) + a_i1 m_1j) + a_i2 m_2j, each operation rounded (no
    fused multiply-add): the order of the pinned torch CPU build's batched product, signed
    zeros included."""
    shared = a.shape[0] == 1
    for n in range(m.shape[0]):
        an = 0 if shared else n
        m00, m01, m02 = m[n, 0, 0], m[n, 0, 1], m[n, 0, 2]
        m10, m11, m12 = m[n, 1, 0], m[n, 1, 1], m[n, 1, 2]
        m20, m21, m22 = m[n, 2, 0], m[n, 2, 1], m[n, 2, 2]
        for i in range(a.shape[1]):
            a0, a1, a2 = a[an, i, 0], a[an, i, 1], a[an, i, 2]
            out[n, i, 0] = ((zero + a0 * m00) + a1 * m10) + a2 * m20
            out[n, i, 1] = ((zero + a0 * m01) + a1 * m11) + a2 * m21
            out[n, i, 2] = ((zero + a0 * m02) + a1 * m12) + a2 * m22
