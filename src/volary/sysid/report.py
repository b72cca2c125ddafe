"""What ``volary sysid`` writes: the platform file, the fitted values and scores, a plot."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from volary.inputs import read_toml
from volary.platforms.schema import FIELDS
from volary.sysid.fit import AERO_EFFECTS
from volary.sysid.logs import FlightLog
from volary.sysid.predict import SysidModel, evaluate, summary


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(float(v)) if isinstance(v, float) else str(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def platform_table(base: str, model: SysidModel, fitted: dict, source: str) -> dict[str, Any]:
    """The catalogue table of the identified vehicle: the base entry's fields, with the fitted
    ones replaced (each citing ``source``)."""
    from volary.platforms.catalogue import entry

    e = entry(base)
    raw = dict(read_toml(e.path, "catalogue file")[base])
    af = model.airframe
    raw["category"] = "identified"
    raw["description"] = f"{base} identified from flight logs ({source})"
    raw["max_rotor_speed"] = {"value": af.max_rotor_speed[0], "unit": "rad/s", "source": source}
    for key in ("motor_tau_up", "motor_tau_down"):
        raw[key] = {"value": getattr(af, key)[0], "unit": "s", "source": source}
    raw["drag_linear"] = {"value": list(af.drag_linear), "unit": "N/(m/s)", "source": source}
    if "moment_gain" in fitted:
        raw["moment_gain"] = {"value": fitted["moment_gain"], "unit": "1", "source": source}
    if "refine" in fitted:
        raw["drag_moment"] = {"value": list(af.drag_moment), "unit": FIELDS["drag_moment"].unit,
                              "source": source}  # fmt: skip
    for key in fitted.get("aero", {}).get("chosen", ()):  # the effects validation kept
        for f in AERO_EFFECTS[key]:
            raw[f] = {"value": float(getattr(af, f)), "unit": FIELDS[f].unit, "source": source}
    return raw


def write_platform(path: Path, name: str, table: dict[str, Any]) -> None:
    lines = ["# Written by volary sysid; format: src/volary/platforms/schema.py", "", "[meta]",
             'format = "volary-airframes"', "version = 1", "", f"[{name}]"]  # fmt: skip
    lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    path.write_text("\n".join(lines) + "\n")


def _scores(logs: Sequence[FlightLog], model: SysidModel, horizon: int, stride: int) -> dict:
    dt = logs[0].dt
    out = {}
    for name, m in (("constant", None), ("model", model)):
        err = evaluate(list(logs), m, horizon, stride)
        out[name] = {
            "summary": summary(err, dt),
            "per_horizon": {k: v.tolist() for k, v in err.items() if k != "windows"},
        }
    return out


def plot(path: Path, scores: dict, dt: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = (("pos", "position (m)"), ("vel", "velocity (m/s)"), ("omega", "body rates (rad/s)"),
            ("att_deg", "attitude (deg)"))  # fmt: skip
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.2), constrained_layout=True)
    for ax, (k, label) in zip(axes, keys, strict=True):
        for name, row in scores.items():
            y = np.asarray(row["per_horizon"][k])
            ax.plot(np.arange(1, len(y) + 1) * dt, y, label=name)
        ax.set_xlabel("horizon (s)")
        ax.set_title(label, fontsize=10)
    axes[0].legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(
    out: Path,
    model: SysidModel,
    fitted: dict,
    train: Sequence[FlightLog],
    test: Sequence[FlightLog],
    horizon: int,
    stride: int,
    base: str = "crazyflie",
) -> dict[str, Path]:
    """Write platform.toml, sysid.json and (with test logs) horizons.png under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    name = f"{base}_identified"
    source = f"volary sysid on {len(train)} training logs"
    write_platform(out / "platform.toml", name, platform_table(base, model, fitted, source))
    doc: dict[str, Any] = {
        "platform": name,
        "train": [log.name for log in train],
        "test_logs": [log.name for log in test],
        "fitted": fitted,
        "command_map": {
            "scale_rad_s": model.command.scale,
            "use_voltage": model.command.use_voltage,
            "curve": list(model.command.curve),
        },
        "delay_samples": model.delay,
        "torque_bias_Nm": list(model.torque_bias),
        "horizon": horizon,
        "stride": stride,
    }
    paths = {"platform.toml": out / "platform.toml", "sysid.json": out / "sysid.json"}
    if test:
        doc["test"] = _scores(test, model, horizon, stride)
        plot(out / "horizons.png", doc["test"], test[0].dt)
        paths["horizons.png"] = out / "horizons.png"
    (out / "sysid.json").write_text(json.dumps(doc, indent=1, default=_finite))
    return paths


def _finite(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    return None if isinstance(v, float) and not math.isfinite(v) else v
