"""``volary ros1 build``: EGO-Planner or Fast-Planner, built from the user's checkout against
Debian 12's ROS 1 (:mod:`volary.ros1`).

volary holds none of the planners' code and downloads nothing. Given a source checkout,
:func:`build` finds which planner it is by its ``package.xml`` files, copies only the catkin
packages the planner node needs (the planner's own and ``quadrotor_msgs``, none of its
simulator) into a workspace, applies volary's patch for Debian 12
(``volary/ros1/patches/<planner>.patch``, each hunk explained in its header), and builds it
with ``nice catkin_make -jN``. The workspace gets ``volary-build.json``: the planner, the
source commit, the patch's sha256, the build's wall seconds and the Debian versions it was
built against. A second build of the same sources, patch and Debian packages does nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from volary.errors import ConfigError, VolaryError

PATCHES = Path(__file__).parent / "patches"
MANIFEST = "volary-build.json"
MARKER = ".volary-ros1-workspace"  # a workspace this module made (only then is src/ replaced)
CACHE = Path("~/.cache/volary/ros1-planners")
MAX_SCAN_FILES = 200_000  # entries walked looking for package.xml files
MAX_SCAN_DEPTH = 8
MAX_JOBS = 64
# Debian packages reported in the manifest (those installed; the others are left out)
REPORTED = ("ros-core", "libroscpp-dev", "catkin", "libpcl-dev", "libeigen3-dev",
            "libopencv-dev", "libcv-bridge-dev", "libnlopt-dev", "g++", "cmake")  # fmt: skip
# what both planners' packages find_package() or #include from Debian's ROS 1 and libraries
COMMON_APT = (
    "catkin", "cmake", "g++", "make", "libroscpp-dev", "ros-message-generation",
    "ros-message-runtime", "libstd-msgs-dev", "libgeometry-msgs-dev", "libnav-msgs-dev",
    "libsensor-msgs-dev", "libvisualization-msgs-dev", "libmessage-filters-dev",
    "libcv-bridge-dev", "libpcl-conversions-dev", "libpcl-dev", "libeigen3-dev",
)  # fmt: skip


class BuildError(VolaryError):
    """The planner's build could not be done; the message says why and where its log is."""


@dataclass(frozen=True)
class Planner:
    """One planner: its catkin packages (name -> the upstream directory they live in) and what
    it needs from Debian."""

    name: str
    title: str
    marker: str  # a package only this planner has
    packages: Mapping[str, str]
    apt: tuple[str, ...]
    products: tuple[str, ...]  # built executables, relative to the workspace's devel/

    @property
    def patch(self) -> Path:
        return PATCHES / f"{self.name}.patch"


PLANNERS: dict[str, Planner] = {
    "ego-planner": Planner(
        name="ego-planner",
        title="EGO-Planner (ZJU-FAST-Lab/ego-planner)",
        marker="ego_planner",
        packages={
            "plan_env": "src/planner/plan_env",
            "path_searching": "src/planner/path_searching",
            "bspline_opt": "src/planner/bspline_opt",
            "traj_utils": "src/planner/traj_utils",
            "ego_planner": "src/planner/plan_manage",
            "quadrotor_msgs": "src/uav_simulator/Utils/quadrotor_msgs",
        },
        apt=COMMON_APT,
        products=("lib/ego_planner/ego_planner_node", "lib/ego_planner/traj_server"),
    ),
    "fast-planner": Planner(
        name="fast-planner",
        title="Fast-Planner (HKUST-Aerial-Robotics/Fast-Planner)",
        marker="poly_traj",
        packages={
            "plan_env": "fast_planner/plan_env",
            "path_searching": "fast_planner/path_searching",
            "bspline": "fast_planner/bspline",
            "bspline_opt": "fast_planner/bspline_opt",
            "poly_traj": "fast_planner/poly_traj",
            "traj_utils": "fast_planner/traj_utils",
            "plan_manage": "fast_planner/plan_manage",
            "quadrotor_msgs": "uav_simulator/Utils/quadrotor_msgs",
        },
        apt=COMMON_APT + ("libnlopt-dev", "libnlopt-cxx-dev"),
        products=("lib/plan_manage/fast_planner_node", "lib/plan_manage/traj_server"),
    ),
}


@dataclass(frozen=True)
class Source:
    """A checkout recognised as one planner: its root, commit and the packages to build."""

    planner: Planner
    root: Path
    commit: str  # git commit, "+dirty" when the work tree differs from it; "unknown" if no git
    packages: dict[str, Path]  # package name -> its directory in the checkout


@dataclass(frozen=True)
class Result:
    """What a build gave: the workspace, its manifest, and whether it was already built."""

    workspace: Path
    manifest: dict[str, Any]
    cached: bool

    def setup(self) -> Path:
        """The workspace's ``devel/setup.bash`` (source it before ``roslaunch``)."""
        return self.workspace / "devel" / "setup.bash"


# ----------------------------------------------------------------------------- the checkout
def _package_name(xml: Path) -> str | None:
    """The ``<name>`` of a package.xml (None when it has none); no XML parser is needed for
    the one element, and none is given an untrusted document."""
    try:
        text = xml.read_text(encoding="utf-8", errors="replace")[:100_000]
    except OSError:
        return None
    start = text.find("<name>")
    end = text.find("</name>", start)
    return text[start + 6 : end].strip() or None if start >= 0 and end > start else None


def find_packages(root: Path) -> dict[str, list[Path]]:
    """Package name -> the directories holding a package.xml of that name under ``root``
    (build/ and devel/ trees and hidden directories skipped; the walk is bounded)."""
    found: dict[str, list[Path]] = {}
    seen = 0
    for here, dirs, files in os.walk(root):
        depth = len(Path(here).relative_to(root).parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("build", "devel"))
        if depth >= MAX_SCAN_DEPTH:
            dirs[:] = []
        seen += len(files) + len(dirs)
        if seen > MAX_SCAN_FILES:
            raise ConfigError(f"SOURCE_DIR: {root}: over {MAX_SCAN_FILES} entries; expected a "
                              "planner's source checkout")  # fmt: skip
        if "package.xml" in files:
            name = _package_name(Path(here) / "package.xml")
            if name:
                found.setdefault(name, []).append(Path(here))
    return found


def _commit(root: Path) -> str:
    git = shutil.which("git")
    if git is None or not (root / ".git").exists():
        return "unknown"
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    head = subprocess.run([git, "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                          text=True, env=env, timeout=60)  # fmt: skip
    if head.returncode != 0:
        return "unknown"
    dirty = subprocess.run([git, "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def detect(source_dir: Path | str) -> Source:
    """The planner a checkout holds, by its package.xml files, or ConfigError naming what
    was expected."""
    root = Path(source_dir).expanduser()
    if not root.is_dir():
        raise ConfigError(f"SOURCE_DIR: expected a directory holding the source checkout of "
                          f"{_titles()}, got {str(source_dir)!r}")  # fmt: skip
    root = root.resolve()
    found = find_packages(root)
    complete: list[Source] = []
    lacking = ""
    for planner in PLANNERS.values():
        for top in _roots(root, found.get(planner.marker, []), planner):
            packages = {name: top / rel for name, rel in planner.packages.items()}
            missing = [n for n, d in packages.items() if _package_name(d / "package.xml") != n]
            if not missing:
                complete.append(Source(planner, top, "", packages))
            elif not lacking:
                lacking = (f"SOURCE_DIR: {top} looks like {planner.title} (package "
                           f"{planner.marker}) but lacks {', '.join(sorted(missing))} at its "
                           "upstream paths")  # fmt: skip
    if len(complete) == 1:
        one = complete[0]
        return Source(one.planner, one.root, _commit(one.root), one.packages)
    if len(complete) > 1:
        where = ", ".join(f"{c.planner.name} at {c.root}" for c in complete[:4])
        raise ConfigError(f"SOURCE_DIR: {root} holds {len(complete)} planner checkouts "
                          f"({where}); expected one: give its directory")  # fmt: skip
    if lacking:
        raise ConfigError(lacking)
    names = ", ".join(sorted(found)[:8]) or "no package.xml"
    raise ConfigError(f"SOURCE_DIR: {root}: expected the source checkout of {_titles()}, "
                      f"found {names}")  # fmt: skip


def _roots(root: Path, marker_dirs: list[Path], planner: Planner) -> list[Path]:
    """The checkout roots the marker package implies (its upstream path stripped)."""
    rel = Path(planner.packages[planner.marker])
    n = len(rel.parts)
    tops = [d.parents[n - 1] for d in marker_dirs if len(d.parts) > n and d.parts[-n:] == rel.parts]
    tops = [t for t in tops if t == root or root in t.parents]
    return tops or ([root] if marker_dirs else [])


def _titles() -> str:
    return " or ".join(p.title for p in PLANNERS.values())


# ----------------------------------------------------------------------------- Debian
def installed_versions(packages: Iterable[str]) -> dict[str, str | None]:
    """Debian package -> its installed version (None when not installed), from dpkg-query."""
    names = sorted(set(packages))
    dpkg = shutil.which("dpkg-query")
    if dpkg is None:
        raise BuildError("dpkg-query not found: volary ros1 build needs Debian 12 and its ROS 1 "
                         f"(apt-get install {' '.join(names)})")  # fmt: skip
    fmt = "${Package}\t${db:Status-Abbrev}\t${Version}\n"
    done = subprocess.run([dpkg, "-W", f"-f={fmt}", *names], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    out: dict[str, str | None] = dict.fromkeys(names)
    for line in done.stdout.splitlines():
        pkg, status, version = (line.split("\t") + ["", ""])[:3]
        pkg = pkg.split(":")[0]
        if pkg in out and status.startswith("ii"):
            out[pkg] = version
    return out


Versions = Callable[[Iterable[str]], Mapping[str, str | None]]


def check_apt(planner: Planner, versions: Versions | None = None) -> dict[str, str]:
    """The installed versions of what ``planner`` needs (and of :data:`REPORTED`), or
    BuildError naming exactly what to apt-get install."""
    have = (versions or installed_versions)(set(planner.apt) | set(REPORTED))
    missing = [p for p in planner.apt if not have.get(p)]
    if missing:
        raise BuildError(f"{planner.name} needs Debian packages that are not installed: "
                         f"apt-get install {' '.join(missing)}")  # fmt: skip
    return {p: v for p, v in sorted(have.items()) if v}


# ----------------------------------------------------------------------------- the workspace
def default_workspace(source: Source) -> Path:
    """``~/.cache/volary/ros1-planners/<planner>-<commit>``."""
    return CACHE.expanduser() / f"{source.planner.name}-{source.commit.replace('+', '-')}"


def tree_digest(dirs: Mapping[str, Path]) -> str:
    """sha256 over the files of the packages to build (their paths and bytes)."""
    h = hashlib.sha256()
    for name, d in sorted(dirs.items()):
        for f in sorted(p for p in d.rglob("*") if p.is_file() and not _skipped(p, d)):
            h.update(f"{name}/{f.relative_to(d).as_posix()}\0".encode())
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def _skipped(p: Path, top: Path) -> bool:
    return any(part in ("build", "devel", ".git") for part in p.relative_to(top).parts[:-1])


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _prepare(ws: Path) -> None:
    """``ws`` made (or reused) as this module's workspace; a non-empty directory it did not
    make is refused rather than written into."""
    if ws.exists() and not ws.is_dir():
        raise ConfigError(f"--workspace: expected a directory to build in, got {str(ws)!r}")
    if ws.is_dir() and any(ws.iterdir()) and not (ws / MARKER).is_file():
        raise ConfigError(f"--workspace: {ws} is not empty and was not made by volary ros1 "
                          "build; give a new or empty directory")  # fmt: skip
    ws.mkdir(parents=True, exist_ok=True)
    (ws / MARKER).write_text("made by volary ros1 build; src/ is replaced on each build\n")


def _copy_and_patch(source: Source, ws: Path) -> None:
    """The planner's packages copied into ``ws/src/<package>`` and volary's patch applied."""
    staging = ws / "src.new"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    ignore = shutil.ignore_patterns("build", "devel", ".git")
    for name, d in source.packages.items():
        shutil.copytree(d, staging / name, ignore=ignore, symlinks=True)
    patch = source.planner.patch
    done = subprocess.run(["patch", "-p1", "--forward", "--batch", "--no-backup-if-mismatch",
                           "-d", str(staging), "-i", str(patch)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    if done.returncode != 0:
        first = (done.stdout + done.stderr).strip().splitlines()
        raise BuildError(f"{patch.name} does not apply to {source.root} at {source.commit}: "
                         f"{first[-1] if first else 'patch failed'}")  # fmt: skip
    if (ws / "src").exists():
        shutil.rmtree(ws / "src")
    staging.rename(ws / "src")


def _debian_env(ws: Path) -> dict[str, str]:
    """Debian's tools first on PATH (cmake must find /usr/bin/python3's catkin_pkg), none of
    this interpreter's Python settings, catkin_make's base from $PWD."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CMAKE_PREFIX_PATH", "ROS_PACKAGE_PATH")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = os.pathsep.join(["/usr/bin", "/bin", env.get("PATH", "")])
    env.update(PWD=str(ws), ROS_LANG_DISABLE="genlisp:geneus:gennodejs")
    return env


def _catkin(ws: Path, jobs: int) -> float:
    """``nice -n 10 catkin_make -jN`` in ``ws`` (log in ws/build.log); wall seconds."""
    tool = shutil.which("catkin_make", path="/usr/bin:/bin")
    if tool is None:
        raise BuildError("catkin_make not found: apt-get install catkin")
    cmd = ["nice", "-n", "10", tool, "-C", str(ws), f"-j{jobs}",
           "-DPYTHON_EXECUTABLE=/usr/bin/python3", "-DCMAKE_BUILD_TYPE=Release",
           "-DCATKIN_ENABLE_TESTING=OFF"]  # fmt: skip
    t0 = time.monotonic()
    with open(ws / "build.log", "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        done = subprocess.run(cmd, cwd=ws, env=_debian_env(ws), stdout=log,
                              stderr=subprocess.STDOUT)  # fmt: skip
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        raise BuildError(f"catkin_make failed after {seconds:.0f} s: {_first_error(ws)} "
                         f"(log: {ws / 'build.log'})")  # fmt: skip
    return seconds


def _first_error(ws: Path) -> str:
    lines = (ws / "build.log").read_text(errors="replace").splitlines()
    for line in lines:
        if " error: " in line or line.startswith("CMake Error") or "fatal error" in line:
            return line.strip()[:300]
    return "see the log"


def build(
    source_dir: Path | str,
    workspace: Path | str | None = None,
    jobs: int = 2,
    echo: Callable[[str], None] = print,
    versions: Versions | None = None,
) -> Result:
    """Build the planner found in ``source_dir`` into ``workspace`` (default
    :func:`default_workspace`) with ``jobs`` compile jobs; a workspace already built from the
    same sources, patch and Debian packages is left as it is (``Result.cached``)."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise ConfigError(f"--jobs: expected an integer in [1, {MAX_JOBS}], got {jobs!r}")
    source = detect(source_dir)
    planner = source.planner
    debs = check_apt(planner, versions)
    ws = Path(workspace).expanduser() if workspace is not None else default_workspace(source)
    ws = ws.absolute()
    key = {"planner": planner.name, "commit": source.commit,
           "sources_sha256": tree_digest(source.packages), "patch_sha256": _sha256(planner.patch),
           "debian": debs}  # fmt: skip
    old = _read_manifest(ws)
    if old is not None and {k: old.get(k) for k in key} == key and _built(ws, planner):
        echo(f"{planner.name} at {source.commit}: already built in {ws} "
             f"({old['build_seconds']:.0f} s then); nothing to do")  # fmt: skip
        return Result(ws, old, cached=True)
    _prepare(ws)
    (ws / MANIFEST).unlink(missing_ok=True)
    echo(f"{planner.name} at {source.commit}: building {len(source.packages)} packages in {ws} "
         f"with catkin_make -j{jobs}")  # fmt: skip
    _copy_and_patch(source, ws)
    seconds = _catkin(ws, jobs)
    if not _built(ws, planner):
        raise BuildError(f"catkin_make finished but {', '.join(planner.products)} are not all in "
                         f"{ws / 'devel'} (log: {ws / 'build.log'})")  # fmt: skip
    manifest = {**key, "source": str(source.root), "packages": sorted(source.packages),
                "patch": planner.patch.name, "build_seconds": round(seconds, 1), "jobs": jobs,
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
    (ws / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    echo(f"{planner.name} at {source.commit}: built in {seconds:.0f} s (wall, -j{jobs}); "
         f"source {ws / 'devel' / 'setup.bash'}")  # fmt: skip
    return Result(ws, manifest, cached=False)


def _read_manifest(ws: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((ws / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "build_seconds" in data else None


def _built(ws: Path, planner: Planner) -> bool:
    return all((ws / "devel" / p).is_file() for p in planner.products)
