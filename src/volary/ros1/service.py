"""Starting the bridge: its own ROS master or the environment's, in a thread or a process.

:func:`start` makes the environment loopback-only (:func:`volary.ros1.env.ros_env`), starts
Debian's ``rosmaster`` when given a port (0: a free one), builds the :class:`Ros1Bridge`;
:func:`serve_in_thread` runs it in a thread; ``python -m volary.ros1 serve`` runs it in the
main thread and prints :func:`ready_line` once serving, which a parent process waits for.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from volary.ros1.bridge import Ros1Bridge, Ros1Options
from volary.ros1.env import check_loopback, free_port, master_uri, ros_env, start_master

READY = "volary-ros1 ready"
DEFAULT_MASTER = "http://127.0.0.1:11311"


@dataclass
class Ros1Service:
    """A started bridge: ``uri`` its master, ``master`` the rosmaster process it started (or
    None), ``thread`` the thread serving it (or None: call ``bridge.serve()``)."""

    bridge: Ros1Bridge
    uri: str
    master: Any = None
    thread: threading.Thread | None = None
    lap: Any = field(default=None)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving, shut the node down and end the master this service started."""
        self.bridge.stop()
        if self.thread is not None:
            self.thread.join(timeout)
        self.bridge.shutdown()
        if self.master is not None and self.master.poll() is None:
            self.master.terminate()
            try:
                self.master.wait(timeout)
            except Exception:  # noqa: BLE001 - a master that will not end is killed
                self.master.kill()


def start(
    options: Ros1Options | None = None,
    *,
    master_port: int | None = None,
    msg_cache: str | Path | None = None,
    log_dir: str | Path | None = None,
) -> Ros1Service:
    """A bridge on a loopback master: its own on ``master_port`` (0: a free port) or, when
    None, ``ROS_MASTER_URI`` (default 127.0.0.1:11311). ``log_dir``: ROS_LOG_DIR of the node
    and master."""
    master = None
    if master_port is None:
        uri = os.environ.get("ROS_MASTER_URI", DEFAULT_MASTER)
        check_loopback(uri)
    else:
        port = master_port or free_port()
        uri = master_uri(port)
        master = start_master(port, log_dir)
    extra = {} if log_dir is None else {"ROS_LOG_DIR": str(log_dir)}
    os.environ.pop("ROS_HOSTNAME", None)  # it would override ROS_IP
    os.environ.update(ros_env(uri, {}, **extra))  # rospy reads these when the node starts
    try:
        bridge = Ros1Bridge(options, msg_cache=msg_cache)
    except BaseException:
        if master is not None:
            master.terminate()
        raise
    return Ros1Service(bridge, uri, master)


def serve_in_thread(
    options: Ros1Options | None = None,
    *,
    master_port: int | None = None,
    msg_cache: str | Path | None = None,
    log_dir: str | Path | None = None,
) -> Ros1Service:
    """:func:`start`, then serve in a daemon thread; returns once serving (the node is up,
    the parameters set and the first tick published). ``service.stop()`` ends it."""
    svc = start(options, master_port=master_port, msg_cache=msg_cache, log_dir=log_dir)

    def run() -> None:
        svc.lap = svc.bridge.serve()

    svc.thread = threading.Thread(target=run, name="volary-ros1", daemon=True)
    svc.thread.start()
    return svc


def ready_line(svc: Ros1Service) -> str:
    """What the process entry prints once serving: master, the generated messages' dirs."""
    m = svc.bridge.messages
    return (f"{READY} master={svc.uri} pythonpath={m.python} msg={m.msg} include={m.include} "
            f"results={svc.bridge.results_path}")  # fmt: skip
