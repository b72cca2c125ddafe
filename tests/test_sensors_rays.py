"""The rows rotation every ray sensor runs per call (``rays.rotate_rows``): its compiled CPU path
sums in one fixed order (the same bits everywhere), and anything it does not cover goes to
torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from volary.math.quaternion import quat_normalize, quat_to_rotmat
from volary.sensors.rays import rotate_rows


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32 if t.dtype == torch.float32 else torch.int64)


def _with_zeros(t: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """``t`` with about a third of its entries set to +0 or -0 (rotations of axis-aligned rays
    and level poses multiply by exact zeros; the sign of a zero sum is part of the bits)."""
    u = torch.rand(t.shape, generator=g, dtype=torch.float64)
    sign = torch.where(torch.rand(t.shape, generator=g) < 0.5, -1.0, 1.0).to(t.dtype)
    return torch.where(u < 0.33, 0.0 * sign, t)


def _in_order(a: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """The slow reference: ((0 + a_i0 m_0j) + a_i1 m_1j) + a_i2 m_2j, one numpy operation at a
    time (numpy rounds each product and sum: no fused multiply-add)."""
    a3 = (a if a.dim() == 3 else a[None]).numpy()
    mm = m.numpy()
    acc = np.zeros((mm.shape[0], a3.shape[1], 3), dtype=a3.dtype)
    for k in range(3):
        acc = acc + a3[:, :, k, None] * mm[:, None, k, :]
    return torch.from_numpy(acc)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shared", [True, False])
def test_the_compiled_rotation_sums_in_a_fixed_order_to_the_bit(dtype, shared):
    """The same bits on every machine and torch build: the reference's order, signed zeros
    included. That order is the one the pinned torch CPU wheel's batched product uses (so no
    stored benchmark row moved); other builds' BLAS may round differently, hence only close."""
    g = torch.Generator().manual_seed(7)
    for n, r in [(1, 1), (1, 4096), (3, 7), (8, 4096), (36, 100)]:
        a = torch.randn((r, 3) if shared else (n, r, 3), generator=g, dtype=dtype)
        rot = quat_to_rotmat(quat_normalize(torch.randn(n, 4, generator=g, dtype=dtype)))
        for m in (rot, rot.transpose(-1, -2), torch.randn(n, 3, 3, generator=g, dtype=dtype)):
            for aa, mm in ((a, m), (_with_zeros(a, g), _with_zeros(m, g))):
                out = rotate_rows(aa, mm)
                assert out.shape == (n, r, 3)
                assert torch.equal(_bits(out), _bits(_in_order(aa, mm))), (n, r, shared)
                atol = 1e-5 if dtype == torch.float32 else 1e-13  # a few ulps of |a||m| ~ 10
                torch.testing.assert_close(out, torch.matmul(aa, mm), rtol=0, atol=atol)


def test_non_finite_rows_rotate_as_the_reference_rotates_them():
    a = torch.tensor([[float("nan"), 0.0, 1.0], [float("inf"), 1.0, 0.0], [1.0, 2.0, 3.0]])
    m = quat_to_rotmat(torch.tensor([[0.9, 0.1, -0.3, 0.2]]).div(0.9695))
    out, ref = rotate_rows(a, m), _in_order(a, m)
    assert torch.equal(out.isnan(), ref.isnan())
    finite = ~ref.isnan()
    assert torch.equal(out[finite], ref[finite])


def test_what_the_loop_does_not_cover_goes_to_torch():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(5, 3, generator=g, requires_grad=True)
    m = torch.randn(2, 3, 3, generator=g)
    out = rotate_rows(a, m)
    out.sum().backward()  # autograd: torch's product, differentiable
    assert a.grad is not None and torch.equal(out.detach(), torch.matmul(a, m).detach())
    broadcast = torch.randn(1, 5, 3, generator=g)  # a batch of 1 against 2 matrices
    assert torch.equal(rotate_rows(broadcast, m), torch.matmul(broadcast, m))
    with pytest.raises(RuntimeError):  # mixed dtypes: torch's own error
        rotate_rows(torch.randn(5, 3, dtype=torch.float64), m)
