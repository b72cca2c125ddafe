"""The ROS 1 message packages FlightGoggles' clients use and Debian does not ship, generated.

FlightGoggles' stacks speak ``mav_msgs/RateThrust`` (ETH's mav_comm) and
``flightgoggles/IRMarker``/``IRMarkerArray``; Debian 12 packages neither, and it ships
``sensor_msgs`` for Python only as ``python3-sensor-msgs``, which may be absent. The
definitions below were written here from the published field lists (package, type, field
names and types in the same order), so their MD5 sums, which ROS 1 compares when a publisher
and a subscriber connect, are FlightGoggles' (:data:`EXPECTED_MD5`, computed from the
upstream files and matching the sums in published generated code).

:func:`ensure_messages` generates, once per definition set, into a cache directory (nothing is
downloaded): ``python/<pkg>/msg`` (genpy), ``msg/<pkg>/<Type>.msg`` (for C++ builds) and, when
Debian's gencpp is installed, ``include/<pkg>/<Type>.h``; plus ``overlay/``, links to Debian's
ROS 1 packages whose names ROS 2's wheels also use (:mod:`volary.ros1.env`). A finished
directory is never rewritten: it is built beside and renamed into place.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from volary.ros1.env import DEBIAN_DIST, DEBIAN_SHARE, SHARED_NAMES, Ros1Error, ros1_tools

# ---- definitions (field layout as published; comments ours) ------------------------------------
RATE_THRUST = """\
# Body-rate and thrust command of a multirotor (FLU body axes: x forward, y left, z up).
std_msgs/Header header
geometry_msgs/Vector3 angular_rates  # rad/s about body x, y, z (roll, pitch, yaw rates)
geometry_msgs/Vector3 thrust         # N in the body frame; a multirotor sets z only
"""
IR_MARKER = """\
# One IR beacon seen in the camera image.
std_msgs/String landmarkID  # the gate it belongs to, e.g. "Gate10"
std_msgs/String markerID    # "1".."4": corner k-1 of /uav/<gate>/nominal_location
float32 x                   # pixel column, origin at the image's top-left corner
float32 y                   # pixel row
float32 z                   # documented as a distance in m; sent as 0
"""
IR_MARKER_ARRAY = """\
# The IR beacons seen in one camera frame (stamped with the frame's time).
std_msgs/Header header
flightgoggles/IRMarker[] markers
"""
DEFINITIONS: dict[str, dict[str, str]] = {
    "mav_msgs": {"RateThrust": RATE_THRUST},
    "flightgoggles": {"IRMarker": IR_MARKER, "IRMarkerArray": IR_MARKER_ARRAY},
}
# ROS 1 MD5 sums of the upstream definitions (ethz-asl/mav_comm mav_msgs/msg/RateThrust.msg;
# FlightGoggles flightgoggles/msg/IRMarker.msg, IRMarkerArray.msg), computed with genmsg from
# those files; the same sums appear in code generated from them (roslisp, rosnodejs,
# rosserial) in public repositories
EXPECTED_MD5 = {
    "mav_msgs/RateThrust": "119c5bf883bef42350d52ce5a7927c7c",
    "flightgoggles/IRMarker": "74186740d14e922a7e5ca083a6795f31",
    "flightgoggles/IRMarkerArray": "8091f0feface0cc0f973be1d2b5c29b5",
}
LAYOUT = 1  # bump when what is generated changes


@dataclass(frozen=True)
class MessageDirs:
    """A generated message set (module docstring). ``python``: what a client node puts on
    PYTHONPATH; ``overlay``: what a process whose environment has ROS 2's message packages
    puts before them (the bridge does)."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "python"

    @property
    def overlay(self) -> Path:
        return self.root / "overlay"

    @property
    def msg(self) -> Path:
        return self.root / "msg"

    @property
    def include(self) -> Path:
        return self.root / "include"

    def pythonpath(self) -> list[Path]:
        """Client nodes' PYTHONPATH entries (generated packages first)."""
        return [self.python]


def default_cache() -> Path:
    """``$VOLARY_ROS1_CACHE``, else ``$XDG_CACHE_HOME/volary/ros1`` (``~/.cache/...``)."""
    env = os.environ.get("VOLARY_ROS1_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "volary" / "ros1"


def ensure_messages(cache: str | Path | None = None) -> MessageDirs:
    """The generated message set for these definitions under ``cache`` (default
    :func:`default_cache`), generating it first when absent."""
    base = Path(cache) if cache is not None else default_cache()
    gen_sensor = not (DEBIAN_DIST / "sensor_msgs").is_dir()
    dirs = MessageDirs(base / _key(gen_sensor))
    if (dirs.root / "DONE").is_file():
        return dirs
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=base))
    try:
        _build(MessageDirs(tmp), gen_sensor)
        (tmp / "DONE").write_text("ok\n")
        try:
            tmp.rename(dirs.root)
        except OSError:  # another process finished first: keep its copy
            if not (dirs.root / "DONE").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dirs


def _key(gen_sensor: bool) -> str:
    text = repr((LAYOUT, sorted((p, sorted(t.items())) for p, t in DEFINITIONS.items()),
                 gen_sensor))  # fmt: skip
    return "msgs-" + hashlib.sha1(text.encode()).hexdigest()[:12]


def _build(dirs: MessageDirs, gen_sensor: bool) -> None:
    genpy, _ = ros1_tools()
    search = {p: [str(DEBIAN_SHARE / p / "msg")] for p in ("std_msgs", "geometry_msgs")}
    search["sensor_msgs"] = [str(DEBIAN_SHARE / "sensor_msgs" / "msg")]
    for pkg, types in DEFINITIONS.items():
        d = dirs.msg / pkg
        d.mkdir(parents=True)
        for name, text in types.items():
            (d / f"{name}.msg").write_text(text)
        search[pkg] = [str(d)]
    packages = {p: sorted(str(f) for f in (dirs.msg / p).glob("*.msg")) for p in DEFINITIONS}
    if gen_sensor:
        share = Path(search["sensor_msgs"][0])
        packages["sensor_msgs"] = sorted(str(f) for f in share.glob("*.msg"))
    for pkg, files in packages.items():
        _genpy_package(genpy, pkg, files, dirs.python, search)
    _link_overlay(dirs.overlay, dirs.python)
    _gencpp(dirs, search)


def _genpy_package(
    genpy: object, pkg: str, files: list[str], out: Path, search: dict[str, list[str]]
) -> None:
    from genpy.generate_initpy import write_modules
    from genpy.generator import MsgGenerator

    msg_dir = out / pkg / "msg"
    if MsgGenerator().generate_messages(pkg, files, str(msg_dir), search) != 0:
        raise Ros1Error(f"genpy could not generate the {pkg} messages (see its output above)")
    write_modules(str(msg_dir))
    (out / pkg / "__init__.py").write_text("")


def _link_overlay(overlay: Path, python: Path) -> None:
    """``overlay/<name>`` for each ROS 1 package whose name ROS 2's wheels share: a link to
    the generated package or to Debian's."""
    overlay.mkdir()
    for name in SHARED_NAMES:
        target = python / name if (python / name).is_dir() else DEBIAN_DIST / name
        if target.is_dir():
            (overlay / name).symlink_to(target, target_is_directory=True)


def _gencpp(dirs: MessageDirs, search: dict[str, list[str]]) -> None:
    """C++ headers with Debian's gencpp (run by /usr/bin/python3, whose empy it uses); skipped
    when gencpp is not installed."""
    script, templates = Path("/usr/lib/gencpp/gen_cpp.py"), Path("/usr/share/gencpp")
    python = shutil.which("python3", path="/usr/bin")
    if not (script.is_file() and templates.is_dir() and python):
        return
    includes = [f"-I{p}:{d}" for p, ds in search.items() for d in ds]
    for pkg in DEFINITIONS:
        out = dirs.include / pkg
        for f in sorted((dirs.msg / pkg).glob("*.msg")):
            cmd = [python, str(script), str(f), "-p", pkg, "-o", str(out), "-e", str(templates)]
            done = subprocess.run(cmd + includes, capture_output=True, text=True,
                                  env={"PATH": "/usr/bin:/bin"})  # fmt: skip
            if done.returncode != 0:
                raise Ros1Error(f"gencpp failed on {f}: {done.stderr[-400:]}")


def md5sums(types: list[str]) -> dict[str, str]:
    """``{"pkg/Type": md5}`` of importable ROS 1 message classes (the generated ones once
    :func:`volary.ros1.env.import_rospy` has put them on the path)."""
    import importlib

    out = {}
    for t in types:
        pkg, name = t.split("/")
        out[t] = getattr(importlib.import_module(f"{pkg}.msg"), name)._md5sum
    return out
