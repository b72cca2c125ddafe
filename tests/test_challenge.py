"""The AlphaPilot challenge as posed: a contestant sees sensors only (never the state or the
perturbed gates), the reference stack's filter is right to first order, beacon faults behave
as stated, and a course's run does not depend on the batch it is flown in."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from volary.errors import ConfigError, UnknownNameError
from volary.math.quaternion import quat_from_euler, quat_integrate, quat_to_rotmat
from volary.sensors.imu import imu_config
from volary.studies.alphapilot.challenge import (
    FAULTS,
    SENSOR_SETS,
    TABLE_IV,
    ChallengeSensors,
    _nominal,
    challenge_summary,
    run_challenge,
)
from volary.studies.alphapilot.estimation import GATE_PARAMS, VEHICLE, GateEkf, GateMap
from volary.studies.alphapilot.interface import (
    CONTESTANTS,
    BeaconReport,
    Briefing,
    ChallengeObservation,
    DepthReport,
    RangeReport,
    make_contestant,
)
from volary.studies.alphapilot.sensor_racer import SensorRacer
from volary.worlds import alphapilot_2019, alphapilot_2019_courses, unperturbed
from volary.worlds.tracks import COURSE_GENERATORS

QUICK = {"iters": 20, "samples": 200}  # a rough nominal plan: these tests fly seconds, not laps


class Hover:
    """A contestant that hovers on thrust alone and keeps everything it is given."""

    def __init__(self) -> None:
        self.briefing: Briefing | None = None
        self.seen: list[ChallengeObservation] = []

    def reset(self, briefing: Briefing) -> None:
        self.briefing = briefing

    def act(self, obs: ChallengeObservation) -> torch.Tensor:
        self.seen.append(obs)
        b = self.briefing
        assert b is not None
        thrust = (b.vehicle.mass * 9.81).float()
        return torch.cat((thrust[:, None], torch.zeros(b.n_envs, 3)), -1)


def _objects(x, seen=None):
    """Every object reachable through dataclass fields, mappings and sequences."""
    seen = set() if seen is None else seen
    if id(x) in seen:
        return
    seen.add(id(x))
    yield x
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            yield from _objects(getattr(x, f.name), seen)
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _objects(k, seen)
            yield from _objects(v, seen)
    elif isinstance(x, list | tuple):
        for v in x:
            yield from _objects(v, seen)


def test_the_contestant_cannot_reach_the_true_state_or_the_perturbed_gates():
    from volary.sim import Simulator, World
    from volary.worlds import GateTracker, Scene

    courses = alphapilot_2019_courses(2, 3)
    spy = Hover()
    every = ChallengeSensors(stereo=True)  # every sensor a contestant may carry
    res = run_challenge(courses, spy, seed=1, sensors=every, time_limit_s=0.3)
    b = spy.briefing
    assert b is not None and spy.seen
    # the briefing's course is the nominal one: no perturbation draw, nominal gate corners
    assert "perturbation_draw" not in b.course.meta and "perturbation_base" not in b.course.meta
    nominal = alphapilot_2019()
    assert [g.corners for g in b.course.gates] == [g.corners for g in nominal.gates]
    assert all([g.corners for g in c.gates] != [g.corners for g in nominal.gates] for c in courses)
    assert set(b.bounds) == set(nominal.meta["perturbation"])
    # observations carry sensor fields only
    fields = {f.name for f in dataclasses.fields(ChallengeObservation)}
    assert fields == {"step", "time", "accel", "gyro", "beacons", "range", "depth"}
    assert {f.name for f in dataclasses.fields(BeaconReport)} == {
        "pixels", "visible", "gate_id", "corner"
    }  # fmt: skip
    assert {f.name for f in dataclasses.fields(RangeReport)} == {"range", "valid"}
    # the stereo frame is depth and validity only: no object ids (which gate a pixel shows)
    assert {f.name for f in dataclasses.fields(DepthReport)} == {"depth", "valid"}
    assert b.stereo is not None and b.stereo.segmentation is False
    forbidden = (World, Simulator, GateTracker, Scene)
    for root in (b, *spy.seen):
        for obj in _objects(root):
            assert not isinstance(obj, forbidden), type(obj)
    # and no observed tensor is the state: positions appear nowhere in what was handed over
    assert any(o.beacons is not None for o in spy.seen)
    assert any(o.range is not None for o in spy.seen)
    assert any(o.depth is not None for o in spy.seen)
    assert spy.seen[0].accel is None and spy.seen[1].accel is not None
    final = res.race.path[-1].double()
    for o in spy.seen:
        for t in (o.accel, o.gyro):
            if t is not None:
                assert not torch.allclose(t.double(), final, atol=1e-3)


def test_observations_are_copies_a_contestant_cannot_change_the_world():
    class Vandal(Hover):
        def act(self, obs):
            cmd = super().act(obs)
            for t in (obs.time, obs.accel, obs.gyro):
                if t is not None:
                    t.fill_(1e6)
            if obs.beacons is not None:
                obs.beacons.pixels.fill_(-1.0)
                obs.beacons.visible.fill_(True)
            return cmd

    spy, vandal = Hover(), Vandal()
    course = alphapilot_2019_courses(1, 0)
    a = run_challenge(course, spy, seed=0, time_limit_s=0.3)
    b = run_challenge(course, vandal, seed=0, time_limit_s=0.3)
    assert torch.equal(a.race.path, b.race.path)


def test_mislabelled_beacons_reach_the_contestant_with_their_true_pixels():
    """The mislabel fault changes labels only: the same course and seed give the same pixels,
    and about the set share of the reports carries another gate's id or corner index."""
    course = alphapilot_2019_courses(1, 0)
    seen = []
    for rate in (0.0, 0.3):
        spy = Hover()
        run_challenge(course, spy, seed=0, sensors=ChallengeSensors(mislabel_rate=rate),
                      time_limit_s=0.5)  # fmt: skip
        seen.append([o.beacons for o in spy.seen if o.beacons is not None])
    changed = total = 0
    for a, b in zip(*seen, strict=True):
        assert torch.equal(a.pixels.nan_to_num(), b.pixels.nan_to_num())
        assert torch.equal(a.visible, b.visible)
        diff = (a.gate_id != b.gate_id) | (a.corner != b.corner)
        changed += int((diff & a.visible).sum())
        total += int(a.visible.sum())
    assert total > 200 and abs(changed / total - 0.3) < 4 * math.sqrt(0.21 / total)
    with pytest.raises(ConfigError, match="mislabel_rate"):
        ChallengeSensors(mislabel_rate=1.5)


def test_ekf_jacobians_match_finite_differences():
    spec = alphapilot_2019()
    order = spec.meta["order_index"]
    corners = torch.tensor([list(map(list, g.corners)) for g in spec.gates], dtype=torch.float64)
    ids = torch.tensor([g.object_id for g in spec.gates])
    state_of = torch.full((len(spec.gates),), -1, dtype=torch.int64)
    state_of[torch.tensor(order)] = torch.arange(len(order))
    std = torch.full((len(order), GATE_PARAMS), 0.5, dtype=torch.float64)
    from volary.sensors import camera_config

    cam = camera_config("flightgoggles")
    q = quat_from_euler(*(torch.tensor([v], dtype=torch.float64) for v in (0.1, -0.2, 1.4)))
    ekf = GateEkf(GateMap(corners, ids, state_of, std), torch.tensor([[17.0, -18.0, 5.0]]), q,
                  imu_config("flightgoggles"), intrinsics=cam.intrinsics,
                  camera_rotation=cam.mount.matrix(),
                  camera_translation=torch.tensor(cam.mount.translation))  # fmt: skip
    ekf.offsets = torch.randn(1, len(order), GATE_PARAMS, dtype=torch.float64) * 0.2
    g = torch.tensor([[order[0], order[0], order[1], 2]])  # gate indices (first two course gates)
    k = torch.tensor([[0, 2, 1, 3]])
    pred, H, depth, Hz = ekf._project(g, k)
    assert (depth > 0).all()
    eps = 1e-6
    for j in [*range(0, 3), *range(6, 9), *range(VEHICLE, VEHICLE + 2 * GATE_PARAMS)]:
        dx = torch.zeros(1, ekf.dim, dtype=torch.float64)
        dx[0, j] = eps
        saved = (ekf.pos.clone(), ekf.quat.clone(), ekf.offsets.clone())
        ekf._inject(dx)
        moved, _, moved_depth, _ = ekf._project(g, k)
        ekf.pos, ekf.quat, ekf.offsets = saved
        num = (moved - pred) / eps
        torch.testing.assert_close(H[..., j], num, rtol=1e-4, atol=1e-3, msg=f"column {j}")
        torch.testing.assert_close(Hz[..., j], (moved_depth - depth) / eps, rtol=1e-4, atol=1e-4)


def test_ekf_converges_on_a_gate_moved_turned_tilted_and_resized():
    """Synthetic frames from the filter's own camera model at the true offsets, seen from a
    vehicle flying past at constant velocity: every offset of the gate in view (shift, height,
    yaw, pitch, roll, opening size) goes to the truth; the fixed gates anchor the vehicle."""
    std = torch.tensor([1.0, 1.0, 0.5, 0.1, 0.1, 0.05, 0.2, 0.2], dtype=torch.float64)
    true_offset = torch.tensor([0.8, -0.6, 0.4, 0.12, -0.08, 0.04, 0.15, -0.1], dtype=torch.float64)
    est, pos, seen = _fly_past_a_moved_gate(true_offset, std)
    assert seen  # the first course gate is in view
    err = (est.offsets[0, 0] - true_offset).abs()
    assert float(err[:3].max()) < 0.05, err  # m
    assert float(err[3:6].max()) < 0.02, err  # rad
    assert float(err[6:].max()) < 0.02, err  # relative size
    assert float((est.pos - pos).norm()) < 0.05


def _fly_past_a_moved_gate(true_offset: torch.Tensor, std: torch.Tensor, **ekf_kw):
    """A filter flown at constant velocity (16 m of the 27 m) toward the first course gate,
    offset by ``true_offset`` from its nominal pose, fed synthetic frames from its own camera
    model, under an offset prior ``std``: (filter, final position, whether all four of that
    gate's corners were in view at some frame)."""
    spec = alphapilot_2019()
    order = spec.meta["order_index"]
    from volary.sensors import camera_config
    from volary.sensors.beacons import project_pinhole

    cam = camera_config("flightgoggles")
    corners = torch.tensor([list(map(list, gt.corners)) for gt in spec.gates], dtype=torch.float64)
    ids = torch.tensor([gt.object_id for gt in spec.gates])
    state_of = torch.full((len(spec.gates),), -1, dtype=torch.int64)
    state_of[torch.tensor(order)] = torch.arange(len(order))
    std = std.expand(len(order), GATE_PARAMS)
    start = torch.tensor([[18.0, -23.0, 5.3]], dtype=torch.float64)
    vel = torch.tensor([[1.0, 8.0, 0.3]], dtype=torch.float64)
    q = quat_from_euler(*(torch.tensor([v], dtype=torch.float64) for v in (0.0, 0.0, math.pi / 2)))
    kw = dict(intrinsics=cam.intrinsics, camera_rotation=cam.mount.matrix(),
              camera_translation=torch.tensor(cam.mount.translation))  # fmt: skip
    truth = GateEkf(GateMap(corners, ids, state_of, std), start, q, imu_config("ideal"), **kw)
    truth.offsets = torch.zeros(1, len(order), GATE_PARAMS, dtype=torch.float64)
    truth.offsets[0, 0] = true_offset
    est = GateEkf(GateMap(corners, ids, state_of, std), start, q, imu_config("ideal"), **kw,
                  **ekf_kw)  # fmt: skip
    est.vel = vel.clone()
    c = truth.gate_corners()[0].reshape(-1, 3)
    gid = ids.repeat_interleave(4)[None]
    corner = torch.arange(4).repeat(len(spec.gates))[None]
    f = torch.tensor([0.0, 0.0, 9.81], dtype=torch.float64)[None]
    seen = torch.zeros(len(spec.gates), 4, dtype=torch.bool)
    for i in range(120):
        est.predict(f, torch.zeros(1, 3, dtype=torch.float64), 1 / 60)
        pos = start + vel * (i + 1) / 60
        pc = (c - pos) @ quat_to_rotmat(q)[0] @ cam.mount.matrix().double()
        uv = project_pinhole(pc, cam.intrinsics)
        vis = (pc[:, 2] > 0.5) & (uv[:, 0] >= 0) & (uv[:, 0] < 1024)
        vis = vis & (uv[:, 1] >= 0) & (uv[:, 1] < 768)
        seen |= vis.view(len(spec.gates), 4)
        est.update_beacons(uv[None], vis[None], gid, corner)
    return est, pos, bool(seen[order[0]].all())


def test_ekf_reopens_a_gate_far_outside_its_prior():
    """A gate moved 1.6 m and raised 0.8 m under a 5 cm prior (30 and 16 sigma): every one of
    its corners fail the Mahalanobis gate (those that pass drag the estimate only part of the
    way), so a filter that trusts the prior ends 0.3 m or more off; re-opening the gate after
    three frames of rejections finds it to centimetres."""
    true_offset = torch.tensor([1.5, -0.6, 0.8, 0.0, 0.0, 0.05, 0.0, 0.0], dtype=torch.float64)
    std = torch.tensor([0.05, 0.05, 0.05, 0.01, 0.01, 0.01, 0.01, 0.01], dtype=torch.float64)
    stuck, _, _ = _fly_past_a_moved_gate(true_offset, std)
    assert float((stuck.offsets[0, 0, :3] - true_offset[:3]).norm()) > 0.3
    assert int(stuck.reopened.sum()) == 0 and int(stuck.rejected.sum()) > 100
    est, pos, _ = _fly_past_a_moved_gate(true_offset, std, reopen_after=3)
    assert int(est.reopened.sum()) >= 1
    err = (est.offsets[0, 0] - true_offset).abs()
    assert float(err[:3].max()) < 0.05, err  # m
    assert float(err[5]) < 0.02, err  # rad
    assert float((est.pos - pos).norm()) < 0.05
    torch.linalg.cholesky(est.P[0])  # still a covariance


def test_ekf_predict_integrates_a_turning_climb():
    """With exact IMU samples of a constant body rate and thrust, propagation follows the
    closed-form attitude and integrates position to second order."""
    spec = alphapilot_2019()
    corners = torch.tensor([list(map(list, g.corners)) for g in spec.gates], dtype=torch.float64)
    ids = torch.tensor([g.object_id for g in spec.gates])
    none = torch.full((len(spec.gates),), -1, dtype=torch.int64)
    q0 = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    ekf = GateEkf(GateMap(corners, ids, none, torch.zeros(0, 3, dtype=torch.float64)),
                  torch.zeros(1, 3, dtype=torch.float64), q0, imu_config("ideal"),
                  intrinsics=torch.tensor([1.0, 1.0, 0.0, 0.0]), camera_rotation=torch.eye(3),
                  camera_translation=torch.zeros(3))  # fmt: skip
    w = torch.tensor([[0.0, 0.0, 0.5]], dtype=torch.float64)
    f = torch.tensor([[0.0, 0.0, 11.81]], dtype=torch.float64)  # 2 m/s^2 up, level
    dt = 1 / 240
    for _ in range(240):
        ekf.predict(f, w, dt)
    torch.testing.assert_close(ekf.quat, quat_integrate(q0, w, 1.0), atol=1e-9, rtol=0)
    assert abs(float(ekf.vel[0, 2]) - 2.0) < 1e-6
    assert abs(float(ekf.pos[0, 2]) - 1.0) < 1e-2


def test_faults_and_sensor_sets_are_what_the_cli_offers():
    assert set(FAULTS) == {"none", "dropout30", "false10", "mislabel10", "bias3x"}
    assert SENSOR_SETS["imu+ir"].label == "IMU + IR"
    assert SENSOR_SETS["imu+ir+ranger"].label == "IMU + IR + Ranger"
    assert set(TABLE_IV) >= {"IMU + IR", "IMU + IR + Ranger"}
    cfg = dataclasses.replace(ChallengeSensors(), **FAULTS["bias3x"]).imu_config()
    base = imu_config("flightgoggles")
    assert cfg.gyro_bias_init == pytest.approx(3 * base.gyro_bias_init)
    assert base.gyro_bias_init > 0 and base.accel_bias_random_walk > 0  # FlightGoggles biases
    with pytest.raises(ConfigError, match="imu_bias_scale"):
        ChallengeSensors(imu_bias_scale=0.0)


def test_every_registered_contestant_has_reset_and_act():
    for name in CONTESTANTS:
        c = make_contestant(name)
        assert callable(c.reset) and callable(c.act)
    with pytest.raises(ConfigError, match="contestant"):
        make_contestant(42)  # type: ignore[arg-type]
    with pytest.raises(UnknownNameError, match="contestant 'nobody'.*reference"):
        make_contestant("nobody")


def test_bad_commands_name_the_contestant():
    class Broken(Hover):
        def act(self, obs):
            return torch.zeros(3)

    with pytest.raises(ConfigError, match=r"contestant 'Broken'.*\(N=1, 4\)"):
        run_challenge(alphapilot_2019_courses(1, 0), Broken(), time_limit_s=0.1)
    with pytest.raises(ConfigError, match="distinct course names"):
        c = alphapilot_2019_courses(1, 0)
        run_challenge(c + c, Hover(), time_limit_s=0.1)


def test_reference_racer_estimates_and_tracks_the_first_seconds():
    courses = alphapilot_2019_courses(2, 0)
    res = run_challenge(courses, SensorRacer(**QUICK), seed=0, time_limit_s=2.5)
    assert not bool(res.race.collided.any())
    assert float(res.pos_err.nan_to_num(0).max()) < 0.75  # a transient while pitched down with
    # the first gate leaving the view (the gates' full offsets are states: 0.50 m here)
    assert float(res.att_err.nan_to_num(0).max()) < math.radians(3.0)
    s = challenge_summary(res)
    assert s["estimation"]["position_m"]["median"] < 0.1
    assert s["courses"] == 2 and s["sensors"] == "IMU + IR + Ranger"


def test_a_course_flies_the_same_alone_and_in_a_batch_whatever_the_threads():
    c = alphapilot_2019_courses(3, 0)
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the caller's setting does not reach the run (one_thread)
    try:
        alone = run_challenge([c[1]], SensorRacer(**QUICK), seed=0, time_limit_s=1.5)
    finally:
        torch.set_num_threads(before)
    batch = run_challenge([c[2], c[1], c[0]], SensorRacer(**QUICK), seed=0, time_limit_s=1.5)
    assert torch.equal(alone.race.path[:, 0], batch.race.path[:, 1])
    torch.testing.assert_close(alone.pos_err[:, 0], batch.pos_err[:, 1], atol=1e-9, rtol=0)


def test_with_a_fixed_snap_solve_a_course_flies_the_same_alone_and_among_eight():
    """Eight envs replan together at the start, where min-snap's "auto" solve switches from
    the dense to the banded solve (a pair's plan then differs from its plan alone in the last
    bits, and the flights part after seconds: resized seed 5, course 10, camera-only: at 2.54 s in a
    batch of 25). With ``snap_method="dense"`` a pair flies the same alone and among eight."""
    c = alphapilot_2019_courses(8, 0)
    one, eight = (SensorRacer(**QUICK, snap_method="dense") for _ in range(2))
    alone = run_challenge([c[3]], one, seed=0, time_limit_s=0.5)
    batch = run_challenge(c, eight, seed=0, time_limit_s=0.5)
    assert torch.equal(alone.race.path[:, 0], batch.race.path[:, 3])
    # the plan itself, in float64 (the flight's float32 state hides a last-bit change a while;
    # with "auto" these setpoints differ by up to 2e-9)
    assert torch.equal(one.knots[0], eight.knots[3])
    k = int(float(one.knots[0, -1]) / one.dt)  # the plan's steps (a hover row follows)
    assert torch.equal(one.table[0, :k], eight.table[3, :k])
    with pytest.raises(ConfigError, match="snap_method"):
        SensorRacer(snap_method="lu")


@pytest.mark.slow  # 36 s on 2 cores, beside a default run near its 12-minute limit; the default
# run keeps the detector's own tests (test_gate_detector.py) and the beacon racer's batch check
def test_camera_only_racer_finds_the_first_gate_alone_or_in_a_batch():
    """Stereo depth instead of the IR beacons: the racer starts from the nominal course, finds
    the perturbed first gate in its depth images on the approach, and a course flies the same
    alone and beside others.

    The camera-only racer is not robust yet (issue 57: it completes 20-32 % of courses), and on
    which of these two courses it finds the gate depends on the machine: on the 2026-11-28 host
    (and already at 2290591) course 1's estimate never leaves the nominal gate, 2.36 m off, where
    the earlier host found both. So it must find and fly through the gate on at least one."""
    c = alphapilot_2019_courses(2, 0)
    cam = SENSOR_SETS["imu+camera+ranger"]
    assert cam.label == "IMU + Ranger + Camera" and not cam.beacons
    alone = run_challenge([c[1]], SensorRacer(**QUICK), seed=0, sensors=cam, time_limit_s=7.0)
    batch = run_challenge([c[0], c[1]], SensorRacer(**QUICK), seed=0, sensors=cam,
                          time_limit_s=7.0)  # fmt: skip
    assert torch.equal(alone.race.path[:, 0], batch.race.path[:, 1])
    first = batch.gate_err[..., 0]  # (K, N) m, the first course gate's estimate
    assert bool((first[0] > 0.5).all())  # the nominal gate is far from the perturbed one
    found = first[-1] < 0.15  # found on the approach
    assert bool(found.any()), first[-1]
    assert bool(torch.isfinite(batch.race.gate_times[found, 0]).all())  # and flown through
    assert not bool(batch.race.collided.any())


@pytest.mark.slow
def test_reference_racer_finishes_the_nominal_course_from_sensors():
    res = run_challenge([alphapilot_2019()], SensorRacer(iters=200), seed=0, time_limit_s=30.0)
    assert bool(res.race.finished[0]) and not bool(res.race.collided[0])
    assert int(res.race.gates_passed[0]) == 11


@pytest.mark.slow
def test_a_whole_race_flies_the_same_alone_and_in_a_batch():
    """Over a whole race, not only its first seconds: the filter's updates and the planner's
    must not round differently with the batch (they did, at 1e-6 m after ~16 s)."""
    c = alphapilot_2019_courses(3, 0)
    alone = run_challenge([c[1]], SensorRacer(), seed=0, time_limit_s=25.0)
    batch = run_challenge([c[2], c[0], c[1]], SensorRacer(), seed=0, time_limit_s=25.0)
    k = alone.race.path.shape[0]
    assert torch.equal(alone.race.path[:, 0], batch.race.path[:k, 2])
    assert int(alone.race.gates_passed[0]) == int(batch.race.gates_passed[2])


def test_reference_clock_holds_only_while_the_vehicle_lags():
    """``hold_m``: each env's reference clock stops while the estimated vehicle is more than
    hold_m behind the reference along its velocity, and runs with the control steps otherwise
    (hold_m = 0: always)."""

    class Logged(SensorRacer):
        def _advance(self) -> None:
            before = self.clock.clone()
            ref = self._reference()
            speed = ref[:, 1].norm(dim=-1)
            lag = ((ref[:, 0] - self.ekf.pos) * ref[:, 1]).sum(-1) / speed.clamp_min(1e-6)
            super()._advance()
            self.log.append((self.clock - before, lag, speed))

    courses = alphapilot_2019_courses(2, 0)
    for hold in (0.0, 0.05):
        racer = Logged(hold_m=hold, **QUICK)
        racer.log = []
        run_challenge(courses, racer, seed=0, time_limit_s=2.0)
        step = torch.stack([d for d, _, _ in racer.log])
        lag = torch.stack([g for _, g, _ in racer.log])
        speed = torch.stack([s for _, _, s in racer.log])
        if hold == 0.0:
            assert bool((step == 1).all())
            continue
        held = (lag > hold) & (speed > 1.0)
        assert torch.equal(step == 0, held)
        assert bool(held.any()) and bool((~held).any())  # both happen in these 2 s


@pytest.mark.parametrize("generator", sorted(COURSE_GENERATORS.names()))
def test_every_setting_gives_back_the_nominal_gates_whole(generator):
    """Each generator setting's courses unperturb to the nominal course, frame bars included
    (`resized` widens them): the AlphaPilot briefing is the nominal course, whichever course
    of a batch comes first (once it was the first course's, true bar widths and all)."""
    base = alphapilot_2019(arena="factory")
    a, b = alphapilot_2019_courses(2, 4, generator, arena="factory")
    assert unperturbed(a).gates == base.gates == unperturbed(b).gates
    assert _nominal([a, b]) == _nominal([b, a])
