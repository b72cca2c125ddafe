"""The World side of serving, shared by every transport (ZeroMQ, ROS 2, ROS 1).

:class:`WorldHost` owns the :class:`~volary.sim.World` built by
:func:`volary.serve.world.build_world` and turns the inputs of one control period into the
World's next step and each vehicle's observation: state, the sensors due, the IMU, collision,
contact and gate events (``docs/protocol.md``'s ``obs``). A transport (``volary serve``'s
:class:`~volary.serve.server.Server`, the ROS bridges) decides *when* to advance and how to
carry inputs and observations; the physics and what is observed are this class's alone, so
a flight is the same through each of them and in-process.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from volary.dynamics.state import field_numpy
from volary.errors import ConfigError
from volary.fc.loop import FirmwareLoop
from volary.serve.world import ServeConfig, build_world, reset_slot
from volary.sim import Placement

_OMIT = {"rays"}  # reading fields that are the same every step (sent in the welcome instead)


class WorldHost:
    """A World flown for other processes (module docstring). ``record``: a ROS 2 bag (MCAP)
    that every input and output is written to (:mod:`volary.serve.recording`)."""

    def __init__(self, config: ServeConfig, *, record: str | Path | None = None) -> None:
        if not isinstance(config, ServeConfig):
            raise ConfigError(f"config: expected a ServeConfig, got {type(config).__name__}")
        self.config = config
        self.world = build_world(config)
        self.firmware: FirmwareLoop | None = (
            self.world.inner if isinstance(self.world.inner, FirmwareLoop) else None
        )
        """The Betaflight rate loop with ``config.firmware == "betaflight"`` (its ``events``:
        lost firmwares), else None."""
        ctrl = self.firmware if self.firmware is not None else self.world.sim.controller
        self.sp_size = int(ctrl.setpoint_size)
        self._check_pos = np.zeros((self.world.b, 3))  # collision-query schedule (_collisions)
        self._margin = np.full(self.world.b, -1.0)
        self._events: tuple[int, dict[str, np.ndarray]] | None = None  # (tick, events)
        self.ticks = 0
        self.recorder: Any = None
        if record is not None:
            from volary.serve.recording import BagRecorder

            self.recorder = BagRecorder(record, config, self.world)

    def close_recording(self) -> None:
        """Close the recording and stop the firmware processes (every transport's ``close``
        calls this)."""
        if self.firmware is not None:
            self.firmware.close()
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None

    def advance(
        self, inputs: dict[int, tuple[str, dict[str, Any]]], actors: dict[int, dict] | None = None
    ) -> dict[int, dict]:
        """One control period with ``inputs`` = {slot: (role, step fields)} and the actors'
        poses {k: {pos, quat}} (placed first); returns the observation of each of those slots
        (recorded with the inputs when recording)."""
        for k, pose in sorted((actors or {}).items()):
            self.world.actors.place(
                k, torch.from_numpy(pose["pos"]), torch.from_numpy(pose["quat"])
            )
            self._events = None
            self._margin[:] = -1.0  # an actor moved: query collisions at this tick
        w = self.world
        dtype = w.params.mass.dtype
        b = w.b
        cmd = np.zeros((b, self.sp_size))
        held = np.ones(b, dtype=bool)  # free slots and vehicles in the loop
        posed = {}
        for slot, (role, d) in inputs.items():
            if role == "vehicle":
                cmd[slot] = d["command"]
                held[slot] = False
            else:
                posed[slot] = d
        command = torch.from_numpy(cmd).to(dtype)
        place = self._placement(held, posed) if held.any() else None
        if self.recorder is not None:
            self.recorder.inputs(w.tick, inputs, actors or {})
        w.step(command, place=place)
        self.ticks += 1
        obs = self.observations(inputs)
        if self.recorder is not None:
            self.recorder.outputs(w.tick, obs)
        return obs

    def _placement(self, held: np.ndarray, posed: dict[int, dict[str, Any]]) -> Placement:
        """The held vehicles' poses: the posed slots' (vehicles in the loop; twist zero unless
        sent), the free slots' where they are."""
        w = self.world
        dtype, st = w.params.mass.dtype, w.state
        pos, quat = st.pos.clone(), st.quat.clone()
        vel, omega = torch.zeros(w.b, 3, dtype=dtype), torch.zeros(w.b, 3, dtype=dtype)
        for slot, d in posed.items():
            pos[slot] = torch.from_numpy(d["pos"]).to(dtype)
            quat[slot] = torch.from_numpy(d["quat"]).to(dtype)
            if d["vel"] is not None:
                vel[slot] = torch.from_numpy(d["vel"]).to(dtype)
            if d["omega"] is not None:
                omega[slot] = torch.from_numpy(d["omega"]).to(dtype)
        return Placement(torch.from_numpy(held), pos, quat, vel, omega)

    def obs(self, slot: int) -> dict[str, Any]:
        return self.observations([slot])[slot]

    def observations(self, slots: Any) -> dict[int, dict[str, Any]]:
        """The ``obs`` of each of ``slots``: state, the sensors it carries that are due, the
        IMU, events. Each tensor is turned into numpy once per call and sent as the slot's row
        (a view)."""
        w = self.world
        st = w.state
        state = {k: field_numpy(st, k) for k in ("pos", "vel", "quat", "omega")}
        times = field_numpy(st, "time")
        carried = {n for slot in slots for n in self.config.slots[slot].sensors}
        readings = {n: _fields(w.read(n), w.b) for n in self.config.sensors
                    if n in carried and w.due(n)}  # fmt: skip
        imu = w.sim.imu_reading
        imu_rows = None if imu is None else {"accel": _numpy(imu.accel), "gyro": _numpy(imu.gyro)}
        events = self.events_now()
        out = {}
        for slot in slots:
            sensors = {n: {f: v[slot] for f, v in readings[n].items()}
                       for n in self.config.slots[slot].sensors if n in readings}  # fmt: skip
            if imu_rows is not None and self.config.slots[slot].role == "vehicle":
                sensors["imu"] = {k: v[slot] for k, v in imu_rows.items()}
            out[slot] = {
                "op": "obs",
                "tick": w.tick,
                "clock": w.tick * w.dt,  # s, exact; the vehicle's ``time`` is a float32 sum
                "time": float(times[slot]),
                "state": {k: v[slot] for k, v in state.items()},
                "sensors": sensors,
                "events": {name: v[slot].item() for name, v in events.items()},
            }
        return out

    def events_now(self) -> dict[str, np.ndarray]:
        """Every vehicle's events at the current tick, computed once per tick: ``collided`` and
        ``out_of_bounds`` (or above the ceiling) with a scene, ``vehicle_contact`` with several
        slots, ``gates_passed`` on a course, ``firmware_lost`` with a Betaflight-flown World.

        Collisions come from the scene's signed distance, queried only when some vehicle has
        moved farther than its margin (clearance to obstacles and to the flight volume) since
        the last query: the distance is 1-Lipschitz, so a skipped query could not have found
        contact (the benchmark's ``ClearanceCollisions`` rule, on displacements)."""
        w = self.world
        if self._events is not None and self._events[0] == w.tick:
            return self._events[1]
        events: dict[str, np.ndarray] = {}
        if w.scene is not None:
            events["collided"], events["out_of_bounds"] = self._collisions()
        if w.m > 1:
            events["vehicle_contact"] = w.vehicle_contacts().numpy()
        if w.gates is not None:
            events["gates_passed"] = w.gates.passed.sum(dim=1).numpy()
        if self.firmware is not None:
            events["firmware_lost"] = self.firmware.lost.copy()
        self._events = (w.tick, events)
        return events

    def _collisions(self) -> tuple[np.ndarray, np.ndarray]:
        w = self.world
        pos = field_numpy(w.state, "pos").astype(np.float64)  # a copy: kept for the next tick
        moved = np.linalg.norm(pos - self._check_pos, axis=1)
        if not bool((moved >= self._margin).any()):
            return np.zeros(w.b, bool), np.zeros(w.b, bool)
        ev = w.collision_events()
        r = w.params.radius.double().numpy()
        lo, hi = w.scene.bounds_min.double().numpy(), w.scene.bounds_max.double().numpy()
        ceil = w.scene.ceiling.double().numpy()
        box = np.minimum(pos - lo, hi - pos).min(axis=1) - r
        margin = np.minimum.reduce([ev.clearance.double().numpy(), box, ceil - pos[:, 2] - r])
        self._check_pos, self._margin = pos, np.maximum(margin, 0.0)
        return ev.collided.numpy(), (ev.out_of_bounds | ev.above_ceiling).numpy()

    def reset_slot(self, slot: int) -> None:
        """Put vehicle ``slot`` back at its start, at rest (what a new client's claim does)."""
        reset_slot(self.world, self.config, slot)
        self._events = None  # the slot moved within this tick
        if self.recorder is not None:
            self.recorder.event(self.world.tick, "reset", slot=slot)


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _fields(reading: Any, b: int) -> dict[str, np.ndarray]:
    """Every per-vehicle tensor field of a reading (first dimension = vehicles) as numpy."""
    if not is_dataclass(reading):
        raise ConfigError(f"sensor reading: expected a dataclass of tensors, got {reading!r:.60}")
    out: dict[str, np.ndarray] = {}
    for f in fields(reading):
        v = getattr(reading, f.name)
        if f.name in _OMIT or not isinstance(v, torch.Tensor) or v.dim() == 0 or v.shape[0] != b:
            continue
        out[f.name] = _numpy(v)
    return out
