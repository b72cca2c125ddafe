"""Where the refined model's early velocity excess comes from (issue 61): volary's step with the
angular dynamics switched off (inertia x 1e6, no torque bias: body rates held at the start's,
as the constant-rates baseline holds them) against the constant-rates baseline, on the test
flights, with the identified platform's translation (results/platform.toml, the fit's command
scale). Any difference is the translational integration: volary's RK4 step (rotor lag as a
state) against the baseline's semi-implicit Euler with the lag's exact decay.

    .venv/bin/python experiments/sysid/nanobench/velocity_check.py PATH/nanobench/datasets/dataset

Writes results/velocity-check.json (about a minute, one thread).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
from run import HERE, load

from volary.platforms import load_file
from volary.sysid import predict as P


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=Path, help="NanoBench's datasets/dataset folder")
    args = ap.parse_args()
    _, test, _ = load(args.dataset)
    fitted = json.loads((HERE / "results" / "nanobench.json").read_text())["fitted"]
    af = next(iter(load_file(HERE / "results" / "platform.toml").values())).airframe
    model = P.SysidModel(af, P.CommandMap(fitted["command_scale_rad_s"]), delay=0)
    base = P.evaluate(test, model, 50, 5, baseline="constant_rates")
    held = replace(model, airframe=af.replace(inertia=np.asarray(af.inertia) * 1e6))
    err = P.evaluate(test, held, 50, 5)
    ratio = {k: (err[k] / base[k]).tolist() for k in ("pos", "vel", "omega")}
    doc = {
        "ratio_to_constant_rates": ratio,
        "horizon_s": [round(0.01 * h, 2) for h in range(1, 51)],
    }
    (HERE / "results" / "velocity-check.json").write_text(json.dumps(doc, indent=1))
    for k, r in ratio.items():
        print(f"{k}: ratio to the constant-rates baseline at 0.01-0.10 s", np.round(r[:10], 4))


if __name__ == "__main__":
    main()
