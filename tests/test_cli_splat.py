"""``volary splat synth|convert|render`` through typer's CliRunner."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from volary.cli.splat import splat_app
from volary.sensors.splat import load_ply

runner = CliRunner()
SMALL = ["--max-gaussians", "5000"]


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    path = tmp_path_factory.mktemp("splat") / "forest.ply"
    r = runner.invoke(splat_app, ["synth", "forest", "--out", str(path), "--seed", "1", *SMALL])
    assert r.exit_code == 0, r.output
    assert "forest seed 1" in r.output and path.is_file()
    return path


def test_synth_writes_a_loadable_deterministic_ply(scene, tmp_path):
    s = load_ply(scene)
    assert 0 < s.count <= 5000 and s.sh_degree == 0 and "object_id" in s.extra
    again = tmp_path / "again.ply"
    r = runner.invoke(splat_app, ["synth", "forest", "--out", str(again), "--seed", "1", *SMALL])
    assert r.exit_code == 0 and again.read_bytes() == scene.read_bytes()


def test_convert_is_a_byte_exact_copy_and_aligns(scene, tmp_path):
    dst = tmp_path / "copy.ply"
    assert runner.invoke(splat_app, ["convert", str(scene), str(dst)]).exit_code == 0
    assert dst.read_bytes() == scene.read_bytes()
    moved = tmp_path / "moved.ply"
    shift = "1,0,0,10, 0,1,0,0, 0,0,1,0, 0,0,0,1"
    r = runner.invoke(splat_app, ["convert", str(scene), str(moved), "--align", shift, "--ascii"])
    assert r.exit_code == 0, r.output
    a, b = load_ply(scene), load_ply(moved)
    assert b.layout is not None and b.layout.text
    torch.testing.assert_close(b.means, a.means + torch.tensor([10.0, 0.0, 0.0]))


def test_render_writes_png_and_depth(scene, tmp_path):
    png, depth = tmp_path / "f.png", tmp_path / "d.npy"
    args = ["render", str(scene), "--out", str(png), "--depth", str(depth)]
    r = runner.invoke(splat_app, [*args, "--width", "48", "--height", "32", "--brightness", "0.5"])
    assert r.exit_code == 0, r.output
    img = cv2.imread(str(png))
    assert img.shape == (32, 48, 3) and img.max() > 0
    assert img.max() <= 0.5 * 255 + 1  # brightness 0.5 of [0, 1] colours
    d = np.load(depth)
    assert d.shape == (32, 48) and np.isfinite(d).mean() > 0.3


def test_render_a_scenario_by_name_from_its_start_pose(tmp_path):
    png = tmp_path / "maze.png"
    r = runner.invoke(
        splat_app, ["render", "maze", "--out", str(png), "--width", "32", "--height", "24", *SMALL]
    )
    assert r.exit_code == 0, r.output
    assert cv2.imread(str(png)).shape == (24, 32, 3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["render", "nowhere.ply"], "no such file"),
        (["render", "volcano"], "scenario"),
        (["render", "maze", "--look-at", "1,2,3"], "--look-at"),
        (["render", "maze", "--hfov", "200"], "--hfov"),
        (["render", "maze", "--device", "tpu"], "--device"),
        (["render", "maze", "--backend", "magic", *SMALL], "magic"),
        (["convert", "nowhere.ply", "x.ply"], "no such file"),
        (["synth", "volcano"], "volcano"),
        (["synth", "forest", "--sh-degree", "5"], "--sh-degree"),
    ],
)
def test_bad_arguments_fail_with_one_line_and_exit_2(args, message, tmp_path):
    r = runner.invoke(
        splat_app, [*args, "--out", str(tmp_path / "x")] if args[0] == "synth" else args
    )
    assert r.exit_code == 2, r.output
    assert message in r.output.lower() and "Traceback" not in r.output


def test_convert_rejects_bad_files_and_degrees(scene, tmp_path):
    bad = tmp_path / "bad.ply"
    bad.write_bytes(b"ply\nformat nonsense\n")
    r = runner.invoke(splat_app, ["convert", str(bad), str(tmp_path / "o.ply")])
    assert r.exit_code == 2 and "bad.ply" in r.output
    r = runner.invoke(
        splat_app, ["convert", str(scene), str(tmp_path / "o.ply"), "--sh-degree", "2"]
    )
    assert r.exit_code == 2 and "--sh-degree" in r.output
    r = runner.invoke(splat_app, ["convert", str(scene), str(tmp_path / "o.ply"), "--align", "1,2"])
    assert r.exit_code == 2 and "--align" in r.output


def test_an_error_about_a_path_that_looks_like_markup_prints_the_path(tmp_path):
    """Issue 18: a file named with rich-markup brackets was printed with the tags eaten."""
    from typer.testing import CliRunner

    from volary.cli.main import app

    bad = tmp_path / "[red]s[-red].ply"
    bad.write_bytes(b"ply\nformat binary_little_endian 1.0\nelement vertex 1\n"
                    b"property float x\nend_header\n\x00")  # fmt: skip
    res = CliRunner().invoke(app, ["splat", "convert", str(bad), str(tmp_path / "o.ply")])
    assert res.exit_code == 2 and "[red]s[-red].ply" in res.output
