"""Contract test over the whole catalogue: every platform holds a hover setpoint for 10 s with
< 1 cm drift under default position control (all platforms in one mixed batch)."""

from __future__ import annotations

import torch

from volary.platforms import get, names
from volary.sim import Simulator


def test_every_catalogue_platform_hovers_10s_under_1cm():
    platforms = names()
    sim = Simulator(platforms, control="position", seed=0, record=False)
    target = torch.tensor([0.0, 0.0, 1.0, 0.0])
    worst = torch.zeros(sim.n_envs)
    for _ in range(int(10.0 * sim.config.control_hz)):
        s = sim.step(target)
        worst = torch.maximum(worst, s.pos.sub(target[:3]).norm(dim=-1))
    bad = {platforms[i]: round(float(worst[i]) * 100, 2) for i in range(len(platforms))
           if worst[i] >= 0.01}
    assert not bad, f"drift >= 1 cm (cm): {bad}"
    assert not sim.state.crashed.any() and not sim.state.diverged.any()
    assert len(platforms) >= 36 + 4 and all(get(p).n_rotors >= 4 for p in platforms)
