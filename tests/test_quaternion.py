"""The rotation matrix of a quaternion: the gathered torch form against the term-by-term one of
the numba laws, bit for bit."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from volary.control.numba_laws import rotmat
from volary.math.quaternion import quat_from_euler, quat_to_rotmat

component = st.one_of(
    st.floats(-2.0, 2.0, allow_nan=False, width=64),
    st.sampled_from([0.0, -0.0, 1.0, -1.0]),  # signed zeros: R's entries keep their sign
)


def textbook_rotmat(q: torch.Tensor) -> torch.Tensor:
    """R(q) entry by entry: the fused loop's numba law (``numba_laws.rotmat``, the textbook
    formula) evaluated on tensors, the reference of ``quat_to_rotmat``."""
    return torch.stack(rotmat.py_func(*q.unbind(-1)), -1).reshape(*q.shape[:-1], 3, 3)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int64 if t.dtype == torch.float64 else torch.int32)


@given(arrays(np.float64, st.tuples(st.integers(1, 5), st.just(4)), elements=component))
def test_fast_rotmat_is_bit_for_bit_the_textbook_one(q: np.ndarray) -> None:
    for dtype in (torch.float64, torch.float32):
        t = torch.as_tensor(q, dtype=dtype)
        assert torch.equal(_bits(quat_to_rotmat(t)), _bits(textbook_rotmat(t)))
    compiled = np.array([rotmat(*row) for row in q.tolist()]).reshape(-1, 3, 3)  # float64
    assert torch.equal(_bits(quat_to_rotmat(torch.as_tensor(q))), _bits(torch.as_tensor(compiled)))


def test_rotmat_keeps_leading_dims_and_is_a_rotation_for_unit_quaternions() -> None:
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)
    q = q / q.norm(dim=-1, keepdim=True)
    r = quat_to_rotmat(q)
    assert r.shape == (2, 5, 3, 3)
    torch.testing.assert_close(r @ r.transpose(-1, -2), torch.eye(3, dtype=r.dtype).expand_as(r))
    torch.testing.assert_close(torch.linalg.det(r), torch.ones(2, 5, dtype=r.dtype))
    yaw = torch.tensor([0.5], dtype=torch.float64)
    rz = quat_to_rotmat(quat_from_euler(yaw * 0, yaw * 0, yaw))[0]
    c, s = np.cos(0.5), np.sin(0.5)
    want = torch.tensor([[c, -s, 0], [s, c, 0], [0, 0, 1.0]], dtype=rz.dtype)
    torch.testing.assert_close(rz, want)
