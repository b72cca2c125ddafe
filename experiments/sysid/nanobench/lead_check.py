"""Does the early velocity excess come from the timing of the commands? (issue 61)

volary's step with the angular dynamics off (as in velocity_check.py) against the constant-rates
baseline, both fed the logged commands advanced by a fraction of a sample or more (linear
interpolation between rows; the last row held), on the *development* split's training flights
(B2-B7; every 20th start, horizons 1-50), with the development split's identified platform.
Both share the advanced commands, so the ratio compares the two integrations at each timing.

    .venv/bin/python experiments/sysid/nanobench/lead_check.py PATH/nanobench/datasets/dataset

Writes results/dev/lead-check.json (about a minute, one thread).
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

LEADS = (0.0, 0.25, 0.5, 0.75, 1.0, 2.0, 3.0)  # samples (10 ms each)


def advanced(lead: float):
    """``predict.delayed_commands`` with the commands moved ``lead`` samples earlier."""
    plain = P.delayed_commands

    def commands(log, model):
        c = plain(log, model)
        n, f = int(np.floor(lead)), lead - np.floor(lead)
        a = np.concatenate([c[n:], np.repeat(c[-1:], n, axis=0)]) if n else c
        return (1 - f) * a + f * np.concatenate([a[1:], a[-1:]])

    return commands


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=Path, help="NanoBench's datasets/dataset folder")
    args = ap.parse_args()
    train, _, _ = load(args.dataset, "dev")
    res = HERE / "results" / "dev"
    fitted = json.loads((res / "nanobench.json").read_text())["fitted"]
    af = next(iter(load_file(res / "platform.toml").values())).airframe
    model = P.SysidModel(af, P.CommandMap(fitted["command_scale_rad_s"]), delay=0)
    held = replace(model, airframe=af.replace(inertia=np.asarray(af.inertia) * 1e6))
    plain, rows = P.delayed_commands, []
    try:
        for lead in LEADS:
            P.delayed_commands = advanced(lead)
            base = P.evaluate(train, model, 50, 20, baseline="constant_rates")
            err = P.evaluate(train, held, 50, 20)
            ratio = err["vel"] / base["vel"]
            rows.append(
                {
                    "lead_samples": lead,
                    "vel_ratio": ratio.tolist(),
                    "vel_model": err["vel"].tolist(),
                    "vel_baseline": base["vel"].tolist(),
                }
            )
            print(
                f"lead {lead:4.2f}: ratio at 0.02-0.05 s {np.round(ratio[1:5], 4)}, "
                f"model error at 0.05 s {err['vel'][4]:.5f} m/s",
                flush=True,
            )
    finally:
        P.delayed_commands = plain
    (res / "lead-check.json").write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
