"""The history transform of SOUS VIDE eq. 3 and the observable state SV-Net sees.

The policy never observes lateral position (paper Sec. VI): its observable state is
``[p_z, v (3), q (4)]`` (eq. 3 uses velocity to back out position changes). One history entry
between steps k-1 and k is

    dt^{k-1} = t^k - t^{k-1}
    dp^{k-1} = dt^{k-1} v^k
    dv^{k-1} = v^k - v^{k-1}
    dq^{k-1} = q_WB^k (x) q_BW^{k-1}

With volary's body-to-world quaternions ``q`` (= q_BW in the paper's subscripts read as "B in
W"), q_WB^k is conj(q^k), so dq is the rotation from the attitude at k-1 to the one at k,
expressed in the body frame at k; it is the identity [1, 0, 0, 0] when the attitude holds.
A window holds the T most recent entries, oldest first. Before a rollout has T+1 samples the
window is left-padded with the *empty entry* ``[0, 0,0,0, 0,0,0, 1,0,0,0]`` (dt = 0 marks it).

Optional (not in eq. 3; RMA's original state-action history, and the quantity eq. 5 divides
by): each entry ending at k may carry the command u^{k-1} = [f_th, W] applied from k-1 to k,
zero for padding and for the first entry (:func:`action_windows`, :class:`ActionWindow`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.math.quaternion import quat_conj, quat_mul

OBS_SIZE = 8  # [p_z, v_x, v_y, v_z, q_w, q_x, q_y, q_z]
ENTRY_SIZE = 11  # [dt, dp (3), dv (3), dq (4)]
ACTION_ENTRY = 4  # [f_th, W (3)] appended per entry when the history carries commands


def observable(state: Tensor) -> Tensor:
    """(..., 10) full state [p, v, q] -> (..., 8) observable [p_z, v, q]."""
    if state.shape[-1] != 10:
        raise ConfigError(f"state: expected last dim 10 ([p, v, q]), got {tuple(state.shape)}")
    return torch.cat((state[..., 2:3], state[..., 3:10]), dim=-1)


def empty_entry(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Tensor:
    """(*shape, 11) padding entries: zeros with an identity quaternion."""
    e = torch.zeros(*shape, ENTRY_SIZE, dtype=dtype, device=device)
    e[..., 7] = 1.0
    return e


def history_entry(t_prev: Tensor, t: Tensor, obs_prev: Tensor, obs: Tensor) -> Tensor:
    """Eq. 3: one (..., 11) entry from two consecutive observations (..., 8) at times (...)."""
    dt = (t - t_prev)[..., None]
    v, v_prev = obs[..., 1:4], obs_prev[..., 1:4]
    dq = quat_mul(quat_conj(obs[..., 4:8]), obs_prev[..., 4:8])
    return torch.cat((dt, dt * v, v - v_prev, dq), dim=-1)


def history_windows(t: Tensor, obs: Tensor, window: int) -> Tensor:
    """All eq. 3 windows of one rollout: t (K,), obs (K, 8) -> (K, window, 11).

    Row k holds the entries (k-window, k-window+1), ..., (k-1, k), oldest first, left-padded
    with the empty entry where the rollout has not started yet (row 0 is all padding).
    """
    if window < 1:
        raise ConfigError(f"window: expected >= 1, got {window}")
    k = t.shape[0]
    entries = history_entry(t[:-1], t[1:], obs[:-1], obs[1:])  # (K-1, 11), entry j ends at j+1
    pad = empty_entry((window,), obs.dtype, obs.device)
    padded = torch.cat((pad, entries), dim=0)  # padded[window + j] = entry ending at j+1
    return _rows(padded, k, window)  # row k: entries ending at k-window+1 .. k


def _rows(padded: Tensor, k: int, window: int) -> Tensor:
    """(k, window, ...) sliding rows of a front-padded sequence: row i = padded[i .. i+window-1]."""
    dev = padded.device
    return padded[torch.arange(k, device=dev)[:, None] + torch.arange(window, device=dev)]


class _OnlineWindow:
    """What the online windows share: ``window`` entries for each of N envs, rolled by one
    each step once an env has started (an env's first step only starts it)."""

    entries: Tensor  # (N, window, E)

    def __init__(
        self,
        n_envs: int,
        window: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        if n_envs < 1 or window < 1:
            raise ConfigError(f"n_envs, window: expected >= 1, got {n_envs}, {window}")
        self.window = window
        self._started = torch.zeros(n_envs, dtype=torch.bool, device=device)
        self._make(n_envs, dtype, torch.device(device))

    def _make(self, n_envs: int, dtype: torch.dtype, device: torch.device) -> None:
        raise NotImplementedError

    def _mask(self, mask: Tensor | None) -> Tensor:
        return torch.ones_like(self._started) if mask is None else mask.to(self._started.device)

    def _roll(self, new: Tensor) -> Tensor:
        """Append ``new`` (N, E) to the started envs' windows; start every env."""
        rolled = torch.cat((self.entries[:, 1:], new[:, None]), dim=1)
        self.entries = torch.where(self._started[:, None, None], rolled, self.entries)
        self._started = torch.ones_like(self._started)
        return self.entries


class HistoryBuffer(_OnlineWindow):
    """Online eq. 3 window for N envs (what a deployed policy keeps between calls)."""

    def _make(self, n_envs: int, dtype: torch.dtype, device: torch.device) -> None:
        self.entries = empty_entry((n_envs, self.window), dtype, device)
        self._t = torch.zeros(n_envs, dtype=dtype, device=device)
        self._obs = torch.zeros(n_envs, OBS_SIZE, dtype=dtype, device=device)

    def reset(self, mask: Tensor | None = None) -> None:
        """Forget the history of the envs where ``mask`` (N,) is True (all if None)."""
        m = self._mask(mask)
        self.entries[m] = empty_entry((self.window,), self.entries.dtype, self.entries.device)
        self._started[m] = False

    def push(self, t: Tensor, obs: Tensor) -> Tensor:
        """Record the observation (N, 8) at time (N,); return the (N, window, 11) window."""
        new = history_entry(self._t, t, self._obs, obs)
        new = torch.where(
            self._started[:, None], new, empty_entry(new.shape[:-1], new.dtype, new.device)
        )
        self._t, self._obs = t.clone(), obs.clone()
        return self._roll(new)


def action_windows(action: Tensor, window: int) -> Tensor:
    """Commands per window entry for one rollout: action (K, 4) -> (K, window, 4).

    Row k pairs the entries ending at k-window+1 .. k with u^(k-window) .. u^(k-1), the command
    applied over each entry's interval; indices before the rollout's start are zero.
    """
    if window < 1:
        raise ConfigError(f"window: expected >= 1, got {window}")
    k = action.shape[0]
    padded = torch.cat((action.new_zeros(window, action.shape[-1]), action), dim=0)
    return _rows(padded, k, window)  # row k: u^(k-window) .. u^(k-1)


class ActionWindow(_OnlineWindow):
    """Online twin of :func:`action_windows` for N envs: ``push()`` before each decision,
    ``record(u)`` with the command then sent."""

    def _make(self, n_envs: int, dtype: torch.dtype, device: torch.device) -> None:
        self.entries = torch.zeros(n_envs, self.window, ACTION_ENTRY, dtype=dtype, device=device)
        self._last = torch.zeros(n_envs, ACTION_ENTRY, dtype=dtype, device=device)

    def reset(self, mask: Tensor | None = None) -> None:
        m = self._mask(mask)
        self.entries[m] = 0.0
        self._last[m] = 0.0
        self._started[m] = False

    def push(self) -> Tensor:
        """Append the last recorded command (envs past their first step); (N, window, 4)."""
        return self._roll(self._last)

    def record(self, u: Tensor) -> None:
        self._last = u.to(self._last).clone()
