"""The contestant's interface, field by field: everything a contestant (the sensors-only and the
camera-only racer alike) can reach from what the challenge hands it (the briefing with its
nominal course, vehicle and sensor configs, and every observation) is listed in
docs/race-interface.md with its source in the 2019 rules or as a volary extra. A field added to
(or dropped from) what is handed over fails here until the table says where it comes from."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch

from volary.studies.alphapilot.challenge import SENSOR_SETS, ChallengeSensors, run_challenge
from volary.studies.alphapilot.interface import Briefing, ChallengeObservation
from volary.worlds.tracks import COURSE_GENERATORS, alphapilot_2019_courses

TABLE = Path(__file__).resolve().parents[1] / "docs" / "race-interface.md"
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|")
GATE = "<gate>"  # a mapping keyed by gate name is one row per value kind, not per gate


class Spy:
    """Hovers on thrust and keeps its briefing and every observation."""

    def reset(self, briefing: Briefing) -> None:
        self.briefing = briefing
        self.seen: list[ChallengeObservation] = []

    def act(self, obs: ChallengeObservation) -> torch.Tensor:
        self.seen.append(obs)
        b = self.briefing
        thrust = (b.vehicle.mass * 9.81).float()
        return torch.cat((thrust[:, None], torch.zeros(b.n_envs, 3)), -1)


def _properties(x: object) -> list[str]:
    cls = type(x)
    return [n for n in dir(cls) if not n.startswith("_") and isinstance(getattr(cls, n), property)]


def reachable(x: object, path: str, gates: set[str], out: set[str]) -> None:
    """Every leaf path under ``x``: dataclass fields and public properties, mapping keys (gate
    names folded into ``<gate>``), the elements of a sequence of records (``[]``)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            reachable(getattr(x, f.name), f"{path}.{f.name}", gates, out)
        for name in _properties(x):
            reachable(getattr(x, name), f"{path}.{name}", gates, out)
        return
    if isinstance(x, dict):
        for k, v in x.items():
            reachable(v, f"{path}.{GATE if k in gates else k}", gates, out)
        return
    records = isinstance(x, list | tuple) and any(
        dataclasses.is_dataclass(v) or isinstance(v, dict) for v in x
    )
    if records:
        for v in x:
            reachable(v, f"{path}[]", gates, out)
        return
    out.add(path)


def leaves(paths: set[str]) -> set[str]:
    """The paths that are not the prefix of another (an observation field that is None at one
    step and a report at another is listed by the report's fields)."""
    return {p for p in paths if not any(q.startswith(p + ".") for q in paths)}


def handed_over(sensors: ChallengeSensors, generator: str = "volary") -> set[str]:
    spy = Spy()
    courses = alphapilot_2019_courses(1, 0, generator, arena="factory")  # the challenge default
    run_challenge(courses, spy, seed=0, sensors=sensors, time_limit_s=0.2)
    gates = {g.name for g in spy.briefing.course.gates}
    out: set[str] = set()
    reachable(spy.briefing, "briefing", gates, out)
    for obs in spy.seen:
        reachable(obs, "obs", gates, out)
    return leaves(out)


def table() -> dict[str, str]:
    rows = {}
    for line in TABLE.read_text().splitlines():
        m = ROW.match(line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} is listed twice"
            rows[m.group(1)] = line
    return rows


@pytest.fixture(scope="module")
def every_field() -> set[str]:
    """What the racers of every sensor set can reach (the stereo camera's fields included)."""
    fields: set[str] = set()
    for cfg in (*SENSOR_SETS.values(), ChallengeSensors(stereo=True)):
        fields |= handed_over(cfg)
    return leaves(fields)


def test_every_field_a_contestant_can_reach_is_in_the_committed_table(every_field):
    listed = set(table())
    added, gone = sorted(every_field - listed), sorted(listed - every_field)
    assert not added, f"handed to the contestant but not in {TABLE.name}: {added}"
    assert not gone, f"in {TABLE.name} but no longer handed over: {gone}"


def test_every_row_names_its_source_and_the_issue_57_fields_are_flagged():
    rows = table()
    for path, line in rows.items():
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 4 and cells[2], f"{path}: expected | field | type | source | note |"
        assert "2019" in cells[2] or "volary extra" in cells[2], f"{path}: {cells[2]!r}"
    flagged = {p for p, line in rows.items() if "**not 2019**" in line}
    assert {
        f"briefing.course.meta.perturbation.{GATE}",
        f"briefing.bounds.{GATE}",
        "obs.beacons.gate_id",
        "obs.beacons.corner",
    } <= flagged


NOT_2019 = {
    "briefing.imu.accel_bias_init",
    "briefing.imu.gyro_bias_init",
    "briefing.imu.accel_bias_random_walk",
    "briefing.imu.gyro_bias_random_walk",
    "briefing.imu.source",
    "briefing.beacon_pixel_std",
    "briefing.course.meta.source",
}


def test_what_a_2019_team_did_not_have_is_not_handed_over(every_field):
    """The IMU's bias model, the simulated detector noise and the course file's path were not
    published in 2019: neither the briefing nor the table has them."""
    assert not NOT_2019 & every_field, sorted(NOT_2019 & every_field)
    assert not NOT_2019 & set(table())
    assert {"briefing.imu.accel_noise_density", "briefing.imu.gyro_noise_density",
            "briefing.imu.rate_hz"} <= every_field  # fmt: skip


def test_courses_of_every_generator_hand_over_the_same_fields():
    """The generator setting a course was drawn with never reaches the contestant."""
    cfg = SENSOR_SETS["imu+ir+ranger"]
    base = handed_over(cfg)
    for generator in ("replaced", "resized", "moved"):
        fields = handed_over(cfg, generator)
        assert fields == base, (generator, sorted(fields ^ base))


def test_the_generators_the_test_covers_are_all_there_are():
    assert set(COURSE_GENERATORS.names()) == {"volary", "replaced", "resized", "moved"}
