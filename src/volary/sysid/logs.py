"""Flight logs for system identification: one in-memory form, read from CSV at the boundary.

A :class:`FlightLog` holds what a fit and an open-loop prediction need, in volary's conventions
(DESIGN.md): world z-up, body FLU, quaternions ``[w, x, y, z]``, SI units, rates in the body
frame. Three CSV layouts are read, each declared once as a column map (:data:`FORMATS`):

- ``volary``: volary's own columns (``t``, ``px..pz``, ``qw..qz``, ``vx..vz``, ``wx..wz`` in
  the body frame, ``u1..uR`` motor commands in [0, 1], optional ``vbat``); write yours in it;
- ``nanobench``: NanoBench's flight CSVs (Ullah and Baca 2026, Crazyflie 2.1, Vicon at 100 Hz):
  quaternions scalar-last, Vicon angular velocity in the *world* frame, motor PWM in
  [0, 65535] in the firmware's order M1..M4 (front-right, back-right, back-left, front-left),
  mapped here to volary's ``quad_x`` order (front-left, back-left, back-right, front-right);
- ``fly``: the log ``volary fly`` writes (``Trajectory.to_csv``): commanded rotor speeds
  ``cmd0..`` in rad/s, each the one held over the step that *ends* at its row (so row i's
  command is moved to row i - 1, the row it is applied from, and the last row is dropped),
  normalized by a rotor speed of full command the caller gives (``volary sysid`` passes its
  ``--platform``'s maximum rotor speed; the fit's command scale then comes out as that speed).
  Its rotor speeds ``w0..`` (rad/s) give the rotors' speed at the first row, where the motor
  lag's filter starts (:func:`volary.sysid.predict.rotor_history`).

The reader checks the file (regular, bounded size), the header (every needed column present,
named in the error when not), the numbers (finite, time strictly increasing at a steady rate)
before it builds anything. Rows where the motors are off (all commands zero: on the ground
before take-off or after landing) are cut from both ends.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import torch

from volary.errors import ConfigError, FileFormatError, not_one_of
from volary.inputs import read_text
from volary.math.quaternion import quat_to_rotmat

MAX_LOG_BYTES = 256 * 1024 * 1024  # a 100 Hz log of 51 columns is ~0.6 MB per minute
PWM_FULL = 65535.0  # Crazyflie motor PWM range


@dataclass(frozen=True)
class LogFormat:
    """How one CSV layout's columns become a :class:`FlightLog`."""

    time: str
    pos: tuple[str, str, str]
    quat: tuple[str, str, str, str]  # read in this order, becomes [w, x, y, z]
    vel: tuple[str, str, str]
    rates: tuple[str, str, str]
    rates_in_world: bool  # angular velocity given in the world frame (rotated to the body)
    motors: tuple[str, ...]  # in volary's rotor order; ("cmd",): cmd0, cmd1, ... as many as given
    motor_full: float | None  # command value of full power (None: the caller's rotor_full)
    vbat: str | None
    command_ends_row: bool = False  # a row's command is the one that led to it (volary fly)
    rotors: str | None = None  # prefix of measured rotor speed columns [rad/s] (w: w0, w1, ...)


FORMATS: dict[str, LogFormat] = {
    "volary": LogFormat(
        "t", ("px", "py", "pz"), ("qw", "qx", "qy", "qz"), ("vx", "vy", "vz"),
        ("wx", "wy", "wz"), False, ("u1", "u2", "u3", "u4"), 1.0, "vbat",
    ),
    "nanobench": LogFormat(
        "t", ("px", "py", "pz"), ("qw", "qx", "qy", "qz"), ("vx", "vy", "vz"),
        ("wx_vicon", "wy_vicon", "wz_vicon"), True,
        ("motor_motor_m4", "motor_motor_m3", "motor_motor_m2", "motor_motor_m1"), PWM_FULL,
        "pwr_pm_vbat",
    ),
    "fly": LogFormat(
        "t", ("x", "y", "z"), ("qw", "qx", "qy", "qz"), ("vx", "vy", "vz"), ("p", "q", "r"),
        False, ("cmd",), None, None, command_ends_row=True, rotors="w",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class FlightLog:
    """One flight, sampled at a fixed rate, perhaps with dropped samples (float64, T rows)."""

    name: str
    t: np.ndarray  # (T,) s
    pos: np.ndarray  # (T, 3) m, world
    quat: np.ndarray  # (T, 4) [w, x, y, z], body to world
    vel: np.ndarray  # (T, 3) m/s, world
    omega: np.ndarray  # (T, 3) rad/s, body
    cmd: np.ndarray  # (T, R) motor commands in [0, 1], volary rotor order
    vbat: np.ndarray  # (T,) V (NaN where the log has none)
    rotor: np.ndarray | None = None  # (T, R) measured rotor speeds, rad/s, where logged

    @property
    def dt(self) -> float:
        return float(np.median(np.diff(self.t)))

    def __len__(self) -> int:
        return len(self.t)

    @cached_property
    def contiguous(self) -> np.ndarray:
        """(T,) int: for each row, how many rows follow it without a gap in the log (a dropped
        sample); windows that would cross a gap are not used."""
        gaps = np.flatnonzero(np.diff(self.t) > 1.5 * self.dt)
        ends = np.append(gaps, len(self.t) - 1)  # the last row of each gap-free run
        rows = np.arange(len(self.t))
        return ends[np.searchsorted(ends, rows)] - rows


def rotmat(quat: np.ndarray) -> np.ndarray:
    """Body-to-world rotation matrices (T, 3, 3) of unit quaternions [w, x, y, z]."""
    return quat_to_rotmat(torch.as_tensor(np.ascontiguousarray(quat))).numpy()


def _motor_columns(fmt: LogFormat, index: dict[str, int]) -> tuple[str, ...]:
    """The format's motor columns; a lone prefix (``cmd``) means prefix0, prefix1, ... up to
    the first one the header lacks."""
    if len(fmt.motors) > 1:
        return fmt.motors
    found = []
    while f"{fmt.motors[0]}{len(found)}" in index:
        found.append(f"{fmt.motors[0]}{len(found)}")
    return tuple(found) or (f"{fmt.motors[0]}0",)


def _columns(
    path: Path, text: str, format: str
) -> tuple[dict[str, int], np.ndarray, tuple[str, ...]]:
    fmt = FORMATS[format]
    head, _, body = text.partition("\n")
    names = [c.strip() for c in head.split(",")]
    index = {c: i for i, c in enumerate(names)}
    motors = _motor_columns(fmt, index)
    needed = [fmt.time, *fmt.pos, *fmt.quat, *fmt.vel, *fmt.rates, *motors]
    missing = [c for c in needed if c not in index]
    if missing:
        raise FileFormatError(
            f"{path.name}: columns {', '.join(missing)} missing; expected the {format} log "
            "columns (docs/sysid.md)"
        )
    try:
        data = np.loadtxt(io.StringIO(body), delimiter=",", ndmin=2)
    except ValueError as err:
        raise FileFormatError(f"{path.name}: expected numbers in every cell ({err})") from None
    if data.shape[1] != len(names):
        raise FileFormatError(
            f"{path.name}: {data.shape[1]} cells a row, header names {len(names)}"
        )
    return index, data, motors


def _detect(head: str) -> str:
    """The layout a header names: NanoBench's motor columns, volary fly's, else volary's."""
    names = {c.strip() for c in head.split(",")}
    if "motor_motor_m1" in names:
        return "nanobench"
    return "fly" if {"cmd0", "crashed"} <= names else "volary"


def _cut_idle(cmd: np.ndarray) -> slice:
    on = np.flatnonzero(cmd.max(axis=1) > 0)
    return slice(int(on[0]), int(on[-1]) + 1) if on.size else slice(0, 0)


def read_log(
    path: str | Path,
    format: str = "auto",
    min_rows: int = 20,
    out_of_range: str = "error",
    rotor_full: float | None = None,
) -> FlightLog:
    """Read one flight log CSV (``format``: ``volary``, ``nanobench``, ``fly`` or ``auto`` from
    the header) into a :class:`FlightLog`, idle rows cut from both ends.

    ``out_of_range``: what a motor command outside [0, full power] does: ``error`` (the
    default) refuses the file; ``cut`` ends the flight at the first such row (some NanoBench
    logs carry PWM above 65535 once the battery is nearly flat). ``rotor_full``: the rotor
    speed [rad/s] of full command, for logs whose commands are rotor speeds (``fly``)."""
    if out_of_range not in ("error", "cut"):
        raise ConfigError(f"out_of_range: expected error or cut, got {out_of_range!r}")
    if format != "auto" and format not in FORMATS:
        raise not_one_of("format", format, [*FORMATS, "auto"])
    text = read_text(path, "flight log", max_bytes=MAX_LOG_BYTES)
    path = Path(path)
    format = _detect(text.partition("\n")[0]) if format == "auto" else format
    fmt = FORMATS[format]
    full = fmt.motor_full if fmt.motor_full is not None else rotor_full
    if full is None or not full > 0:
        raise ConfigError(
            f"rotor_full: a {format} log's commands are rotor speeds; expected the rotor speed "
            f"of full command (> 0 rad/s), got {rotor_full!r}"
        )
    index, data, motors = _columns(path, text, format)
    if fmt.command_ends_row:  # row i's command is applied from row i - 1: move it there
        data = np.column_stack([data[:-1, :], data[1:, [index[c] for c in motors]]])
        index = {**index, **{c: data.shape[1] - len(motors) + i for i, c in enumerate(motors)}}

    def cols(names) -> np.ndarray:
        return data[:, [index[c] for c in names]]

    cmd = cols(motors) / full
    if out_of_range == "cut":
        bad = np.flatnonzero(~((cmd >= 0) & (cmd <= 1)).all(axis=1))
        cmd = cmd[: bad[0]] if bad.size else cmd
    keep = _cut_idle(cmd)
    t, cmd = data[keep, index[fmt.time]], cmd[keep]
    if len(t) < min_rows:
        raise FileFormatError(
            f"{path.name}: {len(t)} rows with the motors on; expected >= {min_rows}"
        )
    quat = cols(fmt.quat)[keep]
    arrays = (t, cols(fmt.pos)[keep], quat, cols(fmt.vel)[keep], cols(fmt.rates)[keep], cmd)
    if not all(np.isfinite(a).all() for a in arrays):
        raise FileFormatError(f"{path.name}: expected finite numbers in the flight's rows")
    _check_time(path, t)
    if fmt.motor_full is None and cmd.max() > 1 + 1e-9:
        raise FileFormatError(
            f"{path.name}: commanded rotor speeds up to {cmd.max() * full:.0f} rad/s, above the "
            f"{full:.0f} rad/s of full command given (volary sysid reads them against "
            "--platform's maximum rotor speed: give the airframe the log was flown with)"
        )
    _check_commands(path, cmd)
    quat = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    omega = cols(fmt.rates)[keep]
    if fmt.rates_in_world:
        omega = np.einsum("tji,tj->ti", rotmat(quat), omega)  # R^T w_world
    vbat = data[keep, index[fmt.vbat]] if fmt.vbat in index else np.full(len(t), np.nan)
    names = [f"{fmt.rotors}{i}" for i in range(len(motors))] if fmt.rotors else []
    rotor = cols(names)[keep] if names and all(n in index for n in names) else None
    if rotor is not None and not np.isfinite(rotor).all():
        raise FileFormatError(f"{path.name}: rotor speeds: expected finite numbers")
    pos, vel = cols(fmt.pos)[keep], cols(fmt.vel)[keep]
    return FlightLog(path.stem, t, pos, quat, vel, omega, cmd, vbat, rotor)


def _check_time(path: Path, t: np.ndarray) -> None:
    dt = np.diff(t)
    if not (dt > 0).all():
        raise FileFormatError(f"{path.name}: t: expected strictly increasing times")
    med = float(np.median(dt))
    off = np.abs(dt - med) > 0.25 * med
    if (off & (dt < 1.5 * med)).any():
        raise FileFormatError(
            f"{path.name}: t: expected a fixed sample rate (gaps allowed); steps range "
            f"{dt.min() * 1e3:.2f}-{dt.max() * 1e3:.2f} ms (resample the log first)"
        )


def _check_commands(path: Path, cmd: np.ndarray) -> None:
    if cmd.min() < 0 or cmd.max() > 1 + 1e-9:
        raise FileFormatError(
            f"{path.name}: motor commands: expected 0..1 of full power after scaling, got "
            f"{cmd.min():.3g}..{cmd.max():.3g}"
        )
