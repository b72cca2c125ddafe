"""``rollout``: fly a World with a command source until its end conditions stop every vehicle.

One loop for every closed loop in volary (benchmark trials, races, tracking, expert data,
policy evaluation, RL envs): per control step, ``act(world, k)`` gives the command, the World
steps, the terms (:mod:`volary.sim.terms`) end the vehicles they fire for, and what was asked
is recorded. Vehicles that ended keep flying (hovering on the command ``act`` gives them) but
are no longer checked; the call returns when every vehicle has ended or after ``steps``.

Deterministic per seed and independent of the batch size as the Simulator is: nothing here
draws random numbers or mixes vehicles.

>>> ep = rollout(world, lambda w, k: setpoint, (collided, reached(goal, 0.5)), duration=10.0)
>>> ep.causes(), ep.end_time, ep.records["pos"].shape        # (K, B, 3)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.sim.terms import is_time_out, term_name
from volary.sim.world import World

Act = Callable[[World, int], Any]
Probe = Callable[[World, Any], "Tensor | None"]
STATE_FIELDS = ("pos", "vel", "quat", "omega", "rotor_speed", "time")


@dataclass
class Episode:
    """What one :func:`rollout` call flew.

    ``cause``/``end_time`` are the World's episode status at the end of the call (causes by
    name in :meth:`causes`; ``time_out_causes``: those of the call's terms declared time-outs,
    :meth:`timed_out`); ``records[name]`` stacks the recorded samples (K, B, ...) taken at
    ``record_steps`` (control steps since the call began; 0 is the state before the first step).
    """

    cause_names: list[str]
    cause: Tensor  # (B,) int64 index into cause_names; -1: still flying
    end_time: Tensor  # (B,) float64 s of episode time at the end; NaN: still flying
    steps: int  # control steps flown by this call
    record_steps: list[int] = field(default_factory=list)
    records: dict[str, Tensor] = field(default_factory=dict)
    time_out_causes: frozenset[str] = frozenset()

    @property
    def ended(self) -> Tensor:
        """(B,) bool: the vehicle's episode has ended."""
        return self.cause >= 0

    @property
    def timed_out(self) -> Tensor:
        """(B,) bool: a time-out term ended the vehicle's episode (a truncation)."""
        codes = [i for i, n in enumerate(self.cause_names) if n in self.time_out_causes]
        return torch.isin(self.cause, torch.tensor(codes, dtype=self.cause.dtype,
                                                   device=self.cause.device))  # fmt: skip

    def causes(self) -> list[str]:
        """Every vehicle's cause name ("" while flying)."""
        return [self.cause_names[c] if c >= 0 else "" for c in self.cause.tolist()]


def rollout(
    world: World,
    act: Act | Tensor,
    terms: Sequence[Any] = (),
    *,
    steps: int | None = None,
    duration: float | None = None,
    record: Sequence[str] | Mapping[str, Callable[[World], Tensor]] = (),
    record_every: int = 1,
    record_initial: bool = False,
    begin: bool = True,
    stop_when_done: bool = True,
) -> Episode:
    """Fly ``world`` for ``steps`` control steps (or ``duration`` s) or until every vehicle ends.

    ``act``: a fixed command tensor or ``act(world, k) -> command`` for step ``k`` of this call
    (it may end vehicles itself with ``world.end(mask, cause)``); ``terms``: end conditions,
    checked in order after every step for the vehicles still flying; ``record``: state fields
    (``pos``, ``vel``, ``quat``, ``omega``, ``rotor_speed``, ``time``), ``"command"``, or a
    mapping name -> ``fn(world) -> Tensor``, sampled every ``record_every`` steps (and before
    the first step with ``record_initial``); ``begin``: start every vehicle's episode now
    (False continues the World's current status, e.g. after a take-off rollout).
    """
    n_steps = _steps(world, steps, duration)
    every = _every(record_every)
    probes = _probes(record)
    names = [term_name(t) for t in terms]
    if begin:
        world.begin()
        for t in terms:
            if callable(getattr(t, "reset", None)):
                t.reset(None)
    world.tick0 = world.tick
    rec = _Recorder(probes)
    if record_initial:
        rec.take(world, 0, None)
    k = 0
    for k in range(n_steps):
        if stop_when_done and not bool(world.active.any()):
            break
        command = act(world, k) if callable(act) else act
        world.step(command)
        for name, term in zip(names, terms, strict=True):
            world.end(term(world), name)
        if (k + 1) % every == 0:
            rec.take(world, k + 1, command)
    else:
        k = n_steps
    return Episode(
        cause_names=list(world.cause_names),
        cause=world.cause.clone(),
        end_time=world.end_time.clone(),
        steps=k,
        record_steps=rec.steps,
        records=rec.stack(),
        time_out_causes=frozenset(n for n, t in zip(names, terms, strict=True) if is_time_out(t)),
    )


class _Recorder:
    def __init__(self, probes: dict[str, Probe]) -> None:
        self.probes = probes
        self.steps: list[int] = []
        self.rows: dict[str, list[Tensor | None]] = {name: [] for name in probes}

    def take(self, world: World, k: int, command: Any) -> None:
        if not self.probes:
            return
        self.steps.append(k)
        for name, probe in self.probes.items():
            self.rows[name].append(probe(world, command))

    def stack(self) -> dict[str, Tensor]:
        out: dict[str, Tensor] = {}
        for name, rows in self.rows.items():
            like = next((r for r in rows if r is not None), None)
            if like is not None:  # the initial sample has no command yet: NaN
                out[name] = torch.stack([torch.full_like(like, math.nan) if r is None else r
                                         for r in rows])  # fmt: skip
        return out


def _probes(record: Any) -> dict[str, Probe]:
    if isinstance(record, Mapping):
        return {str(n): partial(_call_probe, f) for n, f in record.items()}
    out: dict[str, Probe] = {}
    for name in record:
        if name == "command":
            out[name] = _command_probe
        elif name in STATE_FIELDS:
            out[name] = partial(_state_probe, name)
        else:
            raise ConfigError(
                f"record: unknown field {name!r}; expected one of {[*STATE_FIELDS, 'command']} "
                "or a mapping name -> fn(world)"
            )
    return out


def _call_probe(fn: Callable[[World], Tensor], world: World, command: Any) -> Tensor:
    return fn(world)


def _state_probe(field_name: str, world: World, command: Any) -> Tensor:
    return getattr(world.state, field_name).clone()


def _command_probe(world: World, command: Any) -> Tensor | None:
    return None if command is None else torch.as_tensor(command).clone()


def _steps(world: World, steps: int | None, duration: float | None) -> int:
    if (steps is None) == (duration is None):
        raise ConfigError("steps, duration: expected exactly one of them")
    if steps is not None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ConfigError(f"steps: expected an int >= 0, got {steps!r}")
        return steps
    if not (isinstance(duration, int | float) and math.isfinite(duration) and duration > 0):
        raise ConfigError(f"duration: expected a time > 0 s, got {duration!r}")
    return max(1, int(math.ceil(duration * world.sim.config.control_hz - 1e-9)))


def _every(every: Any) -> int:
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ConfigError(f"record_every: expected an int >= 1, got {every!r}")
    return every


__all__ = ["Act", "Episode", "rollout"]
