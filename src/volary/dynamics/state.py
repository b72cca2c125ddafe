"""The state of N multirotors: a frozen dataclass of tensors, env dim first."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.math.quaternion import quat_identity


@dataclass(frozen=True)
class MultirotorState:
    """Kinematic, rotor and status state of N vehicles (world frame z-up, body FLU)."""

    pos: Tensor  # (N, 3) m, world
    vel: Tensor  # (N, 3) m/s, world
    quat: Tensor  # (N, 4) [w, x, y, z] body-to-world
    omega: Tensor  # (N, 3) rad/s, body
    rotor_speed: Tensor  # (N, R) rad/s
    gust: Tensor  # (N, 3) m/s, world, gust part of the wind (Gauss-Markov)
    time: Tensor  # (N,) s since the env's last reset
    tick: Tensor  # (N,) int64 physics steps taken by the env (its noise counter; kept on reset)
    landed: Tensor  # (N,) bool, resting on the ground plane
    crashed: Tensor  # (N,) bool, hit the ground faster than the crash speed
    diverged: Tensor  # (N,) bool, a NaN/inf state or command was caught in this env

    @staticmethod
    def create(
        n_envs: int,
        n_rotors: int,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        pos: Any = None,
        rotor_speed: Any = None,
    ) -> MultirotorState:
        """N vehicles at rest, level, at ``pos`` (default origin), rotors at ``rotor_speed``."""
        z3 = torch.zeros(n_envs, 3, device=device, dtype=dtype)
        f = torch.zeros(n_envs, dtype=torch.bool, device=device)
        p = z3.clone() if pos is None else torch.as_tensor(pos, device=device, dtype=dtype)
        w = torch.zeros(n_envs, n_rotors, device=device, dtype=dtype)
        if rotor_speed is not None:
            w = w + torch.as_tensor(rotor_speed, device=device, dtype=dtype)
        return MultirotorState(
            pos=p.expand(n_envs, 3).clone(),
            vel=z3.clone(),
            quat=quat_identity(n_envs, device=device, dtype=dtype),
            omega=z3.clone(),
            rotor_speed=w,
            gust=z3.clone(),
            time=torch.zeros(n_envs, device=device, dtype=dtype),
            tick=torch.zeros(n_envs, dtype=torch.int64, device=device),
            landed=f.clone(),
            crashed=f.clone(),
            diverged=f.clone(),
        )

    @property
    def n_envs(self) -> int:
        return int(self.pos.shape[0])

    def replace(self, **changes: Tensor) -> MultirotorState:
        return replace(self, **changes)

    def where(self, mask: Tensor, other: MultirotorState) -> MultirotorState:
        """Per env: ``other`` where ``mask`` (N,) is True, else self."""
        out = {}
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            m = mask.reshape(-1, *([1] * (a.dim() - 1)))
            out[f.name] = torch.where(m, b, a)
        return MultirotorState(**out)

    def index(self, idx: Any) -> MultirotorState:
        return MultirotorState(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def to(self, device=None, dtype=None) -> MultirotorState:
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = (
                v.to(device=device, dtype=dtype) if v.is_floating_point() else v.to(device)
            )
        return MultirotorState(**out)


class LazyState(MultirotorState):
    """A MultirotorState over packed buffers (a fused loop's, a bound stepper's) whose tensors
    are made on first access, field by field (a torch view costs about a microsecond to make
    and another to free, the scale of a whole one-vehicle control step; a loop reading
    ``state.pos`` pays for one). Each field is a descriptor (:class:`_LazyField`, set below)
    that makes the tensor and keeps it in the instance's ``__dict__``, where later reads find
    it (and in the list ``_made``, which :meth:`modified` reads)."""

    def modified(self) -> bool:
        """Whether a tensor of this state was written in place (torch version counters; an
        inference tensor has none and counts as written)."""
        d = self.__dict__
        made = d.get("_made")
        if not made:
            return False
        if "_inference" in d:
            return True
        for t in made:
            if t._version:
                return True
        return False

    def replace(self, **changes: Any) -> MultirotorState:  # a plain state from here on
        if not _STATE_SET.issuperset(changes):
            raise TypeError(f"replace: unknown fields {sorted(set(changes) - _STATE_SET)}")
        return MultirotorState(**{f: changes.get(f, getattr(self, f)) for f in _STATE_FIELDS})

    def __reduce__(self) -> Any:  # pickles and copies as a plain MultirotorState
        return (MultirotorState, tuple(getattr(self, f) for f in _STATE_FIELDS))


_STATE_FIELDS = tuple(f.name for f in fields(MultirotorState))
_STATE_SET = frozenset(_STATE_FIELDS)


class _LazyField:
    """A :class:`LazyState` field: the tensor, made from the buffers on first read and kept in
    the instance's ``__dict__`` (which Python reads before a non-data descriptor like this).
    A descriptor, not ``__getattr__``: Python reaches ``__getattr__`` only after raising an
    AttributeError, about a microsecond, the scale of a one-vehicle step."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        d = obj.__dict__
        src = d.get("_src")
        if src is None:
            raise AttributeError(self.name)
        name, x = self.name, src[0]
        if type(x) is np.ndarray and not torch.is_inference_mode_enabled():  # a fused loop's
            kind, i, j = src[3][name]  # buffers, outside a learner's rollout: kept short
            if kind == 0:
                t = torch.from_numpy(x[i:j].T)
            else:
                t = torch.from_numpy(x[i] if kind == 1 else src[2][i] if kind == 2 else src[1])
            d[name] = t
            d["_made"].append(t)
            return t
        with torch.inference_mode(False):  # a learner's rollout (rsl_rl's, say): make a
            t = _buffer_field(src, name)  # normal tensor, whose writes are counted
            t = torch.from_numpy(t) if isinstance(t, np.ndarray) else t
        if t.is_inference():  # a view of inference buffers: no version counter, so it
            d["_inference"] = True  # counts as written (modified)
        d[name] = t
        d["_made"].append(t)
        return t


for _name in _STATE_FIELDS:
    setattr(LazyState, _name, _LazyField(_name))


def lazy_state(x: Any, tick: Any, flags: Any, rows: dict) -> LazyState:
    """A state over (K, N) state rows, (N,) ticks and (3, N) flags (numpy arrays or tensors)
    whose fields become tensors on first access."""
    state = object.__new__(LazyState)
    state.__dict__.update(_src=(x, tick, flags, rows), _made=[])
    return state


def field_numpy(state: MultirotorState, name: str) -> np.ndarray:
    """``state.<name>`` as a numpy array without making a tensor where it can: a field of a
    :class:`LazyState` over numpy buffers not made yet is a view of its buffer rows (a tensor
    costs a few microseconds to make, the scale of a one-vehicle step); anything else is the
    tensor's ``numpy()`` (copied to the host)."""
    d = state.__dict__
    src = d.get("_src")
    if src is None or name in d or not isinstance(src[0], np.ndarray) or name not in _STATE_SET:
        return getattr(state, name).detach().cpu().numpy()
    return _buffer_field(src, name)


def _buffer_field(src: tuple, name: str) -> Any:
    """Field ``name`` of a lazy state's buffers ``(x, tick, flags, rows)`` in the field's layout:
    a view, numpy or tensor as the buffers are."""
    x, tick, flags, rows = src
    kind, i, j = rows[name]
    if kind == 0:  # (N, k) rows i..j of the state buffer, env stride 1
        return x[i:j].T if isinstance(x, np.ndarray) else x[i:j].t()
    if kind == 1:  # (N,) one row: time
        return x[i]
    return flags[i] if kind == 2 else tick  # a flag row, or the tick vector


def field_rows(r: int) -> dict[str, tuple[int, int, int]]:
    """Where each state field lives: (0, i, j) rows i..j of the (K, N) buffer, (1, i, 0) row i,
    (2, i, 0) flag row i, (3, 0, 0) the tick vector; R = ``r`` rotors."""
    return {
        "pos": (0, 0, 3),
        "vel": (0, 3, 6),
        "quat": (0, 6, 10),
        "omega": (0, 10, 13),
        "rotor_speed": (0, 13, 13 + r),
        "gust": (0, 13 + r, 16 + r),
        "time": (1, 16 + r, 0),
        "tick": (3, 0, 0),
        "landed": (2, 0, 0),
        "crashed": (2, 1, 0),
        "diverged": (2, 2, 0),
    }
