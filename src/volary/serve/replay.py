"""``volary replay``: a recording's inputs flown again in a fresh World through
:class:`~volary.serve.server.Server`, bit for bit (``docs/serve.md``). It sits above the
server, which writes recordings through :mod:`~volary.serve.recording` (the bag format, written
and read)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from volary.math import xyzw_to_wxyz
from volary.serve.recording import EVENTS, read_bag
from volary.serve.server import Server


def replay(path: str | Path, *, record: str | Path | None = None) -> Server:
    """Fly a recording's inputs again in a fresh World (no clients, no socket traffic): the
    same joins at the same ticks, the same commands and poses. Returns the
    :class:`~volary.serve.server.Server` at the end (``record``: record the replay too)."""
    config, ticks = read_bag(path)
    srv = Server(config, bind=f"inproc://volary-replay-{id(ticks)}", record=record)
    try:
        for tick in sorted(ticks):
            msgs = ticks[tick]
            for topic, msg in msgs:
                if topic == EVENTS:
                    ev = json.loads(msg.data)
                    if ev["event"] == "reset":  # a hello: reset, then the welcome's reading
                        srv.reset_slot(int(ev["slot"]))
                        srv.obs(int(ev["slot"]))  # (sensor noise streams advance per read)
            inputs, actors = _inputs(msgs)
            if inputs or actors:
                srv.advance(inputs, actors)
    finally:
        srv.close()
    return srv


def _inputs(
    msgs: list[tuple[str, Any]],
) -> tuple[dict[int, tuple[str, dict[str, Any]]], dict[int, dict[str, Any]]]:
    out: dict[int, tuple[str, dict[str, Any]]] = {}
    actors: dict[int, dict[str, Any]] = {}
    twists: dict[int, Any] = {}
    for topic, msg in msgs:
        parts = topic.split("/")
        if len(parts) == 3 and parts[1].startswith("actor") and parts[2] == "pose_in":
            actors[int(parts[1].removeprefix("actor"))] = _pose_of(msg)
            continue
        if len(parts) != 3 or not parts[1].startswith("vehicle"):
            continue
        slot, leaf = int(parts[1].removeprefix("vehicle")), parts[2]
        if leaf == "setpoint":
            out[slot] = ("vehicle", {"command": np.array(msg.data, dtype=np.float64)})
        elif leaf == "pose_in":
            out[slot] = ("in_loop", {**_pose_of(msg), "vel": None, "omega": None})
        elif leaf == "twist_in":
            twists[slot] = msg.twist
    for slot, tw in twists.items():
        out[slot][1]["vel"] = np.array([tw.linear.x, tw.linear.y, tw.linear.z])
        out[slot][1]["omega"] = np.array([tw.angular.x, tw.angular.y, tw.angular.z])
    return out, actors


def _pose_of(msg: Any) -> dict[str, np.ndarray]:
    """{pos, quat [w, x, y, z]} of a PoseStamped (float64, exactly as recorded)."""
    p, q = msg.pose.position, msg.pose.orientation
    quat = xyzw_to_wxyz(torch.tensor([q.x, q.y, q.z, q.w], dtype=torch.float64)).numpy()
    return {"pos": np.array([p.x, p.y, p.z]), "quat": quat}
