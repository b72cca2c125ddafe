"""The platform catalogue: contract over every registered name, lookups and errors, batched
params, Airframe validation messages and malformed catalogue files."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import fields

import numpy as np
import pytest
import torch

from volary.dynamics import Airframe, VehicleParams
from volary.errors import ConfigError, FileFormatError, UnknownNameError
from volary.platforms import CATEGORIES, entry, get, indicators, layout, load_file, names, params

torch.set_num_threads(1)

ALL = names()
_QUANTITIES = ("mass", "inertia", "k_f", "k_m", "max_rotor_speed")


def _gain(name: str) -> list[float]:
    from volary.inputs import read_toml

    return read_toml(entry(name).path)[name]["moment_gain"]["value"]


# --- contract over every registered name -----------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_every_entry_loads_validates_and_can_hover(name):
    af = get(name)
    assert isinstance(af, Airframe) and af.name == name and af.n_rotors >= 4
    assert af.replace() == af  # validates again unchanged
    assert indicators(af).twr_max > 1.3
    assert af.hover_rotor_speed < min(af.max_rotor_speed)
    j = np.asarray(af.inertia)
    assert np.linalg.eigvalsh(j).min() > 0 and j[2, 2] <= j[0, 0] + j[1, 1] + 1e-15
    assert af.radius > af.arm_length
    # m: plausible torque-to-thrust ratio. An identified entry's k_m is an effective value (its
    # moment_gain scales k_m: the fitted yaw moment, not a rotor's), so the prior is checked
    # on the value before the gain.
    gain = entry(name).airframe.sources.get("moment_gain") and _gain(name)
    assert 0.003 < af.k_m[0] / af.k_f[0] / (gain[2] if gain else 1.0) < 0.2
    assert all(f in af.sources and af.sources[f] for f in (*_QUANTITIES, "arm", "layout"))
    assert entry(name).category in CATEGORIES


def test_catalogue_has_every_category():
    assert len(ALL) == len(set(ALL)) >= 36 + 9
    assert {entry(n).category for n in ALL} == set(CATEGORIES)
    assert set(names("preset")) >= {
        "crazyflie",
        "fpv_racer_250",
        "research_quad_1kg",
        "sous_vide",
        "flightgoggles",
    }
    assert set(names("layout")) == {"hexa", "octo", "y6", "tilted_hexa"}


def test_lookups_are_cached():
    assert get("crazyflie") is get("crazyflie")


def test_import_reads_no_file():
    code = (
        "import volary.platforms as p; import volary.platforms.catalogue as c; "
        "print(c._entries.cache_info().currsize)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


def test_unknown_name_lists_valid_names():
    with pytest.raises(UnknownNameError) as err:
        get("crazyfly")
    msg = str(err.value)
    assert "crazyfly" in msg and "crazyflie" in msg and "0.60kg-EMAX" in msg
    assert isinstance(err.value, KeyError)
    with pytest.raises(UnknownNameError, match="flyingtrust-real"):
        names("flyingtrust")


# --- specific presets ------------------------------------------------------------------------


def test_flightgoggles_preset_carries_the_published_values():
    af = get("flightgoggles")
    assert af.mass == 1.0 and af.k_f[0] == 1.91e-6 and af.max_rotor_speed[0] == 2200.0
    assert indicators(af).twr_max == pytest.approx(3.77, abs=0.005)  # as the data file states
    assert af.drag_quadratic == (0.1, 0.1, 0.1)
    assert af.force_noise**2 == pytest.approx(0.0005)
    assert af.moment_noise**2 == pytest.approx(2.5e-4)


def test_tilted_hexa_is_fully_actuated_and_hovers_tilted_20_deg_in_any_direction():
    af = get("tilted_hexa")
    assert af.fully_actuated
    a = af.allocation_matrix()
    t_max = np.asarray(af.k_f) * np.asarray(af.max_rotor_speed) ** 2
    tilt = math.radians(20)
    for az in np.radians(np.arange(0, 360, 10)):
        f_body = (
            af.mass
            * 9.81
            * np.array(
                [math.sin(tilt) * math.cos(az), math.sin(tilt) * math.sin(az), math.cos(tilt)]
            )
        )
        t = np.linalg.solve(a, np.concatenate((f_body, np.zeros(3))))
        assert t.min() >= 0 and (t / t_max).max() < 0.9, math.degrees(az)


def test_quad_presets_are_not_fully_actuated():
    assert not any(get(n).fully_actuated for n in names("preset"))


# --- batched params --------------------------------------------------------------------------


def test_params_mixes_names_and_airframes(device):
    mixed = ["crazyflie", get("hexa"), "octo"]
    p = params(mixed, n_envs=5, device=device, dtype=torch.float64)
    assert isinstance(p, VehicleParams)
    assert p.n_envs == 5 and p.n_rotors == 8 and p.dtype == torch.float64
    assert p.device.type == torch.device(device).type
    assert p.mass.tolist() == [0.027, 2.0, 3.0, 0.027, 2.0]
    assert p.k_f[0, 4:].abs().sum().item() == 0  # padded rotors are inert


def test_params_one_per_flyingtrust_platform():
    p = params(names("flyingtrust-real") + names("flyingtrust-virtual"))
    assert p.n_envs == 36 and p.dtype == torch.float32 and p.n_rotors == 4
    for f in fields(p):
        v = getattr(p, f.name)
        assert not v.is_floating_point() or torch.isfinite(v).all(), f.name


def test_params_rejects_empty_and_unknown():
    with pytest.raises(ConfigError, match="platforms"):
        params([])
    with pytest.raises(UnknownNameError):
        params(["nope"])


# --- Airframe validation names the field -----------------------------------------------------


def _quad(**kw):
    pos, axes, dirs = layout("quad_x", 0.2)
    args = dict(
        name="q",
        mass=1.0,
        inertia=(5e-3, 5e-3, 9e-3),
        rotor_positions=pos,
        rotor_axes=axes,
        rotor_directions=dirs,
        k_f=3e-6,
        k_m=5e-8,
        max_rotor_speed=1500.0,
    )
    args.update(kw)
    return Airframe(**args)


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(mass=0.0), "mass"),
        (dict(mass=-1.0), "mass"),
        (dict(mass=float("nan")), "mass"),
        (dict(inertia=(5e-3, -5e-3, 9e-3)), "inertia"),
        (dict(inertia=((1, 2, 0), (2, 1, 0), (0, 0, 1))), "inertia"),  # symmetric, indefinite
        (dict(inertia=((1, 0), (0, 1))), "inertia"),
        (dict(k_f=[3e-6, float("nan"), 3e-6, 3e-6]), "k_f"),
        (dict(k_f=[3e-6, 3e-6, 3e-6]), "k_f"),
        (dict(max_rotor_speed=-5.0), "max_rotor_speed"),
        (dict(rotor_axes=[(0, 0, 1)] * 3), "rotor_axes"),
        (dict(rotor_positions=[(0, 0)] * 4), "rotor_positions"),
        (dict(rotor_directions=[1, -1, 1, 0.5]), "rotor_directions"),
        (dict(drag_quadratic=(0.1, 0.1)), "drag_quadratic"),
        # all rotors at the centre: no roll/pitch moment (rank 2 of [f_z, m_x, m_y, m_z])
        (dict(rotor_positions=[(0, 0, 0)] * 4), "allocation matrix"),
        # all spinning the same way: yaw row parallel to the thrust row (rank 3)
        (dict(rotor_directions=[1, 1, 1, 1]), "allocation matrix"),
    ],
)
def test_invalid_parameters_raise_config_error_naming_the_field(change, field):
    with pytest.raises(ConfigError, match=field):
        _quad(**change)


def test_zero_yaw_coefficient_is_rank_deficient():
    with pytest.raises(ConfigError, match="rank 3"):
        _quad(k_m=0.0)


# --- malformed catalogue files ---------------------------------------------------------------

GOOD = """
[meta]
format = "volary-airframes"

[mini]
category = "preset"
layout = {value = "quad_x", source = "test"}
arm = {value = 120, unit = "mm", source = "test"}
mass = {value = 800, unit = "g", source = "test"}
inertia = {value = [4e-3, 4e-3, 7e-3], unit = "kg m^2", source = "test"}
k_f = {value = 3e-6, unit = "N/(rad/s)^2", source = "test"}
k_m = {value = 5e-8, unit = "N m/(rad/s)^2", source = "test"}
max_rotor_speed = {value = 15000, unit = "rpm", source = "test"}
"""


def _load(tmp_path, text):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    return load_file(path)


def test_good_file_converts_unit_aliases(tmp_path):
    af = _load(tmp_path, GOOD)["mini"].airframe
    assert af.mass == pytest.approx(0.8) and af.arm_length == pytest.approx(0.12)
    assert af.max_rotor_speed[0] == pytest.approx(15000 * 2 * math.pi / 60)


@pytest.mark.parametrize(
    "old, new, exc, pattern",
    [
        (
            'k_m = {value = 5e-8, unit = "N m/(rad/s)^2", source = "test"}\n',
            "",
            FileFormatError,
            r"\[mini\] k_m: missing field",
        ),
        ('unit = "g", ', "", FileFormatError, r"\[mini\] mass: missing unit"),
        (', source = "test"}\nk_f', "}\nk_f", FileFormatError, r"\[mini\] inertia: missing source"),
        ('unit = "g"', 'unit = "lb"', FileFormatError, r"\[mini\] mass: wrong unit 'lb'"),
        ('unit = "rpm"', 'unit = "Hz"', FileFormatError, r"\[mini\] max_rotor_speed: wrong unit"),
        ("value = 800", 'value = "heavy"', FileFormatError, r"\[mini\] mass: expected a number"),
        ('"quad_x"', '"quad_h"', FileFormatError, r"\[mini\] layout: unknown layout 'quad_h'"),
        ('"preset"', '"toy"', FileFormatError, r"\[mini\] category: expected one of"),
        ("[mini]\n", "[mini]\nwingspan = 3\n", FileFormatError, r"\[mini\] wingspan: unknown"),
        ("value = 800", "value = -800", ConfigError, r"bad.toml: \[mini\] mass: expected a fin"),
        ("[4e-3, 4e-3, 7e-3]", "[4e-3, 4e-3, nan]", ConfigError, r"\[mini\] inertia: .* got nan"),
        ("[4e-3, 4e-3, 7e-3]", "[4e-3, 4e-3]", FileFormatError, r"\[mini\] inertia: expected"),
        ("[4e-3, 4e-3, 7e-3]", "[4e-3, 4e-3, -7e-3]", ConfigError, r"\[mini\] mini: inertia"),
        ("value = 120,", "value = -1,", ConfigError, r"\[mini\] arm"),
        ("[mini]", "[mini", FileFormatError, "bad.toml: the catalogue file is not valid TOML"),
    ],
)
def test_malformed_catalogue_names_file_entry_and_field(tmp_path, old, new, exc, pattern):
    assert old in GOOD
    with pytest.raises(exc, match=pattern) as err:
        _load(tmp_path, GOOD.replace(old, new, 1))
    assert "bad.toml" in str(err.value)


def test_layout_option_for_the_wrong_layout_is_rejected(tmp_path):
    text = GOOD + 'rotor_tilt = {value = 30, unit = "deg", source = "test"}\n'
    with pytest.raises(FileFormatError, match=r"\[mini\] rotor_tilt: does not apply"):
        _load(tmp_path, text)


def test_a_platform_file_stands_in_for_a_catalogue_name(tmp_path):
    """A user's airframe (say the platform.toml of `volary sysid`) is named by its path
    wherever a catalogue name goes: the lookups, a World, the CLI (tests/test_cli.py)."""
    from volary.sim import World

    one = tmp_path / "mine.toml"
    one.write_text(GOOD)
    assert entry(str(one)).airframe.mass == pytest.approx(0.8)
    assert get(f"{one}:mini") is get(str(one))  # the only table, named or not; cached
    w_file = World([str(one)], n_envs=2, control="position", seed=0)
    w_obj = World([load_file(one)["mini"].airframe], n_envs=2, control="position", seed=0)
    for a, b in ((w_file.params.mass, w_obj.params.mass), (w_file.params.k_f, w_obj.params.k_f)):
        assert torch.equal(a, b)
    one.write_text(GOOD.replace("value = 800", "value = 950"))  # edited: read again
    assert get(str(one)).mass == pytest.approx(0.95)
    two = tmp_path / "two.toml"
    two.write_text(GOOD + GOOD.split("[meta]", 1)[1].split("\n", 2)[2].replace("[mini]", "[maxi]"))
    assert get(f"{two}:maxi").mass == pytest.approx(0.8)
    with pytest.raises(ConfigError, match=r"holds 2 airframes \(mini, maxi\); expected .*:NAME"):
        get(str(two))
    with pytest.raises(
        UnknownNameError, match=r"'midi' \(did you mean 'mini'\?\); valid names: maxi, mini"
    ):
        get(f"{two}:midi")
    with pytest.raises(FileFormatError, match="absent.toml: cannot read"):
        get(str(tmp_path / "absent.toml"))
    assert "mine.toml" not in names()  # the catalogue itself is unchanged


def test_missing_file_is_a_file_format_error(tmp_path):
    with pytest.raises(FileFormatError, match="cannot read"):
        load_file(tmp_path / "absent.toml")


# ---- random quads (volary.platforms.randomize) -------------------------------------------------
def test_random_quads_draw_inside_their_ranges_and_enclose_the_flyingtrust_platforms():
    import math

    from volary.platforms.indicators import thrust_to_weight
    from volary.platforms.randomize import QuadRanges, random_quads

    r = QuadRanges()
    quads = random_quads(400, seed=3)
    mass = [q.mass for q in quads]
    twr = [thrust_to_weight(q) for q in quads]
    taus = [q.motor_tau_up[0] for q in quads]
    arm = [math.hypot(*q.rotor_positions[0][:2]) for q in quads]
    for vals, (lo, hi) in ((mass, r.mass), (twr, r.twr), (taus, r.motor_tau), (arm, r.arm)):
        assert lo - 1e-9 <= min(vals) and max(vals) <= hi + 1e-9
        assert max(vals) - min(vals) > 0.6 * (hi - lo)  # spread over the range, not one value
    ft = names("flyingtrust-real") + names("flyingtrust-virtual")
    assert len(ft) == 36
    for name in ft:  # every evaluation platform is a possible draw
        a = get(name)
        assert r.mass[0] <= a.mass <= r.mass[1] and r.twr[0] <= thrust_to_weight(a) <= r.twr[1]
        assert r.motor_tau[0] <= a.motor_tau_up[0] <= r.motor_tau[1]


def test_random_quad_k_does_not_depend_on_how_many_are_drawn_and_hovers():
    from volary.platforms.randomize import random_quad, random_quads
    from volary.sim import Simulator

    assert random_quads(7, seed=1)[5] == random_quad(1, 5) == random_quads(9, seed=1)[5]
    assert random_quad(1, 5) != random_quad(2, 5)
    sim = Simulator(random_quads(16, seed=0), control="position", stochastic=False)
    target = torch.tensor([0.0, 0.5, 1.5, 0.0])  # a 0.5 m step up and sideways
    for _ in range(int(5 * sim.config.control_hz)):
        s = sim.step(target)
    assert not s.crashed.any() and not s.diverged.any()
    assert (s.pos - target[:3]).norm(dim=-1).max() < 0.02  # default gains fly every draw


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"twr": (0.8, 2.0)}, "twr"),
        ({"mass": (2.0, 1.0)}, "mass"),
        ({"arm": (0.0, 0.2)}, "arm"),
    ],  # fmt: skip
)
def test_random_quad_ranges_are_checked(kw, field):
    from volary.platforms.randomize import QuadRanges

    with pytest.raises(ConfigError, match=f"QuadRanges.{field}"):
        QuadRanges(**kw)
