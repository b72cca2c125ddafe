"""The deployable SV-Net policy (SOUS VIDE paper 000, Sec. V-VI): checkpoint in, commands out.

``SVPolicy.act(obs)`` takes ``{"image": (N, H, W, 3) uint8, "state": (N, 10) [p, v, q],
"time": (N,) s, "objective": (N, 7)}`` and returns (N, 4) [f_th in [0, 1], W_x, W_y, W_z rad/s].
Of the state it uses only p_z, v and q (``history.observable``): lateral position never reaches
the network (Sec. VI). The time stamps only set the eq. 3 dt of the history window, which the
policy keeps between calls in a :class:`~volary.studies.sousvide.history.HistoryBuffer`
(``reset`` starts it over for all or some envs). Satisfies ``volary.types.Policy``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from volary.device import resolve as resolve_device
from volary.errors import ConfigError
from volary.studies.sousvide.history import ActionWindow, HistoryBuffer, observable
from volary.studies.sousvide.net import OBJECTIVE_SIZE, SVNet, load_checkpoint, save_checkpoint

OBS_KEYS = ("image", "state", "time", "objective")


class SVPolicy:
    """A trained SV-Net in eval mode plus the online eq. 3 history of N envs."""

    def __init__(
        self, net: SVNet, meta: dict[str, Any] | None = None, device: str | torch.device = "cpu"
    ) -> None:
        if not isinstance(net, SVNet):
            raise ConfigError(f"net: expected an SVNet, got {type(net).__name__}")
        self.device = resolve_device(device)
        self.net = net.to(self.device).eval()
        self.meta = dict(meta or {})
        self._buffer: HistoryBuffer | None = None
        self._commands: ActionWindow | None = None

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu") -> SVPolicy:
        """From a checkpoint written by ``train_policy``/``save`` (``weights_only``);
        ``FileFormatError`` for a missing, foreign or truncated file."""
        net, meta = load_checkpoint(path, device)
        return cls(net, meta, device)

    def save(self, path: str | Path) -> Path:
        return save_checkpoint(self.net, path, self.meta)

    @property
    def variant(self) -> str:
        return self.net.variant.name

    @property
    def n_envs(self) -> int | None:
        return None if self._buffer is None else int(self._buffer.entries.shape[0])

    def reset(self, n_envs: int, mask: Tensor | None = None) -> None:
        """Start the history over: for all ``n_envs`` envs (a new buffer when ``mask`` is
        None), or only where the (n_envs,) bool ``mask`` is True."""
        if not isinstance(n_envs, int) or isinstance(n_envs, bool) or n_envs < 1:
            raise ConfigError(f"n_envs: expected an integer >= 1, got {n_envs!r}")
        if mask is None or self._buffer is None or self.n_envs != n_envs:
            if mask is not None and self._buffer is not None:
                raise ConfigError(
                    f"n_envs: a masked reset keeps the {self.n_envs} envs, got n_envs={n_envs}"
                )
            self._buffer = HistoryBuffer(n_envs, self.net.config.window, device=self.device)
            self._commands = (
                ActionWindow(n_envs, self.net.config.window, device=self.device)
                if self.net.config.history_actions
                else None
            )
            return
        m = torch.as_tensor(mask, device=self.device)
        if m.dtype != torch.bool or m.shape != (n_envs,):
            raise ConfigError(
                f"mask: expected a ({n_envs},) bool tensor, got {tuple(m.shape)} {m.dtype}"
            )
        self._buffer.reset(m)
        if self._commands is not None:
            self._commands.reset(m)

    def _check(self, obs: Any) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        if not isinstance(obs, dict) or any(k not in obs for k in OBS_KEYS):
            got = sorted(obs) if isinstance(obs, dict) else type(obs).__name__
            raise ConfigError(f"obs: expected a dict with keys {list(OBS_KEYS)}, got {got}")
        img, state = torch.as_tensor(obs["image"]), torch.as_tensor(obs["state"])
        t, objective = torch.as_tensor(obs["time"]), torch.as_tensor(obs["objective"])
        c = self.net.config
        n = img.shape[0] if img.ndim == 4 else -1
        want_img = (n, c.image_height, c.image_width, 3)
        if img.ndim != 4 or tuple(img.shape) != want_img or img.dtype != torch.uint8:
            raise ConfigError(
                f"obs['image']: expected (N, {c.image_height}, {c.image_width}, 3) uint8 (the "
                f"trained size), got {tuple(img.shape)} {img.dtype}"
            )
        for key, x, shape in (
            ("state", state, (n, 10)),
            ("time", t, (n,)),
            ("objective", objective, (n, OBJECTIVE_SIZE)),
        ):
            if tuple(x.shape) != shape or not x.is_floating_point():
                raise ConfigError(
                    f"obs[{key!r}]: expected float {shape} (N = {n} from the image), "
                    f"got {tuple(x.shape)} {x.dtype}"
                )
        return img, state, t, objective

    @torch.no_grad()
    def act(self, obs: dict[str, Any]) -> Tensor:
        """(N, 4) [f_th clamped to [0, 1], W_x, W_y, W_z rad/s] on the state's device. The
        first call starts the history for N envs when ``reset`` was not called."""
        img, state, t, objective = self._check(obs)
        n = img.shape[0]
        if self._buffer is None:
            self.reset(n)
        buf = self._buffer
        if buf is None or self.n_envs != n:
            raise ConfigError(
                f"obs: {n} envs but the history holds {self.n_envs}; call reset({n}) first"
            )
        dev, f32 = self.device, torch.float32
        o = observable(state.to(dev, f32))  # [p_z, v, q]: no lateral position
        window = buf.push(t.to(dev, f32), o)
        if self._commands is not None:  # entries carry the commands sent (history_actions)
            window = torch.cat((window, self._commands.push()), dim=-1)
        y = self.net(img.to(dev), o, objective.to(dev, f32), window)
        u = self.net.denormalize_action(y)
        u = torch.cat((u[:, :1].clamp(0.0, 1.0), u[:, 1:]), dim=-1)
        if self._commands is not None:
            self._commands.record(u)
        return u.to(state.device)


__all__ = ["OBS_KEYS", "SVPolicy"]
