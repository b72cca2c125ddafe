"""An RGB depth encoder for the learned planner: a small CNN that predicts, from one forward RGB
frame, the min-pooled depth grid the ``learned`` planner's policy observes (issue 21, "RGB
observations"). With it the ``learned_rgb`` planner flies from RGB alone: the same policy and
shield, the depth grid predicted instead of measured.

Why a depth student and not a policy retrained end to end on images: training the PPO policy on
splat frames needs millions of renders (about 40 64 x 48 frames/s per core here), while the
grid is a supervised target any rendered pose provides. SOUS VIDE distils an expert into an
RGB student the same way (paper 005); here the expert is the depth camera, not a controller.

**Data** (:func:`collect`): for each training scene (``scenarios`` x ``scenes`` generator seeds
from ``scene_seed``: the FLYINGTRUST generators with their default parameters, seeds 1000 and up
by default, disjoint from the fixed configurations the benchmark flies), poses drawn in the
flight volume with ``clearance`` m to every obstacle, heights in ``heights``, yaw around the
direction to the scene's goal (std ``yaw_spread``), roll and pitch of std ``tilt``; at each a
World renders the forward RGB camera (the scene's synthesized splats, the benchmark's sky
colour) and the depth camera of the same size, intrinsics and mount. The target is the depth
image as z-depth over the range (no return: 1) min-pooled to ``grid``, exactly the policy's
depth observation (:func:`volary.studies.flyingtrust.planners.learned.pooled_depth`).

**Network** (:class:`DepthNet`): two pixel-coordinate channels appended to the image (the image
row says much about distance: the floor), strided 3 x 3 / 5 x 5 convolutions with ReLU down to
the grid, a dilated convolution for context, a 1 x 1 convolution and a sigmoid. Loss: L1, with
``over_weight`` times the weight where the prediction is farther than the truth (seeing an
obstacle too far is the unsafe error).

**Export**: ``volary.studies.rl.export.mlp_npz`` (the same plain-array format as the policy; conv,
coords and sigmoid stages), read by :class:`volary.studies.flyingtrust.planners.learned.NumpyMLP`.

    >>> rgb, target, info = collect(RgbDepthConfig())
    >>> net, report = train(rgb, target, RgbDepthConfig())
    >>> export(net, "encoder.npz", info)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from volary.device import torch_threads
from volary.errors import ConfigError
from volary.sensors.splat.camera import SKY
from volary.studies.rl.layers import Coords


@dataclass(frozen=True)
class RgbDepthConfig:
    """Data, network and training of the RGB depth encoder (SI units, radians)."""

    scenarios: tuple[str, ...] = ("forest", "urban")
    scenes: int = 24  # training scenes per type
    scene_seed: int = 1000  # first generator seed (the fixed configurations are below 100)
    frames_per_scene: int = 800
    width: int = 64  # px, the benchmark's camera
    height: int = 48
    hfov: float = math.pi / 2
    depth_range: float = 10.0  # m
    grid: tuple[int, int] = (12, 16)  # (h, w) of the pooled target, the policy's depth grid
    clearance: float = 0.4  # m from any obstacle at a sampled pose
    heights: tuple[float, float] = (0.5, 2.8)  # m
    yaw_spread: float = 0.8  # rad, std of the heading around the direction to the goal
    tilt: float = 0.12  # rad, std of roll and pitch
    channels: tuple[int, int, int] = (16, 32, 32)
    epochs: int = 24
    batch: int = 128
    lr: float = 2e-3
    over_weight: float = 3.0  # loss weight where the prediction is too far
    val_fraction: float = 0.1
    seed: int = 0
    # torch CPU threads while training: a convolution's sums run in a thread-dependent order,
    # so the trained weights are the same per seed at one value, whatever the environment sets
    threads: int = 2

    def __post_init__(self) -> None:
        for k in ("scenes", "frames_per_scene", "width", "height", "epochs", "batch", "threads"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{k}: expected an int >= 1, got {v!r}")
        h, w = self.grid
        if self.height % h or self.width % w:
            raise ConfigError(f"grid: expected a divisor of the {self.height} x {self.width} "
                              f"image, got {self.grid}")  # fmt: skip
        if not 0 < self.val_fraction < 1:
            raise ConfigError(f"val_fraction: expected a share in (0, 1), got {self.val_fraction}")
        if not self.scenarios:
            raise ConfigError("scenarios: expected at least one scenario type")


# ---- data --------------------------------------------------------------------------------------
def sample_poses(spec: Any, n: int, cfg: RgbDepthConfig, gen: torch.Generator
                 ) -> tuple[Tensor, Tensor]:  # fmt: skip
    """``n`` camera-body poses in ``spec``'s flight volume at least ``cfg.clearance`` m from
    every obstacle (module docstring): positions (n, 3), quaternions (n, 4) [w, x, y, z]."""
    from volary.math.quaternion import quat_from_euler
    from volary.worlds import Scene
    from volary.worlds.sdf import scene_sdf

    scene = Scene.stack([spec])
    lo = torch.tensor(spec.bounds_min, dtype=torch.float32)
    hi = torch.tensor(spec.bounds_max, dtype=torch.float32)
    z_hi = min(cfg.heights[1], float(spec.flight_ceiling) - cfg.clearance)
    z_lo = min(cfg.heights[0], z_hi)
    goal = torch.tensor(spec.goal, dtype=torch.float32)
    got: list[Tensor] = []
    have, tries = 0, 0
    while have < n:
        tries += 1
        if tries > 200:
            raise ConfigError(f"scene {spec.meta.get('type')}: no free poses with "
                              f"{cfg.clearance} m clearance")  # fmt: skip
        m = 4 * (n - have) + 16
        u = torch.rand(m, 3, generator=gen)
        p = lo + u * (hi - lo)
        p[:, 2] = z_lo + u[:, 2] * (z_hi - z_lo)
        d = scene_sdf(scene, p[None]).distance[0]
        ok = p[d >= cfg.clearance]
        got.append(ok)
        have += len(ok)
    pos = torch.cat(got)[:n]
    to_goal = goal - pos
    yaw = torch.atan2(to_goal[:, 1], to_goal[:, 0])
    yaw = yaw + cfg.yaw_spread * torch.randn(n, generator=gen)
    roll = cfg.tilt * torch.randn(n, generator=gen)
    pitch = cfg.tilt * torch.randn(n, generator=gen)
    return pos, quat_from_euler(roll, pitch, yaw)


def camera_pair(spec: Any, cfg: RgbDepthConfig, n: int) -> Any:
    """A World of ``n`` vehicles in ``spec`` carrying the RGB camera (``rgb``: SplatCamera over
    the scene's splats, seeded with the scene's generator seed) and the depth camera
    (``depth``) of the same size, intrinsics and forward mount."""
    from volary.sensors.camera import CameraConfig
    from volary.sensors.splat import SplatCamera, synthesize
    from volary.sim import World

    depth = CameraConfig(width=cfg.width, height=cfg.height, hfov=cfg.hfov,
                         max_range=cfg.depth_range, invalid_value=math.nan, segmentation=False,
                         normals=False)  # fmt: skip
    seed = int(spec.meta.get("seed", 0))
    rgb = SplatCamera(synthesize(spec, seed), cfg.width, cfg.height, cfg.hfov, background=SKY)
    return World("crazyflie", spec, n_envs=n, sensors={"depth": depth, "rgb": rgb})


def pooled_target(depth: Tensor, valid: Tensor, cfg: RgbDepthConfig) -> Tensor:
    """(N, h * w) float32 targets of (N, H, W) z-depth: over the range (no return: 1),
    min-pooled to ``cfg.grid`` (the policy's depth observation)."""
    from volary.planning.navigation import pooled_depth

    d = torch.where(valid, depth, torch.full_like(depth, math.inf)).numpy()
    return torch.from_numpy(np.stack([pooled_depth(x, cfg.depth_range, cfg.grid) for x in d]))


def collect(cfg: RgbDepthConfig, progress: Callable[[int, int], None] | None = None,
            batch: int = 100) -> tuple[Tensor, Tensor, dict[str, Any]]:  # fmt: skip
    """RGB frames (F, H, W, 3) uint8, their targets (F, h * w) float32 and ``info`` (camera,
    grid, scenes) from every training scene (module docstring). Deterministic per config."""
    from volary.sensors.splat import to_uint8
    from volary.worlds import make_scenario

    gen = torch.Generator().manual_seed(cfg.seed)
    rgbs, targets, scene_ids = [], [], []
    total = len(cfg.scenarios) * cfg.scenes
    for k, (scen, i) in enumerate(
        (s, i) for s in cfg.scenarios for i in range(cfg.scenes)
    ):  # fmt: skip
        spec = make_scenario(scen, cfg.scene_seed + i)
        world = camera_pair(spec, cfg, batch)
        for start in range(0, cfg.frames_per_scene, batch):
            m = min(batch, cfg.frames_per_scene - start)
            pos, quat = sample_poses(spec, batch, cfg, gen)
            world.reset(pos=pos, quat=quat)
            d = world.read("depth")
            rgbs.append(to_uint8(world.read("rgb").rgb[:m]))
            targets.append(pooled_target(d.depth[:m], d.valid[:m], cfg))
            scene_ids.append(torch.full((m,), k, dtype=torch.int32))
        if progress is not None:
            progress(k + 1, total)
    info = {
        "width": cfg.width, "height": cfg.height, "hfov": cfg.hfov,
        "depth_range": cfg.depth_range, "grid": list(cfg.grid),
        "scenarios": list(cfg.scenarios), "scenes": cfg.scenes, "scene_seed": cfg.scene_seed,
        "frames": int(sum(len(t) for t in targets)), "sky": list(SKY),
    }  # fmt: skip
    return torch.cat(rgbs), torch.cat(targets), info | {"scene_ids": torch.cat(scene_ids)}


# ---- network -----------------------------------------------------------------------------------
class DepthNet(nn.Module):
    """RGB (N, 3, H, W) in [0, 1] -> pooled depth / range (N, h, w) in (0, 1) (module
    docstring); H / h and W / w must be 4."""

    def __init__(self, channels: tuple[int, int, int] = (16, 32, 32)) -> None:
        super().__init__()
        a, b, c = channels
        self.net = nn.Sequential(
            Coords(),
            nn.Conv2d(5, a, 5, stride=2, padding=2),
            nn.ReLU(),
            nn.Conv2d(a, b, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(b, c, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(c, c, 3, padding=2, dilation=2),
            nn.ReLU(),
            nn.Conv2d(c, 1, 1),
            nn.Sigmoid(),
        )

    def forward(self, rgb: Tensor) -> Tensor:
        return self.net(rgb)[:, 0]


def as_input(rgb: Tensor) -> Tensor:
    """(N, H, W, 3) uint8 frames -> (N, 3, H, W) float32 in [0, 1]."""
    return rgb.permute(0, 3, 1, 2).float() / 255.0


def loss_fn(pred: Tensor, target: Tensor, over_weight: float) -> Tensor:
    """L1 with ``over_weight`` where the prediction is farther than the truth."""
    err = pred - target
    return torch.where(err > 0, over_weight * err, -err).mean()


def evaluate(net: DepthNet, rgb: Tensor, target: Tensor, cfg: RgbDepthConfig) -> dict[str, float]:
    """Mean absolute error (m), the share of cells predicted more than 1 m too far, and the
    same for cells whose truth is within 3 m (the ones the shield acts on)."""
    with torch.no_grad():
        pred = torch.cat([net(as_input(rgb[i : i + 512])).flatten(1)
                          for i in range(0, len(rgb), 512)])  # fmt: skip
    r = cfg.depth_range
    err = (pred - target) * r
    near = target * r < 3.0
    return {
        "mae_m": float(err.abs().mean()),
        "too_far_1m": float((err > 1.0).float().mean()),
        "near_mae_m": float(err[near].abs().mean()) if near.any() else math.nan,
        "near_too_far_1m": float((err[near] > 1.0).float().mean()) if near.any() else math.nan,
    }


def train(rgb: Tensor, target: Tensor, cfg: RgbDepthConfig, scene_ids: Tensor | None = None,
          progress: Callable[[int, dict[str, float]], None] | None = None
          ) -> tuple[DepthNet, dict[str, Any]]:  # fmt: skip
    """Train a :class:`DepthNet` with Adam; whole scenes (``scene_ids``) are held out for
    validation (``val_fraction`` of them, at least one), so the validation error is that of
    unseen scenes. Returns (net, report) with the per-epoch losses and validation metrics.
    Runs on ``cfg.threads`` torch threads (restored after), so the weights do not depend on
    the caller's thread settings."""
    if rgb.dim() != 4 or rgb.shape[-1] != 3 or rgb.dtype != torch.uint8:
        raise ConfigError(f"rgb: expected (F, H, W, 3) uint8 frames, got {tuple(rgb.shape)} "
                          f"{rgb.dtype}")  # fmt: skip
    with torch_threads(cfg.threads):
        return _train(rgb, target, cfg, scene_ids, progress)


def _train(rgb: Tensor, target: Tensor, cfg: RgbDepthConfig, scene_ids: Tensor | None,
           progress: Callable[[int, dict[str, float]], None] | None
           ) -> tuple[DepthNet, dict[str, Any]]:  # fmt: skip
    t0 = time.perf_counter()
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    ids = scene_ids if scene_ids is not None else torch.arange(len(rgb)) // 100
    scenes = torch.unique(ids)
    n_val = max(1, int(round(cfg.val_fraction * len(scenes))))
    val_scenes = scenes[torch.randperm(len(scenes), generator=gen)[:n_val]]
    val = torch.isin(ids, val_scenes)
    tr = torch.nonzero(~val).flatten()
    net = DepthNet(cfg.channels)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.epochs)
    hist: dict[str, list[float]] = {"train_loss": []}
    for epoch in range(cfg.epochs):
        net.train()
        order = tr[torch.randperm(len(tr), generator=gen)]
        total = 0.0
        for i in range(0, len(order), cfg.batch):
            idx = order[i : i + cfg.batch]
            x = as_input(rgb[idx])
            if torch.rand((), generator=gen) < 0.5:  # mirror: a scene seen from the side
                x, y = x.flip(-1), target[idx].view(-1, *cfg.grid).flip(-1).flatten(1)
            else:
                y = target[idx]
            loss = loss_fn(net(x).flatten(1), y, cfg.over_weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        sched.step()
        net.eval()
        row = {"train_loss": total / len(tr)}
        row |= {f"val_{k}": v for k, v in evaluate(net, rgb[val], target[val], cfg).items()}
        for k, v in row.items():
            hist.setdefault(k, []).append(v)
        if progress is not None:
            progress(epoch, row)
    report = {
        "config": asdict(cfg),
        "frames": int(len(rgb)),
        "validation_frames": int(val.sum()),
        "validation_scenes": int(n_val),
        "history": hist,
        "parameters": sum(p.numel() for p in net.parameters()),
        "wall_s": time.perf_counter() - t0,
    }
    return net.eval(), report


def export(net: DepthNet, path: str | Path, info: dict[str, Any],
           report: dict[str, Any] | None = None) -> Path:  # fmt: skip
    """The encoder as plain arrays (``mlp_npz``) with the camera it was trained for in
    ``meta``, which the ``learned_rgb`` planner checks against the task's camera."""
    from volary.studies.rl.export import mlp_npz

    keys = ("width", "height", "hfov", "depth_range", "grid", "scenarios", "scenes",
            "scene_seed", "frames", "sky")  # fmt: skip
    meta = {k: info[k] for k in keys} | {"kind": "rgb_depth"}
    if report is not None:
        last = {k: v[-1] for k, v in report["history"].items()}
        meta |= {"validation": last, "parameters": report["parameters"]}
    return mlp_npz(net.net, path, meta=meta)


__all__ = [
    "Coords",
    "DepthNet",
    "RgbDepthConfig",
    "as_input",
    "camera_pair",
    "collect",
    "evaluate",
    "export",
    "loss_fn",
    "pooled_target",
    "sample_poses",
    "train",
]
