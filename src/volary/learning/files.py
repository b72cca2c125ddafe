"""Reading a learner's files by declaration (issue 55): HDF5 datasets and checkpoint networks.

A dataset file is checked against what its reader declares before any array is read: the file a
regular file (:func:`volary.inputs.regular_file`) that HDF5 can open, its root attributes a
pydantic model (:func:`attributes`), each array a dataset stored in this file (no external
link, external raw-data file or virtual dataset: those could name a FIFO or ``/dev/zero``) of
the declared shape and dtype (:func:`array`), and the bytes the reader is about to load within
``LIMITS["array_bytes"]`` (:func:`within_budget`). h5py reads lazily, so all of this costs no
memory whatever shapes the file declares. Every problem is one ``FileFormatError`` line naming
the file and the array or attribute.

A checkpoint's network is built from its stored config only after the same network, built on
torch's ``meta`` device (no memory), has taken the file's state dict (:func:`build_network`):
a config declaring a 10**9-unit layer the weights do not have is refused, not allocated.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch
from torch import nn

from volary.errors import FileFormatError
from volary.inputs import LIMITS, regular_file, validated
from volary.learning.checkpoint import Checkpoint

if TYPE_CHECKING:
    import h5py

M = TypeVar("M")
N = TypeVar("N", bound=nn.Module)
_KINDS = {"f": "floating-point", "i": "integer", "u": "unsigned integer", "b": "boolean"}


def open_h5(path: Any, what: str) -> h5py.File:
    """``path`` opened read-only as HDF5; ``FileFormatError`` for anything else (a FIFO, a
    device, a directory, a missing, truncated or foreign file)."""
    import h5py

    p = regular_file(path, what)
    try:
        return h5py.File(p, "r")
    except (OSError, ValueError) as err:
        raise FileFormatError(f"{p}: not an HDF5 {what} ({_first_line(err)})") from None


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:160] if text else type(err).__name__


def _plain(value: Any) -> Any:
    """An HDF5 attribute as plain Python (numpy scalars and arrays unwrapped), so that the
    model's strict types see what was stored: an int stays an int, a float a float."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def attributes(f: h5py.File, model: type[M], source: str) -> M:
    """The file's root attributes checked against ``model`` (unknown ones refused)."""
    try:
        plain = {k: _plain(v) for k, v in f.attrs.items()}
    except (OSError, TypeError, ValueError) as err:
        raise FileFormatError(f"{source}: unreadable attributes ({_first_line(err)})") from None
    return validated(model, plain, source)


def array(f: h5py.File, name: str, shape: tuple[int, ...], dtype: Any, source: str) -> h5py.Dataset:
    """Dataset ``name`` of exactly ``shape``; its dtype of ``dtype``'s kind (any width for
    floats and integers, exactly ``dtype`` for booleans and bytes)."""
    import h5py

    link = f.get(name, getlink=True)
    if link is None:
        raise FileFormatError(f"{source}: no array {name!r}")
    if not isinstance(link, h5py.HardLink):
        raise FileFormatError(
            f"{source}: {name}: expected an array stored in this file, got a link"
        )
    obj = f[name]
    if not isinstance(obj, h5py.Dataset):
        raise FileFormatError(f"{source}: {name}: expected an array, got a group")
    if obj.is_virtual or obj.external:
        raise FileFormatError(
            f"{source}: {name}: expected an array stored in this file, got one whose data "
            "lies in other files (virtual or external storage)"
        )
    want = np.dtype(dtype)
    got = obj.dtype
    exact = want.kind == "b" or want.itemsize == 1
    ok = got == want if exact else (got.kind == want.kind and got.fields is None)
    if not ok or got.subdtype is not None:
        kind = str(want) if exact else f"{_KINDS[want.kind]} numbers"
        raise FileFormatError(f"{source}: {name}: expected {kind}, got dtype {got}")
    if tuple(obj.shape) != tuple(shape):
        raise FileFormatError(
            f"{source}: {name}: expected shape {tuple(shape)}, got {tuple(obj.shape)}"
        )
    return obj


def within_budget(arrays: Iterable[h5py.Dataset | tuple[int, ...]], source: str) -> None:
    """The bytes of ``arrays`` (datasets, or shapes of float64) within ``LIMITS["array_bytes"]``."""
    total = 0
    for a in arrays:
        shape, size = (a, 8) if isinstance(a, tuple) else (a.shape, a.dtype.itemsize)
        total += math.prod(shape) * size
    limit = LIMITS["array_bytes"]
    if total > limit.hi:
        raise FileFormatError(
            f"{source}: the arrays to read take {total} bytes; expected at most "
            f"{int(limit.hi)} bytes ({limit.quantity})"
        )


def read(ds: h5py.Dataset, source: str, rows: Any = Ellipsis) -> np.ndarray:
    """``ds[rows]``; a damaged chunk or a missing filter is a ``FileFormatError``."""
    try:
        return np.asarray(ds[rows])
    except (OSError, ValueError, TypeError) as err:
        raise FileFormatError(
            f"{source}: {ds.name.lstrip('/')}: unreadable ({_first_line(err)})"
        ) from None


def finite(name: str, values: np.ndarray, source: str, allow_nan: bool = False) -> None:
    """``FileFormatError`` naming the first row of ``values`` that holds an infinity (or a NaN
    unless ``allow_nan``)."""
    bad = np.isinf(values) if allow_nan else ~np.isfinite(values)
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        what = "a finite number" if not allow_nan else "a finite number or NaN"
        got = values.reshape(len(values), -1)[row][bad.reshape(len(values), -1)[row]][0]
        raise FileFormatError(f"{source}: {name}: row {row}: expected {what}, got {got}")


def build_network(
    ck: Checkpoint, field: str, build: Callable[[], N], state: str = "state_dict"
) -> N:
    """The network ``build`` makes from field ``field`` of the checkpoint, built for real only
    after its copy on torch's ``meta`` device (nothing allocated) has taken the file's
    ``state`` field (:meth:`Checkpoint.load_state`: the same keys, shapes and finite weights):
    a config that describes a larger network than the file holds is one ``FileFormatError``,
    before anything is allocated."""
    with ck.reading(field), torch.device("meta"):
        shape = build()
    with warnings.catch_warnings():  # copying into a meta tensor is a no-op, as wanted here
        warnings.simplefilter("ignore", UserWarning)
        ck.load_state(shape, state)
    with ck.reading(field):
        return build()


__all__ = ["array", "attributes", "build_network", "finite", "open_h5", "read", "within_budget"]
