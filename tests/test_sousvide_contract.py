"""The SOUS VIDE data contract: eq. 3 history windows and the resumable HDF5 layout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from volary.errors import ConfigError, FileFormatError
from volary.math.quaternion import quat_mul
from volary.studies.sousvide import dataset as ds
from volary.studies.sousvide.history import (
    ActionWindow,
    HistoryBuffer,
    action_windows,
    history_entry,
    history_windows,
    observable,
)


def _rollout(k: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    state = torch.randn(k, 10, generator=g, dtype=torch.float64)
    state[:, 6:] /= state[:, 6:].norm(dim=-1, keepdim=True)
    return torch.arange(k, dtype=torch.float64) * 0.05, observable(state)


def test_eq3_entry_backs_out_position_from_velocity_and_relative_attitude() -> None:
    t, obs = _rollout(2)
    e = history_entry(t[0], t[1], obs[0], obs[1])
    assert e[0] == pytest.approx(0.05)
    torch.testing.assert_close(e[1:4], 0.05 * obs[1, 1:4])
    torch.testing.assert_close(e[4:7], obs[1, 1:4] - obs[0, 1:4])
    # dq rotates the attitude at k-1 into the one at k: q^k (x) dq = q^{k-1}
    torch.testing.assert_close(quat_mul(obs[1, 4:8], e[7:11]), obs[0, 4:8])


def test_online_buffer_matches_offline_windows_and_pads_the_start() -> None:
    t, obs = _rollout(9)
    offline = history_windows(t, obs, 4)
    buf = HistoryBuffer(1, 4, dtype=torch.float64)
    for k in range(9):
        torch.testing.assert_close(buf.push(t[k : k + 1], obs[k : k + 1])[0], offline[k])
    assert (offline[0, :, 0] == 0).all() and (offline[0, :, 7] == 1).all()
    assert offline[5, :, 0] == pytest.approx(0.05)
    buf.reset()
    assert (buf.push(t[:1], obs[:1])[0] == offline[0]).all()


def test_command_windows_online_equal_offline_and_pair_each_entry_with_its_command() -> None:
    u = torch.arange(24, dtype=torch.float32).reshape(6, 4)
    offline = action_windows(u, 3)
    assert (offline[0] == 0).all() and (offline[1, -1] == u[0]).all()
    assert torch.equal(offline[4], u[1:4])  # entries ending at 2, 3, 4 carry u1, u2, u3
    win = ActionWindow(1, 3)
    for k in range(6):
        assert torch.equal(win.push()[0], offline[k])
        win.record(u[k : k + 1])
    win.reset()
    assert (win.push() == 0).all()


def _units(b: int, steps: int) -> dict[str, np.ndarray]:
    return {
        "images": np.full((b, steps, 4, 6, 3), 7, np.uint8),
        "state": np.ones((b, steps, 10)),
        "time": np.zeros((b, steps)),
        "action": np.zeros((b, steps, 4)),
        "theta": np.zeros((b, steps, 2)),
        "objective": np.zeros((b, steps, 7)),
        "history": np.zeros((b, steps, 3, 11)),
        "valid": np.ones((b, steps), bool),
    }


def test_dataset_resumes_by_unit_and_drops_invalid_rows(tmp_path) -> None:
    p = tmp_path / "d.h5"
    ds.create(p, {"seed": 0}, units=3, steps=5, height=4, width=6, window=3)
    data = _units(2, 5)
    data["valid"][1, 3:] = False
    ds.write_units(p, np.array([0, 2]), data)
    assert ds.pending_units(p).tolist() == [1]
    ds.create(p, {"seed": 0}, units=3, steps=5, height=4, width=6, window=3)  # resume: reuse
    a = ds.read(p)
    assert len(a) == 8 and a.unit.tolist() == [0] * 5 + [2] * 3
    assert a.images is not None and a.images.shape == (8, 4, 6, 3)
    with pytest.raises(ConfigError, match="another config"):
        ds.create(p, {"seed": 1}, units=3, steps=5, height=4, width=6, window=3)


def test_dataset_rejects_foreign_files_and_empty_datasets(tmp_path) -> None:
    bad = tmp_path / "x.h5"
    bad.write_bytes(b"not hdf5")
    with pytest.raises(FileFormatError, match="x.h5"):
        ds.read(bad)
    p = ds.create(tmp_path / "e.h5", {}, units=1, steps=2, height=2, width=2, window=1)
    with pytest.raises(ConfigError, match="no finished rollout"):
        ds.read(p)
