"""The benchmark protocol: built-in suites, TOML suite files, work units."""

from __future__ import annotations

import re

import pytest

from volary.errors import ConfigError, UnknownNameError
from volary.studies.flyingtrust.protocol import (
    QUICK_PLATFORMS,
    SCENARIO_TYPES,
    SUITES,
    Suite,
    get_suite,
)
from volary.studies.flyingtrust.schema import ProtocolSettings, WorkUnit


def test_scenario_types_match_worlds():
    from volary.worlds import SCENARIOS

    assert tuple(SCENARIOS) == SCENARIO_TYPES


def test_flyingtrust_suite_is_the_full_protocol():
    s = get_suite("flyingtrust")
    from volary.worlds import FIXED_SEEDS

    assert len(s.platforms) == 36 and len(s.scenarios) == 7 and s.configs == "fixed"
    assert s.n_trials(1) == 2520 and s.n_trials(2) == 5040
    units = s.units(["straight"], seed=0)
    assert len(units) == 70 and all(len(u.platforms) == 36 for u in units)
    keys = [t.key for u in units for t in u.trials()]
    assert len(keys) == len(set(keys)) == 2520
    # trial k of a (platform, type) pair flies the type's k-th fixed configuration (its seed)
    assert all(u.config == FIXED_SEEDS[u.scenario][u.trial] for u in units)
    assert {u.config for u in units if u.scenario == "maze"} == set(range(10))
    assert s.scene_seeds("forest") == FIXED_SEEDS["forest"] != tuple(range(10))
    assert s.settings == ProtocolSettings()


def test_fixed_configs_tokens_and_explicit_seeds(tmp_path):
    from volary.worlds import FIXED_SEEDS

    q = get_suite("quick")
    assert q.configs == "fixed:2" and q.n_configs() == 2
    assert q.scene_seeds("urban") == FIXED_SEEDS["urban"][:2]
    p = _write(tmp_path, 'platforms = ["0.60kg-EMAX"]\nscenarios = ["forest", "maze"]\n'
                         'configs = "fixed:3"\n')  # fmt: skip
    s = get_suite(p)
    assert [u.config for u in s.units(["straight"], 0)] == [
        *FIXED_SEEDS["forest"][:3], *FIXED_SEEDS["maze"][:3]]  # fmt: skip
    explicit = Suite("x", ("0.60kg-EMAX",), ("forest", "maze"), (4, 11))
    assert [u.config for u in explicit.units(["straight"], 0)] == [4, 11, 4, 11]
    for bad in ("fixed:0", "fixed:11", "fixd", "fixed:two", "fixed:"):
        with pytest.raises(ConfigError, match="'fixed:N' with 1 <= N <= 10"):
            Suite("x", ("0.60kg-EMAX",), ("forest",), bad)


def test_quick_suite_spans_twr_and_all_types():
    from volary.platforms import table1

    s = get_suite("quick")
    assert set(SUITES) == {"demo", "quick", "flyingtrust"}
    assert s.platforms == QUICK_PLATFORMS and s.scenarios == SCENARIO_TYPES
    twr = sorted(table1()[p].twr_max for p in s.platforms)
    assert twr[0] <= 1.5 and twr[-1] >= 5.0
    assert s.n_trials(1) == 84


def test_units_carry_algo_options_and_seed():
    s = get_suite("quick")
    units = s.units(["straight", "reactive"], 7, {"straight": {"speed": 2.0, "v": [1, 2]}})
    assert len(units) == 2 * 7 * 2
    u = units[0]
    assert isinstance(u, WorkUnit) and u.seed == 7 and u.algo == "straight"
    assert dict(u.algo_options) == {"speed": 2.0, "v": (1, 2)}
    assert units[-1].algo_options == ()
    hash(u)  # hashable: usable as a task key
    assert s.units("straight,reactive", 7)[0].algo == "straight"


def test_units_split_platforms_into_chunks():
    s = Suite("x", QUICK_PLATFORMS, ("forest",), (3,), 2, max_envs=4)
    units = s.units(["straight"], 0)
    assert [len(u.platforms) for u in units] == [4, 2, 4, 2]
    assert [u.trial for u in units] == [0, 0, 1, 1] and all(u.config == 3 for u in units)


@pytest.mark.parametrize(
    "kwargs, err",
    [
        ({"algos": [], "seed": 0}, ConfigError),
        ({"algos": ["a", "a"], "seed": 0}, ConfigError),
        ({"algos": ["a"], "seed": -1}, ConfigError),
        ({"algos": ["a"], "seed": 0, "algo_options": {"b": {}}}, ConfigError),
        ({"algos": ["a"], "seed": 0, "algo_options": {"a": {"f": object()}}}, ConfigError),
    ],
)
def test_units_reject_bad_input(kwargs, err):
    with pytest.raises(err):
        get_suite("quick").units(**kwargs)


def _write(tmp_path, text):
    p = tmp_path / "suite.toml"
    p.write_text(text)
    return p


def test_toml_suite_file(tmp_path):
    p = _write(
        tmp_path,
        'name = "mine"\nplatforms = ["0.60kg-EMAX", "crazyflie"]\nscenarios = ["forest", "maze"]\n'
        "configs = [0, 5]\ntrials_per_config = 3\n[settings]\ntime_limit = 60\n",
    )
    s = get_suite(p)
    assert s.name == "mine" and s.platforms == ("0.60kg-EMAX", "crazyflie")
    assert s.configs == (0, 5) and s.trials_per_config == 3
    assert s.settings.time_limit == 60.0 and s.settings.speed_cap == 4.0
    assert s.n_trials() == 2 * 2 * 2 * 3
    assert get_suite(str(p)) == s


def test_a_suite_reads_relative_platform_files_from_its_own_folder(tmp_path, monkeypatch):
    """A suite naming "quad.toml" flies the file beside it whatever the working directory."""
    from pathlib import Path

    from volary.platforms import entry, get

    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "quads.toml").write_text(Path(entry("crazyflie").path).read_text())  # catalogue file
    (folder / "suite.toml").write_text(
        'platforms = ["quads.toml:crazyflie", "0.60kg-EMAX"]\nscenarios = ["forest"]\n'
        "configs = [0]\n"
    )
    monkeypatch.chdir(tmp_path)
    s = get_suite("study/suite.toml")
    assert s.platforms == ("study/quads.toml:crazyflie", "0.60kg-EMAX")
    assert get(s.platforms[0]).mass == get("crazyflie").mass
    monkeypatch.chdir(folder)  # from the suite's own folder: the same file
    assert get_suite("suite.toml").platforms[0] == "quads.toml:crazyflie"


def test_toml_suite_chooses_the_collider(tmp_path):
    head = 'platforms = ["0.60kg-EMAX"]\nscenarios = ["narrow_gap"]\nconfigs = [0]\n[settings]\n'
    s = get_suite(_write(tmp_path, head + 'collider = "box"\n'))
    assert s.settings.collider == "box" and ProtocolSettings().collider == "sphere"
    with pytest.raises(ConfigError, match="settings.collider: expected one of sphere, box"):
        get_suite(_write(tmp_path, head + "collider = 3\n"))


def test_toml_suite_shorthands(tmp_path):
    p = _write(tmp_path, 'platforms = "flyingtrust"\nscenarios = "all"\nconfigs = [1]\n')
    s = get_suite(p)
    assert s.name == "suite" and len(s.platforms) == 36 and s.scenarios == SCENARIO_TYPES


def test_toml_suite_may_draw_configurations_beyond_the_fixed_ten(tmp_path):
    p = _write(tmp_path, 'platforms = ["0.60kg-EMAX"]\nscenarios = ["forest"]\nconfigs = [3, 42]\n')
    s = get_suite(p)
    assert s.configs == (3, 42)
    assert [u.config for u in s.units(["straight"], seed=0)] == [3, 42]


OK = 'platforms = ["0.60kg-EMAX"]\nscenarios = ["forest"]\nconfigs = [0]\n'


@pytest.mark.parametrize(
    "text, err, words",
    [
        ('platforms = ["0.60kg-EMAX"]\nscenarios = ["forest"]\nconfigs = [0]\nfoo = 1\n',
         ConfigError, ["foo", "valid keys", "trials_per_config"]),
        ('platforms = ["nope"]\nscenarios = ["forest"]\nconfigs = [0]\n',
         UnknownNameError, ["nope", "0.60kg-EMAX"]),
        ('platforms = ["0.60kg-EMAX"]\nscenarios = ["jungle"]\nconfigs = [0]\n',
         UnknownNameError, ["jungle", "forest", "perlin"]),
        ('platforms = ["0.60kg-EMAX"]\nscenarios = ["forest"]\nconfigs = [-1]\n',
         ConfigError, ["configs", ">= 0"]),
        ('platforms = ["0.60kg-EMAX"]\nscenarios = ["forest"]\nconfigs = [1.5]\n',
         ConfigError, ["configs"]),
        ('platforms = ["0.60kg-EMAX"]\nscenarios = ["forest"]\n', ConfigError, ["configs"]),
        (OK + '[settings]\nspeed = 3\n',
         ConfigError, ["speed", "speed_cap"]),
        (OK + 'trials_per_config = 0\n',
         ConfigError, ["trials_per_config"]),
        ('platforms = "0.60kg-EMAX"\nscenarios = ["forest"]\nconfigs = [0]\n',
         ConfigError, ["platforms"]),
        ("platforms = [\n", ConfigError, ["TOML"]),
    ],
)  # fmt: skip
def test_malformed_suite_files_give_clear_errors(tmp_path, text, err, words):
    with pytest.raises(err) as info:
        get_suite(_write(tmp_path, text))
    for w in words:
        assert w in str(info.value)


def test_unknown_suite_name_lists_the_valid_ones(tmp_path):
    with pytest.raises(UnknownNameError, match="quick"):
        get_suite("quik")
    with pytest.raises(ConfigError, match="does not exist"):
        get_suite(tmp_path / "missing.toml")


def test_suite_round_trips_through_a_dict():
    from dataclasses import asdict

    from volary.studies.flyingtrust.protocol import suite_from_dict

    for name in SUITES:
        s = get_suite(name)
        assert suite_from_dict(asdict(s)) == s


# ---- issue 18's cases: suite settings have documented ranges -----------------------------------
@pytest.mark.parametrize(
    "text, message",
    [
        ("[settings]\ntime_limit = inf", "settings.time_limit: expected a number in [0.1, 3600] s"),
        ("[settings]\ntime_limit = 1e-300", "settings.time_limit: expected a number in"),
        ("[settings]\nspeed_cap = 1e308", "settings.speed_cap: expected a number in [0.1, 50]"),
        ("trials_per_config = 1000000000", "trials_per_config: expected an int in [1, 1000]"),
    ],
)
def test_suite_files_with_meaningless_settings_are_refused(tmp_path, text, message):
    from volary.studies.flyingtrust.protocol import get_suite

    head = 'name = "x"\nplatforms = ["0.60kg-EMAX"]\nscenarios = ["forest"]\nconfigs = [0]\n'
    if text.startswith("trials"):
        body = head.replace("configs = [0]\n", f"configs = [0]\n{text}\n")
    else:
        body = head + text + "\n"
    p = tmp_path / "s.toml"
    p.write_text(body)
    with pytest.raises(ConfigError, match=re.escape(message)):
        get_suite(str(p))


# ---- issue 55: the suite file is read through volary.inputs and checked by schema.SuiteFile ----
def test_suite_files_that_would_hang_recurse_or_fill_memory_are_one_line_errors(tmp_path):
    import os

    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000)  # HEAD: RecursionError (a traceback)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    big = tmp_path / "big.toml"
    with big.open("wb") as f:
        f.write(b'platforms = ["0.60kg-EMAX"]\nscenarios = ["forest"]\nconfigs = [0]\n')
        f.truncate(65 * 2**20)  # HEAD read all 65 MB
    cases = [(deep, "nested too deeply"), (fifo, "not a regular file"), (big, "expected at most"),
             ("/dev/zero", "not a regular file")]  # fmt: skip
    for path, words in cases:
        with pytest.raises(ConfigError) as info:
            get_suite(str(path))
        assert words in str(info.value) and "\n" not in str(info.value), str(info.value)
