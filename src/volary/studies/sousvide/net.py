"""SV-Net (SOUS VIDE paper 000, Sec. V, Fig. 3) with rapid motor adaptation, its Table I
ablations, input normalization and checkpoints.

Three parts (Fig. 3):

- *Pose-aware feature extractor*: SqueezeNet 1.1 (written here from the architecture of
  Iandola et al. 2016 / the 1.1 layer plan, no torchvision) over the normalized RGB image, a 1x1
  conv head to ``image_features`` channels and global average pooling, concatenated with the
  normalized height and attitude [p_z, q] and fused by an MLP.
- *History network* (RMA, Sec. V): an MLP over the flattened, normalized eq. 3 window
  (T x 11; T x 15 with ``NetConfig.history_actions``, each entry then carrying u^(k-1)) whose
  output layer regresses the normalized dynamics parameters theta = [k_th, m]; the
  activations of its second-to-last layer are the *latent* (:meth:`SVNet.latent`).
- *Command network*: an MLP over [features, history context, observable state (8),
  objective (7)] that outputs the normalized action [f_th, W_x, W_y, W_z].

The history context depends on the Table I variant (:data:`VARIANTS`): the latent (``svnet``,
``no_pretrain``), the explicit theta estimate (``no_latent``) or nothing (``no_rma``).

Every input is normalized inside the model with training-set statistics kept as buffers
(:class:`NormStats`), so a checkpoint is self-contained. Layer sizes are not given in the paper;
the defaults of :class:`ArchConfig` are this implementation's choice.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import Tensor, nn

from volary.errors import ConfigError
from volary.inputs import Flag, Strict, Text, validated
from volary.learning.checkpoint import (
    CheckpointKind,
    read_checkpoint,
    state_on_cpu,
    write_checkpoint,
)
from volary.learning.files import build_network
from volary.registry import Registry
from volary.studies.sousvide.history import ACTION_ENTRY, ENTRY_SIZE, OBS_SIZE

OBJECTIVE_SIZE = 7  # first waypoint (3), last waypoint (3), total time (s)
THETA_SIZE = 2  # [k_th (N), m (kg)]
ACTION_SIZE = 4  # [f_th in [0, 1], W_x, W_y, W_z (rad/s)]
MIN_IMAGE_SIZE = 32  # SqueezeNet 1.1's three stride-2 pools leave >= 1 x 1 from 32 px up
IMAGE_NORMS = ("dataset", "per_image")  # ArchConfig.image_norm
IMAGE_NORM_EPS = 1e-3  # per_image: floor of an image's per-channel std (pixels in [0, 1])
# version 1, "volary.sousvide.svnet/1", is the legacy layout (same fields, a string tag)
CHECKPOINT_KIND = CheckpointKind(
    name="sousvide.svnet",
    title="SV-Net checkpoint",
    fields=("net_config", "state_dict"),
    version=2,
    legacy_format="volary.sousvide.svnet/1",
)
CHECKPOINT_FORMAT = CHECKPOINT_KIND.tag


# ---- variants (Table I) -------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    """One row of Table I: which history context the command network sees and how it trains."""

    name: str
    context: str  # "latent" | "theta" | "none": what the history net feeds the command net
    pretrain: bool  # stage 1 (history net regresses theta) runs
    freeze_history: bool  # the history net is frozen during stage 2 (imitation)
    description: str


_VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant(
            "svnet",
            "latent",
            True,
            True,
            "pre-trained, frozen history net; its second-to-last layer feeds the command net",
        ),
        Variant("no_rma", "none", False, False, "feature extractor and command net only"),
        Variant(
            "no_pretrain",
            "latent",
            False,
            False,
            "no stage 1; the history net trains end to end with the rest",
        ),
        Variant(
            "no_latent",
            "theta",
            True,
            True,
            "pre-trained, frozen history net; its explicit theta estimate feeds the command net",
        ),
    )
}
VARIANTS: Registry[Variant] = Registry("SV-Net variant", _VARIANTS)


def get_variant(name: str) -> Variant:
    """The Table I variant called ``name``; ``UnknownNameError`` lists the valid ones."""
    return VARIANTS.get(name)


# ---- configs ----------------------------------------------------------------------------------
def _positive_ints(name: str, v: Any) -> tuple[int, ...]:
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if not t or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in t):
        raise ConfigError(f"{name}: expected positive integer(s), got {v!r}")
    return t


def _positive_int(name: str, v: Any) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ConfigError(f"{name}: expected an integer >= 1, got {v!r}")


@dataclass(frozen=True)
class ArchConfig:
    """Layer sizes (not in the paper; chosen here). ``cnn_width`` scales every SqueezeNet
    channel count (conv1, squeeze and expand layers) by the factor, at least 4 channels each:
    0.5 has about a quarter of the parameters and multiply-adds of the full 1.1 network.

    ``image_norm`` (Fig. 4's "scaled and normalized"): ``"per_image"`` (the default for new
    nets) standardizes each image by its own per-channel mean and std over pixels, computed in
    the forward pass (std floored at :data:`IMAGE_NORM_EPS`), so a global brightness change
    ``rgb * a`` leaves the network's input unchanged (the dataset image statistics are then
    stored but unused); ``"dataset"`` standardizes each RGB channel with the training set's
    mean and std (the ``image_mean`` / ``image_std`` buffers). A serialized arch without the
    key (a checkpoint from before the option) loads as ``"dataset"``, what it was trained with.
    Chosen from ``experiments/sousvide/ablation/results/image-norm/`` (DESIGN.md)."""

    cnn_width: float = 1.0
    image_features: int = 128  # channels of the 1x1 conv head before global average pooling
    feature_hidden: tuple[int, ...] = (128,)  # fusion MLP of [image features, p_z, q]
    features: int = 64  # pose-aware feature size
    history_hidden: tuple[int, ...] = (128, 64)  # the last is the latent size
    command_hidden: tuple[int, ...] = (256, 128)
    image_norm: str = "per_image"  # "per_image" | "dataset" (IMAGE_NORMS)

    def __post_init__(self) -> None:
        if self.image_norm not in IMAGE_NORMS:
            raise ConfigError(
                f"image_norm: expected one of {', '.join(map(repr, IMAGE_NORMS))}, "
                f"got {self.image_norm!r}"
            )
        if not (isinstance(self.cnn_width, (int, float)) and 0 < self.cnn_width <= 4):
            raise ConfigError(f"cnn_width: expected a factor in (0, 4], got {self.cnn_width!r}")
        for name in ("image_features", "features"):
            _positive_int(name, getattr(self, name))
        for name in ("feature_hidden", "history_hidden", "command_hidden"):
            object.__setattr__(self, name, _positive_ints(name, getattr(self, name)))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ArchConfig:
        """From :meth:`NetConfig.to_dict`'s ``arch``; no ``image_norm`` (written before the
        option existed) means the dataset statistics those nets were trained with."""
        return cls(**{"image_norm": "dataset", **d})


@dataclass(frozen=True)
class NetConfig:
    """Everything needed to rebuild an SV-Net: variant, eq. 3 window T, image size, layers."""

    variant: str = "svnet"
    window: int = 10  # T: eq. 3 entries per history window
    image_height: int = 64
    image_width: int = 64
    arch: ArchConfig = field(default_factory=ArchConfig)
    history_actions: bool = False  # entries carry u^(k-1) (RMA-style; not in eq. 3)

    def __post_init__(self) -> None:
        get_variant(self.variant)
        _positive_int("window", self.window)
        if not isinstance(self.history_actions, bool):
            raise ConfigError(f"history_actions: expected a bool, got {self.history_actions!r}")
        for name in ("image_height", "image_width"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < MIN_IMAGE_SIZE:
                raise ConfigError(f"{name}: expected an int >= {MIN_IMAGE_SIZE} px, got {v!r}")

    @property
    def entry_size(self) -> int:
        """Fields per history entry: eq. 3's 11, plus the command when ``history_actions``."""
        return ENTRY_SIZE + (ACTION_ENTRY if self.history_actions else 0)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["arch"] = {k: list(v) if isinstance(v, tuple) else v for k, v in d["arch"].items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NetConfig:
        """From :meth:`to_dict`'s dict (a checkpoint's ``net_config``): its types, keys and
        sizes checked against a declared model first, so a wrong one is one ``ConfigError``
        line naming the field (``arch.features: ...``), never a TypeError."""
        doc = validated(_NetConfigDoc, d, "net_config", ConfigError)
        out = doc.model_dump(exclude_unset=True)
        out["arch"] = ArchConfig.from_dict(out.get("arch", {}))
        return cls(**out)


Units = Annotated[int, Field(strict=True, ge=1, le=2**16)]
Layers = Annotated[tuple[Units, ...], Field(min_length=1, max_length=64)]


class _ArchDoc(Strict):
    """:class:`ArchConfig` as stored (``image_norm`` absent in files from before it)."""

    cnn_width: Annotated[float, Field(strict=True, gt=0, le=4)] = 1.0
    image_features: Units = 128
    feature_hidden: Layers = (128,)
    features: Units = 64
    history_hidden: Layers = (128, 64)
    command_hidden: Layers = (256, 128)
    image_norm: Text = "per_image"


class _NetConfigDoc(Strict):
    """:class:`NetConfig` as :meth:`NetConfig.to_dict` writes it: types, keys and ranges (the
    rules between fields are the dataclasses' own)."""

    variant: Text = "svnet"
    window: Annotated[int, Field(strict=True, ge=1, le=2**16)] = 10
    image_height: Annotated[int, Field(strict=True, ge=1, le=2**14)] = 64
    image_width: Annotated[int, Field(strict=True, ge=1, le=2**14)] = 64
    arch: _ArchDoc = _ArchDoc()
    history_actions: Flag = False


# ---- SqueezeNet 1.1 ---------------------------------------------------------------------------
# The 1.1 feature plan: ("conv", out) is a 3x3 stride-2 conv + ReLU, "pool" a 3x3 stride-2 max
# pool (ceil mode), (s, e1, e3) a Fire module with squeeze s, expand 1x1 e1 and expand 3x3 e3.
SQUEEZENET_1_1: tuple[Any, ...] = (
    ("conv", 64),
    "pool",
    (16, 64, 64),
    (16, 64, 64),
    "pool",
    (32, 128, 128),
    (32, 128, 128),
    "pool",
    (48, 192, 192),
    (48, 192, 192),
    (64, 256, 256),
    (64, 256, 256),
)


class Fire(nn.Module):
    """Fire module: squeeze 1x1 conv -> ReLU -> [expand 1x1, expand 3x3] -> ReLU -> concat."""

    def __init__(self, cin: int, squeeze: int, expand1: int, expand3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1 = nn.Conv2d(squeeze, expand1, 1)
        self.expand3 = nn.Conv2d(squeeze, expand3, 3, padding=1)
        self.out_channels = expand1 + expand3

    def forward(self, x: Tensor) -> Tensor:
        s = F.relu(self.squeeze(x))
        return torch.cat((F.relu(self.expand1(s)), F.relu(self.expand3(s))), dim=1)


def _scaled(c: int, width: float) -> int:
    return max(4, int(round(c * width)))


class SqueezeNet(nn.Module):
    """SqueezeNet 1.1 features (``features``) + a 1x1 conv head to ``out_features`` channels
    with ReLU + global average pooling. (N, 3, H, W) with H, W >= 32 -> (N, out_features)."""

    def __init__(self, out_features: int = 128, width: float = 1.0) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c = 3
        for item in SQUEEZENET_1_1:
            if item == "pool":
                layers.append(nn.MaxPool2d(3, stride=2, ceil_mode=True))
            elif item[0] == "conv":
                layers += [nn.Conv2d(c, _scaled(item[1], width), 3, stride=2), nn.ReLU()]
                c = _scaled(item[1], width)
            else:
                fire = Fire(c, *(_scaled(k, width) for k in item))
                layers.append(fire)
                c = fire.out_channels
        self.features = nn.Sequential(*layers)
        self.head = nn.Conv2d(c, out_features, 1)
        self.feature_channels = c

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.head(self.features(x)))
        return y.mean(dim=(-2, -1))


def mlp(sizes: tuple[int, ...] | list[int], activate_last: bool) -> nn.Sequential:
    """Linear layers between consecutive ``sizes`` with ReLU between (and after the last one
    when ``activate_last``)."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(a, b))
        if activate_last or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class HistoryNet(nn.Module):
    """RMA history network over a normalized flattened window (N, T * entry): ``body`` (Linear +
    ReLU layers) gives the latent, ``head`` (one Linear) the normalized theta estimate (N, 2)."""

    def __init__(self, window: int, hidden: tuple[int, ...], entry: int = ENTRY_SIZE) -> None:
        super().__init__()
        self.body = mlp((window * entry, *hidden), activate_last=True)
        self.head = nn.Linear(hidden[-1], THETA_SIZE)

    def forward(self, flat: Tensor) -> Tensor:
        return self.head(self.body(flat))


# ---- normalization -----------------------------------------------------------------------------
_STAT_SIZES = {
    "image": 3,
    "obs": OBS_SIZE,
    "objective": OBJECTIVE_SIZE,
    "history": ENTRY_SIZE,
    "theta": THETA_SIZE,
    "action": ACTION_SIZE,
}
_HISTORY_SIZES = (ENTRY_SIZE, ENTRY_SIZE + ACTION_ENTRY)


def _stat_sizes(entry: int) -> dict[str, int]:
    return dict(_STAT_SIZES, history=entry)


@dataclass(frozen=True)
class NormStats:
    """Per-channel mean and std of each input and target, from the training rows (Fig. 4).
    ``image`` is over pixels in [0, 1] per RGB channel; ``history`` per eq. 3 entry field."""

    mean: dict[str, Tensor]  # name -> (size,)
    std: dict[str, Tensor]  # name -> (size,), > 0

    @classmethod
    def identity(cls, entry: int = ENTRY_SIZE) -> NormStats:
        sizes = _stat_sizes(entry)
        return cls(
            {k: torch.zeros(n) for k, n in sizes.items()},
            {k: torch.ones(n) for k, n in sizes.items()},
        )

    @classmethod
    def from_moments(
        cls, mean: dict[str, Tensor], std: dict[str, Tensor], floor: float = 1e-6
    ) -> NormStats:
        """Checks sizes (the history entry: 11, or 15 with commands); a std below ``floor``
        (a constant input) becomes 1."""
        entry = int(torch.as_tensor(mean["history"]).numel())
        if entry not in _HISTORY_SIZES:
            raise ConfigError(f"stats['history']: expected {_HISTORY_SIZES} fields, got {entry}")
        m, s = {}, {}
        for k, n in _stat_sizes(entry).items():
            mk, sk = torch.as_tensor(mean[k]).float(), torch.as_tensor(std[k]).float()
            if mk.shape != (n,) or sk.shape != (n,):
                raise ConfigError(f"stats[{k!r}]: expected shape ({n},), got {tuple(mk.shape)}")
            if not (torch.isfinite(mk).all() and torch.isfinite(sk).all()):
                raise ConfigError(f"stats[{k!r}]: non-finite mean or std")
            m[k], s[k] = mk, torch.where(sk < floor, torch.ones_like(sk), sk)
        return cls(m, s)


def _init_weights(module: nn.Module, generator: torch.Generator) -> None:
    """He-uniform weights (ReLU gain), zero biases; drawn from ``generator`` only."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_uniform_(m.weight, nonlinearity="relu", generator=generator)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def _init_output(layer: nn.Linear, generator: torch.Generator, scale: float = 0.1) -> None:
    """Small output layer (U(+-scale / sqrt(fan_in)), zero bias): a fresh network predicts
    about the training mean (0 in normalized units) instead of outputs of order 1 or more."""
    bound = scale / layer.in_features**0.5
    nn.init.uniform_(layer.weight, -bound, bound, generator=generator)
    nn.init.zeros_(layer.bias)


# ---- SV-Net -------------------------------------------------------------------------------------
class SVNet(nn.Module):
    """SV-Net of Fig. 3 for one Table I variant. Raw inputs in, normalized action out.

    ``forward(image, obs, objective, window)``: image (N, H, W, 3) uint8, obs (N, 8) observable
    state [p_z, v, q], objective (N, 7), window (N, T, entry) eq. 3 entries (ignored by ``no_rma``,
    may be None there) -> (N, 4) normalized action; :meth:`denormalize_action` makes it
    physical.
    """

    # normalization buffers (NormStats), registered in __init__
    image_mean: Tensor
    image_std: Tensor
    obs_mean: Tensor
    obs_std: Tensor
    objective_mean: Tensor
    objective_std: Tensor
    history_mean: Tensor
    history_std: Tensor
    theta_mean: Tensor
    theta_std: Tensor
    action_mean: Tensor
    action_std: Tensor

    def __init__(self, config: NetConfig, generator: torch.Generator | None = None) -> None:
        super().__init__()
        if not isinstance(config, NetConfig):
            raise ConfigError(f"config: expected a NetConfig, got {type(config).__name__}")
        self.config = config
        self.variant = get_variant(config.variant)
        a = config.arch
        self.cnn = SqueezeNet(a.image_features, a.cnn_width)
        self.fusion = mlp((a.image_features + 5, *a.feature_hidden, a.features), True)
        self.history = (
            HistoryNet(config.window, a.history_hidden, config.entry_size)
            if self.has_history
            else None
        )
        ctx = {"latent": a.history_hidden[-1], "theta": THETA_SIZE, "none": 0}
        n_in = a.features + ctx[self.variant.context] + OBS_SIZE + OBJECTIVE_SIZE
        self.command = mlp((n_in, *a.command_hidden, ACTION_SIZE), activate_last=False)
        stats = NormStats.identity(config.entry_size)
        for k in _STAT_SIZES:
            self.register_buffer(f"{k}_mean", stats.mean[k].clone())
            self.register_buffer(f"{k}_std", stats.std[k].clone())
        gen = generator if generator is not None else torch.Generator()
        _init_weights(self, gen)
        if self.history is not None:
            _init_output(self.history.head, gen)
        last = self.command[-1]
        if isinstance(last, nn.Linear):
            _init_output(last, gen)

    @property
    def has_history(self) -> bool:
        return self.variant.context != "none"

    # -- normalization
    def set_stats(self, stats: NormStats) -> None:
        """Copy training-set statistics into the model's buffers."""
        if stats.mean["history"].numel() != self.config.entry_size:
            raise ConfigError(
                f"stats['history']: expected {self.config.entry_size} fields for this net "
                f"(history_actions={self.config.history_actions}), got "
                f"{stats.mean['history'].numel()}"
            )
        for k in _STAT_SIZES:
            getattr(self, f"{k}_mean").copy_(stats.mean[k])
            getattr(self, f"{k}_std").copy_(stats.std[k])

    def stats(self) -> NormStats:
        return NormStats(
            {k: getattr(self, f"{k}_mean").detach().cpu().clone() for k in _STAT_SIZES},
            {k: getattr(self, f"{k}_std").detach().cpu().clone() for k in _STAT_SIZES},
        )

    def _norm(self, name: str, x: Tensor) -> Tensor:
        dt = self.obs_mean.dtype
        return (x.to(dt) - getattr(self, f"{name}_mean")) / getattr(self, f"{name}_std")

    def preprocess_image(self, image: Tensor) -> Tensor:
        """Fig. 4: (N, H, W, 3) uint8 -> (N, 3, H, W) scaled to [0, 1], per-channel normalized:
        with the dataset statistics, or (``arch.image_norm == "per_image"``) with each image's
        own channel mean and std over its pixels (std floored at ``IMAGE_NORM_EPS``)."""
        x = image.permute(0, 3, 1, 2).to(self.obs_mean.dtype) / 255.0
        if self.config.arch.image_norm == "per_image":
            mean = x.mean(dim=(-2, -1), keepdim=True)
            std = x.std(dim=(-2, -1), keepdim=True, unbiased=False).clamp_min(IMAGE_NORM_EPS)
            return (x - mean) / std
        return (x - self.image_mean[:, None, None]) / self.image_std[:, None, None]

    # -- the three parts
    def features(self, image: Tensor, obs: Tensor) -> Tensor:
        """Pose-aware features (N, features): SqueezeNet + normalized [p_z, q] through an MLP."""
        o = self._norm("obs", obs)
        pose = torch.cat((o[:, :1], o[:, 4:8]), dim=-1)
        return self.fusion(torch.cat((self.cnn(self.preprocess_image(image)), pose), dim=-1))

    def _history_net(self) -> HistoryNet:
        if self.history is None:
            raise ConfigError(f"variant {self.variant.name!r} has no history network")
        return self.history

    def latent(self, window: Tensor) -> Tensor:
        """RMA latent (N, history_hidden[-1]): second-to-last layer of the history net."""
        flat = self._norm("history", window).flatten(-2)
        return self._history_net().body(flat)

    def theta_estimate(self, window: Tensor) -> Tensor:
        """The history net's normalized theta estimate (N, 2) (stage-1 target)."""
        return self._history_net().head(self.latent(window))

    def theta_physical(self, window: Tensor) -> Tensor:
        """Theta estimate in physical units (N, 2): [k_th (N), m (kg)]."""
        return self.theta_estimate(window) * self.theta_std + self.theta_mean

    def forward(
        self, image: Tensor, obs: Tensor, objective: Tensor, window: Tensor | None
    ) -> Tensor:
        parts = [self.features(image, obs)]
        if self.variant.context != "none":
            if window is None:
                raise ConfigError(f"window: variant {self.variant.name!r} needs the history")
            lat = self.latent(window)
            head = self._history_net().head
            parts.append(lat if self.variant.context == "latent" else head(lat))
        parts += [self._norm("obs", obs), self._norm("objective", objective)]
        return self.command(torch.cat(parts, dim=-1))

    def normalize_action(self, action: Tensor) -> Tensor:
        return self._norm("action", action)

    def normalize_theta(self, theta: Tensor) -> Tensor:
        return self._norm("theta", theta)

    def denormalize_action(self, y: Tensor) -> Tensor:
        """Normalized command-net output -> [f_th, W_x, W_y, W_z] (f_th not clamped here)."""
        return y * self.action_std + self.action_mean


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# ---- checkpoints ---------------------------------------------------------------------------------
def save_checkpoint(net: SVNet, path: str | Path, meta: dict[str, Any] | None = None) -> Path:
    """Weights + normalization buffers (state dict), the net config and JSON-able metadata,
    written atomically by :mod:`volary.learning.checkpoint` (``weights_only``-safe)."""
    fields = {"net_config": net.config.to_dict(), "state_dict": state_on_cpu(net)}
    return write_checkpoint(path, CHECKPOINT_KIND, fields, meta)


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> tuple[SVNet, dict]:
    """(net in eval mode on ``device``, metadata). ``FileFormatError`` naming the file and the
    field for a missing, foreign, truncated or malformed file."""
    ck = read_checkpoint(path, CHECKPOINT_KIND)
    with ck.reading("net_config"):
        cfg = NetConfig.from_dict(ck["net_config"])
    net = build_network(ck, "net_config", lambda: SVNet(cfg))
    ck.load_state(net)
    return net.to(device).eval(), ck.meta


__all__ = [
    "ACTION_SIZE",
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_KIND",
    "IMAGE_NORMS",
    "IMAGE_NORM_EPS",
    "MIN_IMAGE_SIZE",
    "OBJECTIVE_SIZE",
    "SQUEEZENET_1_1",
    "THETA_SIZE",
    "VARIANTS",
    "ArchConfig",
    "Fire",
    "HistoryNet",
    "NetConfig",
    "NormStats",
    "SVNet",
    "SqueezeNet",
    "Variant",
    "get_variant",
    "load_checkpoint",
    "mlp",
    "parameter_count",
    "save_checkpoint",
]
