"""docs/ros.md: the documented `volary ros2 serve` line serves the documented ROS 2 node, which
flies to within 5 cm of its point (DDS on this machine, a domain id of this test's own)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (pip install 'volary[ros2]')")
pytest.importorskip("tf2_msgs.msg", reason="run: python -m volary.ros2.msgs build")

DOC = Path(__file__).resolve().parents[1] / "docs" / "ros.md"
TEXT = DOC.read_text()


def test_the_documented_node_flies_through_the_documented_bridge(tmp_path):
    serve = [ln for ln in re.findall(r"```bash\n(.*?)```", TEXT, flags=re.S)[0].splitlines()
             if ln.startswith("volary ros2 serve")][0]  # fmt: skip
    argv = shlex.split(serve.split("#")[0])
    block = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)[0]
    assert len([ln for ln in block.splitlines() if ln.strip()]) <= 22
    (tmp_path / "hello.py").write_text(block)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "ROS_DOMAIN_ID": str(61 + os.getpid() % 40),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "FASTDDS_BUILTIN_TRANSPORTS": "SHM",
    }
    server = subprocess.Popen([sys.executable, "-m", "volary.cli.main", *argv[1:]],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env)  # fmt: skip
    try:
        line = ""
        while "volary ros2:" not in line:
            line = server.stdout.readline()
            assert line, "the bridge exited before serving"
        node = subprocess.run([sys.executable, str(tmp_path / "hello.py")], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert node.returncode == 0, node.stderr
        assert "within 5 cm at t = " in node.stdout
    finally:
        server.send_signal(signal.SIGINT)
        out = server.communicate(timeout=30)[0]
    assert "served" in out and server.returncode == 0, out
