"""Why the first gate costs the reference stack on `moved` courses (issue 57): what the racer sees
of it on the approach, how its estimate is wrong, and what the size state buys and costs.

Two parts, on one generator setting and seed (25 courses, factory arena, sensors-only):
1. the approach (noise seed 0, in this process, the first ``--approach-s`` seconds): every
   0.1 s, the median over the courses of how many of gate 1's beacon corners are reported and
   how many the filter uses, and of gate 1's estimate error split along the line of sight from
   the start, across it and in height, and in the size of its opening;
2. the races (``--noise-seeds``, ``--workers``): completion, the leaderboard (best 5 of 25) per
   noise seed, crashes by the number of gates passed before them, the median gate error at
   passage per gate; once per ``--variant`` (``SensorRacer`` fields as JSON).

Development courses only: seed 5 of `moved` and `resized` were flown by no report run.

    .venv/bin/python experiments/alphapilot/robust-racer/first_gate.py --generator moved --seed 5 \\
        --variant '{}' --variant '{"gate_scale_std": 0.0}' --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from volary.studies.alphapilot.challenge import (
    run_challenge_seeds,
    seeds_summary,
)
from volary.studies.alphapilot.sensor_racer import SensorRacer
from volary.worlds.tracks import alphapilot_2019_courses

TRACE: list[tuple[float, torch.Tensor, torch.Tensor, torch.Tensor]] = []


@dataclass
class TracedRacer(SensorRacer):
    """The reference stack, recording gate 1's reported and used corners and its estimate."""

    ekf_time: float = 0.0

    def reset(self, briefing):  # noqa: ANN001, ANN201 - the parent's signature
        super().reset(briefing)
        fuse, gid = self.ekf.update_beacons, self.ekf.map.ids[self.order[0]]

        def traced(pixels, visible, gate_ids, corner, **kw):  # noqa: ANN001, ANN202
            used = fuse(pixels, visible, gate_ids, corner, **kw)
            mine = gate_ids == gid
            est = self.ekf.gate_corners()[:, self.order[0]].clone()
            t = float(self.ekf_time)
            TRACE.append((t, (visible & mine).sum(1), (used & mine).sum(1), est))
            return used

        self.ekf.update_beacons = traced  # the same fusion, in the same order, recorded

    def act(self, obs):  # noqa: ANN001, ANN201 - the parent's signature
        self.ekf_time = obs.step * self.dt
        return super().act(obs)


def med(x: torch.Tensor) -> float:
    """The median of |x| to the millimetre (or the hundredth of a corner)."""
    return round(float(x.abs().double().median()), 3)


def approach(courses: list, seconds: float) -> list[dict]:
    """Part 1 (module docstring)."""
    TRACE.clear()
    run_challenge_seeds(courses, TracedRacer(), [0], time_limit_s=seconds)
    true = torch.stack([torch.as_tensor(np.asarray(s.gates[s.meta["order_index"][0]].corners))
                        for s in courses]).double()  # fmt: skip
    centre = true.mean(1)
    start = torch.tensor([s.start for s in courses], dtype=torch.float64)
    los = centre - start
    los[:, 2] = 0.0
    los = los / los.norm(dim=-1, keepdim=True)
    across = torch.stack((-los[:, 1], los[:, 0], torch.zeros_like(los[:, 0])), -1)
    size_true = (true - centre[:, None]).norm(dim=-1).mean(-1)
    rows, last = [], -1.0
    for t, seen, used, est in TRACE:
        if t < last + 0.1 - 1e-9:
            continue
        last = t
        err = est.mean(1) - centre
        size = (est - est.mean(1, keepdim=True)).norm(dim=-1).mean(-1) - size_true

        rows.append({"t": round(t, 2), "reported": med(seen), "used": med(used),
                     "along_m": med((err * los).sum(-1)), "across_m": med((err * across).sum(-1)),
                     "height_m": med(err[:, 2]), "size_m": med(size)})  # fmt: skip
    return rows


def race(courses: list, variant: dict, seeds: list[int], workers: int) -> dict:
    """Part 2 (module docstring) for one variant (leaderboards: the challenge's own summary)."""
    t0 = time.perf_counter()
    res = run_challenge_seeds(courses, SensorRacer(**variant), seeds, workers=workers)
    g, per_seed = res.race, seeds_summary(res)["per_seed"]
    best5 = [s["leaderboard"] for s in per_seed]
    gt = g.gate_times.numpy()  # each gate's error at passage, as challenge_summary's but the
    k = np.searchsorted(res.est_time.numpy(), np.nan_to_num(gt, nan=np.inf)) - 1  # median of
    k = np.clip(k, 0, len(res.est_time) - 1)  # an even count averages its two middle values
    err = np.take_along_axis(res.gate_err.numpy().transpose(1, 2, 0), k[..., None], 2)[..., 0]
    err[np.isnan(gt)] = np.nan
    by_gate = np.nanmedian(err, 0).round(3).tolist()
    return {
        "variant": variant,
        "leaderboard_per_seed": [round(v, 3) for v in best5],
        "leaderboard_median": round(float(np.median(best5)), 3),
        "completion": round(float(g.finished.double().mean()), 3),
        "crashes_by_gates_passed": np.bincount(
            g.gates_passed[g.collided].numpy(), minlength=len(by_gate) + 1
        ).tolist(),
        "gate_err_at_passage_m": by_gate,
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generator", default="moved")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument(
        "--variant",
        action="append",
        default=None,
        help="SensorRacer fields as JSON, once per variant (default: '{}')",
    )
    ap.add_argument("--noise-seeds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--approach-s", type=float, default=3.2)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    courses = alphapilot_2019_courses(25, a.seed, generator=a.generator, arena="factory")
    doc = {"generator": a.generator, "seed": a.seed, "noise_seeds": list(range(a.noise_seeds)),
           "approach": approach(courses, a.approach_s), "races": []}  # fmt: skip
    for row in doc["approach"][::5]:
        print(row)
    for v in a.variant or ["{}"]:
        r = race(courses, json.loads(v), doc["noise_seeds"], a.workers)
        doc["races"].append(r)
        print(r)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
