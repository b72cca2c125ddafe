"""The README's Python examples run as written (the first one, a newcomer's first script, in
the default run; all of them in the slow run)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from volary.errors import ConfigError

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def _run(code: str, where: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.chdir(where)
    scope: dict = {"__name__": "__readme__"}
    exec(compile(code, str(README), "exec"), scope)  # noqa: S102 - our own README
    return scope


def test_first_example_flies_a_forest_and_saves_a_depth_frame(tmp_path, monkeypatch):
    first = python_blocks()[0]
    assert 'sensors={"depth": "d455"}' in first and ".save(" in first
    scope = _run(first, tmp_path, monkeypatch)
    png = (tmp_path / "depth.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    moved = scope["world"].state.pos[0] - torch.tensor(scope["spec"].start, dtype=torch.float32)
    assert 0.5 < float(moved[0]) < 3.5  # flew toward the setpoint 3 m ahead for one second


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_every_readme_example_runs(index, tmp_path, monkeypatch):
    _run(python_blocks()[index], tmp_path, monkeypatch)


def test_readings_save_png_and_npz(tmp_path):
    from volary.sim import World
    from volary.worlds import make_scenario

    spec = make_scenario("forest", seed=3)
    world = World(["crazyflie"] * 2, spec, sensors={"depth": "aerial_gym_64", "lidar": "os0_16"})
    world.reset(pos=torch.tensor(spec.start))
    depth, scan = world.read("depth"), world.read("lidar")
    depth.save(tmp_path / "d.npz", env=1)
    with np.load(tmp_path / "d.npz") as z:
        np.testing.assert_array_equal(z["depth"], depth.depth[1].numpy())
        assert z["valid"].dtype == bool
    assert scan.save(tmp_path / "l.png").read_bytes().startswith(b"\x89PNG")
    with np.load(scan.save(tmp_path / "l.npz")) as z:
        assert z["points"].shape == (16 * scan.range.shape[2], 3)
    with pytest.raises(ConfigError, match="env"):
        depth.save(tmp_path / "x.png", env=2)
    with pytest.raises(ConfigError, match=r"\.png or \.npz"):
        depth.save(tmp_path / "x.jpg")


def test_a_reading_saved_into_a_missing_folder_creates_it(tmp_path):
    from volary.sensors.splat.render import SplatImage
    from volary.sim import World
    from volary.worlds import make_scenario

    spec = make_scenario("forest", seed=3)
    world = World(["crazyflie"], spec, sensors={"depth": "aerial_gym_64", "lidar": "os0_16"})
    world.reset(pos=torch.tensor(spec.start))
    img = SplatImage(torch.zeros(1, 4, 6, 3), torch.ones(1, 4, 6), torch.ones(1, 4, 6))
    saved = [
        world.read("depth").save(tmp_path / "a" / "depth.png"),
        world.read("depth").save(tmp_path / "b" / "c" / "depth.npz"),
        world.read("lidar").save(tmp_path / "d" / "scan.png"),
        img.save(tmp_path / "e" / "rgb.png"),
    ]
    assert all(p.is_file() and p.stat().st_size > 0 for p in saved)


def test_splat_image_saves_its_pixels(tmp_path):
    from PIL import Image

    from volary.sensors.splat.render import SplatImage

    rgb = torch.zeros(1, 4, 6, 3)
    rgb[0, :, :3, 0] = 1.0  # left half red
    img = SplatImage(rgb, torch.ones(1, 4, 6), torch.ones(1, 4, 6))
    px = np.asarray(Image.open(img.save(tmp_path / "rgb.png")).convert("RGB"))
    assert px.shape == (4, 6, 3) and (px[:, :3, 0] == 255).all() and (px[:, 3:] == 0).all()


def test_sensor_presets_by_name_and_a_clear_error():
    from volary.sensors import CameraConfig, LidarConfig
    from volary.sim.world import sensor_preset

    assert isinstance(sensor_preset("d455"), CameraConfig)
    assert isinstance(sensor_preset("os1_64"), LidarConfig)
    with pytest.raises(ConfigError, match=r"sensors\['cam'\]: unknown sensor preset 'd999'.*d455"):
        sensor_preset("d999", "sensors['cam']")
