"""Which thrust law do the logs support? (issue 61; development split only)

published_baseline.py finds NanoBench's linear regression (vertical specific force on the four
commands and the battery voltage) a better one-step and open-loop predictor of the vertical
axis than volary's identified model, whose thrust is k_f w^2 with w proportional to u V / V_ref.
This diagnostic fits, on the development split's training flights (B2-B7), the collective
body-z force (the logged acceleration's, plus the fitted z drag) as a function of the lagged
(10 ms) effective commands e = u V / V_ref in four forms, and scores each one step ahead on the
last 30 % of each development test flight (B8) with NanoBench's ground truth (Savitzky-Golay
a_z + g, published_baseline.az_truth):

- ``quadratic`` (volary's law): F = a sum e_i^2
- ``quadratic + linear``: F = a sum e_i^2 + b sum e_i
- ``linear + constant``: F = b sum e_i + c
- ``quadratic + linear + constant``

    .venv/bin/python experiments/sysid/nanobench/thrust_map_check.py PATH/nanobench/datasets/dataset

Writes results/dev/thrust-map.json (under a minute, one thread).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import published_baseline as PB
from run import HERE, load

from volary.platforms import load_file
from volary.sysid import predict as P
from volary.sysid.fit import _rows, body_force
from volary.sysid.logs import rotmat

LAWS = {
    "quadratic": [0],
    "quadratic + linear": [0, 1],
    "linear + constant": [1, 2],
    "quadratic + linear + constant": [0, 1, 2],
}
TAU = 0.01  # s, the fitted motor lag


def regressors(log, airframe) -> np.ndarray:
    """(T, 3) [sum e^2, sum e, 1] of the effective commands e through the motor lag
    (``predict.rotor_history`` with a unit command scale, no delay and no speed limit)."""
    af = airframe.replace(motor_tau_up=(TAU,), motor_tau_down=(TAU,), max_rotor_speed=(1e6,))
    lag = P.rotor_history(log, P.SysidModel(af, P.CommandMap(1.0)))
    return np.column_stack([(lag**2).sum(1), lag.sum(1), np.ones(len(log))])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=Path, help="NanoBench's datasets/dataset folder")
    args = ap.parse_args()
    train, test, _ = load(args.dataset, "dev")
    af = next(iter(load_file(HERE / "results" / "dev" / "platform.toml").values())).airframe
    mass, drag = af.mass, np.asarray(af.drag_linear)
    x, y = [], []
    for log, rows in zip(train, _rows(train), strict=True):
        v_b = np.einsum("tji,tj->ti", rotmat(log.quat), log.vel)
        x.append(regressors(log, af)[rows])
        y.append((body_force(log, mass)[:, 2] + drag[2] * v_b[:, 2])[rows])
    x, y = np.concatenate(x), np.concatenate(y)
    out = {}
    for name, cols in LAWS.items():
        w = np.linalg.lstsq(x[:, cols], y, rcond=None)[0]
        errs = []
        for log in test:
            r = rotmat(log.quat)
            f_b = -drag * np.einsum("tji,tj->ti", r, log.vel)
            f_b[:, 2] += regressors(log, af)[:, cols] @ w
            az = np.einsum("tij,tj->ti", r, f_b)[:, 2] / mass
            errs.append((az - PB.az_truth(log))[int(0.7 * len(log)) :])
        out[name] = {
            "coefficients_N": w.tolist(),
            "one_step_az_rmse": PB.rmse(np.concatenate(errs)),
        }
    w = PB.fit_linear(train)
    errs = [(PB.features(g) @ w - PB.az_truth(g))[int(0.7 * len(g)) :] for g in test]
    out["NanoBench linear regression"] = {"one_step_az_rmse": PB.rmse(np.concatenate(errs))}
    (HERE / "results" / "dev" / "thrust-map.json").write_text(json.dumps(out, indent=1))
    for name, row in out.items():
        print(
            f"{name}: one-step a_z + g RMSE {row['one_step_az_rmse']:.3f} m/s^2 "
            f"{np.round(row.get('coefficients_N', []), 4)}"
        )


if __name__ == "__main__":
    main()
