"""Flight logs for system identification: one in-memory form, read from CSV at the boundary.

A :class:`FlightLog` holds what a fit and an open-loop prediction need, in volary's conventions
(DESIGN.md): world z-up, body FLU, quaternions ``[w, x, y, z]``, SI units, rates in the body
frame. Two CSV layouts are read, each declared once as a column map (:data:`FORMATS`):

- ``volary``: volary's own columns (``t``, ``px..pz``, ``qw..qz``, ``vx..vz``, ``wx..wz`` in
  the body frame, ``u1..uR`` motor commands in [0, 1], optional ``vbat``); write yours in it;
- ``nanobench``: NanoBench's flight CSVs (Ullah and Baca 2026, Crazyflie 2.1, Vicon at 100 Hz):
  quaternions scalar-last, Vicon angular velocity in the *world* frame, motor PWM in
  [0, 65535] in the firmware's order M1..M4 (front-right, back-right, back-left, front-left),
  mapped here to volary's ``quad_x`` order (front-left, back-left, back-right, front-right).

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

from volary.errors import ConfigError, FileFormatError
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
    motors: tuple[str, ...]  # in volary's rotor order
    motor_full: float  # command value of full power (normalized by it)
    vbat: str | None


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


def _columns(path: Path, text: str, fmt: LogFormat) -> tuple[dict[str, int], np.ndarray]:
    head, _, body = text.partition("\n")
    names = [c.strip() for c in head.split(",")]
    index = {c: i for i, c in enumerate(names)}
    needed = [fmt.time, *fmt.pos, *fmt.quat, *fmt.vel, *fmt.rates, *fmt.motors]
    missing = [c for c in needed if c not in index]
    if missing:
        raise FileFormatError(
            f"{path.name}: columns {', '.join(missing)} missing; expected the "
            f"{'nanobench' if fmt is FORMATS['nanobench'] else 'volary'} log columns "
            "(docs/sysid.md)"
        )
    try:
        data = np.loadtxt(io.StringIO(body), delimiter=",", ndmin=2)
    except ValueError as err:
        raise FileFormatError(f"{path.name}: expected numbers in every cell ({err})") from None
    if data.shape[1] != len(names):
        raise FileFormatError(
            f"{path.name}: {data.shape[1]} cells a row, header names {len(names)}"
        )
    return index, data


def _cut_idle(cmd: np.ndarray) -> slice:
    on = np.flatnonzero(cmd.max(axis=1) > 0)
    return slice(int(on[0]), int(on[-1]) + 1) if on.size else slice(0, 0)


def read_log(
    path: str | Path, format: str = "auto", min_rows: int = 20, out_of_range: str = "error"
) -> FlightLog:
    """Read one flight log CSV (``format``: ``volary``, ``nanobench`` or ``auto`` from the
    header) into a :class:`FlightLog`, idle rows cut from both ends.

    ``out_of_range``: what a motor command outside [0, full power] does: ``error`` (the
    default) refuses the file; ``cut`` ends the flight at the first such row (some NanoBench
    logs carry PWM above 65535 once the battery is nearly flat)."""
    if out_of_range not in ("error", "cut"):
        raise ConfigError(f"out_of_range: expected error or cut, got {out_of_range!r}")
    text = read_text(path, "flight log", max_bytes=MAX_LOG_BYTES)
    path = Path(path)
    if format == "auto":
        format = "nanobench" if "motor_motor_m1" in text.partition("\n")[0] else "volary"
    if format not in FORMATS:
        raise ConfigError(f"format: expected one of {', '.join(FORMATS)} or auto, got {format!r}")
    fmt = FORMATS[format]
    index, data = _columns(path, text, fmt)

    def cols(names) -> np.ndarray:
        return data[:, [index[c] for c in names]]

    cmd = cols(fmt.motors) / fmt.motor_full
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
    _check_commands(path, cmd)
    quat = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    omega = cols(fmt.rates)[keep]
    if fmt.rates_in_world:
        omega = np.einsum("tji,tj->ti", rotmat(quat), omega)  # R^T w_world
    vbat = data[keep, index[fmt.vbat]] if fmt.vbat in index else np.full(len(t), np.nan)
    return FlightLog(path.stem, t, cols(fmt.pos)[keep], quat, cols(fmt.vel)[keep], omega, cmd, vbat)


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
