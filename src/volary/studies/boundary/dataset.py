"""The BoundaryPredictor dataset: Algorithm 1 over (a subset of) the Table II grid, on disk.

HDF5 (DESIGN.md "data at rest"): chunked datasets, one row per input E_i, the generating config
as JSON in the root attribute ``config`` (grid spec, sampling config, seed, fraction), and a
``done`` flag per row so a killed run resumes where it stopped (blocks of ``block`` inputs are
written and flushed as they finish). Loading reads plain arrays: nothing is unpickled.

| dataset | shape | what |
| --- | --- | --- |
| ``grid_index`` | (K,) int64 | flat index into the Table II grid |
| ``inputs`` | (K, 8) float64 | E_i (eq. 6) |
| ``speed``, ``t0`` | (K,) float64 | the label (v_i, t_0) of the cheapest candidate; NaN if none |
| ``cost_min`` | (K,) float64 | its eq. 7 cost (inf if no candidate passed eq. 3) |
| ``cost`` | (K, 70) float32 | eq. 7 per candidate (inf: rejected by eq. 3; NaN: pruned) |
| ``crashed``, ``skipped`` | (K, 70) int8 | N_crash, N_skipped per candidate (-1: not flown) |
| ``tracking`` | (K, 70) float32 | E_tracking per candidate, m (NaN: not flown) |
| ``done`` | (K,) bool | row computed |
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import h5py
import numpy as np
import torch
from pydantic import Field
from torch import Tensor

from volary.errors import ConfigError, FileFormatError
from volary.inputs import Finite, Integer, Strict, Text, validated
from volary.learning.files import array, attributes, finite, open_h5, read, within_budget
from volary.studies.boundary.flight import CandidateFlyer, FlightBatch, FlightOutcome
from volary.studies.boundary.grid import N_FIELDS, TABLE_II, grid_inputs, subset_indices
from volary.studies.boundary.sampling import (
    N_CANDIDATES,
    W_CRASH,
    SamplingConfig,
    Window,
    candidate_coefficients,
    candidates,
    satisfies_acceleration_limit,
    select_optimal,
    trajectory_cost,
    window,
)

FORMAT = "volary.bp.dataset/1"
ROW_FIELDS = ("speed", "t0", "cost_min")
_EQ3_PART = 2048  # inputs per eq. 3 check (its float32 samples take ~70 MB per 1000 inputs)
CAND_FIELDS = ("cost", "crashed", "skipped", "tracking")


@dataclass(frozen=True)
class Labels:
    """Algorithm 1's result for K inputs."""

    speed: Tensor  # (K,) m/s
    t0: Tensor  # (K,) s
    cost_min: Tensor  # (K,)
    cost: Tensor  # (K, 70)
    crashed: Tensor  # (K, 70) int8, -1 not flown
    skipped: Tensor  # (K, 70) int8, -1 not flown
    tracking: Tensor  # (K, 70) m, NaN not flown
    flown: int  # candidates simulated


def label_inputs(
    e: Tensor, grid_index: Tensor, flyer: CandidateFlyer, cfg: SamplingConfig
) -> Labels:
    """Algorithm 1 for inputs ``e (K, 8)``: eq. 3 filter, batched flights, eq. 7 costs, argmin.

    With ``cfg.prune`` the flights go in two rounds: first the ``cfg.first_round`` eq.
    3-feasible candidates of smallest t_0 per input, then every other feasible candidate whose
    t_0 is below its input's cheapest cost after the first round. Every term of eq. 7 is >= 0
    and T = t_0, so C >= t_0: a candidate left out cannot be cheaper than the minimum found, and
    the argmin is Algorithm 1's (candidates not flown get a NaN cost). Without pruning every
    feasible candidate is flown. Candidate ids (randomization streams) are grid_index * 70 + j,
    so a candidate's flight does not depend on the batch or the round."""
    cand = candidates(e)
    coeffs, dur = candidate_coefficients(e, cand)
    ok = torch.zeros(cand.t0.shape, dtype=torch.bool)  # (K, 70) eq. 3, in bounded-memory parts
    for s in range(0, e.shape[0], _EQ3_PART):
        part = slice(s, s + _EQ3_PART)
        ok[part] = satisfies_acceleration_limit(coeffs[part], dur[part], cfg.accel_samples)
    res = _Results.create(e.shape[0])
    flights = _Flights(coeffs, dur, window(e), grid_index.to(torch.int64), cfg)
    if cfg.prune:
        rank = torch.where(ok, cand.t0, math.inf).argsort(dim=1).argsort(dim=1)
        first = ok & (rank < cfg.first_round)
        res.add(first, flights.fly(first, flyer), cand.t0)
        best = res.cost.amin(1, keepdim=True)  # inf where nothing was flown
        rest = ok & ~first & (cand.t0 < best)
        res.add(rest, flights.fly(rest, flyer), cand.t0)
        res.cost = torch.where(ok & ~res.flown, math.nan, res.cost)
    else:
        res.add(ok, flights.fly(ok, flyer), cand.t0)
    v, t, cmin = select_optimal(res.cost, cand)
    return Labels(
        v, t, cmin, res.cost.float(), res.crashed, res.skipped, res.tracking,
        int(res.flown.sum()),
    )  # fmt: skip


@dataclass
class _Results:
    """Per-candidate results filled round by round."""

    cost: Tensor  # (K, 70) inf until flown
    crashed: Tensor
    skipped: Tensor
    tracking: Tensor
    flown: Tensor

    @staticmethod
    def create(k: int) -> _Results:
        shape = (k, N_CANDIDATES)
        return _Results(
            torch.full(shape, math.inf, dtype=torch.float64),
            torch.full(shape, -1, dtype=torch.int8),
            torch.full(shape, -1, dtype=torch.int8),
            torch.full(shape, math.nan, dtype=torch.float32),
            torch.zeros(shape, dtype=torch.bool),
        )

    def add(self, mask: Tensor, out: FlightOutcome, t0: Tensor) -> None:
        cost = trajectory_cost(
            out.crashed.double(), out.skipped.double(), out.tracking.double(), t0[mask]
        )
        self.cost[mask] = cost
        self.crashed[mask] = out.crashed.to(torch.int8)
        self.skipped[mask] = out.skipped.to(torch.int8)
        self.tracking[mask] = out.tracking.float()
        self.flown |= mask


@dataclass(frozen=True)
class _Flights:
    """Builds the flight batch of any mask of candidates."""

    coeffs: Tensor  # (K, 70, 2, 3, 8)
    dur: Tensor  # (K, 70, 2)
    win: Window
    grid_index: Tensor  # (K,)
    cfg: SamplingConfig

    def fly(self, mask: Tensor, flyer: CandidateFlyer) -> FlightOutcome:
        sel = mask.reshape(-1).nonzero()[:, 0]
        if sel.numel() == 0:
            z = torch.zeros(0)
            return FlightOutcome(z.bool(), z.long(), z.float())
        row, j = sel // N_CANDIDATES, sel % N_CANDIDATES
        batch = FlightBatch(
            self.coeffs.reshape(-1, 2, 3, 8)[sel], self.dur.reshape(-1, 2)[sel],
            self.win.headings[row], self.win.centres[row], self.grid_index[row] * N_CANDIDATES + j,
        )  # fmt: skip
        return flyer.fly(batch)


# ---- file ------------------------------------------------------------------------------------
def _config_doc(cfg: SamplingConfig, seed: int, fraction: float, n: int) -> dict:
    return {
        "format": FORMAT,
        "paper": "BoundaryPredictor (paper 002) Algorithm 1, eq. 3-7, Tables I-II",
        "grid": TABLE_II.to_dict(),
        "grid_size": TABLE_II.size,
        "fraction": fraction,
        "seed": seed,
        "n_inputs": n,
        "sampling": cfg.to_dict(),
    }


EXECUTION_FIELDS = ("chunk", "min_chunk", "bucket_ratio", "compile")  # do not change labels


def _labelling(doc: dict) -> dict:
    """``doc`` without the sampling fields that only decide how flights are batched."""
    sampling = {k: v for k, v in doc.get("sampling", {}).items() if k not in EXECUTION_FIELDS}
    return {**doc, "sampling": sampling}


def _create(path: Path, idx: np.ndarray, doc: dict) -> None:
    k = len(idx)
    with h5py.File(path, "w") as f:
        f.attrs["config"] = json.dumps(doc)
        f.attrs["format"] = FORMAT
        ch = (min(k, 4096),)
        f.create_dataset("grid_index", data=idx.astype(np.int64), chunks=ch)
        f.create_dataset("inputs", data=grid_inputs(idx).numpy(), chunks=(ch[0], 8))
        for name in ROW_FIELDS:
            f.create_dataset(name, data=np.full(k, np.nan), chunks=ch)
        cc = (ch[0], N_CANDIDATES)
        f.create_dataset("cost", data=np.full((k, N_CANDIDATES), np.inf, np.float32), chunks=cc)
        for name in ("crashed", "skipped"):
            f.create_dataset(name, data=np.full((k, N_CANDIDATES), -1, np.int8), chunks=cc)
        f.create_dataset("tracking", data=np.full((k, N_CANDIDATES), np.nan, np.float32), chunks=cc)
        f.create_dataset("done", data=np.zeros(k, bool), chunks=ch)


def generate_dataset(
    out: str | Path,
    *,
    fraction: float = 1.0,
    seed: int = 0,
    config: SamplingConfig | None = None,
    block: int = 8192,
    resume: bool = True,
    device: str = "cpu",
    progress: Callable[[int, int, float], None] | None = None,
) -> Path:
    """Write (or finish) the dataset for a random ``fraction`` of the Table II grid (chosen by
    ``seed``, which also seeds the Table I randomization) to the HDF5 file ``out``.

    An existing file with the same config is resumed (its finished rows are kept); a different
    config raises ConfigError unless ``resume=False`` (then it is overwritten). ``progress`` is
    called with (rows done, rows total, candidates flown per second) after each block. The
    flights run on ``device`` (the labels do not depend on it beyond float32 rounding)."""
    cfg = config or SamplingConfig()
    if not isinstance(block, int) or block < 1:
        raise ConfigError(f"block: expected an input count >= 1, got {block!r}")
    idx = subset_indices(fraction, seed)
    doc = _config_doc(cfg, seed, fraction, len(idx))
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and resume:
        old = read_config(path)
        if _labelling(old) != _labelling(json.loads(json.dumps(doc))):
            raise ConfigError(
                f"out: {path} holds a dataset of another config; pass resume=False to "
                "overwrite it or choose another path"
            )
    else:
        _create(path, idx, doc)
    flyer = CandidateFlyer(cfg, seed=seed, device=device)
    with h5py.File(path, "r+") as f:
        done = f["done"][:]
        todo = np.flatnonzero(~done)
        for s in range(0, len(todo), block):
            rows = todo[s : s + block]
            t = time.perf_counter()
            lab = label_inputs(
                torch.as_tensor(f["inputs"][rows[0] : rows[-1] + 1][rows - rows[0]]),
                torch.as_tensor(idx[rows]),
                flyer,
                cfg,
            )
            _write(f, rows, lab)
            f.flush()
            if progress is not None:
                progress(int(f["done"][:].sum()), len(idx), lab.flown / (time.perf_counter() - t))
    return path


def _write(f: h5py.File, rows: np.ndarray, lab: Labels) -> None:
    for name in ROW_FIELDS + CAND_FIELDS:
        f[name][rows] = getattr(lab, name).numpy()
    f["done"][rows] = True


class _Attributes(Strict):
    """The file's root attributes (the config as JSON text)."""

    format: Literal["volary.bp.dataset/1"]
    config: Text


class _Config(Strict):
    """The generating config :func:`generate_dataset` stores (``_config_doc``)."""

    format: Literal["volary.bp.dataset/1"]
    paper: Text
    grid: dict[Text, tuple[Finite, Finite, Integer]]
    grid_size: Annotated[int, Field(strict=True, ge=1, le=TABLE_II.size)]
    fraction: Annotated[float, Field(strict=True, gt=0, le=1, allow_inf_nan=False)]
    seed: Annotated[int, Field(strict=True, ge=0)]
    n_inputs: Annotated[int, Field(strict=True, ge=1, le=TABLE_II.size)]
    sampling: dict[Text, Any]


def _read_config(f: h5py.File, source: str) -> dict:
    attrs = attributes(f, _Attributes, source)
    try:
        doc = json.loads(attrs.config)
    except (ValueError, RecursionError) as err:
        raise FileFormatError(f"{source}: attribute 'config': expected JSON ({err})") from None
    validated(_Config, doc, f"{source}: attribute 'config'")
    return doc


def read_config(path: str | Path) -> dict:
    """The generating config stored in a dataset file (checked against the layout
    :func:`generate_dataset` writes; ``FileFormatError`` naming the file otherwise)."""
    with open_h5(path, "BoundaryPredictor dataset") as f:
        return _read_config(f, str(path))


@dataclass(frozen=True)
class BPDataset:
    """A loaded dataset (finished rows only), NumPy arrays."""

    grid_index: np.ndarray  # (K,)
    inputs: np.ndarray  # (K, 8)
    speed: np.ndarray  # (K,) m/s label
    t0: np.ndarray  # (K,) s label
    cost_min: np.ndarray  # (K,)
    cost: np.ndarray  # (K, 70)
    config: dict

    def labelled(self, drop_crashed: bool = False) -> BPDataset:
        """Rows with a label (some candidate passed eq. 3); with ``drop_crashed`` also without
        the rows whose cheapest candidate crashed (every feasible candidate crashed: C_min >=
        1e6, eq. 7), whose label is no demonstration of a good trajectory."""
        ok = np.isfinite(self.speed) & np.isfinite(self.t0)
        if drop_crashed:
            ok &= self.cost_min < W_CRASH
        return replace(self, **{k: getattr(self, k)[ok] for k in _ARRAYS})


_ARRAYS = ("grid_index", "inputs", "speed", "t0", "cost_min", "cost")


# the arrays load_dataset reads: per-row shape and dtype (the table in the module docstring)
_LAYOUT: dict[str, tuple[tuple[int, ...], Any]] = {
    "grid_index": ((), np.int64),
    "inputs": ((N_FIELDS,), np.float64),
    "speed": ((), np.float64),
    "t0": ((), np.float64),
    "cost_min": ((), np.float64),
    "cost": ((N_CANDIDATES,), np.float32),
    "done": ((), np.bool_),
}


def load_dataset(path: str | Path) -> BPDataset:
    """Read the finished rows of a dataset file (plain HDF5 arrays; no pickle). Before any
    array is read, the file is checked against the declared layout: its config, every array's
    shape (``n_inputs`` rows) and dtype, the bytes to load; then the rows' values (grid indices
    of Table II, finite inputs, labels finite or NaN). ``FileFormatError`` in one line naming
    the file and the array otherwise."""
    src = str(path)
    with open_h5(path, "BoundaryPredictor dataset") as f:
        cfg = _read_config(f, src)
        k = int(cfg["n_inputs"])
        ds = {n: array(f, n, (k, *row), dt, src) for n, (row, dt) in _LAYOUT.items()}
        within_budget(ds.values(), src)
        done = read(ds.pop("done"), src)
        arrays = {n: read(d, src)[done] for n, d in ds.items()}
    _check_values(arrays, src)
    return BPDataset(**arrays, config=cfg)


def _check_values(a: dict[str, np.ndarray], src: str) -> None:
    """The finished rows' values: what Algorithm 1 can have written."""
    bad = (a["grid_index"] < 0) | (a["grid_index"] >= TABLE_II.size)
    if bad.any():
        row = int(np.argmax(bad))
        raise FileFormatError(
            f"{src}: grid_index: row {row}: expected an index in [0, {TABLE_II.size}), "
            f"got {a['grid_index'][row]}"
        )
    finite("inputs", a["inputs"], src)
    for name in ("speed", "t0"):  # NaN: no candidate passed eq. 3
        finite(name, a[name], src, allow_nan=True)
    if (a["cost_min"] < 0).any() or np.isnan(a["cost_min"]).any():
        raise FileFormatError(f"{src}: cost_min: expected costs >= 0 (inf: no candidate)")


def summarize(data: BPDataset) -> dict:
    """Counts and label distributions of a loaded dataset (JSON-ready)."""
    cost, n = data.cost, len(data.grid_index)
    flown = np.isfinite(cost)
    ok = np.isfinite(data.speed) & (data.cost_min < W_CRASH)
    speeds, counts = np.unique(np.round(data.speed[ok], 4), return_counts=True)
    t0 = data.t0[ok]
    return {
        "inputs": n,
        "no_feasible_candidate": int(np.isnan(data.speed).sum()),
        "every_flown_candidate_crashed": int((np.isfinite(data.speed) & ~ok).sum()),
        "labelled_without_crash": int(ok.sum()),
        "eq3_feasible_per_input": float((~np.isinf(cost)).sum() / max(n, 1)),
        "flown_per_input": float(flown.sum() / max(n, 1)),
        "crashed_share_of_flown": float((cost[flown] >= W_CRASH).mean()) if flown.any() else None,
        "label_speed_counts": {f"{v:g}": int(c) for v, c in zip(speeds, counts, strict=True)},
        "label_t0_quantiles_s": {
            q: float(np.quantile(t0, float(q))) if t0.size else None
            for q in ("0", "0.05", "0.5", "0.95", "1")
        },
        "label_t0_above_2s_share": float((t0 > 2.0).mean()) if t0.size else None,
    }


__all__ = [
    "FORMAT",
    "BPDataset",
    "Labels",
    "generate_dataset",
    "label_inputs",
    "load_dataset",
    "read_config",
    "summarize",
]
