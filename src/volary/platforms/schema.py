"""The catalogue file format: TOML tables of values that carry a unit and a source.

One top-level table per airframe::

    [crazyflie]
    category = "preset"                      # preset | layout | flyingtrust-real | ...
    description = "Bitcraze Crazyflie 2.x"
    layout = {value = "quad_x", source = "Bitcraze"}
    arm = {value = 0.046, unit = "m", source = "Bitcraze: 92 mm motor-to-motor diagonal"}
    mass = {value = 0.027, unit = "kg", source = "..."}
    ...
    [crazyflie.table1]                       # optional: published indicators, same format
    twr_max = {value = 2.2, unit = "1", source = "FLYINGTRUST Table I"}

Every number carries ``unit`` (checked against :data:`FIELDS`; a few aliases such as g, mm,
rpm, ms are converted to SI) and ``source``. Problems raise :class:`FileFormatError` (structure,
units) or :class:`ConfigError` (physically invalid values), naming file, entry and field.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from volary.dynamics.airframe import Airframe
from volary.errors import ConfigError, FileFormatError
from volary.platforms.indicators import Indicators
from volary.platforms.layouts import LAYOUTS


@dataclass(frozen=True)
class Field:
    """One catalogue field: its SI unit, the accepted aliases (factor to SI) and whether needed."""

    unit: str
    required: bool = False
    aliases: tuple[tuple[str, float], ...] = ()


_SPEED = (("rpm", 2 * math.pi / 60),)
FIELDS: dict[str, Field] = {
    "arm": Field("m", True, (("mm", 1e-3), ("cm", 1e-2))),
    "mass": Field("kg", True, (("g", 1e-3),)),
    "inertia": Field("kg m^2", True, (("g cm^2", 1e-7),)),
    "k_f": Field("N/(rad/s)^2", True),
    "k_m": Field("N m/(rad/s)^2", True),
    "max_rotor_speed": Field("rad/s", True, _SPEED),
    "min_rotor_speed": Field("rad/s", False, _SPEED),
    "motor_tau_up": Field("s", False, (("ms", 1e-3),)),
    "motor_tau_down": Field("s", False, (("ms", 1e-3),)),
    "drag_linear": Field("N/(m/s)"),
    "drag_quadratic": Field("N/(m/s)^2"),
    "drag_moment": Field("N m/(rad/s)^2"),
    "force_noise": Field("N/sqrt(Hz)"),
    "moment_noise": Field("N m/sqrt(Hz)"),
    "collider_radius": Field("m", False, (("mm", 1e-3),)),
    "frame_height": Field("m", False, (("mm", 1e-3), ("cm", 1e-2))),
    "rotor_tilt": Field("deg", False, (("rad", 180 / math.pi),)),  # tilted_hexa only
    "coaxial_gap": Field("m", False, (("mm", 1e-3),)),  # y6 only
}
TABLE1_FIELDS: dict[str, Field] = {
    "twr_max": Field("1", True),
    "alpha_xy_max": Field("rad/s^2", True),
    "alpha_z_max": Field("rad/s^2", True),
}
CATEGORIES = ("preset", "layout", "flyingtrust-real", "flyingtrust-virtual")
_META_KEYS = {"category", "description", "layout", "table1"}


@dataclass(frozen=True)
class Entry:
    """One parsed catalogue entry."""

    name: str
    category: str
    description: str
    airframe: Airframe
    table1: Indicators | None  # published indicators (FLYINGTRUST Table I), if any
    path: Path  # the file it came from


def _norm(unit: str) -> str:
    return "".join(unit.split()).replace("*", "").replace("·", "")


class _Where:
    """Formats the 'file: [entry] field' prefix of every error."""

    def __init__(self, path: Path, entry: str) -> None:
        self.path, self.entry = path, entry

    def __call__(self, fname: str, msg: str) -> FileFormatError:
        return FileFormatError(f"{self.path.name}: [{self.entry}] {fname}: {msg}")


def _number(where: _Where, fname: str, value: Any) -> Any:
    """Check ``value`` is a number or a (nested) list of numbers."""
    if isinstance(value, list):
        return [_number(where, fname, v) for v in value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise where(fname, f"expected a number or a list of numbers, got {value!r}")
    return float(value)


def _scale(value: Any, factor: float) -> Any:
    return [_scale(v, factor) for v in value] if isinstance(value, list) else value * factor


def quantity(where: _Where, fname: str, raw: Any, spec: Field) -> tuple[Any, str]:
    """``(value in SI, source)`` of a ``{value, unit, source}`` table, unit checked."""
    if not isinstance(raw, Mapping):
        raise where(fname, f"expected a table {{value, unit, source}}, got {raw!r}")
    missing = [k for k in ("value", "unit", "source") if k not in raw]
    if missing:
        raise where(fname, f"missing {', '.join(missing)} (expected unit {spec.unit!r})")
    unit = raw["unit"]
    factors = {_norm(spec.unit): 1.0, **{_norm(a): f for a, f in spec.aliases}}
    if not isinstance(unit, str) or _norm(unit) not in factors:
        accepted = ", ".join(repr(u) for u in (spec.unit, *(a for a, _ in spec.aliases)))
        raise where(fname, f"wrong unit {unit!r}; expected {accepted}")
    value = _scale(_number(where, fname, raw["value"]), factors[_norm(unit)])
    return value, str(raw["source"])


def _rotor_layout(where: _Where, raw: Mapping[str, Any], values: dict[str, Any]) -> Any:
    spec = raw.get("layout")
    if not isinstance(spec, Mapping) or "value" not in spec or "source" not in spec:
        raise where("layout", "expected a table {value = <layout name>, source = ...}")
    name = spec["value"]
    if name not in LAYOUTS:
        raise where("layout", str(LAYOUTS.unknown(name)))
    arm = values.pop("arm")
    tilt, gap = values.pop("rotor_tilt", None), values.pop("coaxial_gap", None)
    if tilt is not None and name != "tilted_hexa" or gap is not None and name != "y6":
        raise where(
            "rotor_tilt" if tilt is not None else "coaxial_gap",
            f"does not apply to layout {name!r}",
        )
    try:
        if name == "tilted_hexa" and tilt is not None:
            return LAYOUTS[name](arm, tilt_deg=tilt)
        if name == "y6" and gap is not None:
            return LAYOUTS[name](arm, gap=gap)
        return LAYOUTS[name](arm)
    except ConfigError as err:
        raise ConfigError(f"{where.path.name}: [{where.entry}] arm: {err}") from err


def _table1(where: _Where, raw: Any) -> Indicators:
    if not isinstance(raw, Mapping):
        raise where("table1", "expected a table of twr_max, alpha_xy_max, alpha_z_max")
    vals = {}
    for key, spec in TABLE1_FIELDS.items():
        if key not in raw:
            raise where(f"table1.{key}", "missing field")
        vals[key] = quantity(where, f"table1.{key}", raw[key], spec)[0]
    return Indicators(**vals)


def parse_entry(path: Path, name: str, raw: Any) -> Entry:
    """Check one top-level table and build its validated :class:`Airframe`."""
    where = _Where(path, name)
    if not isinstance(raw, Mapping):
        raise where("", "expected a table")
    unknown = sorted(set(raw) - set(FIELDS) - _META_KEYS)
    if unknown:
        raise where(unknown[0], f"unknown field; valid: {', '.join(sorted(FIELDS))}")
    category = raw.get("category")
    if category not in CATEGORIES:
        raise where("category", f"expected one of {', '.join(CATEGORIES)}, got {category!r}")
    values, sources = {}, {}
    for fname, spec in FIELDS.items():
        if fname not in raw:
            if spec.required:
                raise where(fname, f"missing field (unit {spec.unit!r})")
            continue
        values[fname], sources[fname] = quantity(where, fname, raw[fname], spec)
    pos, axes, dirs = _rotor_layout(where, raw, values)
    sources["layout"] = str(raw["layout"]["source"])
    try:
        airframe = Airframe(
            name=name,
            rotor_positions=pos,
            rotor_axes=axes,
            rotor_directions=dirs,
            sources=sources,
            **values,
        )
    except ConfigError as err:
        raise ConfigError(f"{path.name}: [{name}] {err}") from err
    table1 = _table1(where, raw["table1"]) if "table1" in raw else None
    return Entry(name, category, str(raw.get("description", "")), airframe, table1, path)


def load_file(path: str | Path) -> dict[str, Entry]:
    """Parse one catalogue TOML file into entries (in file order)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise FileFormatError(f"{path.name}: not valid TOML: {err}") from err
    except OSError as err:
        raise FileFormatError(f"{path}: cannot read catalogue file: {err}") from err
    doc.pop("meta", None)
    return {name: parse_entry(path, name, raw) for name, raw in doc.items()}
