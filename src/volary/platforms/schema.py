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
rpm, ms are converted to SI) and ``source``. The file is read by :func:`volary.inputs.read_toml`
(a regular file only) and each entry checked by a pydantic model built from :data:`FIELDS`
(:func:`entry_model`). Problems raise :class:`FileFormatError` (structure, types, shapes, units)
or :class:`ConfigError` (physically invalid values: a number not finite or outside its field's
declared range, or an airframe :class:`Airframe` refuses), in one line naming file, entry and
field: ``mine.toml: [my-quad] mass: expected a finite number in [0.0001, 10000] kg (vehicle
mass), got 1e+308 g``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, TypeAdapter, ValidationError, create_model
from pydantic import Field as Declared
from pydantic import Strict as StrictType
from pydantic_core import PydanticCustomError

from volary.dynamics.airframe import Airframe
from volary.errors import ConfigError, FileFormatError, did_you_mean
from volary.inputs import Limit, Strict, Text, read_toml
from volary.platforms.indicators import Indicators
from volary.platforms.layouts import LAYOUTS

MAX_ROTORS = 64  # longest per-rotor list a file may give (the layouts have 4 to 8 rotors)
MAX_ENTRIES = 10_000  # airframes in one catalogue file
ENTRY_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,100}")  # printable, 1-100 characters


@dataclass(frozen=True)
class Field:
    """One catalogue field: its SI unit, the accepted aliases (factor to SI), whether needed,
    the shape of its value (``scalar``, ``per_rotor``: one number or one per rotor, ``vec3``:
    one number or x, y, z, ``inertia``: 3 diagonal numbers or a 3x3 matrix) and the range every
    number must lie in once converted to SI (``lo``, ``hi``; what the quantity is)."""

    unit: str
    required: bool = False
    aliases: tuple[tuple[str, float], ...] = ()
    shape: str = "scalar"
    lo: float = 0.0
    hi: float = 1e4
    what: str = ""

    @property
    def limit(self) -> Limit:
        return Limit(self.what, self.unit, self.lo, self.hi)


# Ranges: generous bounds on anything that flies (a 1 g micro drone to a 10 t heavy lifter),
# well outside the catalogue's own values; they keep 1e308 and friends out of the dynamics.
_SPEED = (("rpm", 2 * math.pi / 60),)
FIELDS: dict[str, Field] = {
    "arm": Field("m", True, (("mm", 1e-3), ("cm", 1e-2)), "scalar", 1e-3, 10.0, "rotor arm"),
    "mass": Field("kg", True, (("g", 1e-3),), "scalar", 1e-4, 1e4, "vehicle mass"),
    "inertia": Field("kg m^2", True, (("g cm^2", 1e-7),), "inertia", -1e4, 1e4, "inertia"),
    "k_f": Field("N/(rad/s)^2", True, (), "per_rotor", 1e-12, 1.0, "thrust coefficient"),
    "k_m": Field("N m/(rad/s)^2", True, (), "per_rotor", 0.0, 1.0, "torque coefficient"),
    "max_rotor_speed": Field("rad/s", True, _SPEED, "per_rotor", 1.0, 1e5, "top rotor speed"),
    "min_rotor_speed": Field("rad/s", False, _SPEED, "per_rotor", 0.0, 1e5, "lowest speed"),
    "motor_tau_up": Field("s", False, (("ms", 1e-3),), "per_rotor", 1e-4, 10.0, "motor lag"),
    "motor_tau_down": Field("s", False, (("ms", 1e-3),), "per_rotor", 1e-4, 10.0, "motor lag"),
    "drag_linear": Field("N/(m/s)", False, (), "vec3", 0.0, 1e4, "linear drag"),
    "drag_quadratic": Field("N/(m/s)^2", False, (), "vec3", 0.0, 1e4, "quadratic drag"),
    "drag_moment": Field("N m/(rad/s)^2", False, (), "vec3", 0.0, 1e4, "rotational drag"),
    "force_noise": Field("N/sqrt(Hz)", False, (), "scalar", 0.0, 1e4, "force noise"),
    "moment_noise": Field("N m/sqrt(Hz)", False, (), "scalar", 0.0, 1e4, "moment noise"),
    "collider_radius": Field("m", False, (("mm", 1e-3),), "scalar", 1e-3, 100.0, "collider"),
    "frame_height": Field(
        "m", False, (("mm", 1e-3), ("cm", 1e-2)), "scalar", 1e-3, 100.0, "frame height"
    ),  # fmt: skip
    "rotor_tilt": Field(
        "deg", False, (("rad", 180 / math.pi),), "scalar", -90.0, 90.0, "rotor tilt"
    ),  # fmt: skip  # tilted_hexa only
    "coaxial_gap": Field("m", False, (("mm", 1e-3),), "scalar", 0.0, 10.0, "rotor gap"),  # y6
    "moment_gain": Field("1", False, (), "vec3", 1e-3, 100.0, "moment effectiveness"),  # sysid
    # rotor aerodynamics (dynamics/aero.py); absent = off
    "rotor_drag_inplane": Field("N/((rad/s)(m/s))", False, (), "scalar", 0.0, 1.0, "rotor drag"),
    "rotor_drag_axial": Field("N/((rad/s)(m/s))", False, (), "scalar", 0.0, 1.0, "rotor drag"),
    "flapping": Field("N m/((rad/s)(m/s))", False, (), "scalar", 0.0, 1.0, "blade flapping"),
    "inflow_axial": Field("N/((rad/s)(m/s))", False, (), "scalar", 0.0, 1.0, "inflow thrust"),
    "translational_lift": Field(
        "N/((rad/s)(m/s)^2)", False, (), "scalar", 0.0, 1.0, "translational lift"
    ),  # fmt: skip
    "ground_effect_radius": Field(
        "m", False, (("mm", 1e-3), ("cm", 1e-2)), "scalar", 0.0, 10.0, "rotor radius"
    ),  # fmt: skip
    # downwash on the vehicles below (sim/downwash.py); 1 = the published jet, absent = off
    "downwash": Field("1", False, (), "scalar", 0.0, 100.0, "downwash scale"),
}
TABLE1_FIELDS: dict[str, Field] = {
    "twr_max": Field("1", True, (), "scalar", 1e-3, 1e3, "thrust-to-weight ratio"),
    "alpha_xy_max": Field("rad/s^2", True, (), "scalar", 1e-3, 1e6, "roll acceleration"),
    "alpha_z_max": Field("rad/s^2", True, (), "scalar", 1e-3, 1e6, "yaw acceleration"),
}
CATEGORIES = ("preset", "layout", "flyingtrust-real", "flyingtrust-virtual", "identified")
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
        field = f" {fname}" if fname else ""
        return FileFormatError(f"{self.path.name}: [{self.entry}]{field}: {msg}")


# ---- the declared format (pydantic): structure, shapes and units -> FileFormatError -------------
Number = Annotated[float, StrictType()]  # NaN and inf pass here; the range check refuses them
_Row = tuple[Number, Number, Number]
_SHAPES: dict[str, tuple[Any, str]] = {
    "scalar": (Number, "a number"),
    "per_rotor": (
        Number | Annotated[list[Number], Declared(min_length=1, max_length=MAX_ROTORS)],
        "a number or a list of one number per rotor",
    ),
    "vec3": (Number | _Row, "a number or a list of 3 numbers (x, y, z)"),
    "inertia": (_Row | tuple[_Row, _Row, _Row], "a list of 3 diagonal numbers or a 3x3 matrix"),
}


@functools.cache
def _shape(shape: str) -> Callable[[Any], Any]:
    adapter, what = TypeAdapter(_SHAPES[shape][0]), _SHAPES[shape][1]

    def check(value: Any) -> Any:
        try:
            return adapter.validate_python(value)
        except (ValidationError, RecursionError):
            raise PydanticCustomError(
                "shape", "expected {what}, got {got}", {"what": what, "got": _short(value)}
            ) from None

    return check


def _unit(spec: Field) -> Callable[[str], str]:
    factors = {_norm(spec.unit): 1.0, **{_norm(a): f for a, f in spec.aliases}}
    accepted = ", ".join(repr(u) for u in (spec.unit, *(a for a, _ in spec.aliases)))

    def check(unit: str) -> str:
        if _norm(unit) not in factors:
            raise PydanticCustomError(
                "unit", "wrong unit {unit}; expected {accepted}",
                {"unit": _short(unit), "accepted": accepted},
            )  # fmt: skip
        return unit

    return check


def _one_of(valid: tuple[str, ...]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in valid:
            raise PydanticCustomError(
                "one_of", "expected one of {valid}, got {got}",
                {"valid": ", ".join(valid), "got": _short(value)},
            )  # fmt: skip
        return value

    return check


def _layout_name(name: str) -> str:
    if name not in LAYOUTS:
        raise PydanticCustomError("layout", "{msg}", {"msg": str(LAYOUTS.unknown(name[:60]))})
    return name


def _short(value: Any, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def _quantity_model(fname: str, spec: Field) -> type[Strict]:
    return create_model(
        f"Quantity_{fname}",
        __base__=Strict,
        value=(Annotated[Any, AfterValidator(_shape(spec.shape))], ...),
        unit=(Annotated[Text, AfterValidator(_unit(spec))], ...),
        source=(Text, ...),
    )


def _fields(fields: Mapping[str, Field]) -> dict[str, Any]:
    return {
        name: (_quantity_model(name, spec), ...)
        if spec.required
        else (_quantity_model(name, spec) | None, None)
        for name, spec in fields.items()
    }


class LayoutRef(Strict):
    """``layout = {value = <layout name>, source = ...}``."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # built on first use
    value: Annotated[Text, AfterValidator(_layout_name)]
    source: Text


@functools.cache
def entry_model() -> type[Strict]:
    """The pydantic model of one catalogue entry, built from :data:`FIELDS`,
    :data:`TABLE1_FIELDS` and :data:`CATEGORIES` on first use (some 40 ms, kept off import)."""
    table1 = create_model("Table1", __base__=Strict, **_fields(TABLE1_FIELDS))
    return create_model(
        "CatalogueEntry",
        __base__=Strict,
        category=(Annotated[Text, AfterValidator(_one_of(CATEGORIES))], ...),
        description=(Text, ""),
        layout=(LayoutRef, ...),
        table1=(table1 | None, None),
        **_fields(FIELDS),
    )


def _problem(where: _Where, err: ValidationError) -> FileFormatError:
    """The first problem of a pydantic error in the catalogue's words: ``[entry] field: ...``."""
    first = err.errors(include_url=False)[0]
    loc = tuple(str(p) for p in first["loc"])
    kind, table, key = first["type"], loc[:-1], loc[-1] if loc else ""
    got = _short(first.get("input"))
    if kind in ("missing", "extra_forbidden") and table in ((), ("table1",)):
        fields = TABLE1_FIELDS if table else FIELDS
        spec = fields.get(key)
        if kind == "missing":
            return where(
                ".".join(loc), "missing field" + (f" (unit {spec.unit!r})" if spec else "")
            )
        valid = sorted(fields) if table else sorted([*FIELDS, *_META_KEYS])
        hint = did_you_mean(str(loc[-1]), valid) if loc else ""
        return where(".".join(loc), f"unknown field{hint}; valid: {', '.join(valid)}")
    if kind in ("missing", "extra_forbidden"):  # a key of a {value, unit, source} table
        spec = FIELDS.get(table[-1]) if len(table) == 1 else TABLE1_FIELDS.get(table[-1])
        keys = "value, source" if table == ("layout",) else "value, unit, source"
        hint = f" (expected unit {spec.unit!r})" if spec and kind == "missing" else ""
        msg = f"missing {key}{hint}" if kind == "missing" else f"unknown key; expected {keys}"
        return where(".".join(table), msg)
    if kind in ("shape", "unit", "one_of", "layout"):  # ours: they name the field itself
        return where(".".join(loc[:-1] if key in ("value", "unit") else loc), first["msg"])
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        what = "a table {value, unit, source}" if loc and loc[-1] in FIELDS else "a table"
        return where(".".join(loc), f"expected {what}, got {got}")
    msg = first["msg"]
    return where(".".join(loc), f"{msg[:1].lower()}{msg[1:]}, got {got}")


# ---- values: ranges in SI -> ConfigError -------------------------------------------------------
def _flat(value: Any) -> list[float]:
    return [v for row in value for v in _flat(row)] if isinstance(value, list | tuple) else [value]


def _scale(value: Any, factor: float) -> Any:
    if isinstance(value, list | tuple):
        return [_scale(v, factor) for v in value]
    return value * factor


def quantity(where: _Where, fname: str, raw: Any, spec: Field) -> tuple[Any, str]:
    """``(value in SI, source)`` of a checked ``{value, unit, source}`` table; a number that is
    not finite or outside the field's range (compared in SI) is a ConfigError."""
    factor = {_norm(spec.unit): 1.0, **{_norm(a): f for a, f in spec.aliases}}[_norm(raw.unit)]
    value = _scale(raw.value, factor)
    for v, given in zip(_flat(value), _flat(raw.value), strict=True):
        if not (math.isfinite(v) and spec.lo <= v <= spec.hi):
            raise ConfigError(
                f"{where.path.name}: [{where.entry}] {fname}: expected {spec.limit.describe()}, "
                f"got {given!r}{'' if raw.unit in ('', '1') else ' ' + raw.unit}"
            )
    return value, raw.source


def _rotor_layout(where: _Where, name: str, values: dict[str, Any]) -> Any:
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


def _per_rotor_lengths(where: _Where, layout: str, n: int, values: dict[str, Any]) -> None:
    """A per-rotor list holds one number per rotor of the layout (a single number: all)."""
    for fname, value in values.items():
        if FIELDS[fname].shape == "per_rotor" and isinstance(value, list) and len(value) != n:
            raise where(
                fname,
                f"expected a number or a list of {n} numbers (one per rotor of {layout}), "
                f"got {len(value)}",
            )


def _field_outside_hint(key: str) -> str:
    """For a top-level key that is a platform field (written without its platform's table):
    where it belongs; else nothing."""
    if key == "name":
        return " (a platform is named by its table: [my_quad], its fields below it)"
    if key in FIELDS:
        return (f" ('{key}' is a platform field: put it under a table named for the platform,"
                f" [my_quad], as {key} = {{value = ..., unit = ..., source = ...}})")  # fmt: skip
    if key in _META_KEYS:
        return f" ('{key}' is a platform field: put it under a table named for the platform)"
    return ""


def parse_entry(path: Path, name: str, raw: Any) -> Entry:
    """Check one top-level table against :func:`entry_model` (structure, shapes, units:
    FileFormatError), its numbers against the fields' ranges and build its validated
    :class:`Airframe` (physically invalid values: ConfigError); every error one line
    ``file: [entry] field: problem``."""
    path = Path(path)
    if not isinstance(name, str) or ENTRY_NAME.fullmatch(name) is None:
        raise FileFormatError(
            f"{path.name}: [{_short(name)}]: expected an entry name of 1-100 printable characters"
        )
    where = _Where(path, name)
    if not isinstance(raw, Mapping):
        raise where("", f"expected a table, got {_short(raw)}{_field_outside_hint(name)}")
    try:
        entry: Any = entry_model().model_validate(raw)
    except ValidationError as err:
        problem = _problem(where, err)
        raise FileFormatError(f"{problem}{_field_outside_hint(name)}") from None
    values, sources = {}, {}
    for fname, spec in FIELDS.items():
        if getattr(entry, fname) is not None:
            values[fname], sources[fname] = quantity(where, fname, getattr(entry, fname), spec)
    table1 = None
    if entry.table1 is not None:
        table1 = Indicators(
            **{
                key: quantity(where, f"table1.{key}", getattr(entry.table1, key), spec)[0]
                for key, spec in TABLE1_FIELDS.items()
            }
        )
    pos, axes, dirs = _rotor_layout(where, entry.layout.value, values)
    _per_rotor_lengths(where, entry.layout.value, len(pos), values)
    sources["layout"] = entry.layout.source
    gain = values.pop("moment_gain", None)
    try:
        airframe = Airframe(
            name=name,
            rotor_positions=pos,
            rotor_axes=axes,
            rotor_directions=dirs,
            sources=sources,
            **values,
        )
        if gain is not None:
            airframe = airframe.with_moment_gain(gain)
    except ConfigError as err:
        raise ConfigError(f"{path.name}: [{name}] {err}") from err
    return Entry(name, entry.category, entry.description, airframe, table1, path)


def load_file(path: str | Path) -> dict[str, Entry]:
    """Parse one catalogue TOML file into entries (in file order). The file is read by
    :func:`volary.inputs.read_toml` (a regular file within the size limit, UTF-8, bounded
    nesting: nothing else is opened); ``[meta]`` is skipped; every other table is an entry
    checked by :func:`parse_entry`."""
    doc = read_toml(path, "catalogue file")
    path = Path(path)
    doc.pop("meta", None)
    if not 1 <= len(doc) <= MAX_ENTRIES:
        raise FileFormatError(
            f"{path.name}: {len(doc)} airframe tables; expected 1 to {MAX_ENTRIES} (besides [meta])"
        )
    return {name: parse_entry(path, name, raw) for name, raw in doc.items()}
