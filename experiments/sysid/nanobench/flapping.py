"""Is there a blade-flapping moment in NanoBench's training flights? Regress the body torque
the fitted model leaves unexplained (`crazyflie_nanobench`, the fit of run.py) on the body
velocity, per axis, on the training flights (B2-B8).

    .venv/bin/python experiments/sysid/nanobench/flapping.py PATH/nanobench/datasets/dataset

A flapping moment M = -k e_z x v_B shows as tau_x = +k v_y, tau_y = -k v_x. Writes
results/flapping.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from run import HERE, load

from volary.platforms import get
from volary.sysid import fit as F
from volary.sysid import predict as P
from volary.sysid.logs import rotmat


def smooth(a: np.ndarray, k: int = 5) -> np.ndarray:
    kernel = np.ones(k) / k
    return np.stack([np.convolve(a[:, j], kernel, "same") for j in range(a.shape[1])], 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=Path)
    args = ap.parse_args()
    train, _, _ = load(args.dataset)
    fitted = json.loads((HERE / "results" / "nanobench.json").read_text())["fitted"]
    af = get("crazyflie_nanobench")
    model = P.SysidModel(af, P.CommandMap(fitted["command_scale_rad_s"]), fitted["delay_samples"])
    xs, ys = [], []
    for log in train:
        rotor = F.interval_mean(F.rotor_force_torque(log, model)[1])
        resid = smooth(F.body_torque(log, np.asarray(af.inertia)) - rotor)[10:-10]
        v_b = np.einsum("tji,tj->ti", rotmat(log.quat), log.vel)[10:-10]
        xs.append(np.c_[v_b, np.ones(len(v_b))])
        ys.append(resid)
    x, y = np.vstack(xs), np.vstack(ys)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    r2 = 1 - (y - x @ coef).var(axis=0) / y.var(axis=0)
    doc = {
        "coef_Nm_per_mps": {
            "rows": ["v_x", "v_y", "v_z", "1"],
            "cols": ["tau_x", "tau_y", "tau_z"],
            "values": coef.tolist(),
        },  # fmt: skip
        "flapping_k_from_tau_x": float(coef[1, 0]),
        "flapping_k_from_tau_y": float(-coef[0, 1]),
        "r2": r2.tolist(),
        "rows": len(y),
    }
    (HERE / "results" / "flapping.json").write_text(json.dumps(doc, indent=1))
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
