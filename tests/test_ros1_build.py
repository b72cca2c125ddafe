"""``volary ros1 build``: EGO-Planner and Fast-Planner from a user's checkout (volary.ros1.build).

The default tests check the command's input handling on fake checkouts (package.xml files at
the planners' upstream paths), the one-line apt-get message, the build cache (catkin mocked),
the patch files' form and the Makefile's package list. The slow test builds the real planners
from ``$VOLARY_EGO_SRC`` / ``$VOLARY_FAST_PLANNER_SRC`` (source checkouts; skipped when unset)
with Debian 12's ROS 1: minutes each on two cores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from volary.cli.main import app
from volary.errors import ConfigError
from volary.ros1 import build as rb

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _fake_checkout(root: Path, planner: str, skip: tuple[str, ...] = ()) -> Path:
    """A directory with the planner's package.xml files (and a CMakeLists.txt each) at their
    upstream paths, plus a simulator package it must not copy."""
    for name, rel in rb.PLANNERS[planner].packages.items():
        if name in skip:
            continue
        d = root / rel
        d.mkdir(parents=True)
        (d / "package.xml").write_text(f'<?xml version="1.0"?>\n<package>\n  <name>{name}</name>\n'
                                       "</package>\n")  # fmt: skip
        (d / "CMakeLists.txt").write_text(f"project({name})\n")
    sim = root / "uav_simulator" / "so3_control"
    sim.mkdir(parents=True)
    (sim / "package.xml").write_text("<package><name>so3_control</name></package>")
    return root


def _all_installed(packages):
    return dict.fromkeys(packages, "1.0")


def _invoke(*args: str):
    return runner.invoke(app, ["ros1", "build", *args])


def test_a_missing_source_dir_is_one_line_naming_the_argument(tmp_path: Path) -> None:
    r = _invoke(str(tmp_path / "nowhere"))
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: SOURCE_DIR"), r.stderr
    assert "nowhere" in lines[0]


def test_a_directory_of_neither_planner_is_refused_with_what_it_holds(tmp_path: Path) -> None:
    other = tmp_path / "other_ws" / "src" / "hover_cpp"
    other.mkdir(parents=True)
    (other / "package.xml").write_text("<package><name>hover_cpp</name></package>")
    r = _invoke(str(tmp_path / "other_ws"))
    assert r.exit_code == 2, r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert "EGO-Planner" in lines[0] and "Fast-Planner" in lines[0] and "hover_cpp" in lines[0]


def test_an_incomplete_checkout_names_the_missing_packages(tmp_path: Path) -> None:
    src = _fake_checkout(tmp_path / "ego", "ego-planner", skip=("bspline_opt", "quadrotor_msgs"))
    with pytest.raises(ConfigError, match=r"lacks bspline_opt, quadrotor_msgs"):
        rb.detect(src)


def test_a_directory_holding_several_checkouts_is_refused(tmp_path: Path) -> None:
    """Not one of them picked silently: the user names the checkout to build."""
    _fake_checkout(tmp_path / "ego-a", "ego-planner")
    _fake_checkout(tmp_path / "ego-b", "ego-planner")
    _fake_checkout(tmp_path / "fast", "fast-planner")
    with pytest.raises(ConfigError, match=r"holds 3 planner checkouts .*expected one"):
        rb.detect(tmp_path)
    assert rb.detect(tmp_path / "ego-b").root == tmp_path / "ego-b"


@pytest.mark.parametrize("planner", sorted(rb.PLANNERS))
def test_each_planner_is_recognised_by_its_package_files(tmp_path: Path, planner: str) -> None:
    src = _fake_checkout(tmp_path / "checkout", planner)
    if planner == "fast-planner":  # upstream also has a second quadrotor_msgs (a stale copy)
        dup = src / "uav_simulator/Utils/multi_map_server/quadrotor_msgs"
        dup.mkdir(parents=True)
        (dup / "package.xml").write_text("<package><name>quadrotor_msgs</name></package>")
    found = rb.detect(src)
    assert found.planner.name == planner
    assert found.commit == "unknown"  # not a git checkout
    assert set(found.packages) == set(rb.PLANNERS[planner].packages)
    assert found.packages["quadrotor_msgs"] == src / rb.PLANNERS[planner].packages["quadrotor_msgs"]
    assert "so3_control" not in found.packages


def test_missing_debian_packages_are_one_line_of_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _fake_checkout(tmp_path / "fast", "fast-planner")

    def versions(packages):
        gone = {"libpcl-dev", "libnlopt-cxx-dev"}
        return {p: (None if p in gone else "1.0") for p in packages}

    monkeypatch.setattr(rb, "installed_versions", versions)
    monkeypatch.setattr(rb, "_catkin", lambda ws, jobs: pytest.fail("built without packages"))
    r = _invoke(str(src), "--workspace", str(tmp_path / "ws"))
    assert r.exit_code == 1, r.output
    lines = r.stderr.splitlines()
    assert lines == ["error: fast-planner needs Debian packages that are not installed: "
                     "apt-get install libpcl-dev libnlopt-cxx-dev"], r.stderr  # fmt: skip
    assert not (tmp_path / "ws").exists()


def test_bad_jobs_and_a_foreign_workspace_are_refused(tmp_path: Path) -> None:
    src = _fake_checkout(tmp_path / "ego", "ego-planner")
    r = _invoke(str(src), "--jobs", "0")
    assert r.exit_code == 2 and r.stderr.startswith("error: --jobs"), r.output
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="--workspace: .* not made by volary"):
        rb.build(src, foreign, versions=_all_installed, echo=lambda s: None)
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_a_second_build_of_the_same_sources_is_a_no_op(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """catkin mocked; the planner's patch replaced by an empty one (fake sources)."""
    src = _fake_checkout(tmp_path / "ego", "ego-planner")
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "ego-planner.patch").write_text("")
    monkeypatch.setattr(rb, "PATCHES", patches)
    calls: list[Path] = []

    def catkin(ws: Path, jobs: int) -> float:
        calls.append(ws)
        for product in rb.PLANNERS["ego-planner"].products:
            (ws / "devel" / product).parent.mkdir(parents=True, exist_ok=True)
            (ws / "devel" / product).write_text("")
        return 12.5

    monkeypatch.setattr(rb, "_catkin", catkin)
    ws = tmp_path / "ws"
    first = rb.build(src, ws, versions=_all_installed, echo=lambda s: None)
    assert not first.cached and len(calls) == 1
    manifest = json.loads((ws / rb.MANIFEST).read_text())
    assert manifest["planner"] == "ego-planner" and manifest["build_seconds"] == 12.5
    assert manifest["commit"] == "unknown" and manifest["debian"]["libpcl-dev"] == "1.0"
    assert sorted(p.name for p in (ws / "src").iterdir()) == sorted(
        rb.PLANNERS["ego-planner"].packages
    )
    out: list[str] = []
    second = rb.build(src, ws, versions=_all_installed, echo=out.append)
    assert second.cached and len(calls) == 1 and "nothing to do" in out[0]
    # a changed source file, or another Debian version, builds again
    (src / rb.PLANNERS["ego-planner"].packages["plan_env"] / "CMakeLists.txt").write_text("x\n")
    assert not rb.build(src, ws, versions=_all_installed, echo=lambda s: None).cached
    newer = lambda pk: {p: "2.0" for p in pk}  # noqa: E731
    assert not rb.build(src, ws, versions=newer, echo=lambda s: None).cached
    assert len(calls) == 3


# ----------------------------------------------------------------------------- the patch files
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _parse(patch: Path) -> tuple[list[str], dict[str, int]]:
    """(the files its header documents, file -> hunks), checking each hunk's line counts."""
    lines = patch.read_text().splitlines()
    documented = [m.group(1) for m in (re.match(r"^# file (\S+):", x) for x in lines) if m]
    hunks: dict[str, int] = {}
    i, current = 0, None
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- "):
            assert lines[i + 1].startswith("+++ "), (patch.name, i)
            old = line[4:].split("\t")[0]
            new = lines[i + 1][4:].split("\t")[0]
            assert old.split("/", 1)[1] == new.split("/", 1)[1], (patch.name, old, new)
            current = new.split("/", 1)[1]
            hunks[current] = 0
            i += 2
            continue
        m = HUNK.match(line)
        if m:
            assert current is not None, (patch.name, i)
            want_old = int(m.group(2) or 1)
            want_new = int(m.group(4) or 1)
            n_old = n_new = 0
            i += 1
            while i < len(lines) and (n_old < want_old or n_new < want_new):
                tag = lines[i][:1]
                assert tag in (" ", "-", "+", "\\"), (patch.name, i, lines[i])
                n_old += tag in (" ", "-")
                n_new += tag in (" ", "+")
                i += 1
            assert (n_old, n_new) == (want_old, want_new), (patch.name, line)
            hunks[current] += 1
            continue
        assert current is None or not line.strip() or line.startswith("diff "), (patch.name, i)
        i += 1
    return documented, hunks


@pytest.mark.parametrize("planner", sorted(rb.PLANNERS))
def test_each_patch_is_a_unified_diff_touching_only_what_it_documents(planner: str) -> None:
    patch = rb.PLANNERS[planner].patch
    documented, hunks = _parse(patch)
    assert hunks and all(n > 0 for n in hunks.values()), patch.name
    assert sorted(hunks) == sorted(set(documented)), (sorted(hunks), documented)
    packages = set(rb.PLANNERS[planner].packages)
    assert all(f.split("/")[0] in packages for f in hunks), sorted(hunks)
    assert patch.read_text().startswith(f"# volary: {rb.PLANNERS[planner].title.split(' (')[0]}")


def test_makefile_lists_the_packages_the_build_checks() -> None:
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    out = subprocess.run(["make", "-s", "-C", str(ROOT), "print-ros1-planners-apt"],
                         capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    wanted = {p for planner in rb.PLANNERS.values() for p in planner.apt}
    assert sorted(out) == sorted(wanted)


# ----------------------------------------------------------------------------- real builds
SOURCES = {"ego-planner": "VOLARY_EGO_SRC", "fast-planner": "VOLARY_FAST_PLANNER_SRC"}


@pytest.mark.slow
@pytest.mark.parametrize("planner", sorted(SOURCES))
def test_the_planner_builds_against_debian_ros1(tmp_path: Path, planner: str) -> None:
    src = os.environ.get(SOURCES[planner])
    if not src:
        pytest.skip(f"${SOURCES[planner]} (a {planner} source checkout) is not set")
    ws = tmp_path / "ws"
    r = _invoke(src, "--workspace", str(ws), "--jobs", "2")
    assert r.exit_code == 0, (r.output, (ws / "build.log").read_text()[-3000:])
    manifest = json.loads((ws / rb.MANIFEST).read_text())
    assert manifest["planner"] == planner and manifest["build_seconds"] > 0
    assert manifest["patch_sha256"] == rb._sha256(rb.PLANNERS[planner].patch)
    for product in rb.PLANNERS[planner].products:
        assert os.access(ws / "devel" / product, os.X_OK), product
    again = _invoke(src, "--workspace", str(ws))
    assert again.exit_code == 0 and "nothing to do" in again.stdout, again.output
