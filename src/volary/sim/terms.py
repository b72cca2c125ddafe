"""Named end conditions: small functions of a World's state, one per way an episode ends.

A term is a callable ``term(world) -> (B,) bool`` (True: this vehicle's episode ends now) with a
``name`` (a plain function's ``__name__`` serves), a ``time_out`` flag and, when it keeps state,
``reset(mask)``. ``time_out`` declares whether the term is a time-out (a truncation: the episode
was cut short by a limit, not ended by what the vehicle did), as Isaac Lab's
``DoneTerm(..., time_out=True)``: :func:`time_limit` is one, every other term here is not, and a
term without the flag is not one (:func:`is_time_out`; :func:`end_term` declares it on a
function). The envs report a step that only time-outs ended as truncated, any other as
terminated.
A task or a protocol is a tuple of terms; :func:`volary.sim.rollout` evaluates them in order
after every control step, for the vehicles still flying, and the first that fires names the
cause. Terms only read the World; they never step it.

>>> terms = (collided, out_of_volume, diverged, reached(goal, radius=2.0, dwell=1.0, speed=1.0),
...          time_limit(90.0))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import torch
from torch import Tensor

from volary.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])


class Term(Protocol):
    """An end condition: ``(B,) bool`` for the vehicles whose episode ends now; ``time_out``:
    it is a truncation (a limit), not a termination."""

    name: str
    time_out: bool

    def __call__(self, world: Any) -> Tensor: ...


def end_term(*, time_out: bool, name: str | None = None) -> Callable[[F], F]:
    """Declare the decorated function an end condition: ``time_out`` (module docstring) and,
    when given, its ``name``; returns the function itself."""
    if not isinstance(time_out, bool):
        raise ConfigError(f"time_out: expected True or False, got {time_out!r}")

    def declare(fn: F) -> F:
        fn.time_out = time_out  # type: ignore[attr-defined]
        if name is not None:
            fn.__name__ = name
        return fn

    return declare


def is_time_out(term: Any) -> bool:
    """Whether ``term`` is declared a time-out (``time_out`` attribute; absent: False)."""
    flag = getattr(term, "time_out", False)
    if not isinstance(flag, bool):
        raise ConfigError(f"terms: {term_name(term)}.time_out: expected a bool, got {flag!r}")
    return flag


def term_name(term: Any) -> str:
    """A term's name: its ``name`` attribute, else its ``__name__``."""
    name = getattr(term, "name", None) or getattr(term, "__name__", None)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"terms: {term!r} has neither a name nor a __name__")
    return name


@end_term(time_out=False)
def collided(world: Any) -> Tensor:
    """The vehicle's sphere touches an obstacle of its scene or another vehicle of its env, or
    it crashed on the ground (``state.crashed``)."""
    hit = world.state.crashed | world.vehicle_contacts()
    if world.scene is not None:
        hit = hit | world.collision_events().collided
    return hit


@end_term(time_out=False)
def out_of_volume(world: Any) -> Tensor:
    """The vehicle's centre left its scene's flight volume, or its sphere touches the ceiling."""
    if world.scene is None:
        return torch.zeros(world.b, dtype=torch.bool, device=world.device)
    ev = world.collision_events()
    return ev.out_of_bounds | ev.above_ceiling


@end_term(time_out=False)
def out_of_bounds(world: Any) -> Tensor:
    """The vehicle's centre left its scene's bounds box (no ceiling margin: see
    :func:`out_of_volume` for the sphere against the ceiling); a NaN position is not out."""
    if world.scene is None:
        return torch.zeros(world.b, dtype=torch.bool, device=world.device)
    pos, scene = world.state.pos, world.scene
    return ((pos < scene.bounds_min) | (pos > scene.bounds_max)).any(-1)


@end_term(time_out=False)
def diverged(world: Any) -> Tensor:
    """The simulation of the vehicle diverged (NaN/inf state, flagged or reset by the
    Simulator) or its position is not finite."""
    st = world.state
    return st.diverged | world.sim.last_reset | ~torch.isfinite(st.pos).all(-1)


@end_term(time_out=False)
def crashed(world: Any) -> Tensor:
    """The vehicle hit the ground plane hard (``state.crashed``)."""
    return world.state.crashed.clone()


@end_term(time_out=False)
def gates_done(world: Any) -> Tensor:
    """The vehicle passed the last gate of its course (the World's GateTracker)."""
    g = world.gates
    if g is None:
        raise ConfigError("gates_done: the World has no gates")
    last = (g.n_gates - 1).clamp_min(0)
    return g.passed.gather(1, last[:, None])[:, 0]


def time_limit(seconds: float) -> Callable[[Any], Tensor]:
    """Ends an episode once ``seconds`` of episode time have passed."""
    limit = _positive(seconds, "seconds")

    @end_term(time_out=True, name="time_limit")
    def fn(world: Any) -> Tensor:
        return world.elapsed >= limit - 1e-9

    return fn


def below(height: float) -> Callable[[Any], Tensor]:
    """Ends an episode when the vehicle's centre is below ``height`` m (world z)."""

    @end_term(time_out=False, name="below")
    def fn(world: Any) -> Tensor:
        return world.state.pos[:, 2] < height

    return fn


def tilted(max_tilt: float) -> Callable[[Any], Tensor]:
    """Ends an episode when the body z axis leans more than ``max_tilt`` rad from world up."""
    from volary.math.quaternion import quat_to_rotmat

    cos_max = math.cos(_positive(max_tilt, "max_tilt"))

    @end_term(time_out=False, name="tilted")
    def fn(world: Any) -> Tensor:
        return quat_to_rotmat(world.state.quat)[:, 2, 2] < cos_max

    return fn


def too_far(target: Any, distance: float) -> Callable[[Any], Tensor]:
    """Ends an episode when the vehicle is more than ``distance`` m from ``target``: a (3,) or
    (B, 3) tensor, or a callable ``world -> (B, 3)`` for targets that move or change."""
    limit = _positive(distance, "distance")

    @end_term(time_out=False, name="too_far")
    def fn(world: Any) -> Tensor:
        return (_target(target, world) - world.state.pos).norm(dim=-1) > limit

    return fn


class reached:  # noqa: N801 - a term reads like the function terms beside it
    """Ends an episode once the vehicle has stayed within ``radius`` m of ``goal`` for ``dwell``
    s (measured on the steps it is checked) with speed below ``speed`` m/s when it is checked.

    ``goal``: (3,) or (B, 3), or a callable ``world -> (B, 3)``; ``every``: check every k-th
    control step only (the dwell clock sees only those samples, as a recorded track would).
    """

    name = "reached"
    time_out = False

    def __init__(
        self, goal: Any, radius: float, *, dwell: float = 0.0, speed: float = math.inf,
        every: int = 1,
    ) -> None:  # fmt: skip
        self.goal, self.radius = goal, _positive(radius, "radius")
        if not (dwell >= 0 and math.isfinite(dwell)):
            raise ConfigError(f"dwell: expected a time >= 0 s, got {dwell}")
        if not speed > 0:
            raise ConfigError(f"speed: expected a speed > 0 m/s, got {speed}")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ConfigError(f"every: expected an int >= 1, got {every!r}")
        self.dwell, self.speed, self.every = float(dwell), float(speed), every
        self.inside_since: Tensor | None = None  # (B,) s of episode time; NaN: outside

    def reset(self, mask: Tensor | None = None) -> None:
        if self.inside_since is not None:
            m = torch.ones_like(self.inside_since, dtype=torch.bool) if mask is None else mask
            self.inside_since = torch.where(m, math.nan, self.inside_since)

    def __call__(self, world: Any) -> Tensor:
        if self.inside_since is None:
            self.inside_since = torch.full((world.b,), math.nan, dtype=torch.float64,
                                           device=world.device)  # fmt: skip
        if (world.tick - world.tick0) % self.every:
            return torch.zeros(world.b, dtype=torch.bool, device=world.device)
        st, t = world.state, world.elapsed
        inside = (_target(self.goal, world) - st.pos).norm(dim=-1) <= self.radius
        inside = inside & world.active
        since = torch.where(inside & torch.isnan(self.inside_since), t, self.inside_since)
        self.inside_since = torch.where(inside, since, math.nan)
        slow = st.vel.norm(dim=-1) < self.speed
        return inside & (t - self.inside_since >= self.dwell - 1e-9) & slow


def _target(target: Any, world: Any) -> Tensor:
    t = target(world) if callable(target) else target
    return torch.as_tensor(t, device=world.device, dtype=world.state.pos.dtype)


def _positive(v: Any, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and v > 0):
        raise ConfigError(f"{name}: expected a finite number > 0, got {v!r}")
    return float(v)


__all__ = [
    "Term",
    "below",
    "collided",
    "crashed",
    "diverged",
    "end_term",
    "gates_done",
    "is_time_out",
    "out_of_bounds",
    "out_of_volume",
    "reached",
    "term_name",
    "tilted",
    "time_limit",
    "too_far",
]
