"""Where ROS 1 comes from: Debian's packages, reached from volary's interpreter, on loopback only.

Debian 12 ships ROS 1 (Noetic-era) for its own ``/usr/bin/python3`` under
``/usr/lib/python3/dist-packages``. volary's virtual environment is another interpreter of the
same minor version, so those pure-Python packages import in it once that directory is on the
path. It is *appended* (and only when ``import rospy`` fails), so every module the environment
has keeps winning. One family is the exception: the ROS 2 wheels of the ``ros2`` extra install
``std_msgs``, ``geometry_msgs``, ``rosgraph_msgs`` and ``tf2_msgs`` too, with ROS 2's classes.
ROS 1 needs its own under those names, so :func:`import_rospy` puts a directory holding just
those packages (links to Debian's, plus the generated ones of :mod:`volary.ros1.msgs`) *first*
on the path. A process therefore speaks ROS 1 or ROS 2, not both; importing the bridge where
ROS 2's messages are already loaded is refused with that explanation.

Network: every process here gets ``ROS_IP=127.0.0.1`` (rospy, roscpp and rosmaster then bind
to loopback), and a master this module starts listens on ``http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from volary.errors import VolaryError

DEBIAN_DIST = Path("/usr/lib/python3/dist-packages")
DEBIAN_SHARE = Path("/usr/share")  # <pkg>/msg/*.msg of Debian's ROS message packages
LOOPBACK = "127.0.0.1"
APT_PACKAGES = (
    "ros-core python3-rospy python3-genpy python3-genmsg ros-std-msgs ros-geometry-msgs "
    "ros-sensor-msgs python3-tf2-msgs python3-rosgraph-msgs"
)
# ROS 1 message packages that ROS 2 wheels also install under the same names
SHARED_NAMES = ("std_msgs", "geometry_msgs", "rosgraph_msgs", "tf2_msgs", "sensor_msgs")


class Ros1Error(VolaryError):
    """ROS 1 is missing or cannot run here; the message says what to install or change."""


def missing_ros1() -> str | None:
    """Why Debian's ROS 1 cannot be used from this machine (None when it can): the test
    suite's skip reason and the bridge's error."""
    if shutil.which("rosmaster") is None:
        return f"rosmaster not found: install Debian's ROS 1 (apt-get install {APT_PACKAGES})"
    for pkg in ("rospy", "genpy", "genmsg", "rosgraph_msgs", "std_msgs", "tf2_msgs"):
        if not (DEBIAN_DIST / pkg).is_dir() and not _importable_ros1(pkg):
            return f"{pkg} not found: install Debian's ROS 1 (apt-get install {APT_PACKAGES})"
    for pkg in ("std_msgs", "geometry_msgs", "sensor_msgs"):
        if not (DEBIAN_SHARE / pkg / "msg").is_dir():
            deb = "ros-" + pkg.replace("_", "-")
            return f"{DEBIAN_SHARE / pkg / 'msg'} not found (apt-get install {deb})"
    return None


def _importable_ros1(name: str) -> bool:
    from importlib.util import find_spec

    return find_spec(name) is not None and name not in SHARED_NAMES


def ros1_tools() -> tuple[ModuleType, ModuleType]:
    """(genpy, genmsg), appending Debian's directory to ``sys.path`` when they are not
    importable as is."""
    try:
        import genmsg
        import genpy
    except ImportError:
        _append_debian()
        try:
            import genmsg
            import genpy
        except ImportError as e:
            raise Ros1Error(
                f"ROS 1 message tools (genpy, genmsg) not importable: {e}; install Debian's "
                f"ROS 1 (apt-get install {APT_PACKAGES})"
            ) from e
    return genpy, genmsg


def import_rospy(overlay: list[Path]) -> ModuleType:
    """rospy, with ``overlay`` (directories of ROS 1 message packages) first on the path and
    Debian's directory appended when rospy is not importable as is (module docstring)."""
    _refuse_ros2_messages()
    for d in reversed(overlay):
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))
    try:
        import rospy
    except ImportError:
        _append_debian()
        try:
            import rospy
        except ImportError as e:
            raise Ros1Error(
                f"rospy not importable: {e}; install Debian's ROS 1 (apt-get install "
                f"{APT_PACKAGES})"
            ) from e
    from std_msgs.msg import Header

    if not hasattr(Header, "_md5sum"):  # a ROS 2 class: the overlay did not win
        raise Ros1Error(f"std_msgs resolves to {sys.modules['std_msgs'].__file__}, not ROS 1's")
    return rospy


def _append_debian() -> None:
    if not DEBIAN_DIST.is_dir():
        raise Ros1Error(
            f"{DEBIAN_DIST} not found: install Debian's ROS 1 (apt-get install {APT_PACKAGES})"
        )
    if str(DEBIAN_DIST) not in sys.path:
        sys.path.append(str(DEBIAN_DIST))


def _refuse_ros2_messages() -> None:
    for name in SHARED_NAMES:
        mod = sys.modules.get(f"{name}.msg")
        if mod is not None and not _is_ros1(mod):
            raise Ros1Error(
                f"ROS 2's {name} is already imported in this process ({mod.__file__}); ROS 1 "
                "needs its own package of that name: run the ROS 1 bridge in a process of its "
                "own (python -m volary.ros1 serve)"
            )


def _is_ros1(msg_module: ModuleType) -> bool:
    classes = [getattr(msg_module, n) for n in dir(msg_module) if n[:1].isupper()]
    return any(hasattr(c, "_md5sum") for c in classes) or not classes


# ---- processes ----------------------------------------------------------------------------------
def master_uri(port: int) -> str:
    return f"http://{LOOPBACK}:{port}"


def ros_env(uri: str, base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """An environment for a ROS 1 process on loopback: ``base`` (default: this process's) with
    ROS_MASTER_URI = ``uri``, ROS_IP = 127.0.0.1 and no ROS_HOSTNAME (it would override ROS_IP)."""
    check_loopback(uri)
    env = dict(os.environ if base is None else base)
    env.pop("ROS_HOSTNAME", None)
    env.update(ROS_MASTER_URI=uri, ROS_IP=LOOPBACK, **extra)
    return env


def check_loopback(uri: str) -> None:
    """Refuse a master that is not on this machine's loopback (nothing here leaves it)."""
    from urllib.parse import urlparse

    host = urlparse(uri).hostname or ""
    if not (host == "localhost" or host.startswith("127.")):
        raise Ros1Error(f"ROS_MASTER_URI: expected a loopback master (127.0.0.1), got {uri!r}")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a master of one's own)."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def master_alive(uri: str, timeout: float = 0.5) -> bool:
    import xmlrpc.client
    from urllib.parse import urlparse

    u = urlparse(uri)
    try:
        with socket.create_connection((u.hostname or LOOPBACK, u.port or 11311), timeout):
            pass
        reply: Any = xmlrpc.client.ServerProxy(uri).getPid("/volary_probe")
        return bool(reply[0] == 1)
    except (OSError, xmlrpc.client.Error):
        return False


def start_master(port: int, log_dir: str | Path | None = None, timeout: float = 15.0) -> Any:
    """Debian's ``rosmaster --core`` on 127.0.0.1:``port`` (a ``subprocess.Popen``), once it
    answers; the caller terminates it. ``log_dir``: its ROS_LOG_DIR (default ROS's)."""
    exe = shutil.which("rosmaster")
    if exe is None:
        raise Ros1Error(f"rosmaster not found: apt-get install {APT_PACKAGES}")
    uri = master_uri(port)
    if master_alive(uri):
        raise Ros1Error(f"master_port: {port} already serves a ROS master; pick a free port")
    env = ros_env(uri, _system_env())
    if log_dir is not None:
        env["ROS_LOG_DIR"] = str(log_dir)
    proc = subprocess.Popen(
        [exe, "--core", "-p", str(port), "-w", "3"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a terminal's Ctrl-C reaches the bridge, which ends it
        preexec_fn=_die_with_parent,
    )
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise Ros1Error(f"rosmaster on port {port} exited ({proc.returncode}): {err[-400:]}")
        if master_alive(uri):
            return proc
        time.sleep(0.05)
    proc.terminate()
    raise Ros1Error(f"rosmaster on port {port} did not answer within {timeout} s")


def stop_processes(procs: Any, grace_s: float = 10.0) -> None:
    """Stop the processes still running, last started first: SIGTERM, then SIGKILL after
    ``grace_s`` s (a node that ignores the terminate must not outlive its run)."""
    for proc in reversed(list(procs)):
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the process that started it dies (Linux's
    PR_SET_PDEATHSIG), so a killed bridge leaves no master behind."""
    import ctypes
    import signal

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass


def _system_env() -> dict[str, str]:
    """This process's environment without the virtual environment's Python settings, for
    Debian's /usr/bin/python3 programs (rosmaster, client nodes)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    venv = env.pop("VIRTUAL_ENV", None)
    if venv:
        parts = env.get("PATH", "").split(os.pathsep)
        env["PATH"] = os.pathsep.join(p for p in parts if not p.startswith(venv))
    return env


def client_env(uri: str, pythonpath: list[Path], **extra: str) -> dict[str, str]:
    """The environment of a ``/usr/bin/python3`` ROS 1 node: loopback master, the generated
    message packages first on PYTHONPATH, no trace of volary's virtual environment."""
    env = ros_env(uri, _system_env(), **extra)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    return env
