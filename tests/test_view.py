"""The browser viewer (volary.view, ``volary view``): recordings from a real benchmark trial, a
rollout and files; the viewer's time slider; and the page in a real headless Chromium (skipped,
saying how to install one, where no Chromium or Playwright is present)."""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from volary.errors import ConfigError, FileFormatError
from volary.studies.flyingtrust.db import load_results
from volary.studies.flyingtrust.protocol import Suite
from volary.studies.flyingtrust.recording import trial_recording
from volary.studies.flyingtrust.report import view_command
from volary.studies.flyingtrust.run import run_suite
from volary.view import (
    Frame,
    Recording,
    Track,
    Viewer,
    episode_recording,
    load_recording,
    recording_from_spec,
)
from volary.worlds import make_scenario

SUITE = Suite("view-test", ("crazyflie",), ("forest",), (0,))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A real one-trial benchmark run (straight planner, crazyflie, forest config 0)."""
    d = tmp_path_factory.mktemp("run")
    run_suite(SUITE, ["straight"], d / "run.sqlite", workers=0, seed=0, progress=False)
    return d


@pytest.fixture(scope="module")
def key(run_dir) -> str:
    (row,) = load_results(run_dir / "run.sqlite")
    assert row.track, "the trial stored its track"
    return row.key


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- recordings --------------------------------------------------------------------------------
def test_trial_recording_has_the_scene_track_and_outcome(run_dir, key):
    rec = trial_recording(run_dir, key)
    (row,) = load_results(run_dir / "run.sqlite")
    spec = make_scenario("forest", 0)
    assert rec.spec == spec and rec.scene_ref == "forest:0"
    assert len(rec.triangles) > 100 and rec.vertices.shape[1] == 3  # the forest's trunks
    (tr,) = rec.tracks
    assert tr.name == "crazyflie" and (row.cause if not row.success else "success") in rec.title
    np.testing.assert_allclose(tr.pos[0], spec.start, atol=0.05)  # starts at the start
    assert tr.t[-1] == pytest.approx(rec.duration)
    np.testing.assert_allclose(tr.planned, [spec.start, spec.goal])  # the reference line


def test_unknown_trial_names_the_keys_that_exist(run_dir, key):
    with pytest.raises(ConfigError, match="trial: no trial 'nope'.*keys look like") as e:
        trial_recording(run_dir, "nope")
    assert key in str(e.value)
    with pytest.raises(ConfigError, match="run: no benchmark database"):
        trial_recording(run_dir / "missing", key)


def test_recording_round_trips_through_npz(tmp_path, run_dir, key):
    rec = trial_recording(run_dir, key)
    img = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    rec.frames = [Frame(0.5, "cam", image=img), Frame(1.0, "lidar", points=np.ones((7, 3)))]
    back = load_recording(rec.save(tmp_path / "r.npz"))
    assert back.title == rec.title and back.spec == rec.spec and back.bounds == rec.bounds
    np.testing.assert_array_equal(back.triangles, rec.triangles)
    np.testing.assert_array_equal(back.tracks[0].pos, rec.tracks[0].pos)
    np.testing.assert_array_equal(back.frames[0].image, img)
    assert back.frames_at(0.7)["cam"].t == 0.5 and back.frames_at(2.0)["lidar"].points.shape == (
        7,
        3,
    )
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(FileFormatError, match="not a volary recording .*not a zip") as err:
        load_recording(tmp_path / "bad.npz")
    assert "pickle" not in str(err.value)  # numpy's own message suggests loading one
    with pytest.raises(ConfigError, match="expected a .npz file"):
        rec.save(tmp_path / "r.json")


def test_track_pose_interpolates_and_checks_its_arrays():
    tr = Track("v", [0.0, 1.0], [[0, 0, 1], [2, 0, 1]])
    pos, quat = tr.pose_at(0.25)
    np.testing.assert_allclose(pos, [0.5, 0, 1])
    np.testing.assert_allclose(quat, [1, 0, 0, 0])
    np.testing.assert_allclose(tr.pose_at(5.0)[0], [2, 0, 1])  # held after the end
    with pytest.raises(ConfigError, match="expected t \\(K,\\) and pos \\(K, 3\\)"):
        Track("v", [0.0, 1.0], [[0, 0, 1]])
    with pytest.raises(ConfigError, match="non-decreasing"):
        Track("v", [1.0, 0.0], [[0, 0, 1], [0, 0, 1]])


def test_episode_recording_of_a_rollout():
    from volary.sim import World, rollout

    spec = make_scenario("forest", 1)
    world = World(["crazyflie"] * 2, spec, control="position", seed=0)
    world.reset(pos=torch.tensor([spec.start, spec.start]))
    target = torch.tensor([[*spec.start, 0.0]] * 2) + torch.tensor([1.0, 0.0, 0.0, 0.0])
    ep = rollout(
        world, target, duration=0.5, record=("pos", "quat"), record_initial=True, record_every=12
    )
    rec = episode_recording(spec, ep, dt=world.dt, radius=world.sim.params.radius.tolist())
    assert [t.name for t in rec.tracks] == ["vehicle 0", "vehicle 1"]
    assert rec.tracks[0].quat.shape == (len(ep.record_steps), 4)
    assert rec.duration == pytest.approx(ep.record_steps[-1] * world.dt)
    with pytest.raises(ConfigError, match="record=\\('pos', 'quat'\\)"):
        episode_recording(spec, rollout(world, target, steps=2), dt=world.dt)


def test_report_names_the_view_command():
    assert view_command("mapper|x|forest|0|0", "out/bench/r") == (
        "volary view out/bench/r --trial 'mapper|x|forest|0|0'"
    )
    assert view_command("a|b", None).startswith("volary view RUN_DIR --trial")


def test_report_prints_each_sample_failures_view_command(tmp_path, run_dir, key):
    from dataclasses import replace

    from volary.studies.flyingtrust.report import make_report

    (row,) = load_results(run_dir / "run.sqlite")
    failed = replace(row, success=False, cause="collision")  # a failure with its track
    page = make_report([failed], tmp_path, run=run_dir).read_text(encoding="utf-8")
    assert f"In 3-D: volary view {run_dir} --trial &#x27;{key}&#x27;" in page


def test_cli_saves_a_trial_recording(tmp_path, run_dir, key):
    from typer.testing import CliRunner

    from volary.cli.main import app

    out = tmp_path / "t.npz"
    res = CliRunner().invoke(
        app, ["view", str(run_dir), "--trial", key, "--save", str(out), "--no-serve"]
    )
    assert res.exit_code == 0, res.output
    assert load_recording(out).tracks[0].name == "crazyflie"
    res = CliRunner().invoke(app, ["view", str(run_dir), "--no-serve"])
    assert res.exit_code == 2 and "--trial KEY" in res.output


# ---- the viewer, server side ---------------------------------------------------------------------
def _synthetic() -> Recording:
    spec = make_scenario("narrow_gap", 0)
    t = np.linspace(0.0, 4.0, 21)
    pos = np.stack(
        [spec.start[0] + 2.0 * t, np.full_like(t, spec.start[1]), np.full_like(t, 1.5)], 1
    )
    return recording_from_spec(
        spec, [Track("quad", t, pos, radius=0.3)], "synthetic", "narrow_gap:0"
    )


def test_slider_time_moves_the_vehicle_and_renders_depth():
    v = Viewer(port=_free_port())
    try:
        rec = _synthetic()
        v.show(rec)
        p0, q0 = v.vehicle_pose["quad"]
        np.testing.assert_allclose(p0, rec.tracks[0].pos[0])
        np.testing.assert_allclose(q0, [1, 0, 0, 0], atol=1e-12)  # facing +x, its direction
        v.set_time(2.0)
        np.testing.assert_allclose(v.vehicle_pose["quad"][0], rec.tracks[0].pos[10])
        v.set_time(99.0)  # clamped to the end
        assert v.time == pytest.approx(4.0)
        assert v._image is not None and v._image.image.shape[2] == 3  # depth from the pose
        with pytest.raises(ConfigError, match="rec: expected a Recording"):
            v.show("nope")  # type: ignore[arg-type]
    finally:
        v.close()
    with pytest.raises(ConfigError, match="port: expected"):
        Viewer(port=-1)


def test_play_advances_the_time_until_stopped():
    v = Viewer(port=_free_port())
    try:
        v.show(_synthetic())
        play = next(g for g in v._gui if getattr(g, "label", "") == "play")
        play.value = True  # what the page's checkbox does
        deadline = time.time() + 5.0
        while v.time < 0.5 and time.time() < deadline:
            time.sleep(0.05)
        assert v.time >= 0.5
        play.value = False
        time.sleep(0.3)
        stopped = v.time
        time.sleep(0.5)
        assert v.time == stopped
    finally:
        v.close()


# ---- the page in a real browser ---------------------------------------------------------------
CHROMIUM = next(
    (
        p
        for p in (
            os.environ.get("VOLARY_CHROMIUM"),
            shutil.which("chromium-headless-shell"),
            shutil.which("chromium"),
            shutil.which("google-chrome"),
        )
        if p
    ),
    None,
)


def _browser_or_skip():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("no Playwright: pip install playwright (in the dev extra)")
    if CHROMIUM is None:
        pytest.skip(
            "no Chromium: apt-get install chromium-headless-shell (Debian), or set "
            "VOLARY_CHROMIUM to a Chromium/Chrome binary"
        )
    return sync_playwright


def _pixels(png: bytes) -> np.ndarray:
    """The screenshot's RGB, left of the GUI panel (which shows the slider's own value)."""
    import io

    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    return img[:, : int(0.64 * img.shape[1])]


def _magenta(img: np.ndarray) -> int:
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    return int(((r > 150) & (b > 150) & (g < 100)).sum())


def test_page_draws_the_trial_and_the_slider_moves_the_vehicle(run_dir, key):
    sync_playwright = _browser_or_skip()
    rec = trial_recording(run_dir, key)
    v = Viewer(port=_free_port())
    try:
        v.show(rec, depth_camera=None)
        start = v.vehicle_pose["crazyflie"][0].copy()
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                args=["--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--no-sandbox"],
            )
            page = browser.new_page(viewport={"width": 1000, "height": 700})
            page.goto(v.url)
            page.wait_for_selector("canvas", timeout=60_000)
            time.sleep(4.0)  # the scene messages arrive and draw
            full = _pixels(page.screenshot())
            assert _magenta(full) > 100, "the flown track (magenta) is drawn"
            v.server.scene.add_mesh_simple("/scene/obstacles", rec.vertices[:3], rec.triangles[:1])
            time.sleep(2.0)
            bare = _pixels(page.screenshot())
            assert (np.abs(full - bare).sum(-1) > 60).sum() > 2000, "the forest was drawn"
            slider = page.get_by_role("slider").first
            slider.focus()
            page.keyboard.press("End")  # the user drags the time slider to its end
            deadline = time.time() + 10
            while v.time < rec.duration - 1e-6 and time.time() < deadline:
                time.sleep(0.1)
            time.sleep(2.0)
            moved = _pixels(page.screenshot())
            browser.close()
        assert v.time == pytest.approx(rec.duration)
        end = v.vehicle_pose["crazyflie"][0]
        np.testing.assert_allclose(end, rec.tracks[0].pos[-1])
        assert np.linalg.norm(end - start) > 5.0
        assert (np.abs(moved - bare).sum(-1) > 60).sum() > 50, "the vehicle moved on the page"
    finally:
        v.close()


def test_live_view_follows_a_world_as_it_steps():
    from volary.sim import World

    spec = make_scenario("forest", 2)
    world = World(["crazyflie"] * 2, spec, control="position", seed=0)
    world.reset(pos=torch.tensor([spec.start, spec.start]))
    v = Viewer(port=_free_port())
    try:
        live = v.live(world)
        assert set(v.vehicle_pose) == {"vehicle 0"}  # env 0's one vehicle
        target = torch.tensor([[*spec.start, 0.0]] * 2) + torch.tensor([1.0, 0.0, 0.5, 0.0])
        for _ in range(240):
            world.step(target)
        assert live.update()
        np.testing.assert_allclose(v.vehicle_pose["vehicle 0"][0], world.state.pos[0].numpy())
        assert not live.update()  # at most PLAYBACK_HZ redraws a second
        with pytest.raises(ConfigError, match="env: expected 0 <= env < 2"):
            v.live(world, env=2)
    finally:
        v.close()


def test_rl_eval_tracer_records_env_0s_first_episode(tmp_path):
    """`volary rl eval --record`: env 0's first episode as a viewer recording."""
    from volary.envs import make_env
    from volary.studies.rl.cli import EpisodeTracer

    env = make_env("hover", n_envs=2, seed=0)
    tracer = EpisodeTracer(env)
    tracer.reset(seed=0)
    steps = 0
    while not tracer.done and steps < 3000:
        tracer.step(torch.zeros(2, env.single_action_space.shape[0]))
        steps += 1
    tracer.step(torch.zeros(2, env.single_action_space.shape[0]))  # after the end: not kept
    rec = load_recording(tracer.recording("hover").save(tmp_path / "ep.npz"))
    (tr,) = rec.tracks
    assert tracer.done and len(tr.t) == steps and tr.t[0] == 0.0
    assert tr.quat.shape == (steps, 4)
    assert tr.radius == pytest.approx(float(env.world.sim.params.radius[0]))
