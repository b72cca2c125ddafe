"""A World on ROS 1 as FlightGoggles (AlphaPilot 2019): ``volary ros1 serve``.

:class:`Ros1Bridge` is a :class:`~volary.serve.host.WorldHost` whose transport is one rospy
node. It flies FlightGoggles' vehicle (platform ``flightgoggles``) on the AlphaPilot course
under the ``ctbr`` control level, which is FlightGoggles' input: ``/uav/input/rateThrust``
(``mav_msgs/RateThrust``: thrust.z in N, body rates FLU in rad/s, held until the next). It
publishes FlightGoggles' topics (:mod:`volary.ros1.topics`) and sets its parameters
(:mod:`volary.ros1.params`).

Time: the bridge owns ``/clock`` (``/use_sim_time`` is true). One tick is one control period
(``control_hz``, 120 Hz by default; physics at 960 Hz as FlightGoggles). Each tick publishes, in
this order, ``/clock``, ``/tf`` (world -> uav/imu), at 60 Hz ``camera_info``, ``ir_beacons``
and the rangefinder, and last ``/uav/sensors/imu`` (armed only), all stamped with the tick's
time.

Arming (FlightGoggles 2019): the vehicle sits at its start pose, not simulated and without IMU
output, until a RateThrust with thrust.z >= 9.9 N arrives at least 0.1 s of sim time after the
last reset. A collision (volary's race rule) publishes ``/uav/collision``, puts the vehicle
back at its start and disarms it.

Arming takes effect on a tick of the 60 Hz render grid: an arming command that arrives
between two frames is held until the next frame's tick (at most 1/60 s), so the flight's
frames fall on its control steps 0, k, 2k, ... (k = control_hz / 60) however late the command
arrived, as in ``volary race``, where the sensors' clock starts with the flight.

Repeatable flights: a held vehicle's noise streams (process noise, IMU, sensors) restart at
every held tick, so while disarmed it reads the streams' first draws again and again, and at
arming they restart once more and the vehicle is reset where it is held. A flight's noise
therefore does not depend on how many ticks the wall clock held it: the same commands, armed at
the same phase of the 60 Hz sensor grid, fly bit for bit the same, noise on or off.

Lock-step (default): while disarmed the clock runs at wall speed (so that sim-time timers in
client nodes fire and can send the arming command); once armed, after publishing tick k's
messages the World waits for a RateThrust and flies tick k -> k+1 with the newest one received
since it began publishing tick k (ROS 1 gives no reliable way to tie a message to a tick: the
header is ignored, as FlightGoggles did). Publish one RateThrust per IMU message and nothing is
lost however slow the node is. A node that sends nothing for ``input_timeout`` wall seconds
(a timer slower than the tick, a crashed node) gets the last command held for that tick, with
a warning. Real time (``realtime``): FlightGoggles' own behaviour; the World ticks on the wall
clock (times ``speed``) and flies the newest command; when it cannot keep up the clock runs
slower, and ``/volary/clock_scale`` (sim s per wall s) and ``/uav/camera/debug/fps`` say so.

Firmware (``firmware="betaflight"``): the RateThrust commands fly through Betaflight 4.6.0
SITL's acro rate loop (:class:`volary.fc.loop.FirmwareLoop`, one firmware process, lock-step
with the World's physics steps) instead of FlightGoggles' rate loop. FlightGoggles' vehicle has
no Betaflight profile, so the vehicle is ``research_quad_1kg`` (its 1 kg) unless ``platform``
names another profiled one. Each arming starts a fresh firmware, booted and armed with the
vehicle at rest at its pose, so a flight does not depend on how long it was held disarmed. A
firmware that is lost (it exits or stops answering) ends the flight the way a collision does:
``/uav/collision`` is published, the vehicle goes back to its start, disarmed, the lap ends as
"Collision"; besides, ``/volary/firmware_lost`` (``std_msgs/String``) says when and why and
``/rosout`` logs it. The next arming starts a fresh firmware.

A command that is not finite is refused: logged (``/rosout``), explained on
``/volary/command_error``, and the World keeps the last valid one.

The lap is kept as FlightGoggles' reporter kept it (:mod:`volary.ros1.lap`): at its end the
results YAML is written to ``/uav/results_location`` and published (latched) on
``/volary/results``, and the score on ``/volary/score``.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from volary.errors import ConfigError
from volary.ros1.env import import_rospy
from volary.ros1.lap import Lap
from volary.ros1.msgs import MessageDirs, ensure_messages
from volary.ros1.params import MIN_ARMING_THRUST, RESET_TIMEOUT, fg_params
from volary.serve import roscommon as R
from volary.serve.host import WorldHost
from volary.serve.world import (
    FIRMWARES,
    SensorSpec,
    ServeConfig,
    SlotSpec,
    check_course_setting,
)

COURSES = ("alphapilot_2019",)
SENSOR_HZ = 60.0  # FlightGoggles' render rate: camera_info, IR beacons, rangefinder
PHYSICS_HZ = 960.0  # FlightGoggles' dynamics step
CONTROL_RATES = (60.0, 120.0, 240.0, 480.0, 960.0)  # ticks that divide 960 Hz, multiples of 60
CAMERA, RANGER = "flightgoggles", "flightgoggles"  # sensor presets
GRAVITY = 9.81  # m/s^2 (DESIGN.md)
COMMAND_FIELDS = ("thrust.z", "angular_rates.x", "angular_rates.y", "angular_rates.z")
FIRMWARE_PLATFORM = "research_quad_1kg"  # Betaflight-profiled, FlightGoggles' vehicle's 1 kg
FIRMWARE_LOST = "/volary/firmware_lost"  # std_msgs/String: when and why a firmware was lost


@dataclass(frozen=True)
class Ros1Options:
    """How the bridge serves (module docstring). ``ticks``: stop after this many ticks (None:
    until stopped); ``results``: the results YAML's path; ``exit_on_result``: stop when the
    lap ends (FlightGoggles' scorer launch ended with its reporter); ``imu``: IMU preset;
    ``seed``: the World's noise seed; ``kinetic_frames``: header frame ids with FlightGoggles
    2019's leading slash (:class:`volary.ros1.topics.Frames`); ``firmware``: whose rate loop
    flies the RateThrust commands, ``"ideal"`` (FlightGoggles' own, volary's ``ctbr``
    controller) or ``"betaflight"`` (module docstring); ``platform``: the vehicle (None:
    FlightGoggles' own, ``flightgoggles``, with the ideal loop; :data:`FIRMWARE_PLATFORM` with
    Betaflight, which flies only the platforms it has a rate profile for); ``course_seed``:
    serve the perturbed course ``course_index`` of ``alphapilot_2019_courses(course_index + 1,
    course_seed, generator)`` (its gates moved by the course-generator setting ``generator``,
    default ``volary``: within their published bounds; the parameters' ``nominal_location``
    stays the nominal course's, as in 2019), None: the nominal course; ``arena``: ``empty``
    (gates, floor, bounds) or ``factory`` (the hall of :mod:`volary.worlds.factory`: walls,
    roof, pillars, machines, as ``volary race`` flies the challenge); ``noise_key``: draw the
    vehicle's process, IMU and sensor noise from this key alone (``ServeConfig.noise_keys``),
    None: from ``seed``. With ``noise_key(course, noise_seed)``
    (:func:`volary.studies.alphapilot.race.noise_key`) the served course draws what that
    course x noise-seed pair draws in ``volary race``."""

    course: str = "alphapilot_2019"
    control_hz: float = 120.0
    realtime: bool = False
    speed: float = 1.0
    input_timeout: float | None = 2.0
    ticks: int | None = None
    results: str = "results.yaml"
    exit_on_result: bool = False
    ignore_collisions: bool = False
    imu: str = "flightgoggles"
    seed: int = 0
    kinetic_frames: bool = False
    node_name: str = "volary_flightgoggles"
    firmware: str = "ideal"
    platform: str | None = None
    course_seed: int | None = None
    course_index: int = 0
    generator: str = "volary"
    arena: str = "empty"
    noise_key: int | None = None

    def __post_init__(self) -> None:
        if self.course not in COURSES:
            raise ConfigError(f"course: expected one of {COURSES}, got {self.course!r}")
        check_course_setting("arena", self.arena, "arena")
        check_course_setting("generator", self.generator, "generator")
        for name in ("course_seed", "course_index"):
            v = getattr(self, name)
            if v is None and name == "course_seed":
                continue
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**32:
                raise ConfigError(f"{name}: expected an int in [0, 2**32), got {v!r}")
        if float(self.control_hz) not in CONTROL_RATES:
            raise ConfigError(
                f"control_hz: expected one of {CONTROL_RATES}, got {self.control_hz!r}"
            )
        if not (isinstance(self.speed, int | float) and 0 < self.speed <= 100):
            raise ConfigError(f"speed: expected a real-time factor in (0, 100], got {self.speed!r}")
        if self.input_timeout is not None and not self.input_timeout > 0:
            raise ConfigError(f"input_timeout: expected s > 0 or None, got {self.input_timeout!r}")
        if self.ticks is not None and not (isinstance(self.ticks, int) and self.ticks >= 0):
            raise ConfigError(f"ticks: expected an int >= 0 or None, got {self.ticks!r}")
        if self.firmware not in FIRMWARES:
            raise ConfigError(f"firmware: expected one of {FIRMWARES}, got {self.firmware!r}")
        from volary.platforms import get

        get(self.vehicle)  # an unknown name lists the platforms
        if self.firmware == "betaflight":
            from volary.fc.profiles import rate_profile

            rate_profile(self.vehicle)  # a platform without one lists those that have one

    @property
    def vehicle(self) -> str:
        """The platform flown (``platform``, or the firmware's default)."""
        if self.platform is not None:
            return self.platform
        from volary.bench.gate_race import RACE_PLATFORM

        return RACE_PLATFORM if self.firmware == "ideal" else FIRMWARE_PLATFORM


def serve_config(options: Ros1Options) -> ServeConfig:
    """The World FlightGoggles' interface fronts: its vehicle on the course, ``ctbr`` control
    (through ``options.firmware``'s rate loop), its IMU, the left camera's IR beacons and the
    downward rangefinder at 60 Hz."""
    return ServeConfig(
        slots=(SlotSpec(platform=options.vehicle, sensors=("ir", "range")),),
        scene=options.course,
        control="ctbr",
        control_hz=float(options.control_hz),
        physics_hz=PHYSICS_HZ,
        imu=options.imu,
        sensors={
            "ir": SensorSpec("beacons", CAMERA, SENSOR_HZ),
            "range": SensorSpec("rangefinder", RANGER, SENSOR_HZ),
        },
        sim_seed=options.seed,
        noise_keys=() if options.noise_key is None else (options.noise_key,),
        firmware=options.firmware,
        scene_params=(
            {"arena": options.arena}
            if options.course_seed is None
            else {
                "course_seed": options.course_seed,
                "course": options.course_index,
                "generator": options.generator,
                "arena": options.arena,
            }  # fmt: skip
        ),
    )


def next_due(due: float, period: float, now: float) -> float:
    """The wall time the next tick is due (real time, and disarmed lock-step ticks): one
    ``period`` after the last was ``due``, but no earlier than 0.25 s before ``now`` (after a
    stall the schedule moves on: no burst) and no later than one period after ``now`` (after
    armed lock-step ticks that ran faster than the wall clock, a disarmed clock goes on at wall
    speed from there instead of standing still until the wall clock catches up)."""
    return min(max(due + period, now - 0.25), now + period)


_FG_RATE_LOOP = ("/uav/flightgoggles_lpf/", "/uav/flightgoggles_pid/")  # its gains' parameters


def _cause(ev: dict[str, Any], world: Any) -> str:
    if ev["collided"][0]:
        hit = world.collision_events()
        return f"touched object {int(hit.object_id[0])}"
    if ev["out_of_bounds"][0]:
        return "left the arena or touched its ceiling"
    return "hit the ground" if bool(world.state.crashed[0]) else "the simulation diverged"


class _Commands:
    """The newest valid RateThrust (as a ctbr setpoint) and how many have arrived, shared
    between rospy's callback threads and the World's."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.latest: np.ndarray | None = None
        self.count = 0
        self.refused = 0

    def put(self, sp: np.ndarray) -> None:
        with self.cond:
            self.latest, self.count = sp, self.count + 1
            self.cond.notify_all()

    def wait_newer(self, seen: int, until: float, stop: threading.Event) -> bool:
        """Wait until a command newer than ``seen`` arrives (True), the monotonic time
        ``until`` passes or ``stop`` is set (False)."""
        with self.cond:
            while self.count <= seen and not stop.is_set():
                left = until - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.1))
            return self.count > seen

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()


class Ros1Bridge(WorldHost):
    """FlightGoggles' ROS 1 interface over a World (module docstring). ``messages``: the
    generated message set (default: :func:`volary.ros1.msgs.ensure_messages` of
    ``msg_cache``). The ROS master is ``ROS_MASTER_URI``'s (set it before constructing); one
    bridge per process (rospy has one node)."""

    def __init__(
        self,
        options: Ros1Options | None = None,
        *,
        messages: MessageDirs | None = None,
        msg_cache: str | Path | None = None,
    ) -> None:
        self.options = options if options is not None else Ros1Options()
        if not isinstance(self.options, Ros1Options):
            raise ConfigError(f"options: expected Ros1Options, got {type(options).__name__}")
        self.messages = messages if messages is not None else ensure_messages(msg_cache)
        self.rospy = import_rospy([self.messages.python, self.messages.overlay])
        super().__init__(serve_config(self.options))
        import volary.ros1.topics as topics
        from volary.sensors import camera_config, rangefinder_config

        self.T = topics
        self.spec = self.world.specs[0]
        self.camera, self.ranger = camera_config(CAMERA), rangefinder_config(RANGER)
        self.gate_names = [g.name for g in self.spec.gates]
        self.frames = topics.Frames(self.options.kinetic_frames)
        self.lap = Lap(list(self.spec.meta["order"]), float(self.spec.meta["timeout_s"]))
        self.commands = _Commands()
        self.armed = False
        self._arm_after = RESET_TIMEOUT  # s sim: a command arriving after this may arm
        self._arm_count: int | None = None  # commands received by then
        self.stalls = 0  # armed ticks flown on a held command after input_timeout
        self.stop_event = threading.Event()
        self._passed = np.zeros(len(self.lap.names), dtype=bool)
        self._reported = False
        self._rate_window: tuple[float, int, int] | None = None  # wall, tick, frames: serve()
        self._fw_reported = 0  # firmware events published so far
        imu = self.world.sim.imu.config
        # per-sample variances (m/s^2)^2 and (rad/s)^2 of what is published
        self._var = (imu.accel_noise_density**2 * imu.rate_hz,
                     imu.gyro_noise_density**2 * imu.rate_hz)  # fmt: skip
        self._start_node()

    # ---- setup --------------------------------------------------------------------------------
    @property
    def results_path(self) -> Path:
        return Path(self.options.results).resolve()

    @property
    def now(self) -> float:
        """s of sim time at the current tick (exact: tick times the control period)."""
        return self.world.tick * self.world.dt

    def parameters(self) -> dict[str, Any]:
        out = fg_params(self.world, self.spec, self.camera, self.ranger, str(self.results_path))
        out["/uav/flightgoggles_uav_dynamics/ignore_collisions"] = self.options.ignore_collisions
        if self.firmware is not None:  # Betaflight's rate loop flies, not FlightGoggles'
            out = {k: v for k, v in out.items() if not k.startswith(_FG_RATE_LOOP)}
        out["/volary/firmware"] = self.options.firmware
        return out

    def _start_node(self) -> None:
        rospy = self.rospy
        params = self.parameters()
        sim_time = params.pop("/use_sim_time")
        for k, v in params.items():
            rospy.set_param(k, v)
        rospy.set_param("/use_sim_time", False)  # the bridge keeps wall time; it owns /clock
        rospy.init_node(self.options.node_name, anonymous=False, disable_signals=True)
        rospy.set_param("/use_sim_time", sim_time)
        from mav_msgs.msg import RateThrust

        self.pub = self.T.Publishers(rospy)
        self.sub = rospy.Subscriber(self.T.RATE_THRUST, RateThrust, self._on_rate_thrust,
                                    tcp_nodelay=True)  # fmt: skip
        self.pub.tf_static.publish(self.T.static_tf(rospy, self.camera.mount))
        self.firmware_lost: Any = None
        if self.firmware is not None:
            with warnings.catch_warnings():  # rospy warns that queue_size=None is synchronous
                warnings.simplefilter("ignore", SyntaxWarning)
                self.firmware_lost = rospy.Publisher(FIRMWARE_LOST, self.T.String,
                                                     queue_size=None, tcp_nodelay=True)  # fmt: skip

    # ---- commands -----------------------------------------------------------------------------
    def _on_rate_thrust(self, msg: Any) -> None:
        values = (msg.thrust.z, msg.angular_rates.x, msg.angular_rates.y, msg.angular_rates.z)
        try:
            sp = R.setpoint(values, 4, self.T.RATE_THRUST)
        except R.CommandError:
            bad = next(i for i, v in enumerate(values) if not np.isfinite(v))
            what = f"{self.T.RATE_THRUST}: {COMMAND_FIELDS[bad]} is {values[bad]!r}"
            self.refuse(f"{what}; expected a finite number (refused; the last valid one holds)")
            return
        self.commands.put(sp)

    def refuse(self, why: str) -> None:
        self.commands.refused += 1
        self.rospy.logerr_throttle(1.0, why)
        self.pub.command_error.publish(self.T.String(data=why))

    # ---- the loop -----------------------------------------------------------------------------
    def serve(self) -> Lap:
        """Serve until stopped, ``ticks`` ticks, or the lap's end with ``exit_on_result``;
        returns the lap (its results written and published once it ended)."""
        tick0 = self.world.tick
        seen = self._publish_tick()  # tick 0, sim time 0; its first sensor reads warm up (~1 s)
        # the clock starts once tick 0 is out: its warm-up is neither sim time nor a stall
        next_wall = wall0 = time.monotonic()
        self._rate_window = (wall0, self.world.tick, 0)
        try:
            while not self._should_stop():
                period = self.world.dt / (self.options.speed if self.options.realtime else 1)
                next_wall = next_due(next_wall, period, time.monotonic())
                command = self._await_command(seen, next_wall)
                self._step(command)
                seen = self._publish_tick()
        finally:
            self.lap.interrupt()
            self._report()
            sim, wall = (self.world.tick - tick0) * self.world.dt, time.monotonic() - wall0
            lost = "" if self.firmware is None else f" firmware_lost={len(self.firmware.events)}"
            print(f"volary-ros1 stopped ticks={self.world.tick - tick0} sim_s={sim:.3f} "
                  f"wall_s={wall:.3f} held={self.stalls} refused={self.commands.refused}{lost}",
                  flush=True)  # fmt: skip
        return self.lap

    def stop(self) -> None:
        """Ask :meth:`serve` to return after the current tick (any thread)."""
        self.stop_event.set()
        self.commands.wake()

    def shutdown(self) -> None:
        """Shut the node down and stop the firmware processes."""
        self.close_recording()
        self.rospy.signal_shutdown("volary ros1 bridge stopped")

    def _should_stop(self) -> bool:
        o = self.options
        return (self.stop_event.is_set() or self.rospy.is_shutdown()
                or (o.ticks is not None and self.world.tick >= o.ticks)
                or (o.exit_on_result and self.lap.result is not None))  # fmt: skip

    def _await_command(self, seen: int, next_wall: float) -> np.ndarray | None:
        """The command for the coming tick (module docstring: lock-step and real time)."""
        c, stop = self.commands, self.stop_event
        if self.options.realtime:
            while not stop.is_set():
                left = next_wall - time.monotonic()  # one read: the clock may pass it meanwhile
                if left <= 0:
                    break
                time.sleep(min(left, 0.05))
        elif not self.armed:
            c.wait_newer(seen, next_wall, stop)
        else:
            timeout = self.options.input_timeout
            until = time.monotonic() + (timeout if timeout is not None else float("inf"))
            if not c.wait_newer(seen, until, stop) and not stop.is_set():
                self._stalled()
        return c.latest

    def _stalled(self) -> None:
        self.stalls += 1
        self.rospy.logwarn_throttle(
            5.0,
            f"no RateThrust within input_timeout={self.options.input_timeout} s after tick "
            f"{self.world.tick}: holding the last command (a node commanding from a timer "
            "slower than the tick wants --realtime)",
        )

    def _step(self, command: np.ndarray | None) -> None:
        if not self.armed and self._arms(command) and self.world.due("ir"):
            self.armed = True
            # the flight draws its noise from the streams' start and (with Betaflight) flies a
            # fresh firmware, armed at rest where it is held: however long it was held, it
            # flies the same (module docstring)
            # the frames read this tick (a frame tick: the arming waits for one) are the
            # flight's step-0 frames, so its sensors' streams stay where those reads left them
            self._restart_noise(sensors=False)
            self.reset_slot(0)
        if self.armed and command is not None:
            self.advance({0: ("vehicle", {"command": command})})
            self.lap.start(self.now)  # the first IMU message carries this stamp
        else:
            self._hold()
        self._gates()
        if self.firmware is not None:
            self._firmware_lost()  # disarms when it ends the flight
        if self.armed:
            self._check_crash()
        self.lap.check_time(self.now)
        if self.lap.result is not None:
            self._report()

    def _hold(self) -> None:
        """One disarmed tick: the vehicle stays where it is, at rest, its rotors at hover speed
        (FlightGoggles resets them to it), and time runs."""
        w = self.world
        hover = torch.zeros(w.b, self.sp_size, dtype=w.params.mass.dtype)
        hover[:, 0] = w.params.mass * GRAVITY
        self._restart_noise()  # a held vehicle reads the streams' first draws, tick after tick
        w.step(hover, place=self._placement(np.ones(w.b, dtype=bool), {}))
        self.ticks += 1

    def _restart_noise(self, sensors: bool = True) -> None:
        """The vehicle's noise streams (process, IMU and, with ``sensors``, its sensors') back at
        their start (:meth:`volary.sim.World.restart_noise`)."""
        w = self.world
        mask = torch.zeros(w.b, dtype=torch.bool, device=w.device)
        mask[0] = True
        w.restart_noise(mask, sensors=sensors)

    def _arms(self, command: np.ndarray | None) -> bool:
        """FlightGoggles 2019: a RateThrust of at least 9.9 N that *arrives* more than 0.1 s of
        sim time after the last reset (a command held from before does not re-arm)."""
        if self.now < self._arm_after - 1e-9:
            return False
        if self._arm_count is None:  # the first tick past the timeout: count from here
            self._arm_count = self.commands.count
            return False
        fresh = self.commands.count > self._arm_count
        return fresh and command is not None and command[0] >= MIN_ARMING_THRUST

    def _gates(self) -> None:
        passed = self.world.gates.passed[0].cpu().numpy()
        pos = self.world.state.pos[0].tolist()
        for k in np.flatnonzero(passed & ~self._passed):
            self.lap.passed(int(k), self.now, pos)
        self._passed = passed.copy()

    def _check_crash(self) -> None:
        if not self.crashed():
            return
        self.pub.collision.publish(self.T.Empty())
        ev, pos = self.events_now(), self.world.state.pos[0].tolist()
        where, why = [round(v, 2) for v in pos], _cause(ev, self.world)
        self.rospy.logwarn(f"collision at t={self.now:.3f} s at {where} m ({why})")
        self.lap.collided()
        if not self.options.ignore_collisions:
            self._disarm()

    def _disarm(self) -> None:
        """Back to the start, disarmed; a command may arm again ``RESET_TIMEOUT`` s later."""
        self.reset_slot(0)
        self.armed, self._passed[:] = False, False
        self._arm_after, self._arm_count = self.now + RESET_TIMEOUT, None

    def _firmware_lost(self) -> None:
        """Publish each newly lost firmware on :data:`FIRMWARE_LOST` and ``/rosout``; a flight
        whose firmware is gone ends as a collision does (module docstring), whether or not
        collisions are ignored: nothing flies the vehicle any more."""
        assert self.firmware is not None
        events = self.firmware.events[self._fw_reported :]
        self._fw_reported += len(events)
        for ev in events:
            why = f"t={ev.time:.3f} s: betaflight firmware lost: {ev.cause}"
            self.firmware_lost.publish(self.T.String(data=why))
            self.rospy.logerr(why + (f"; its log ends: {ev.log_tail}" if ev.log_tail else ""))
        if self.armed and self.firmware.lost[0]:
            self.pub.collision.publish(self.T.Empty())
            self.lap.collided()
            self._disarm()  # reset_slot starts a fresh firmware

    def crashed(self) -> bool:
        """:func:`volary.bench.gate_race.crashed_out`'s rule for vehicle 0 (touching a gate or the
        ceiling, leaving the arena, hitting the ground, a diverged simulation), its scene query
        on :meth:`events_now`'s schedule (skipped only while no contact is possible)."""
        ev, w = self.events_now(), self.world
        return bool(ev["collided"][0] or ev["out_of_bounds"][0] or w.state.crashed[0]
                    or w.sim.last_reset[0])  # fmt: skip

    def _report(self) -> None:
        """Write and publish the results once the lap has ended."""
        if self._reported or self.lap.result is None:
            return
        self._reported = True
        text = self.lap.results_yaml()
        self.lap.write(self.results_path)
        self.pub.results.publish(self.T.String(data=text))
        self.pub.score.publish(self.T.Float64(data=self.lap.score()))
        self.rospy.loginfo(f"lap: {self.lap.summary()}; results in {self.results_path}")
        print(f"volary-ros1 lap {self.lap.summary()}", flush=True)

    # ---- publishing ---------------------------------------------------------------------------
    def _publish_tick(self) -> int:
        """Publish the current tick's messages; returns the command count seen just before
        (a command counts as the answer to this tick when it arrives after that)."""
        seen = self.commands.count
        rospy, T, w, t = self.rospy, self.T, self.world, self.now
        p = self.pub
        p.clock.publish(p.clock_msg(rospy, t))
        st = w.state
        p.tf.publish(T.pose_tf(rospy, t, st.pos[0].tolist(), st.quat[0].tolist()))
        frame = int(w.due("ir"))
        if frame:
            p.camera_info.publish(T.camera_info(rospy, t, self.camera, self.frames.camera))
            p.ir.publish(T.ir_beacons(rospy, t, w.read("ir"), self.gate_names))
            rng = w.read("range")
            p.range.publish(T.rangefinder(rospy, t, rng, self.ranger, self.frames.body))
        if self.armed and w.sim.imu_reading is not None:  # last: it closes the tick
            r = w.sim.imu_reading
            p.imu.publish(T.imu(rospy, t, r.accel[0].tolist(), r.gyro[0].tolist(), *self._var))
        self._frame_rate(frame)
        return seen

    def _frame_rate(self, frame: int) -> None:
        """About once a wall second of serving: sim s per wall s (the sim time the window's
        ticks advanced over the wall time they took) and beacon frames per wall s."""
        if self._rate_window is None:  # tick 0, before the clock starts (serve)
            return
        t0, tick0, frames = self._rate_window
        frames += frame
        now = time.monotonic()
        wall = now - t0
        if wall < 1.0:
            self._rate_window = (t0, tick0, frames)
            return
        sim = (self.world.tick - tick0) * self.world.dt
        self.pub.clock_scale.publish(self.T.Float32(data=sim / wall))
        self.pub.fps.publish(self.T.Float32(data=frames / wall))
        self._rate_window = (now, self.world.tick, 0)
