"""Collective thrust and body rates (CTBR, volary's ``ctbr`` control mode) as Betaflight acro
sticks, and back: what a policy or planner written for volary's ideal rate loop sends through
:class:`volary.fc.betaflight.BetaflightLink`.

>>> from volary.fc.profiles import RATE_PROFILES
>>> m = StickMap.for_platform("research_quad_1kg", RATE_PROFILES["research_quad_1kg"])
>>> sticks = m.sticks(thrust=9.81, rates_flu=(0.0, 0.0, 1.0))   # hover thrust, yaw left 1 rad/s

Body rates. Betaflight 4.6.0's ACTUAL rates (``src/main/fc/rc.c``, ``applyActualRates``): for
a stick deflection x in [-1, 1] (``rcCommand / 500``, no deadband by default),

    rate(x) = c x + max(0, R - c) |x| (e x^5 + (1 - e) x)        deg/s

with center sensitivity c (``rc_rate`` x 10), max rate R (``srate`` x 10) and expo e
(``expo`` / 100): odd, strictly increasing, rate(1) = R. :func:`stick_for_rate` inverts it
(closed form for e = 0, bisection otherwise); a rate beyond R is clipped to full stick.
Signs (checked in flight, ``tests/test_fc_ctbr.py``): Betaflight's gyro axes are FLU's (the
SITL negates FRD's y and z), so a positive roll stick rolls right (+x FLU, right side down), a
positive pitch stick (forward) pitches nose-down (+y FLU), and a positive yaw stick (right)
yaws clockwise seen from above, which is -z FLU (``updateRcCommands`` negates the yaw stick
unless ``yaw_control_reversed``). So roll = x(p), pitch = x(q), yaw = x(-r).

Collective thrust. Assumed, as :class:`BetaflightLink` maps outputs: every rotor's thrust is
k_f w^2 and the thrust is shared equally (the commanded rates' differential is the rate loop's
business); the motor output u in [0, 1] is linear in the rotor speed command, w = w_min + u
(w_max - w_min); Betaflight's mixer (airmode on, legacy mixer, no thrust linearization, no
throttle boost accounted for) gives u = idle + t (u_max - idle) for throttle t in [0, 1] with
no rate demand; the throttle stick is linear (``thr_mid`` 50, ``thr_expo`` 0) from
``min_check`` to 2000 us. So thrust T -> w = sqrt(T / (n k_f)) -> u -> t -> channel
``min_check + t (2000 - min_check)`` -> stick ``(channel - 1000) / 1000``; thrusts outside
what idle and full motor output give are clipped to them. The steady rotor speed lags the
command by the motor's time constant, as in volary's ideal loop.

Measured (:func:`measure_thrust`,
``experiments/rl/betaflight-transfer/policy.py --thrust-sweep``): with the vehicle held level
at rest (its state reset every exchange, so the rate loop has nothing to do), the
delivered thrust is 0.990-1.000 of the command from 0.3 to 1.5 x hover on all three study
platforms; the 0-1 % shortfall is the firmware's integer microseconds (``rc.c``
``updateRcCommands``' throttle scaling and the SITL's ``int16_t`` motor pulses). What the map
cannot see is the rate loop's differential: the mixer adds each axis's PID sum to the motor
outputs, linear in rotor speed, so outputs u + d_i deliver n k_f (w(u)^2 + mean d_i^2 (w_max -
w_min)^2), more than commanded. Yaw takes the largest differential (the weakest moment): under a +-1
rad/s yaw-rate square wave Betaflight's default yaw PID-sum limit delivered 0.84-1.87 x the
command. The 1 kg quad's and the Crazyflie's profiles cap it (``pidsum_limit_yaw`` 100,
:mod:`volary.fc.profiles`: 1.00-1.03 x); the racer keeps its yaw authority and the excess.
A correction from the reported motor outputs was tried and rejected: the differential changes
within a control period, so it delivered 0.84-1.31 x.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from volary.errors import ConfigError
from volary.fc.betaflight import Sticks
from volary.fc.profiles import AxisRates, RateProfile

_BISECT_STEPS = 60  # halvings of [0, 1]: below 1e-17 of stick


def actual_rate(stick: Any, rates: AxisRates) -> np.ndarray:
    """Betaflight's ACTUAL rates: the setpoint (deg/s) of stick deflection(s) in [-1, 1]."""
    x = np.clip(np.asarray(stick, dtype=np.float64), -1.0, 1.0)
    c, e = rates.center, rates.expo
    s = max(0.0, rates.max_rate - c)
    return c * x + s * np.abs(x) * (e * x**5 + (1.0 - e) * x)


def stick_for_rate(rate_deg: Any, rates: AxisRates) -> np.ndarray:
    """The stick deflection(s) whose ACTUAL-rates setpoint is ``rate_deg`` (deg/s); rates
    beyond the curve's maximum give full stick (+-1)."""
    r = np.asarray(rate_deg, dtype=np.float64)
    if not np.all(np.isfinite(r)):
        raise ConfigError(f"rate_deg: expected finite body rates in deg/s, got {r!r}")
    sign, mag = np.sign(r), np.abs(r)
    top = float(actual_rate(1.0, rates))
    mag = np.minimum(mag, top)
    c, e = rates.center, rates.expo
    s = max(0.0, rates.max_rate - c)
    if s == 0.0:
        x = mag / c if c > 0 else np.ones_like(mag)
    elif e == 0.0:  # s x^2 + c x - r = 0
        x = (-c + np.sqrt(c * c + 4.0 * s * mag)) / (2.0 * s)
    else:  # rate(x) is increasing on [0, 1]
        lo, hi = np.zeros_like(mag), np.ones_like(mag)
        for _ in range(_BISECT_STEPS):
            mid = 0.5 * (lo + hi)
            below = actual_rate(mid, rates) < mag
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        x = 0.5 * (lo + hi)
    return sign * np.clip(x, 0.0, 1.0)


def flu_to_stick_rates(rates_flu: Any) -> np.ndarray:
    """Betaflight's (roll, pitch, yaw) setpoints (rad/s) for FLU body rates (p, q, r)."""
    w = np.asarray(rates_flu, dtype=np.float64)
    if w.shape != (3,) or not np.all(np.isfinite(w)):
        raise ConfigError(f"rates_flu: expected 3 finite FLU body rates in rad/s, got {w!r}")
    return np.array([w[0], w[1], -w[2]])


@dataclass(frozen=True)
class StickMap:
    """CTBR <-> sticks for one platform flown with one :class:`RateProfile` (module
    docstring: the formulas and their assumptions)."""

    rates: tuple[AxisRates, AxisRates, AxisRates]
    n_rotors: int
    k_f: float  # N s^2, thrust per rotor = k_f w^2
    w_min: float  # rad/s at motor output 0
    w_max: float  # rad/s at motor output 1
    idle: float  # armed motor output floor
    u_max: float  # motor output at full throttle
    min_check: int  # us

    @staticmethod
    def for_platform(platform: str, profile: RateProfile) -> StickMap:
        """The map of a catalogue platform (equal rotors) flown with ``profile``."""
        from volary.platforms import get

        a = get(platform)
        k_f, w_min, w_max = (
            np.asarray(v, dtype=np.float64) for v in (a.k_f, a.min_rotor_speed, a.max_rotor_speed)
        )
        if np.ptp(k_f) > 0 or np.ptp(w_min) > 0 or np.ptp(w_max) > 0:
            raise ConfigError(f"platform {platform}: expected equal rotors for one throttle map")
        idle = profile.motor_idle
        return StickMap(
            rates=profile.rates,
            n_rotors=a.n_rotors,
            k_f=float(k_f[0]),
            w_min=float(w_min[0]),
            w_max=float(w_max[0]),
            idle=idle,
            u_max=1.0 - (1.0 - idle) * (1.0 - profile.motor_output_limit),
            min_check=profile.min_check,
        )

    # ---- thrust <-> throttle ----------------------------------------------------------------
    def throttle(self, thrust: float) -> float:
        """Throttle stick in [0, 1] for a collective thrust (N), clipped to the motor range."""
        if not math.isfinite(thrust):
            raise ConfigError(f"thrust: expected a finite collective thrust in N, got {thrust}")
        w = math.sqrt(max(0.0, thrust) / (self.n_rotors * self.k_f))
        u = (w - self.w_min) / (self.w_max - self.w_min)
        t = min(1.0, max(0.0, (u - self.idle) / (self.u_max - self.idle)))
        channel = self.min_check + t * (2000 - self.min_check)
        return (channel - 1000.0) / 1000.0

    def motor_thrust(self, motors: Any) -> float:
        """Collective thrust (N) of motor outputs in [0, 1] at steady rotor speeds, as
        :class:`BetaflightLink` maps them: sum of k_f (w_min + u (w_max - w_min))^2."""
        u = np.clip(np.asarray(motors, dtype=np.float64), 0.0, 1.0)
        w = self.w_min + u * (self.w_max - self.w_min)
        return float(self.k_f * np.sum(w * w))

    def thrust(self, throttle: float) -> float:
        """Collective thrust (N) the mixer gives for a throttle stick in [0, 1] (no rate
        demand, steady motors): the inverse of :meth:`throttle` inside the motor range."""
        channel = 1000.0 + 1000.0 * min(1.0, max(0.0, throttle))
        t = max(0.0, (channel - self.min_check) / (2000 - self.min_check))
        u = self.idle + t * (self.u_max - self.idle)
        w = self.w_min + u * (self.w_max - self.w_min)
        return self.n_rotors * self.k_f * w * w

    # ---- body rates <-> sticks ---------------------------------------------------------------
    def stick_deflections(self, rates_flu: Any) -> np.ndarray:
        """(roll, pitch, yaw) stick deflections in [-1, 1] for FLU body rates (rad/s)."""
        bf = np.degrees(flu_to_stick_rates(rates_flu))
        return np.array([float(stick_for_rate(bf[k], self.rates[k])) for k in range(3)])

    def body_rates(self, deflections: Any) -> np.ndarray:
        """FLU body rates (rad/s) that Betaflight's setpoint is for stick deflections."""
        d = np.asarray(deflections, dtype=np.float64)
        bf = np.radians([float(actual_rate(d[k], self.rates[k])) for k in range(3)])
        return flu_to_stick_rates(bf)  # its own inverse

    def sticks(self, thrust: float, rates_flu: Any) -> Sticks:
        """The armed acro RC frame for a CTBR command (thrust N, FLU body rates rad/s)."""
        roll, pitch, yaw = self.stick_deflections(rates_flu)
        return Sticks(roll=roll, pitch=pitch, yaw=yaw, throttle=self.throttle(thrust),
                      arm=True, angle=False)  # fmt: skip

    def ctbr(self, sticks: Sticks) -> tuple[float, np.ndarray]:
        """(collective thrust N, FLU body rates rad/s) an RC frame commands, after the RC
        link's 1 us quantization (what the firmware reads)."""
        ch = sticks.channels()
        deflections = [(ch[0] - 1500) / 500.0, (ch[1] - 1500) / 500.0, (ch[3] - 1500) / 500.0]
        return self.thrust((ch[2] - 1000) / 1000.0), self.body_rates(deflections)


# ---- the map against the firmware ------------------------------------------------------------
BOOT_EXCHANGES, ARM_EXCHANGES = 3000, 500  # 1 kHz: 3 s boot and gyro calibration, 0.5 s arming


def measure_thrust(
    platform: str,
    fractions: Sequence[float],
    profile: RateProfile | None = None,
    method: str = "held",
    seconds: float = 1.0,
) -> list[dict[str, float]]:
    """Fly ``platform`` through Betaflight (1 kHz exchanges, 2 kHz physics; the study's
    profile unless ``profile``) and compare the collective thrust delivered with what
    :class:`StickMap` was asked for, at ``fractions`` x the platform's weight.

    ``method="held"``: the vehicle is held level at rest at 2 m (its state reset before every
    exchange) with zero body rates commanded, so only the throttle path acts; delivered = the
    mean of :meth:`StickMap.motor_thrust` over the last half of ``seconds``. ``method="yaw"``:
    it flies free from rest at 10 m under a +-1 rad/s yaw-rate square wave (0.2 s period),
    the case a policy's yaw commands create; delivered = the mean of k_f w^2 over the rotors'
    actual speeds from 0.2 s on. One firmware boots and arms once for all fractions. Returns
    one row per fraction: fraction, commanded and delivered thrust (N), their ratio."""
    import torch

    from volary.fc.betaflight import BetaflightLink, LinkConfig
    from volary.fc.profiles import rate_profile
    from volary.platforms import get

    if method not in ("held", "yaw"):
        raise ConfigError(f"method: expected 'held' or 'yaw', got {method!r}")
    if not (math.isfinite(seconds) and 0.3 <= seconds <= 60.0):
        raise ConfigError(f"seconds: expected a duration in [0.3, 60] s, got {seconds}")
    rp = profile or rate_profile(platform)
    m = StickMap.for_platform(platform, rp)
    weight = get(platform).mass * 9.81
    n = int(round(seconds * 1000))
    rows = []
    with BetaflightLink(platform, LinkConfig(profile=rp.profile())) as link:
        for k in range(BOOT_EXCHANGES + ARM_EXCHANGES):
            link.step(Sticks(throttle=0.0, arm=k >= BOOT_EXCHANGES, angle=False))
        for f in fractions:
            thrust = float(f) * weight
            start = torch.tensor([[0.0, 0.0, 2.0 if method == "held" else 10.0]],
                                 dtype=torch.float64)  # fmt: skip
            link.sim.reset(pos=start)
            got = []
            for k in range(n):
                if method == "held":
                    link.sim.reset(pos=start)
                    r = link.step(m.sticks(thrust, (0.0, 0.0, 0.0)))
                    if k >= n // 2:
                        got.append(m.motor_thrust(r.motors))
                else:
                    yaw = 1.0 if (k // 100) % 2 == 0 else -1.0
                    link.step(m.sticks(thrust, (0.0, 0.0, yaw)))
                    if k >= 200:
                        w = link.sim.state.rotor_speed[0].numpy()
                        got.append(float(m.k_f * np.sum(w * w)))
            delivered = float(np.mean(got))
            rows.append({"fraction": float(f), "commanded_n": thrust,
                         "delivered_n": delivered, "ratio": delivered / thrust})  # fmt: skip
    return rows
