"""The fast CPU splat path (numba): per env a cheap cull, a depth sort and Gaussian-major
compositing with per-pixel occlusion culling.

Same equations as the torch reference (:mod:`volary.sensors.splat.render`), in a different
loop order. The reference walks pixel by pixel through every Gaussian; here, with per-scene
arrays cached across calls (:class:`SceneTable`: rows of world covariance, shortest-axis
normal, opacity and reach in Morton order of the means, 64-byte aligned; a compact (mean,
reach) cull array; DC colours), each env (or band of image rows, when there are more threads
than envs)

1. keeps the Gaussians in front (near < z < far), drawable and not provably off screen (a
   conservative footprint bound), as packed (depth key, id) integers in id order;
2. sorts them by z (stable LSD radix sort in 11-bit digits: the reference's stable order);
3. visits them front to back in batches of 64: table rows gathered (the next batch's rows
   prefetched), then the exact projection (2-D covariance, determinant, footprint radius) of
   the batch by a branch-free loop that vectorizes; then per Gaussian the image test as the
   reference, a skip when every pixel of its footprint box is done (a per-row bitmask), each
   footprint row narrowed to the pixel centres where the exponent can reach the 1/255
   cutoff, and for each open pixel the reference's test and the running transmittance,
   colour and depth sums. Colour (SH) and depth plane are evaluated on the Gaussian's first
   contributing pixel (about 30k of 80k candidates of a 64 x 64 forest frame contribute). A
   pixel whose transmittance would fall below T_MIN is marked done (the reference's "stop
   before").

Per pixel the contributions arrive in the same order with the same alpha as in the reference,
so the paths agree to float rounding; the split over threads (envs or row bands) does not
change a bit. (The earlier pixel-major tile kernel, the GPU scheme, spent 50 ms compositing a
64 x 64 forest frame that this path renders whole in ~11 ms of CPU: pixels that never
saturate, e.g. sky beside tree tops, scanned their tile's whole list.)
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numba
import numpy as np
import torch
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from torch import Tensor

from volary.sensors.splat.io import SH_C0, SH_C1, SH_C2, SH_C3, GaussianSplats
from volary.sensors.splat.projected import ALPHA_MAX, ALPHA_MIN, COS_EDGE_ON, T_MIN, usable

_C2 = tuple(SH_C2)  # tuples: numba freezes them as constants (cacheable)
_C3 = tuple(SH_C3)
jit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")


@jit
def sh_eval(sh, b, g, x, y, z, deg, out, basis):
    """out[:] = max(sum_k sh[b, g, k] Y_k(x, y, z) + 0.5, 0) (io.sh_colour)."""
    basis[0] = SH_C0
    if deg >= 1:
        basis[1], basis[2], basis[3] = -SH_C1 * y, SH_C1 * z, -SH_C1 * x
    if deg >= 2:
        xx, yy, zz = x * x, y * y, z * z
        basis[4] = _C2[0] * x * y
        basis[5] = _C2[1] * y * z
        basis[6] = _C2[2] * (2 * zz - xx - yy)
        basis[7] = _C2[3] * x * z
        basis[8] = _C2[4] * (xx - yy)
    if deg >= 3:
        basis[9] = _C3[0] * y * (3 * xx - yy)
        basis[10] = _C3[1] * x * y * z
        basis[11] = _C3[2] * y * (4 * zz - xx - yy)
        basis[12] = _C3[3] * z * (2 * zz - 3 * xx - 3 * yy)
        basis[13] = _C3[4] * x * (4 * zz - xx - yy)
        basis[14] = _C3[5] * z * (xx - yy)
        basis[15] = _C3[6] * x * (xx - 3 * yy)
    for ch in range(3):
        acc = 0.0
        for k in range((deg + 1) * (deg + 1)):
            acc += basis[k] * sh[b, g, k, ch]
        out[ch] = max(acc + 0.5, 0.0)


@jit
def prepare(means, quats, log_scales, logits, table):
    """Per Gaussian, one row of ``table`` (B, G, 16): mean (0-2), world covariance xx xy
    xz yy yz zz (3-8), shortest-axis unit normal (9-11), peak opacity (12), reach =
    sqrt(2 ln(255 o)) x largest scale (13, m), flat flag (14), sqrt(2 ln(255 o)) (15).
    Scalars only."""
    for b in range(quats.shape[0]):
        for g in range(quats.shape[1]):
            w, x, y, z = quats[b, g, 0], quats[b, g, 1], quats[b, g, 2], quats[b, g, 3]
            nq = math.sqrt(w * w + x * x + y * y + z * z)
            nq = nq if nq > 1e-12 else 1e-12
            w, x, y, z = w / nq, x / nq, y / nq, z / nq
            s0 = math.exp(log_scales[b, g, 0])
            s1 = math.exp(log_scales[b, g, 1])
            s2 = math.exp(log_scales[b, g, 2])
            # M = R S, R body-to-world from the unit quaternion
            m00, m10, m20 = (
                (1 - 2 * (y * y + z * z)) * s0,
                2 * (x * y + w * z) * s0,
                2 * (x * z - w * y) * s0,
            )  # noqa: E501
            m01, m11, m21 = (
                2 * (x * y - w * z) * s1,
                (1 - 2 * (x * x + z * z)) * s1,
                2 * (y * z + w * x) * s1,
            )  # noqa: E501
            m02, m12, m22 = (
                2 * (x * z + w * y) * s2,
                2 * (y * z - w * x) * s2,
                (1 - 2 * (x * x + y * y)) * s2,
            )  # noqa: E501
            row = table[b, g]
            row[0], row[1], row[2] = means[b, g, 0], means[b, g, 1], means[b, g, 2]
            row[3] = m00 * m00 + m01 * m01 + m02 * m02
            row[4] = m00 * m10 + m01 * m11 + m02 * m12
            row[5] = m00 * m20 + m01 * m21 + m02 * m22
            row[6] = m10 * m10 + m11 * m11 + m12 * m12
            row[7] = m10 * m20 + m11 * m21 + m12 * m22
            row[8] = m20 * m20 + m21 * m21 + m22 * m22
            # shortest axis (the first on ties, as torch.sort) and the middle scale
            if s0 <= s1 and s0 <= s2:
                smin, smid, ax, ay, az = s0, min(s1, s2), m00, m10, m20
            elif s1 <= s2:
                smin, smid, ax, ay, az = s1, min(s0, s2), m01, m11, m21
            else:
                smin, smid, ax, ay, az = s2, min(s0, s1), m02, m12, m22
            row[9], row[10], row[11] = ax / smin, ay / smin, az / smin
            o = 1.0 / (1.0 + math.exp(-logits[b, g]))
            row[12] = o
            kf = math.sqrt(2.0 * math.log(max(255.0 * o, 1.0)))
            row[13] = kf * max(s0, s1, s2)
            row[14] = 1.0 if smin < 0.5 * smid else 0.0
            row[15] = kf


@intrinsic
def prefetch(typingctx, arr, i, j):
    """Hint the CPU to load the cache line of ``arr[i, j]`` (2-D array; ``llvm.prefetch``,
    read, keep in all cache levels). No effect on results."""
    sig = types.void(arr, i, j)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = [context.cast(builder, v, t, types.intp)
               for v, t in zip(args[1:], signature.args[1:], strict=True)]  # fmt: skip
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def cttz(typingctx, x):
    """Count of trailing zero bits of a uint64 (``llvm.cttz``; 64 for 0)."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(i64, [i64, ir.IntType(1)])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.cttz.i64")
        return builder.call(fn, [args[0], ir.IntType(1)(0)])

    return sig, codegen


_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


@jit
def span(lo, hi, w):
    """uint64 mask of the columns lo..hi (inclusive) that fall in word w (columns 64 w ..
    64 w + 63); 0 if none."""
    a = max(lo - 64 * w, 0)
    b = min(hi - 64 * w, 63)
    if a > b:
        return np.uint64(0)
    m = _ONES >> np.uint64(63 - (b - a))
    return m << np.uint64(a)


@jit
def any_open(dmask, i, lo, hi):
    """True if a pixel of row i, columns lo..hi, is not done (bit clear in dmask)."""
    for w in range(lo >> 6, (hi >> 6) + 1):
        if (~dmask[i, w]) & span(lo, hi, w):
            return True
    return False


@jit
def id_bits(g):
    """Bits that hold a Gaussian id < g in a packed sort key (at least 1)."""
    b = 1
    while (1 << b) < g:
        b += 1
    return b


@jit
def sort_by_depth(packed, cnt, tmp, idbits):
    """Stable LSD radix sort of packed[:cnt] (uint64: depth key above the low ``idbits``
    bits, Gaussian id in them) on the key bits, in 11-bit digits; digits every key shares
    are skipped. Keys are emitted in id order, so equal keys keep id order, as a stable sort
    does. Returns the array (packed or tmp) that holds the result."""
    nd = (64 - idbits + 10) // 11
    count = np.zeros((nd, 2049), np.int64)
    for q in range(cnt):  # every digit's histogram in one pass
        k = packed[q] >> np.uint64(idbits)
        for d in range(nd):
            count[d, ((k >> np.uint64(11 * d)) & np.uint64(0x7FF)) + 1] += 1
    src, dst = packed, tmp
    for d in range(nd):
        trivial = False
        for b in range(2048):
            if count[d, b + 1] == cnt:
                trivial = True
            count[d, b + 1] += count[d, b]
        if trivial:
            continue
        shift = np.uint64(idbits + 11 * d)
        for q in range(cnt):
            b = (src[q] >> shift) & np.uint64(0x7FF)
            dst[count[d, b]] = src[q]
            count[d, b] += 1
        src, dst = dst, src
    return src


@jit
def candidates(n, cull, k, t_wc, width, height, r0, r1, near, far, blur, idbits, packed):
    """Gaussians of env n in front (near < z < far), drawable (finite reach) and not
    provably off screen (conservative footprint bound), as packed (depth key, id) in id
    order; returns their count. The key is the top 64 - idbits bits of the float64 pattern
    of z (order-preserving for z > 0)."""
    fx, fy, cx, cy = k[n, 0], k[n, 1], k[n, 2], k[n, 3]
    ox, oy, oz = t_wc[n, 0, 3], t_wc[n, 1, 3], t_wc[n, 2, 3]
    r00, r01, r02 = t_wc[n, 0, 0], t_wc[n, 0, 1], t_wc[n, 0, 2]
    r10, r11, r12 = t_wc[n, 1, 0], t_wc[n, 1, 1], t_wc[n, 1, 2]
    r20, r21, r22 = t_wc[n, 2, 0], t_wc[n, 2, 1], t_wc[n, 2, 2]
    limx = 1.3 * max(cx, width - cx) / fx
    limy = 1.3 * max(cy, height - cy) / fy
    jn = math.sqrt(fx * fx * (1 + limx * limx) + fy * fy * (1 + limy * limy))  # >= |J| z
    kb = 4.0 * math.sqrt(blur) + 2.0  # px: the dilation's reach plus the ceil, generous
    bsel = n if cull.shape[0] > 1 else 0
    drop = np.uint64(63 - (64 - idbits))
    cnt = 0
    for g in range(cull.shape[1]):
        reach = cull[bsel, g, 3]
        if not reach >= 0.0:  # NaN: never drawn
            continue
        dx, dy, dz = cull[bsel, g, 0] - ox, cull[bsel, g, 1] - oy, cull[bsel, g, 2] - oz
        z = r02 * dx + r12 * dy + r22 * dz
        if not (z > near and z < far):
            continue
        x = r00 * dx + r10 * dy + r20 * dz
        y = r01 * dx + r11 * dy + r21 * dz
        iz = 1.0 / z
        rb = jn * reach * iz + kb  # >= the exact footprint radius
        u, v = fx * x * iz + cx, fy * y * iz + cy
        if u + rb <= 0 or u - rb >= width or v + rb <= r0 or v - rb >= r1:
            continue
        key = np.float64(z).view(np.uint64) >> drop
        packed[cnt] = (key << np.uint64(idbits)) | np.uint64(g)
        cnt += 1
    return cnt


@jit
def plane(tab, g, r00, r01, r02, r10, r11, r12, r20, r21, r22, fx, fy, cx, cy, x, y, z, u, v,
          rad):  # fmt: skip
    """Depth model (d, a, b, c, lo, hi) of the flat Gaussian tab[g] (render.depth_planes): its
    plane when not seen within ~6 deg of edge-on and not edge-on anywhere in its footprint box,
    else the centre's z."""
    nx, ny, nz = tab[g, 9], tab[g, 10], tab[g, 11]
    ncx = r00 * nx + r10 * ny + r20 * nz
    ncy = r01 * nx + r11 * ny + r21 * nz
    ncz = r02 * nx + r12 * ny + r22 * nz
    qa, qb = ncx / fx, ncy / fy
    qc = ncz - qa * cx - qb * cy
    qd = ncx * x + ncy * y + ncz * z
    use = abs(qd) / max(math.sqrt(x * x + y * y + z * z), 1e-12) > COS_EDGE_ON
    den0 = qa * u + qb * v + qc
    # the box's corner denominators den0 + rad (+-qa +-qb) lie between these two (rounding is
    # monotone), and d / den is monotone where den keeps its sign: the same test and range as
    # over all four corners
    spread = abs(qa) + abs(qb)
    dlo, dhi = den0 + rad * -spread, den0 + rad * spread
    if not (dlo * den0 > 0 and dhi * den0 > 0 and abs(dlo) > 1e-12 and abs(dhi) > 1e-12):
        use = False
    if not use:
        return z, 0.0, 0.0, 1.0, z, z
    zlo, zhi = qd / dlo, qd / dhi
    return qd, qa, qb, qc, min(z, min(zlo, zhi)), max(z, max(zlo, zhi))


BATCH = 64  # Gaussians projected together (vectorized); the next batch's rows are prefetched
NARROW = 3  # px: wider footprint boxes get each row narrowed to the cut-off ellipse first


@jit
def splat_env(n, order, cnt, idbits, table, colour0, perm, sh, k, t_wc, width, height, r0, r1,
              blur, deg, planar, rgb, wz, ws, acc, dmask, ra, rb, inb, outb, gb):  # fmt: skip
    """Project and composite the depth-sorted candidates of env n (order[:cnt], packed
    (key, table row)) front to back. A Gaussian is skipped once its footprint is known to
    add nothing: all its 8 x 8 tiles done, or every pixel centre of its cut-off ellipse done
    (each row of the footprint is narrowed to the pixel centres where the exponent can reach
    the 1/255 cutoff: roots of the conic's quadratic, widened by 1e-6 px). Only then its colour
    (SH) and depth plane; every remaining pixel runs the reference's test."""
    fx, fy, cx, cy = k[n, 0], k[n, 1], k[n, 2], k[n, 3]
    r00, r01, r02 = t_wc[n, 0, 0], t_wc[n, 0, 1], t_wc[n, 0, 2]
    r10, r11, r12 = t_wc[n, 1, 0], t_wc[n, 1, 1], t_wc[n, 1, 2]
    r20, r21, r22 = t_wc[n, 2, 0], t_wc[n, 2, 1], t_wc[n, 2, 2]
    ox, oy, oz = t_wc[n, 0, 3], t_wc[n, 1, 3], t_wc[n, 2, 3]
    limx = 1.3 * max(cx, width - cx) / fx
    limy = 1.3 * max(cy, height - cy) / fy
    bsel = n if table.shape[0] > 1 else 0
    tab = table[bsel]
    col0 = colour0[bsel]
    col = np.empty(3)
    basis = np.empty(16)
    acc[r0:r1] = 0.0  # per pixel: transmittance, r, g, b, sum w z, sum w
    acc[r0:r1, :, 0] = 1.0
    dmask[:, :] = 0
    mask = np.uint64((1 << idbits) - 1)
    for q in range(min(BATCH, cnt)):
        prefetch(tab, order[q] & mask, 0)
    for q0 in range(0, cnt, BATCH):
        nb = min(BATCH, cnt - q0)
        for t in range(nb):  # this batch's rows (in cache: prefetched one batch ahead)
            g = np.int64(order[q0 + t] & mask)
            gb[t] = g
            for c in range(9):
                inb[c * BATCH + t] = tab[g, c]
            inb[9 * BATCH + t] = tab[g, 15]
        for q in range(q0 + BATCH, min(q0 + 2 * BATCH, cnt)):
            prefetch(tab, order[q] & mask, 0)
        project_batch(inb, outb, nb, fx, fy, cx, cy, limx, limy, blur, ox, oy, oz,
                      r00, r01, r02, r10, r11, r12, r20, r21, r22)  # fmt: skip
        for t in range(nb):
            det = outb[8 * BATCH + t]
            if not det > 0:
                continue
            u, v, rad = outb[3 * BATCH + t], outb[4 * BATCH + t], outb[9 * BATCH + t]
            if not (u + rad > 0 and u - rad < width and v + rad > r0 and v - rad < r1):
                continue
            g = gb[t]
            x, y, z = outb[0 * BATCH + t], outb[1 * BATCH + t], outb[2 * BATCH + t]
            ca, cb, cc = outb[5 * BATCH + t], outb[6 * BATCH + t], outb[7 * BATCH + t]
            dx, dy, dz = inb[0 * BATCH + t] - ox, inb[1 * BATCH + t] - oy, inb[2 * BATCH + t] - oz
            kf = inb[9 * BATCH + t]
            o = tab[g, 12]
            j0 = max(0, int(math.ceil(u - rad - 0.5)))
            j1 = min(width - 1, int(math.floor(u + rad - 0.5)))
            i0 = max(r0, int(math.ceil(v - rad - 0.5)))
            i1 = min(r1 - 1, int(math.floor(v + rad - 0.5)))
            if j0 > j1 or i0 > i1:
                continue
            live = False
            for i in range(i0, i1 + 1):  # any pixel of the box not done?
                if any_open(dmask, i, j0, j1):
                    live = True
                    break
            if not live:
                continue
            idet = 1.0 / det
            ia, ib, ic = cc * idet, -cb * idet, ca * idet  # conic
            cut = -0.5 * kf * kf - 1e-9  # ln(1 / (255 o)): alpha < 1/255 below it
            if j1 - j0 >= NARROW:
                kk = -2.0 * cut  # power >= cut  <=>  ia dx^2 + 2 ib dy dx + ic dy^2 <= kk
                iia = 1.0 / ia
                for i in range(i0, i1 + 1):
                    ddy = i + 0.5 - v
                    disc = ib * ib * ddy * ddy - ia * (ic * ddy * ddy - kk)
                    if disc < 0.0:
                        ra[i], rb[i] = 1, 0
                        continue
                    sq = math.sqrt(disc)
                    ra[i] = max(j0, int(math.ceil(u + (-ib * ddy - sq) * iia - 0.5 - 1e-6)))
                    rb[i] = min(j1, int(math.floor(u + (-ib * ddy + sq) * iia - 0.5 + 1e-6)))
            else:
                for i in range(i0, i1 + 1):
                    ra[i], rb[i] = j0, j1
            shaded = False  # colour and depth plane, on the first pixel that takes a share
            pd, pa, pb, pc, lo, hi = z, 0.0, 0.0, 1.0, z, z
            for i in range(i0, i1 + 1):
                if ra[i] > rb[i]:
                    continue
                py = i + 0.5
                ddy = py - v
                for wd in range(ra[i] >> 6, (rb[i] >> 6) + 1):
                    m = (~dmask[i, wd]) & span(ra[i], rb[i], wd)
                    while m:  # the open pixels of the row's range in this word
                        bit = cttz(m)
                        m &= m - np.uint64(1)
                        j = 64 * wd + np.int64(bit)
                        px = j + 0.5
                        ddx = px - u
                        power = -0.5 * (ia * ddx * ddx + ic * ddy * ddy) - ib * ddx * ddy
                        if power > 0.0 or power < cut:
                            continue
                        a = min(ALPHA_MAX, o * math.exp(power))
                        if a < ALPHA_MIN:
                            continue
                        t = acc[i, j, 0]
                        t_next = t * (1.0 - a)
                        if t_next < T_MIN:
                            dmask[i, wd] |= np.uint64(1) << bit
                            continue
                        if not shaded:
                            shaded = True
                            if deg == 0:
                                for ch in range(3):
                                    col[ch] = col0[g, ch]
                            else:
                                nd = math.sqrt(dx * dx + dy * dy + dz * dz)
                                nd = nd if nd > 1e-12 else 1e-12
                                sh_eval(sh, bsel, perm[bsel, g], dx / nd, dy / nd, dz / nd, deg,
                                        col, basis)  # fmt: skip
                            if planar and tab[g, 14] > 0.5:
                                pd, pa, pb, pc, lo, hi = plane(
                                    tab, g, r00, r01, r02, r10, r11, r12, r20, r21, r22, fx,
                                    fy, cx, cy, x, y, z, u, v, rad
                                )  # fmt: skip
                        w = a * t
                        acc[i, j, 1] += w * col[0]
                        acc[i, j, 2] += w * col[1]
                        acc[i, j, 3] += w * col[2]
                        den = pa * px + pb * py + pc
                        if abs(den) <= 1e-12:
                            den = 1e-12
                        acc[i, j, 4] += w * min(max(pd / den, lo), hi)
                        acc[i, j, 5] += w
                        acc[i, j, 0] = t_next
    for i in range(r0, r1):
        for j in range(width):
            rgb[n, i, j, 0] = acc[i, j, 1]
            rgb[n, i, j, 1] = acc[i, j, 2]
            rgb[n, i, j, 2] = acc[i, j, 3]
            wz[n, i, j] = acc[i, j, 4]
            ws[n, i, j] = acc[i, j, 5]


@jit
def project_batch(inb, outb, nb, fx, fy, cx, cy, limx, limy, blur, ox, oy, oz,
                  r00, r01, r02, r10, r11, r12, r20, r21, r22):  # fmt: skip
    """Camera-frame mean, pixel mean, 2-D covariance (a, b, c), its determinant and the
    footprint radius of nb Gaussians (inb rows: mean xyz, covariance xx xy xz yy yz zz,
    sqrt(2 ln(255 o))) into outb rows (x, y, z, u, v, a, b, c, det, radius). No branches, so
    the loop vectorizes; values where det <= 0 are meaningless and not used."""
    for t in range(nb):
        dx, dy, dz = inb[0 * BATCH + t] - ox, inb[1 * BATCH + t] - oy, inb[2 * BATCH + t] - oz
        z = r02 * dx + r12 * dy + r22 * dz
        x = r00 * dx + r10 * dy + r20 * dz
        y = r01 * dx + r11 * dy + r21 * dz
        iz = 1.0 / z
        # 2-D covariance J W Sigma W^T J^T + blur I (3DGS Eq. 5, EWA Eq. 31)
        tx = min(max(x * iz, -limx), limx)
        ty = min(max(y * iz, -limy), limy)
        fz, gz = fx * iz, fy * iz
        a0, a1, a2 = fz * (r00 - tx * r02), fz * (r10 - tx * r12), fz * (r20 - tx * r22)
        b0, b1, b2 = gz * (r01 - ty * r02), gz * (r11 - ty * r12), gz * (r21 - ty * r22)
        sxx, sxy, sxz = inb[3 * BATCH + t], inb[4 * BATCH + t], inb[5 * BATCH + t]
        syy, syz, szz = inb[6 * BATCH + t], inb[7 * BATCH + t], inb[8 * BATCH + t]
        v0 = sxx * a0 + sxy * a1 + sxz * a2
        v1 = sxy * a0 + syy * a1 + syz * a2
        v2 = sxz * a0 + syz * a1 + szz * a2
        ca = a0 * v0 + a1 * v1 + a2 * v2 + blur
        cb = b0 * v0 + b1 * v1 + b2 * v2
        w0 = sxx * b0 + sxy * b1 + sxz * b2
        w1 = sxy * b0 + syy * b1 + syz * b2
        w2 = sxz * b0 + syz * b1 + szz * b2
        cc = b0 * w0 + b1 * w1 + b2 * w2 + blur
        det = ca * cc - cb * cb
        mid = 0.5 * (ca + cc)
        lam = mid + np.sqrt(max(mid * mid - det, 0.0))
        outb[0 * BATCH + t], outb[1 * BATCH + t], outb[2 * BATCH + t] = x, y, z
        outb[3 * BATCH + t] = fx * x * iz + cx
        outb[4 * BATCH + t] = fy * y * iz + cy
        outb[5 * BATCH + t], outb[6 * BATCH + t], outb[7 * BATCH + t], outb[8 * BATCH + t] = (
            ca,
            cb,
            cc,
            det,
        )
        outb[9 * BATCH + t] = np.ceil(inb[9 * BATCH + t] * np.sqrt(lam))


@jit
def render_envs(table, cull, colour0, perm, sh, k, t_wc, width, height, r0, r1, near, far, blur,
                deg, planar, rgb, wz, ws):  # fmt: skip
    """Every env in turn, image rows r0..r1 - 1 (one thread; the GIL is released), scratch
    buffers shared."""
    g = cull.shape[1]
    idbits = id_bits(g)
    packed = np.empty(g, np.uint64)
    tmp = np.empty(g, np.uint64)
    acc = np.empty((height, width, 6))
    dmask = np.empty((height, (width + 63) // 64), np.uint64)  # bit set: pixel done
    ra = np.empty(height, np.int64)
    rb = np.empty(height, np.int64)
    inb = np.empty(10 * BATCH)
    outb = np.empty(10 * BATCH)
    gb = np.empty(BATCH, np.int64)
    for n in range(t_wc.shape[0]):
        cnt = candidates(n, cull, k, t_wc, width, height, r0, r1, near, far, blur, idbits, packed)
        order = sort_by_depth(packed, cnt, tmp, idbits)
        splat_env(n, order, cnt, idbits, table, colour0, perm, sh, k, t_wc, width, height, r0, r1,
                  blur, deg, planar, rgb, wz, ws, acc, dmask, ra, rb, inb, outb, gb)  # fmt: skip


def _np(t: Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.detach().cpu().numpy())


_TABLES: dict[tuple[int, ...], tuple[tuple[Tensor, ...], SceneTable]] = {}


def _aligned(shape: tuple[int, ...], dtype: np.dtype, align: int = 64) -> np.ndarray:
    """An uninitialized C array whose data starts on an ``align``-byte boundary (a float32
    table row of 16 values is then exactly one cache line)."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(size + align, np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off : off + size].view(dtype).reshape(shape)


def _spread(v: np.ndarray) -> np.ndarray:
    """Bits of 21-bit ints spread to every third bit (for 63-bit Morton codes)."""
    v = v.astype(np.uint64) & np.uint64(0x1FFFFF)
    for shift, mask in ((32, 0x1F00000000FFFF), (16, 0x1F0000FF0000FF), (8, 0x100F00F00F00F00F),
                        (4, 0x10C30C30C30C30C3), (2, 0x1249249249249249)):  # fmt: skip
        v = (v | (v << np.uint64(shift))) & np.uint64(mask)
    return v


def morton_order(means: np.ndarray) -> np.ndarray:
    """Permutation (G,) putting Gaussians in Z-order of their means: Gaussians near in space
    are near in memory, so depth-ordered visits touch fewer cache lines."""
    if len(means) == 0:
        return np.zeros(0, np.int64)
    finite = np.where(np.isfinite(means), means, 0.0)
    lo, hi = finite.min(0), finite.max(0)
    q = ((finite - lo) / np.maximum(hi - lo, 1e-12) * (2**21 - 1)).astype(np.int64)
    code = (
        _spread(q[:, 0]) | (_spread(q[:, 1]) << np.uint64(1)) | (_spread(q[:, 2]) << np.uint64(2))
    )
    return np.argsort(code, kind="stable")


class SceneTable(NamedTuple):
    """Per-scene arrays of the fast path, rows in Morton order of the means, ``(B, G, ...)``."""

    table: np.ndarray  # (B, G, 16) the rows of :func:`prepare`, 64-byte aligned
    cull: np.ndarray  # (B, G, 4) mean and reach (m); reach NaN: never drawn
    colour0: np.ndarray  # (B, G, 3) view-independent colour max(SH_C0 dc + 0.5, 0)
    perm: np.ndarray  # (B, G) table row -> Gaussian id


def scene_table(splats: GaussianSplats) -> SceneTable:
    """The per-scene arrays (:class:`SceneTable`), cached for the last two scenes (keyed by
    tensor identity and version, so an in-place edit of the splats' tensors is seen)."""
    ts = (splats.means, splats.quats, splats.log_scales, splats.opacity_logits, splats.sh)
    key = tuple(x for t in ts for x in (id(t), t._version))
    hit = _TABLES.get(key)
    if hit is not None:
        return hit[1]
    sel = (lambda t: t[None]) if splats.means.dim() == 2 else (lambda t: t)
    means = _np(sel(splats.means))
    raw = np.empty((*means.shape[:2], 16), dtype=means.dtype)
    prepare(
        means, _np(sel(splats.quats)), _np(sel(splats.log_scales)),
        _np(sel(splats.opacity_logits)), raw,
    )  # fmt: skip
    raw[~_np(sel(usable(splats))), 12] = 0.0  # opacity 0: never drawn
    colour0 = _np((SH_C0 * sel(splats.sh)[..., 0, :] + 0.5).clamp_min(0.0))
    perm = np.stack([morton_order(m) for m in means])  # (B, G) table row -> Gaussian id
    table = _aligned(raw.shape, raw.dtype)
    table[:] = np.take_along_axis(raw, perm[..., None], 1)
    colour0 = np.ascontiguousarray(np.take_along_axis(colour0, perm[..., None], 1))
    cull = np.ascontiguousarray(table[..., [0, 1, 2, 13]])
    with np.errstate(invalid="ignore"):
        cull[~(table[..., 12] > ALPHA_MIN), 3] = np.nan
    out = SceneTable(table, cull, colour0, perm)
    while len(_TABLES) >= 2:
        _TABLES.pop(next(iter(_TABLES)))
    _TABLES[key] = (ts, out)  # ts keeps the tensors alive: ids stay unique
    return out


_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def _run_all(fn: Callable[..., None], units: list[tuple[int, int, int, int]]) -> None:
    """fn(*unit) for every unit on a process-wide thread pool (created once, replaced by a
    larger one when more threads are asked for; starting threads per call costs ~0.2 ms)."""
    with _POOL_LOCK:
        if not _POOL or _POOL[0]._max_workers < len(units):
            _POOL[:] = [ThreadPoolExecutor(len(units), thread_name_prefix="volary-splat")]
        jobs = [_POOL[0].submit(fn, *u) for u in units]
    for job in jobs:
        job.result()


def work_units(n: int, height: int, threads: int) -> list[tuple[int, int, int, int]]:
    """(env a, env b, row r0, row r1) per thread: ``threads`` contiguous runs of envs, or with
    fewer envs than threads, each env cut into ``threads // n`` bands of rows."""
    threads = max(1, threads)
    if n == 0:
        return []
    if n >= threads or height < 2:
        cuts = np.linspace(0, n, min(threads, max(n, 1)) + 1).astype(int)
        return [(int(a), int(b), 0, height) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    bands = min(threads // n, height)
    rows = np.linspace(0, height, bands + 1).astype(int)
    return [(e, e + 1, int(r0), int(r1)) for e in range(n)
            for r0, r1 in zip(rows[:-1], rows[1:], strict=True)]  # fmt: skip


def render_fast(
    splats: GaussianSplats,
    k: Tensor,
    t_wc: Tensor,
    width: int,
    height: int,
    *,
    near: float,
    far: float,
    blur: float,
    sh_degree: int,
    depth_mode: str,
) -> tuple[Tensor, Tensor, Tensor]:
    """(rgb (N, H, W, 3), sum w z (N, H, W), sum w (N, H, W)) on the CPU, float64 sums.
    Work is split over ``torch.get_num_threads()`` threads (the kernel releases the GIL):
    contiguous runs of envs, or, with fewer envs than threads, bands of image rows (each band
    culls, sorts and composites the Gaussians that reach its rows). Every pixel sees the same
    contributions in the same order either way, so the result does not depend on the split."""
    table, cull, colour0, perm = scene_table(splats)
    sh = _np(splats.sh if splats.sh.dim() == 4 else splats.sh[None])
    n = t_wc.shape[0]
    rgb = np.zeros((n, height, width, 3))
    wz, ws = np.zeros((n, height, width)), np.zeros((n, height, width))
    kk, tt = _np(k.double()), _np(t_wc.double())
    args = (float(near), float(far), float(blur), sh_degree, depth_mode == "plane")

    def unit(a: int, b: int, r0: int, r1: int) -> None:
        per = (lambda x: x[a:b]) if table.shape[0] > 1 else (lambda x: x)
        render_envs(per(table), per(cull), per(colour0), per(perm), per(sh), kk[a:b],
                    tt[a:b], width, height, r0, r1, *args, rgb[a:b], wz[a:b], ws[a:b])  # fmt: skip

    units = work_units(n, height, torch.get_num_threads())
    if len(units) <= 1:
        for u in units:
            unit(*u)
    else:
        _run_all(unit, units)
    dt = torch.empty(0, dtype=splats.means.dtype).numpy().dtype
    return tuple(torch.from_numpy(a.astype(dt)) for a in (rgb, wz, ws))  # type: ignore[return-value]


def render_fast_image(
    splats: GaussianSplats,
    k: Tensor,
    t_wc: Tensor,
    width: int,
    height: int,
    background: Tensor,
    min_alpha: float,
    depth_fill: float,
    **kw: Any,
) -> tuple[Tensor, Tensor, Tensor]:
    """rgb, depth, alpha of :func:`volary.sensors.splat.render.render` on the fast path. Its
    last steps (background, expected depth, depth fill, clamps) are done here in NumPy, in the
    splats' dtype, the same IEEE operations as render() does in torch, but without torch's
    intra-op threads: their OpenMP workers spin-wait after a parallel op and took the cores
    from the kernel's threads (5x slower at 224 x 224 with 2 threads)."""
    rgb_t, wz_t, alpha_t = render_fast(splats, k, t_wc, width, height, **kw)
    rgb, wz, alpha = rgb_t.numpy(), wz_t.numpy(), alpha_t.numpy()
    dt = rgb.dtype.type
    rgb = rgb + (dt(1.0) - alpha)[..., None] * background.numpy()
    depth = wz / np.maximum(alpha, dt(1e-12))
    depth = np.where(alpha >= dt(min_alpha), depth, dt(depth_fill))
    out = (np.clip(rgb, dt(0.0), dt(1.0)), depth, np.clip(alpha, dt(0.0), dt(1.0)))
    return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in out)  # type: ignore[return-value]


__all__ = ["SceneTable", "render_fast", "render_fast_image", "scene_table", "work_units"]
