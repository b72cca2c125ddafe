"""Every reader answers malformed input with a clean error (issue 18): the fuzz harness of
``tests/_fuzz.py`` over mutations of files volary writes, and the memory bound."""

from __future__ import annotations

import tracemalloc

import pytest

from _fuzz import run


def _check(doc: dict) -> None:
    assert doc["findings"] == [], doc["findings"][:5]
    assert set(doc["outcomes"]) <= {"clean", "valid"}
    for reader, counts in doc["per_reader"].items():  # every reader met errors it had to name
        assert counts.get("clean", 0) > 0, reader


def test_a_short_fuzz_sweep_finds_no_traceback_hang_or_wrong_acceptance(tmp_path):
    _check(run(600, tmp_path, seed=7))


@pytest.mark.slow
def test_the_long_fuzz_run(tmp_path):
    """The issue's run: 10,000 inputs across every reader (about 10 s here)."""
    doc = run(10_000, tmp_path, seed=0)
    _check(doc)
    assert doc["inputs"] == 10_000


@pytest.mark.parametrize("kind", ["mesh_ply", "pcd", "splat_ply"])
def test_a_tiny_file_declaring_a_trillion_elements_costs_no_memory(tmp_path, kind):
    """Peak allocation while refusing a 200-byte file that declares 10^12 elements: under
    1 MB (the reader compares the declared size with the file's before allocating)."""
    from volary.errors import FileFormatError
    from volary.sensors.splat import load_ply
    from volary.worlds.io import load_mesh, load_points

    n = 10**12
    if kind == "pcd":
        p = tmp_path / "big.pcd"
        p.write_text(f"VERSION 0.7\nFIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\n"
                     f"WIDTH {n}\nHEIGHT 1\nPOINTS {n}\nDATA binary\n" + "\\0" * 12)  # fmt: skip
        read = load_points
    else:
        p = tmp_path / "big.ply"
        props = "xyz" if kind == "mesh_ply" else ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2",
                                                  "opacity", "scale_0", "scale_1", "scale_2",
                                                  "rot_0", "rot_1", "rot_2", "rot_3"]  # fmt: skip
        head = f"ply\nformat binary_little_endian 1.0\nelement vertex {n}\n"
        head += "".join(f"property float {c}\n" for c in props) + "end_header\n"
        p.write_bytes(head.encode() + bytes(64))
        read = load_mesh if kind == "mesh_ply" else load_ply
    tracemalloc.start()
    try:
        with pytest.raises(FileFormatError):
            read(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, peak
