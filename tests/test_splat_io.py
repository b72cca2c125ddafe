"""3DGS PLY I/O: exact round trips (INRIA and Nerfstudio layouts), alignment, SH rotation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from plyfile import PlyData, PlyElement

from volary.errors import ConfigError, FileFormatError
from volary.sensors.splat import GaussianSplats, align, load_ply, render, save_ply, sh_colour
from volary.sensors.splat.io import default_layout, sh_rotation
from volary.sensors.splat.render import look_at


def random_splats(g: int, degree: int, seed: int = 0) -> GaussianSplats:
    gen = torch.Generator().manual_seed(seed)
    k = (degree + 1) ** 2
    return GaussianSplats(
        torch.randn(g, 3, generator=gen) + torch.tensor([0.0, 0.0, 4.0]),
        torch.randn(g, 4, generator=gen),
        torch.log(0.05 + 0.2 * torch.rand(g, 3, generator=gen)),
        torch.randn(g, generator=gen) + 1.0,
        0.5 * torch.randn(g, k, 3, generator=gen),
    )


def inria_ply(path, g: int = 50, degree: int = 3, seed: int = 1) -> np.ndarray:
    """A file laid out as the reference code's save_ply (normals, channel-major f_rest)."""
    rng = np.random.default_rng(seed)
    names = [n for n, _ in default_layout(degree).properties]
    arr = np.empty(g, dtype=[(n, "<f4") for n in names])
    for n in names:
        arr[n] = rng.normal(size=g).astype(np.float32)
    for n in ("nx", "ny", "nz"):
        arr[n] = 0.0
    PlyData([PlyElement.describe(arr, "vertex")], text=False).write(str(path))
    return arr


def test_inria_round_trip_is_exact_bytes_and_values(tmp_path):
    src, dst = tmp_path / "a.ply", tmp_path / "b.ply"
    arr = inria_ply(src)
    s = load_ply(src)
    assert s.count == 50 and s.sh_degree == 3 and s.means.dtype == torch.float32
    # channel-major f_rest: f_rest_{c*15 + k-1} is channel c of coefficient k
    assert s.sh[7, 5, 2].item() == arr["f_rest_34"][7]
    assert s.sh[7, 0, 1].item() == arr["f_dc_1"][7]
    assert s.quats[3, 0].item() == arr["rot_0"][3]
    save_ply(dst, s)
    assert dst.read_bytes() == src.read_bytes()
    t = load_ply(dst)
    for f in ("means", "quats", "log_scales", "opacity_logits", "sh"):
        assert torch.equal(getattr(s, f), getattr(t, f))


def test_nerfstudio_rgb_layout_and_ascii_round_trip(tmp_path):
    g, rng = 20, np.random.default_rng(3)
    names = ["x", "y", "z", "nx", "ny", "nz"]
    dtype = [(n, "<f4") for n in names] + [(c, "u1") for c in ("red", "green", "blue")]
    dtype += [(n, "<f4") for n in ("opacity", "scale_0", "scale_1", "scale_2")]
    dtype += [(f"rot_{i}", "<f4") for i in range(4)]
    arr = np.zeros(g, dtype=dtype)
    for n, d in dtype:
        arr[n] = rng.integers(0, 255, g) if d == "u1" else rng.normal(size=g)
    src, dst = tmp_path / "ns.ply", tmp_path / "ns2.ply"
    PlyData([PlyElement.describe(arr, "vertex")], text=True, comments=["ns"]).write(str(src))
    s = load_ply(src)
    assert s.sh_degree == 0
    expect = arr["red"].astype(np.float64) / 255.0
    colour = sh_colour(s.sh, torch.tensor([0.0, 0.0, 1.0]), 0)[:, 0].double().numpy()
    np.testing.assert_allclose(colour, expect, atol=1e-6)
    save_ply(dst, s)
    assert dst.read_bytes() == src.read_bytes()


def test_synthesized_splats_save_with_default_layout_and_extras(tmp_path):
    s = random_splats(30, 1)
    s = GaussianSplats(
        s.means, s.quats, s.log_scales, s.opacity_logits, s.sh,
        {"object_id": np.arange(30, dtype=np.int32)},
    )  # fmt: skip
    save_ply(tmp_path / "s.ply", s)
    t = load_ply(tmp_path / "s.ply")
    assert torch.equal(t.sh, s.sh) and torch.equal(t.means, s.means)
    np.testing.assert_array_equal(t.extra["object_id"], np.arange(30))
    assert [n for n, _ in t.layout.properties][:3] == ["x", "y", "z"]


def test_splats_save_into_a_folder_that_does_not_exist_yet(tmp_path):
    s = random_splats(10, 0)
    save_ply(tmp_path / "new" / "folder" / "s.ply", s)
    assert torch.equal(load_ply(tmp_path / "new" / "folder" / "s.ply").means, s.means)


def test_bad_files_raise_file_format_error(tmp_path):
    p = tmp_path / "bad.ply"
    arr = np.zeros(3, dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4")])
    PlyData([PlyElement.describe(arr, "vertex")]).write(str(p))
    with pytest.raises(FileFormatError, match="missing vertex properties"):
        load_ply(p)
    p.write_bytes(b"not a ply")
    with pytest.raises(FileFormatError, match="bad.ply"):
        load_ply(p)


def test_truncated_and_empty_files_raise_file_format_error(tmp_path):
    p = tmp_path / "cut.ply"
    save_ply(p, random_splats(40, 3))
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])  # binary body cut in the middle
    with pytest.raises(FileFormatError, match="truncated"):
        load_ply(p)
    p.write_bytes(data[: data.index(b"end_header\n") + 11])  # header only
    with pytest.raises(FileFormatError, match="cut.ply"):
        load_ply(p)
    names = [n for n, _ in default_layout(1).properties]
    PlyData([PlyElement.describe(np.zeros(0, dtype=[(n, "<f4") for n in names]), "vertex")]).write(
        str(p)
    )
    with pytest.raises(FileFormatError, match="empty"):
        load_ply(p)
    names = [n for n, _ in default_layout(0).properties] + ["f_rest_0"]
    arr = np.zeros(2, dtype=[(n, "<f4") for n in names])
    PlyData([PlyElement.describe(arr, "vertex")]).write(str(p))
    with pytest.raises(FileFormatError, match="f_rest"):
        load_ply(p)


@pytest.mark.parametrize("degree", [1, 2, 3])
def test_sh_rotation_matches_rotated_directions(degree):
    gen = torch.Generator().manual_seed(5)
    r = torch.linalg.qr(torch.randn(3, 3, generator=gen, dtype=torch.float64))[0]
    r = r * torch.sign(torch.linalg.det(r))
    sh = torch.randn(4, (degree + 1) ** 2, 3, generator=gen, dtype=torch.float64)
    rotated = sh.clone()
    for lvl, a in enumerate(sh_rotation(r, degree)):
        s = slice(lvl * lvl, (lvl + 1) ** 2)
        rotated[:, s] = torch.einsum("ij,gjc->gic", a, sh[:, s])
    d = torch.nn.functional.normalize(torch.randn(4, 3, generator=gen, dtype=torch.float64), dim=-1)
    # colour seen along R d after rotating = colour along d before
    torch.testing.assert_close(sh_colour(rotated, d @ r.T, degree), sh_colour(sh, d, degree))


def test_alignment_moves_the_scene_with_the_camera(tmp_path):
    s = random_splats(200, 3)
    ang = 0.7
    rot = torch.tensor(
        [[math.cos(ang), -math.sin(ang), 0], [math.sin(ang), math.cos(ang), 0], [0, 0, 1.0]]
    )
    m = torch.eye(4)
    m[:3, :3], m[:3, 3] = 2.0 * rot, torch.tensor([1.0, -2.0, 0.5])
    save_ply(tmp_path / "s.ply", s)
    w = load_ply(tmp_path / "s.ply", world_from_file=m.numpy())
    cam = look_at((0.3, -0.2, -1.0), (0.0, 0.0, 4.0)).float()
    cam_w = m @ cam
    cam_w[:3, :3] /= 2.0  # the camera is rigid: rotation only, position scaled
    k = (40.0, 40.0, 24.0, 24.0)
    a = render(s, k, cam, 48, 48, backend="fast", blur=0.0)
    b = render(w, k, cam_w, 48, 48, backend="fast", blur=0.0)
    assert (a.rgb - b.rgb).abs().max() < 2e-4
    torch.testing.assert_close(b.depth, 2.0 * a.depth, rtol=1e-4, atol=1e-4, equal_nan=True)


def test_alignment_rejects_non_similarity():
    s = random_splats(5, 0)
    m = np.eye(4)
    m[0, 0] = 2.0
    with pytest.raises(ConfigError, match="world_from_file"):
        align(s, m)
    with pytest.raises(ConfigError, match="world_from_file"):
        align(s, np.eye(3))


def test_splats_check_shapes():
    s = random_splats(5, 0)
    with pytest.raises(ConfigError, match="splats.quats"):
        GaussianSplats(s.means, s.quats[:, :3], s.log_scales, s.opacity_logits, s.sh)
    with pytest.raises(ConfigError, match="splats.sh"):
        GaussianSplats(s.means, s.quats, s.log_scales, s.opacity_logits, s.sh[:, :, :2])


# ---- issue 18's cases ---------------------------------------------------------------------------
_SPLAT_HEADER = (
    "ply\nformat binary_little_endian 1.0\nelement vertex {n}\n"
    + "".join(
        f"property float {p}\n"
        for p in (
            "x",
            "y",
            "z",
            "f_dc_0",
            "f_dc_1",
            "f_dc_2",
            "opacity",
            "scale_0",
            "scale_1",
            "scale_2",
            "rot_0",
            "rot_1",
            "rot_2",
            "rot_3",
        )  # fmt: skip
    )
    + "end_header\n"
)


@pytest.mark.parametrize("count", [10**12, 2**31, 2**63])
def test_huge_declared_counts_fail_before_allocating(tmp_path, count):
    p = tmp_path / "big.ply"
    p.write_bytes(_SPLAT_HEADER.format(n=count).encode() + bytes(56))
    with pytest.raises(FileFormatError, match="truncated"):
        load_ply(p)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_gaussians_are_refused_naming_the_property(tmp_path, bad):
    import struct

    rows = b"".join(
        struct.pack("<14f", 0, 0, 0, 0.5, 0.5, 0.5, 1.0, bad, bad, bad, 1, 0, 0, 0)
        for _ in range(4)
    )
    p = tmp_path / "nan.ply"
    p.write_bytes(_SPLAT_HEADER.format(n=4).encode() + rows)
    with pytest.raises(FileFormatError, match="'scale_0': 4 of 4 values are NaN or infinite"):
        load_ply(p)


def test_a_zero_rotation_is_refused(tmp_path):
    import struct

    rows = struct.pack("<14f", 0, 0, 0, 0.5, 0.5, 0.5, 1.0, -2, -2, -2, 0, 0, 0, 0)
    p = tmp_path / "zero.ply"
    p.write_bytes(_SPLAT_HEADER.format(n=1).encode() + rows)
    with pytest.raises(FileFormatError, match="zero rotation"):
        load_ply(p)
