"""volary.sim.World, the named end conditions and rollout: each term fires when it should, the
rig reads at its rates, vehicles of one env see and touch each other, rollout stops vehicles
as they end and is independent of the batch size."""

from __future__ import annotations

import math

import pytest
import torch

from volary.errors import ConfigError, UnknownNameError
from volary.sensors import CameraConfig, rangefinder_config
from volary.sensors.raycast.registry import make_raycaster
from volary.sim import Sensing, World, rollout, terms
from volary.sim.world import (
    VEHICLE_ID,
    _merge_sphere_hits,
    sphere_hits,
    sphere_hits_reference,
    vehicle_contacts,
)
from volary.worlds.primitives import Box, SceneSpec

ROOM = SceneSpec(
    name="room",
    bounds_min=(-5.0, -5.0, 0.0),
    bounds_max=(5.0, 5.0, 4.0),
    obstacles=(Box(center=(3.0, 0.0, 1.0), size=(0.4, 4.0, 2.0), object_id=1),),
    start=(0.0, 0.0, 1.0),
    goal=(1.5, 0.0, 1.0),
)
CAM = CameraConfig(width=16, height=12, hfov=math.radians(90.0), max_range=8.0)


def _world(n: int = 2, **kw) -> World:
    kw.setdefault("stochastic", False)
    return World("crazyflie", ROOM, n_envs=n, **kw)


def _hold(world: World, pos) -> torch.Tensor:
    sp = torch.zeros(world.b, 4)
    sp[:, :3] = torch.as_tensor(pos)
    return sp


# ---- terms --------------------------------------------------------------------------------------
def test_collided_fires_inside_an_obstacle_only():
    w = _world(2)
    w.reset(pos=torch.tensor([[3.0, 0.0, 1.0], [0.0, 0.0, 1.0]]))
    assert terms.collided(w).tolist() == [True, False]


def test_out_of_volume_fires_outside_the_bounds_and_at_the_ceiling():
    w = _world(3)
    w.reset(pos=torch.tensor([[0.0, 0.0, 1.0], [0.0, 6.0, 1.0], [0.0, 0.0, 3.99]]))
    assert terms.out_of_volume(w).tolist() == [False, True, True]


def test_diverged_fires_on_non_finite_state():
    w = _world(2, on_divergence="terminate")
    w.sim.state = w.sim.state.replace(pos=torch.tensor([[0.0, 0.0, 1.0], [math.nan, 0.0, 1.0]]))
    assert terms.diverged(w).tolist() == [False, True]


def test_below_tilted_too_far():
    w = _world(2)
    q = torch.tensor([[1.0, 0.0, 0.0, 0.0], [math.cos(0.5), math.sin(0.5), 0.0, 0.0]])
    w.reset(pos=torch.tensor([[0.0, 0.0, 0.2], [0.0, 0.0, 1.0]]), quat=q)
    assert terms.below(0.3)(w).tolist() == [True, False]
    assert terms.tilted(0.9)(w).tolist() == [False, True]  # tilt 1 rad on the second
    assert terms.too_far(torch.tensor([0.0, 0.0, 1.0]), 0.5)(w).tolist() == [True, False]


def test_time_limit_ends_every_vehicle_at_its_limit():
    w = _world(2)
    w.reset()
    ep = rollout(w, _hold(w, [0.0, 0.0, 1.0]), (terms.time_limit(0.5),), duration=2.0)
    assert ep.causes() == ["time_limit", "time_limit"]
    assert ep.steps == 120  # 0.5 s at 240 Hz, then the call stops
    assert torch.allclose(ep.end_time, torch.full((2,), 0.5, dtype=torch.float64), atol=1e-6)


def test_reached_needs_the_dwell_inside_the_radius():
    w = _world(1)
    w.reset()
    goal = torch.tensor(ROOM.goal)
    term = terms.reached(goal, radius=0.3, dwell=0.5, speed=1.0)
    ep = rollout(w, _hold(w, ROOM.goal), (term, terms.time_limit(6.0)), duration=6.0)
    assert ep.causes() == ["reached"]
    pos = ep.records.get("pos")
    assert pos is None  # nothing asked, nothing recorded
    assert float(ep.end_time[0]) > 0.5
    assert float((w.state.pos[0] - goal).norm()) < 0.3


def test_gates_done_needs_gates():
    w = _world(1)
    with pytest.raises(ConfigError, match="gates"):
        terms.gates_done(w)


# ---- rollout -------------------------------------------------------------------------------------
def test_rollout_stops_each_vehicle_at_its_own_end_and_records():
    w = _world(2)
    w.reset(pos=torch.tensor([[0.0, 0.0, 1.0], [2.0, 0.0, 1.0]]))
    sp = _hold(w, [0.0, 0.0, 1.0])
    sp[1, :3] = torch.tensor([3.5, 0.0, 1.0])  # flies into the wall at x = 2.8
    ep = rollout(
        w, sp, (terms.collided, terms.time_limit(3.0)), duration=5.0,
        record=("pos", "command"), record_every=24, record_initial=True,
    )  # fmt: skip
    assert ep.causes() == ["time_limit", "collided"]
    assert float(ep.end_time[1]) < float(ep.end_time[0])
    assert ep.records["pos"].shape == (len(ep.record_steps), 2, 3)
    assert ep.record_steps[0] == 0 and ep.record_steps[1] == 24
    assert ep.records["command"].shape[1:] == (2, 4)
    assert not w.active.any()


def test_act_may_end_vehicles_with_a_cause_of_its_own():
    w = _world(3)
    w.reset()

    def act(world, k):
        if k == 10:
            world.end(torch.tensor([False, True, False]), "error")
        return _hold(world, [0.0, 0.0, 1.0])

    ep = rollout(w, act, (terms.time_limit(0.2),), duration=1.0)
    assert ep.causes() == ["time_limit", "error", "time_limit"]


def test_rollout_is_independent_of_the_batch_size():
    def fly(n: int) -> torch.Tensor:
        w = World("crazyflie", ROOM, n_envs=n, stochastic=True, seed=3)
        w.reset()
        ep = rollout(w, _hold(w, [0.5, 0.2, 1.2]), (), steps=60, record=("pos",))
        return ep.records["pos"][:, :2]

    assert torch.equal(fly(2), fly(5))


def test_restarted_noise_makes_a_flight_independent_of_the_steps_before_it():
    """World.restart_noise, then reset: vehicle 0 flies the same process noise, IMU and noisy
    rangefinder readings however many steps came before, the ones a new World flies after its
    first reset (what the ROS 1 bridge relies on at arming, to fly the noise of an in-process
    race); without the restart it does not."""

    def fly(before: int | None, restart: bool) -> torch.Tensor:
        w = World("crazyflie", ROOM, n_envs=2, stochastic=True, seed=3, imu="flightgoggles",
                  sensors={"range": rangefinder_config("flightgoggles")})  # fmt: skip
        w.reset()
        for _ in range(before or 0):
            w.step(_hold(w, [0.0, 0.0, 1.0]))
            w.read("range")
        mask = torch.tensor([True, False])
        if restart:
            w.restart_noise(mask)
        if before is not None:  # None: a new World, reset once
            w.reset(mask)
        out = []
        for _ in range(20):
            w.step(_hold(w, [0.3, 0.0, 1.2]))
            r = w.sim.imu_reading
            rng = w.read("range").range[:1]
            out.append(torch.cat([w.state.pos[0], r.accel[0], r.gyro[0], rng]))
        return torch.stack(out)

    a = fly(3, True)
    assert a[:, -1].std() > 0.01  # the rangefinder is noisy
    assert torch.equal(a, fly(11, True))
    assert torch.equal(a, fly(None, False))  # what a new World flies
    assert not torch.equal(fly(3, False), fly(11, False))


def test_rollout_checks_its_arguments():
    w = _world(1)
    with pytest.raises(ConfigError, match="exactly one"):
        rollout(w, _hold(w, [0, 0, 1]), ())
    with pytest.raises(ConfigError, match="record"):
        rollout(w, _hold(w, [0, 0, 1]), (), steps=1, record=("speed",))
    with pytest.raises(ConfigError, match="record_every"):
        rollout(w, _hold(w, [0, 0, 1]), (), steps=1, record_every=0)


# ---- the rig ------------------------------------------------------------------------------------
def test_sensors_read_at_their_rates_and_once_per_step():
    w = _world(2, sensors={"depth": Sensing(CAM, rate_hz=60.0), "fast": CAM})
    w.reset()
    seen = []

    def act(world, k):
        seen.append(sorted(world.readings()))
        return _hold(world, [0.0, 0.0, 1.0])

    rollout(w, act, (), steps=8)
    assert seen[0] == ["depth", "fast"] and seen[1] == ["fast"] and seen[4] == ["depth", "fast"]
    assert w.read("fast") is w.read("fast")  # rendered once per step
    with pytest.raises(UnknownNameError):
        w.read("lidar")


def test_ended_vehicles_read_as_misses():
    w = _world(2, sensors={"depth": CAM})
    w.reset()
    w.end(torch.tensor([True, False]), "done")
    r = w.read("depth")
    assert not r.valid[0].any() and r.valid[1].any()


def test_a_rate_that_does_not_divide_the_control_rate_reads_at_each_sample_time():
    """7 Hz under the control rate: 7 readings a second, each at the first control step at or
    after its sample time i / 7 s; a rate above the control rate is refused."""
    w = _world(1, sensors={"depth": Sensing(CAM, rate_hz=7.0)})
    hz = w.sim.config.control_hz
    w.reset()
    due = []

    def act(world, k):
        due.append(world.due("depth"))
        return _hold(world, [0.0, 0.0, 1.0])

    rollout(w, act, (), steps=int(hz))
    steps = [k for k, d in enumerate(due) if d]
    assert steps == [math.ceil(i * hz / 7 - 1e-9) for i in range(7)]
    with pytest.raises(ConfigError, match="rate_hz"):
        _world(1, sensors={"depth": Sensing(CAM, rate_hz=2 * hz)})


# ---- several vehicles per env ----------------------------------------------------------------
def test_vehicles_of_one_env_see_each_other():
    w = World("crazyflie", ROOM, n_envs=2, vehicles_per_env=2, sensors={"depth": CAM})
    pos = torch.tensor([[0.0, 0.0, 1.0], [0.5, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 3.0, 1.0]])
    w.reset(pos=pos)
    seg = w.read("depth").segmentation
    assert (seg[0] == VEHICLE_ID + 1).any()  # vehicle 1 stands 0.5 m ahead of vehicle 0
    assert not (seg[2] >= VEHICLE_ID).any()  # env 1's other vehicle is beside it, not ahead
    assert not (seg[1] >= VEHICLE_ID).any()  # vehicle 1 looks away from vehicle 0


def test_vehicles_collide_with_each_other_within_their_env_only():
    pos = torch.tensor([[0.0, 0.0, 1.0], [0.05, 0.0, 1.0], [0.0, 0.0, 1.0], [2.0, 0.0, 1.0]])
    r = torch.full((4,), 0.07)
    assert vehicle_contacts(pos, r, 2).tolist() == [True, True, False, False]
    assert vehicle_contacts(pos, r, 1).tolist() == [False] * 4


def test_sphere_hits_match_the_torch_reference_caster():
    """The other vehicles' spheres hit where the analytic ray-cast reference puts them."""
    from volary.worlds.primitives import Sphere

    centers = torch.tensor([[0.0, 0.0, 1.0], [2.0, 0.3, 1.1]])
    radius = torch.tensor([0.1, 0.25])
    g = torch.Generator().manual_seed(0)
    dirs = torch.nn.functional.normalize(
        torch.tensor([1.0, 0.15, 0.05]) + 0.2 * torch.randn(1, 200, 3, generator=g), dim=-1
    )
    origins = centers[:1, None].expand(1, 200, 3)
    spec = SceneSpec(
        "s", (-5.0, -5.0, -5.0), (5.0, 5.0, 5.0), obstacles=(Sphere((2.0, 0.3, 1.1), 0.25, 7),)
    )
    ref = make_raycaster(spec, 1, backend="torch", ground=False).cast(origins, dirs, 10.0)
    o = torch.cat([origins, origins])
    d, oid, nrm = sphere_hits(o, torch.cat([dirs, dirs]), centers, radius, 2, 10.0)
    assert torch.equal(torch.isfinite(d[0]), ref.hit[0])
    hit = ref.hit[0]
    assert hit.sum() > 10
    assert torch.allclose(d[0][hit], ref.distance[0][hit], atol=1e-5)
    assert torch.allclose(nrm[0][hit], ref.normal[0][hit], atol=1e-4)
    assert (oid[0][hit] == VEHICLE_ID + 1).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_sphere_hits_agree_with_the_torch_reference(dtype):
    """The CPU loop finds the same sphere for every ray as the batched torch reference, with the
    same distance and normal up to torch's own sqrt rounding (torch's vectorized sqrt is not
    correctly rounded, so the last bit may differ): rays from inside and outside spheres,
    several envs, rays past the range, NaN directions."""
    g = torch.Generator().manual_seed(0)
    for m, n, r in [(2, 1, 500), (3, 2, 300), (8, 1, 400), (5, 3, 64)]:
        c = (1.5 * torch.rand(n * m, 3, generator=g)).to(dtype)
        rad = (0.05 + 0.5 * torch.rand(n * m, generator=g)).to(dtype)
        o = c[:, None, :] + 0.4 * torch.randn(n * m, r, 3, generator=g).to(dtype)
        d = torch.nn.functional.normalize(torch.randn(n * m, r, 3, generator=g).to(dtype), dim=-1)
        d[0, :3] = float("nan")
        dist, oid, nrm = sphere_hits(o, d, c, rad, m, 3.0)
        ref = sphere_hits_reference(o, d, c, rad, m, 3.0)
        assert [t.dtype for t in (dist, oid, nrm)] == [t.dtype for t in ref]
        assert torch.equal(oid, ref[1])
        hit = oid >= 0
        assert 20 < int(hit.sum()) < hit.numel()
        assert torch.equal(torch.isinf(dist), ~hit)
        tol = 4 * torch.finfo(dtype).eps
        assert torch.allclose(dist[hit], ref[0][hit], rtol=tol, atol=tol)
        assert torch.allclose(nrm, ref[2], rtol=10 * tol, atol=10 * tol)
        assert not (oid - VEHICLE_ID == torch.arange(n * m)[:, None] % m).any()  # never itself


def test_compiled_merge_puts_in_the_nearer_vehicle_hits_of_active_vehicles_only():
    """The CPU merge of scene hits and vehicle spheres equals the torch reference's merge
    (nearer wins, inactive vehicles keep their scene hits)."""
    from volary.sensors.raycast.base import RayHits

    g = torch.Generator().manual_seed(1)
    m, r = 4, 300
    c = 1.5 * torch.rand(m, 3, generator=g)
    rad = 0.1 + 0.4 * torch.rand(m, generator=g)
    o = c[:, None, :] + 0.3 * torch.randn(m, r, 3, generator=g)
    d = torch.nn.functional.normalize(torch.randn(m, r, 3, generator=g), dim=-1)
    dist = 3 * torch.rand(m, r, generator=g)
    dist[:, ::5] = torch.inf
    scene = RayHits(dist, torch.where(torch.isinf(dist), -1, 7), torch.randn(m, r, 3, generator=g))
    active = torch.tensor([True, False, True, True])
    ref_d, ref_id, ref_n = sphere_hits_reference(o, d, c, rad, m, 2.5)
    closer = (ref_d < scene.distance) & active[:, None]
    clone = RayHits(*(t.clone() for t in (scene.distance, scene.object_id, scene.normal)))
    out = _merge_sphere_hits(clone, o, d, c, rad, m, 2.5, active)
    assert torch.equal(out.object_id, torch.where(closer, ref_id, scene.object_id))
    assert 20 < int(closer.sum()) and torch.equal(out.distance[1], scene.distance[1])
    want = torch.where(closer, ref_d, scene.distance)
    assert torch.allclose(out.distance, want, rtol=1e-6, atol=1e-6)
    want_n = torch.where(closer[..., None], ref_n, scene.normal)
    assert torch.allclose(out.normal, want_n, rtol=1e-5, atol=1e-5)


def test_world_checks_its_arguments():
    with pytest.raises(ConfigError, match="vehicles_per_env"):
        World("crazyflie", ROOM, n_envs=2, vehicles_per_env=0)
    with pytest.raises(ConfigError, match="scene"):
        World("crazyflie", [ROOM, ROOM, ROOM], n_envs=2)
    with pytest.raises(ConfigError, match="noise_seeds"):
        World("crazyflie", ROOM, n_envs=2, noise_seeds=[1])
    # a scenario's name where its spec goes: said so, with the call that makes one
    with pytest.raises(ConfigError, match=r"the string 'forest' \(a scenario: .*make_scenario"):
        World("crazyflie", "forest", n_envs=2)
    w = _world(2)
    with pytest.raises(ConfigError, match="mask"):
        w.reset(torch.tensor([True]))


def test_the_imu_reads_every_step_when_the_vehicles_carry_one():
    w = _world(2, imu="bmi085")
    w.reset()
    assert "imu" not in w.readings()  # nothing measured before the first step
    w.step(_hold(w, [0.0, 0.0, 1.0]))
    imu = w.readings()["imu"]
    assert imu.accel.shape == (2, 3) and imu.gyro.shape == (2, 3)


def test_placed_vehicles_take_the_given_pose_and_the_others_fly():
    from volary.sim import Placement

    world = World("crazyflie", None, n_envs=1, vehicles_per_env=2, control="position")
    world.reset(pos=torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 1.0]]))
    free = World("crazyflie", None, n_envs=1, vehicles_per_env=2, control="position")
    free.reset(pos=torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 1.0]]))
    sp = torch.tensor([[0.5, 0.0, 1.2, 0.0], [1.0, 0.0, 1.0, 0.0]])
    place = Placement(
        mask=torch.tensor([False, True]),
        pos=torch.tensor([[9.0, 9.0, 9.0], [2.0, 3.0, 1.5]]),
        quat=torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 2.0]]),  # normalized here
        vel=torch.tensor([[0.0, 0.0, 0.0], [0.1, 0.2, 0.3]]),
    )
    st, ref = world.step(sp, place=place), free.step(sp)
    assert torch.equal(st.pos[1], torch.tensor([2.0, 3.0, 1.5]))
    assert torch.equal(st.quat[1], torch.tensor([0.0, 0.0, 0.0, 1.0]))
    assert torch.equal(st.vel[1], torch.tensor([0.1, 0.2, 0.3]))
    assert torch.equal(st.omega[1], torch.zeros(3))
    assert torch.equal(st.pos[0], ref.pos[0])  # the unplaced vehicle flew its own physics
    assert world.state is st and world.tick == 1
    with pytest.raises(ConfigError, match=r"place\.pos: expected shape \(2, 3\)"):
        world.step(sp, place=Placement(torch.tensor([True, True]), torch.zeros(3), place.quat))


@pytest.mark.parametrize("compile", [False, "numba"])
def test_noise_seeds_key_process_and_imu_noise_on_every_backend(compile):
    """A vehicle seeded s flies the same whatever its slot (the numba closed loop once kept the
    slot-keyed noise it was built with, ignoring ``noise_seeds``)."""

    def fly(seeds):
        w = World("flightgoggles", ROOM, n_envs=len(seeds), stochastic=True, compile=compile,
                  control="position", imu="flightgoggles", noise_seeds=seeds)  # fmt: skip
        w.reset(pos=torch.tensor(ROOM.start))
        ep = rollout(w, _hold(w, (0.0, 0.0, 1.2)), steps=60, record=("pos",))
        return ep.records["pos"], w.sim.imu_reading.accel

    alone_pos, alone_imu = fly([7])
    batch_pos, batch_imu = fly([3, 5, 7])
    torch.testing.assert_close(batch_pos[:, 2], alone_pos[:, 0], rtol=0, atol=1e-6)
    torch.testing.assert_close(batch_imu[2], alone_imu[0], rtol=0, atol=1e-5)
    assert not torch.equal(batch_pos[:, 0], batch_pos[:, 2])  # other seeds, other noise
    assert not torch.allclose(batch_imu[0], batch_imu[2], atol=1e-3)
