"""Which beacon corners the tilted-bars fix (2026-11-30) hides or shows: every gate corner of
seed 0's first default course, seen from 430 places on straight lines start -> gate 1 -> ...
-> gate 11, occluded (FlightGoggles' rule: a hit closer than the corner, own-frame hits within
0.3 m of it excepted) with every gate's bars upright (as before) and in the gate's plane (now).
Occlusion only: no field of view, no attitude.

    .venv/bin/python experiments/alphapilot/robust-racer/beacon_occlusion.py   # a few seconds
"""

from __future__ import annotations

import numpy as np
import torch

import volary.worlds.primitives as prim
from volary.sensors.raycast import make_raycaster
from volary.worlds.tracks import alphapilot_2019_courses

MARGIN, EPS = 0.3, 0.01  # m: own-frame hits this near the corner count as the corner; slack


def places(spec) -> torch.Tensor:
    """(T, 3) points on straight lines from the start through the course gates' centres."""
    pts = [np.asarray(spec.start, dtype=float)]
    for g in spec.meta["order_index"]:
        c = np.asarray(spec.gates[g].corners).mean(0)
        a = pts[-1]
        pts += [a + s * (c - a) for s in np.linspace(0, 1, 40)[1:]]
    return torch.tensor(np.stack(pts))


def occluded(spec, pts: torch.Tensor, upright: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, 4 G) occluded flags and the object id each ray hit, bars upright or in-plane."""
    saved = prim.LEVEL_RAD
    prim.LEVEL_RAD = 10.0 if upright else saved  # every gate counts as level: upright bars
    try:
        caster = make_raycaster(spec, backend="torch", dtype=torch.float64)
    finally:
        prim.LEVEL_RAD = saved
    c = torch.tensor(np.stack([np.asarray(g.corners) for g in spec.gates])).reshape(-1, 3)
    rel = c[None] - pts[:, None]
    length = rel.norm(dim=-1)
    d = rel / length[..., None]
    hits = caster.cast(pts[:, None].expand_as(d).reshape(1, -1, 3), d.reshape(1, -1, 3),
                       float(length.max()))  # fmt: skip
    t, oid = (x.reshape(length.shape) for x in (hits.distance, hits.object_id))
    own = torch.tensor([spec.gates[k // 4].object_id for k in range(c.shape[0])])[None]
    return (t < length - EPS) & ~((t > length - MARGIN) & (oid == own)), oid


def main() -> None:
    torch.set_num_threads(1)
    spec = alphapilot_2019_courses(1, 0, generator="volary", arena="factory")[0]
    pts = places(spec)
    old, _ = occluded(spec, pts, upright=True)
    new, oid = occluded(spec, pts, upright=False)
    name = {g.object_id: g.name for g in spec.gates}
    print(f"{pts.shape[0]} places x {old.shape[1]} corners: {int((new & ~old).sum())} sightings "
          f"now hidden, {int((old & ~new).sum())} now seen")  # fmt: skip
    for k in range(old.shape[1]):
        if bool((old[:, k] != new[:, k]).any()):
            print(f"  {spec.gates[k // 4].name} corner {k % 4}: hidden from {int(old[:, k].sum())}"
                  f" -> {int(new[:, k].sum())} places")  # fmt: skip
    blockers = oid[new & ~old]
    print("  hidden by:", {name.get(int(i), int(i)): int((blockers == i).sum())
                           for i in blockers.unique()})  # fmt: skip


if __name__ == "__main__":
    main()
