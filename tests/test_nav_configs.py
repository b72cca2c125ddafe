"""More configurations per scenario type: ``configs = "generated:N"`` and ``volary bench run
--configs N --scenarios a,b``, drawn by each type's own rule (``worlds.generated_seeds``)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from _nav_fakes import fake_unit
from volary.cli.main import app
from volary.errors import ConfigError, UnknownNameError
from volary.studies.flyingtrust import run as nav_runner
from volary.studies.flyingtrust.cli import build_suite
from volary.studies.flyingtrust.db import RunDB
from volary.studies.flyingtrust.protocol import SCENARIO_TYPES, Suite, get_suite
from volary.studies.flyingtrust.run import create_run, stored_suite
from volary.worlds import scenarios
from volary.worlds.scenarios import FIXED_SEEDS, fixed_seeds, generated_seeds
from volary.worlds.scenarios_common import stratified_seeds

SEEDS_0_9 = ("random_cylinders", "narrow_gap", "sudden_drop", "maze", "perlin")
EMAX = ("0.60kg-EMAX",)
cli = CliRunner()


@pytest.fixture
def fake_clearance(monkeypatch):
    """Forest's and urban's line clearance replaced by a cheap, scrambled function of the
    seed (no scene generated); records the seeds asked for. Caches cleared around the test."""
    asked: list[tuple[str, int]] = []

    def clearance(kind: str, seed: int) -> float:
        asked.append((kind, seed))
        return float((seed * 37 + (kind == "urban") * 11) % 101) / 10.0

    scenarios._generated.cache_clear()
    monkeypatch.setattr(scenarios, "seed_clearance", clearance)
    yield clearance, asked
    scenarios._generated.cache_clear()


def test_generated_seeds_of_the_seeds_0_9_types_are_the_first_n_seeds():
    for kind in SEEDS_0_9:
        for n in (1, 7, 10, 30, 100):
            assert generated_seeds(kind, n) == tuple(range(n))
        assert generated_seeds(kind, 10) == fixed_seeds(kind) == FIXED_SEEDS[kind]


def test_forest_and_urban_are_stratified_over_ten_candidates_per_configuration(fake_clearance):
    clearance, asked = fake_clearance
    for kind in ("forest", "urban"):
        for n in (3, 10, 25):
            asked.clear()
            want = stratified_seeds([clearance(kind, s) for s in range(10 * n)], k=n)
            asked.clear()
            got = generated_seeds(kind, n)
            assert got == want and len(set(got)) == n and got != tuple(range(n))
            assert sorted(s for k, s in asked) == list(range(10 * n))  # candidates 0..10n-1
            assert {k for k, _ in asked} == {kind}
    asked.clear()
    assert generated_seeds("urban", 25) == want
    generated_seeds("forest", 10)
    assert asked == []  # cached: the candidates are not generated again


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["forest", "urban"])
def test_generated_ten_of_forest_and_urban_is_the_fixed_ten(kind):
    """The real generators (forest 12 s, urban 7 s here): generated:10 flies the fixed ten."""
    assert generated_seeds(kind, 10) == fixed_seeds(kind)


def test_generated_seeds_refuse_counts_outside_1_to_100_and_unknown_types():
    for bad in (0, 101, -3, 2.5, True, "10"):
        with pytest.raises(ConfigError, match=r"^n: expected an integer in \[1, 100\]"):
            generated_seeds("maze", bad)
    with pytest.raises(UnknownNameError, match="forest"):
        generated_seeds("jungle", 3)


def test_a_generated_suite_flies_n_configurations_per_type_with_unique_trial_keys(
    fake_clearance,
):
    s = Suite("g", EMAX, ("maze", "forest"), "generated:12", trials_per_config=2)
    assert s.n_configs() == 12 and s.n_trials(1) == 2 * 12 * 2
    assert s.scene_seeds("maze") == tuple(range(12))
    assert s.scene_seeds("forest") == generated_seeds("forest", 12)
    units = s.units(["straight"], seed=0)
    keys = [t.key for u in units for t in u.trials()]
    assert len(keys) == len(set(keys)) == 48
    for kind in ("maze", "forest"):  # trial = i * trials_per_config + j, i-th configuration
        mine = [u for u in units if u.scenario == kind]
        assert [u.trial for u in mine] == list(range(24))
        assert [u.config for u in mine] == [c for c in s.scene_seeds(kind) for _ in (0, 1)]


def test_generated_ten_flies_the_same_units_as_fixed():
    kinds = SEEDS_0_9
    fixed = Suite("f", EMAX, kinds, "fixed").units(["straight"], 0)
    assert Suite("f", EMAX, kinds, "generated:10").units(["straight"], 0) == fixed


@pytest.mark.parametrize(
    "bad", ["generated:0", "generated:101", "generated:x", "generated", "generated:", "gen:3"]
)
def test_bad_generated_tokens_are_refused_in_one_line(bad, tmp_path):
    with pytest.raises(ConfigError, match=r"'generated:N' with 1 <= N <= 100") as e:
        Suite("x", EMAX, ("maze",), bad)
    assert "\n" not in str(e.value) and repr(bad) in str(e.value)
    path = tmp_path / "s.toml"
    path.write_text(f'platforms = ["0.60kg-EMAX"]\nscenarios = ["maze"]\nconfigs = "{bad}"\n')
    with pytest.raises(ConfigError, match=rf"^{path}: configs: expected 'fixed'.*'generated:N'"):
        get_suite(path)


def test_a_suite_file_with_generated_configs_loads_and_its_run_stores_it(tmp_path):
    path = tmp_path / "more.toml"
    path.write_text('platforms = ["0.60kg-EMAX"]\nscenarios = ["perlin", "maze"]\n'
                    'configs = "generated:30"\n')  # fmt: skip
    s = get_suite(path)
    assert s.configs == "generated:30" and s.n_trials(2) == 120
    db = create_run(s, ["straight"], tmp_path / "run" / "run.sqlite")
    assert stored_suite(db) == s


def test_build_suite_applies_configs_and_scenarios_before_set():
    s = build_suite("quick", 30, "maze, perlin", ["trials_per_config=2"])
    assert (s.configs, s.scenarios, s.trials_per_config) == ("generated:30", ("maze", "perlin"), 2)
    assert s.platforms == get_suite("quick").platforms
    assert build_suite("flyingtrust", 10) == get_suite("flyingtrust")  # 10: the fixed suite
    assert build_suite("quick", 30, None, ["configs=fixed:3"]).configs == "fixed:3"  # --set last
    assert build_suite("quick", None, "forest").scenarios == ("forest",)
    assert build_suite("quick") == get_suite("quick")


def _one_line_error(r, *needles: str) -> None:
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert r.output.startswith("error: --"), r.output
    for n in needles:
        assert n in r.output, r.output


def test_bench_run_refuses_bad_configs_and_scenarios_naming_the_option(tmp_path):
    out = ["--out", str(tmp_path / "r")]
    for n in ("0", "101", "-2"):
        r = cli.invoke(app, ["bench", "run", "--configs", n, *out])
        _one_line_error(r, "--configs: expected an integer in [1, 100]", f"got {n}")
    r = cli.invoke(app, ["bench", "run", "--scenarios", "forest,jungle", *out])
    _one_line_error(r, "--scenarios: unknown scenario type 'jungle'", ", ".join(SCENARIO_TYPES))
    for text in (",", "maze,maze"):
        r = cli.invoke(app, ["bench", "run", "--scenarios", text, *out])
        _one_line_error(r, "--scenarios:")
    assert not (tmp_path / "r").exists()


def test_bench_run_flies_the_generated_suite_it_built(tmp_path, monkeypatch, fake_clearance):
    """The whole command, with the episode and forest's clearance faked: the run's units fly
    the configurations the rule gives, and its stored suite is the generated one."""
    real = nav_runner.run_units
    monkeypatch.setattr(
        nav_runner, "run_units", lambda *a, **k: real(*a, **{**k, "unit_fn": fake_unit})
    )
    toml = tmp_path / "one.toml"
    toml.write_text('platforms = ["0.60kg-EMAX"]\nscenarios = "all"\nconfigs = [0]\n')
    args = ["bench", "run", "--suite", str(toml), "--configs", "12", "--scenarios", "forest,maze"]
    r = cli.invoke(app, [*args, "--workers", "0", "--out", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    assert "generated:12: drawing 12 of 120 candidate scenes of forest" in r.output
    assert "24 trials" in r.output and "complete: 24/24 trials" in r.output
    db = tmp_path / "run" / "run.sqlite"
    s = stored_suite(db)
    assert (s.configs, s.scenarios) == ("generated:12", ("forest", "maze"))
    with RunDB.open(db, readonly=True) as run:
        flown = {k: [u.config for u in run.units() if u.scenario == k] for k in s.scenarios}
    assert flown == {"forest": list(generated_seeds("forest", 12)), "maze": list(range(12))}


def test_bench_run_help_names_the_new_options():
    r = cli.invoke(app, ["bench", "run", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    for word in ("--configs", "generated:N", "--scenarios", "forest,urban"):
        assert word in r.output, (word, r.output)
