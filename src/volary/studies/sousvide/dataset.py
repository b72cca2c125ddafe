"""The SOUS VIDE expert dataset on disk (HDF5; DESIGN.md "data at rest").

One *unit* is one expert rollout of Algorithm 1 (desired point i, sample j): ``steps`` control
steps at the policy rate (20 Hz). Unit u owns rows ``[u * steps, (u + 1) * steps)``, so the
file is allocated once, a unit is written whole and flagged in ``done``, and a killed run
resumes by flying the units whose flag is still False. Rows after an early end of a rollout
(the expert crashed or diverged) have ``valid`` False. The generating config is stored as JSON
in the root attribute ``config``; loading reads plain arrays, nothing is unpickled.

| dataset | shape | what |
| --- | --- | --- |
| ``images`` | (R, H, W, 3) uint8 | onboard RGB (OpenCV camera, row-major) |
| ``state`` | (R, 10) float32 | true [p (m), v (m/s), q [w,x,y,z] body-to-world], world frame |
| ``time`` | (R,) float32 | reference time t_k of the desired trajectory, s |
| ``action`` | (R, 4) float32 | expert u = [f_th in [0, 1], W_x, W_y, W_z rad/s] |
| ``theta`` | (R, 2) float32 | sampled dynamics [k_th (max thrust, N), m (kg)] |
| ``objective`` | (R, 7) float32 | first waypoint (3), last waypoint (3), total time (s) |
| ``history`` | (R, T, 11) float32 | eq. 3 window ending at the row (``history.history_windows``) |
| ``unit``, ``step`` | (R,) int64 | rollout index and step within it |
| ``valid`` | (R,) bool | row holds data |
| ``done`` | (U,) bool | unit written |

Root attributes: ``format`` (:data:`FORMAT`), ``config`` (JSON), ``units``, ``steps``,
``window``, ``height``, ``width``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import h5py
import numpy as np
from pydantic import Field

from volary.errors import ConfigError, FileFormatError
from volary.inputs import Strict, Text
from volary.learning.files import array, attributes, finite, open_h5, within_budget
from volary.learning.files import read as read_array
from volary.studies.sousvide.history import ENTRY_SIZE

FORMAT = "volary.sousvide.dataset/1"
Count = Annotated[int, Field(strict=True, ge=1)]
ROW_FIELDS: dict[str, tuple[tuple[int, ...], Any]] = {
    # name: (per-row shape with H, W, T as -1, -2, -3 placeholders, dtype)
    "images": ((-1, -2, 3), np.uint8),
    "state": ((10,), np.float32),
    "time": ((), np.float32),
    "action": ((4,), np.float32),
    "theta": ((2,), np.float32),
    "objective": ((7,), np.float32),
    "history": ((-3, ENTRY_SIZE), np.float32),
    "unit": ((), np.int64),
    "step": ((), np.int64),
    "valid": ((), np.bool_),
}


def _row_shape(name: str, height: int, width: int, window: int) -> tuple[int, ...]:
    sub = {-1: height, -2: width, -3: window}
    return tuple(sub.get(d, d) for d in ROW_FIELDS[name][0])


def create(
    path: str | Path,
    config: dict[str, Any],
    *,
    units: int,
    steps: int,
    height: int,
    width: int,
    window: int,
) -> Path:
    """Allocate a dataset file, or reuse an existing one written with the same ``config``.

    Raises ``ConfigError`` when ``path`` holds a dataset made with another config (resuming
    would mix two datasets) and ``FileFormatError`` when it is not a SOUS VIDE dataset.
    """
    path = Path(path)
    for name, v in (
        ("units", units),
        ("steps", steps),
        ("height", height),
        ("width", width),
        ("window", window),
    ):
        if not isinstance(v, int) or v < 1:
            raise ConfigError(f"{name}: expected a positive int, got {v!r}")
    text = json.dumps(config, sort_keys=True)
    if path.exists():
        with _open(path, "r") as f:
            if f.attrs["config"] != text:
                raise ConfigError(
                    f"out: {path} holds a dataset generated with another config; use a new "
                    "path, or the same settings to resume"
                )
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    rows = units * steps
    with h5py.File(tmp, "w") as f:
        f.attrs.update(
            format=FORMAT,
            config=text,
            units=units,
            steps=steps,
            window=window,
            height=height,
            width=width,
        )
        for name, (_, dtype) in ROW_FIELDS.items():
            shape = _row_shape(name, height, width, window)
            f.create_dataset(
                name,
                shape=(rows, *shape),
                dtype=dtype,
                chunks=(min(rows, steps), *shape),
                compression="lzf" if name == "images" else None,
            )
        f.create_dataset("done", shape=(units,), dtype=np.bool_)
    tmp.replace(path)
    return path


def _open(path: Path, mode: str) -> h5py.File:
    try:
        f = h5py.File(path, mode)
    except OSError as exc:
        raise FileFormatError(f"{path}: not a readable HDF5 file ({exc})") from exc
    if f.attrs.get("format") != FORMAT:
        f.close()
        raise FileFormatError(f"{path}: not a SOUS VIDE dataset (format {FORMAT!r} expected)")
    return f


def pending_units(path: str | Path) -> np.ndarray:
    """Indices of the units not yet written, ascending."""
    with _open(Path(path), "r") as f:
        return np.flatnonzero(~f["done"][...])


def write_units(path: str | Path, units: np.ndarray, data: dict[str, np.ndarray]) -> None:
    """Write whole units: ``data[name]`` has shape (len(units), steps, *row shape) for every
    row field except ``unit`` and ``step`` (filled here); then flag the units done and flush.
    """
    units = np.asarray(units, dtype=np.int64)
    with _open(Path(path), "r+") as f:
        steps = int(f.attrs["steps"])
        if units.size and (units.min() < 0 or units.max() >= f["done"].shape[0]):
            raise ConfigError(f"units: expected indices in [0, {f['done'].shape[0]}), got {units}")
        want = {k for k in ROW_FIELDS if k not in ("unit", "step")}
        if set(data) != want:
            raise ConfigError(f"data: expected fields {sorted(want)}, got {sorted(data)}")
        for b, u in enumerate(units):
            sl = slice(u * steps, (u + 1) * steps)
            for name in want:
                f[name][sl] = data[name][b]
            f["unit"][sl] = u
            f["step"][sl] = np.arange(steps)
        f.flush()
        f["done"][units] = True  # the flag goes last: a unit is done only once its rows are in
        f.flush()


@dataclass
class SousVideArrays:
    """A dataset read into memory (valid rows of done units only)."""

    images: np.ndarray | None  # (R, H, W, 3) uint8, None when read without images
    state: np.ndarray
    time: np.ndarray
    action: np.ndarray
    theta: np.ndarray
    objective: np.ndarray
    history: np.ndarray
    unit: np.ndarray
    step: np.ndarray
    config: dict[str, Any]

    def __len__(self) -> int:
        return int(self.state.shape[0])


class _Attributes(Strict):
    """The root attributes :func:`create` writes."""

    format: Literal["volary.sousvide.dataset/1"]
    config: Text
    units: Count
    steps: Count
    window: Count
    height: Count
    width: Count


def read(path: str | Path, *, images: bool = True) -> SousVideArrays:
    """Load the rows of finished units that hold data. ``FileFormatError`` in one line naming
    the file and the attribute or array on a foreign or damaged file: checked before any
    array is read against the declared layout (:data:`ROW_FIELDS`: every array's shape and
    dtype, ``units * steps`` rows, the bytes to load), then the rows read (their unit and step
    where they belong, the numbers finite). ``ConfigError`` when no unit is finished yet."""
    src = str(path)
    with open_h5(path, "SOUS VIDE dataset") as f:
        head = attributes(f, _Attributes, src)
        config = _config(head.config, src)
        dims = (head.height, head.width, head.window)
        rows_total = head.units * head.steps
        arrays = {
            name: array(f, name, (rows_total, *_row_shape(name, *dims)), dtype, src)
            for name, (_, dtype) in ROW_FIELDS.items()
        }
        done_ds = array(f, "done", (head.units,), np.bool_, src)
        within_budget([a for n, a in arrays.items() if images or n != "images"], src)
        done = read_array(done_ds, src)
        if not done.any():
            raise ConfigError(f"{path}: no finished rollout in the dataset yet (run generate)")
        valid = read_array(arrays.pop("valid"), src)
        rows = (np.repeat(done, head.steps) & valid).nonzero()[0]
        out = {n: read_array(a, src)[rows] for n, a in arrays.items() if n != "images"}
        imgs = read_array(arrays["images"], src)[rows] if images else None
    _check_rows(out, rows, head.steps, src)
    return SousVideArrays(images=imgs, config=config, **out)


def _config(text: str, src: str) -> dict[str, Any]:
    try:
        config = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise FileFormatError(f"{src}: attribute 'config': expected JSON ({err})") from None
    if not isinstance(config, dict):
        raise FileFormatError(
            f"{src}: attribute 'config': expected a JSON object, got {type(config).__name__}"
        )
    return config


def _check_rows(out: dict[str, np.ndarray], rows: np.ndarray, steps: int, src: str) -> None:
    """Each read row's unit and step are where the row lies; its numbers finite."""
    unit, step = rows // steps, rows % steps
    for name, want in (("unit", unit), ("step", step)):
        wrong = out[name] != want
        if wrong.any():
            i = int(np.argmax(wrong))
            raise FileFormatError(
                f"{src}: {name}: row {int(rows[i])}: expected {int(want[i])}, "
                f"got {int(out[name][i])}"
            )
    for name in ("state", "time", "action", "theta", "objective", "history"):
        finite(name, out[name], src)
