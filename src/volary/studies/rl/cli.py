"""``volary rl train|eval|export|dce|rgb-encoder``: the RL study's commands. PPO on the
``volary.envs`` tasks with the study's recipes (:mod:`volary.studies.rl.recipes`), its
evaluation, ONNX/C/npz export; the depth encoder; the learned_rgb planner's RGB depth encoder.

A typer app (``rl_app``) that :mod:`volary.cli.main` mounts as ``volary rl`` with its command
group class (it runs the declared option checks, :data:`OPTIONS`; one-line errors), so every
``volary rl ...`` command reads as before the study moved. A bad input raises
:class:`~volary.errors.ConfigError`, which the ``volary`` command prints as one line with exit
code 2.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from volary.checks import (
    DEVICE,
    ENV,
    OUT,
    SEED,
    SET,
    Check,
    counts,
    in_file,
    looked_up,
    one_of,
    out_file,
    parsed,
    real,
    text,
)
from volary.errors import not_one_of
from volary.options import SetOption, configure, console, fail

rl_app = typer.Typer(
    name="rl",
    no_args_is_help=True,
    help="Reinforcement learning: PPO train, eval and export.",
)


def _task(name: str) -> None:
    from volary.envs import ENVS

    if name not in ENVS:
        raise not_one_of("", name, ENVS)


def _recipe(name: str) -> Any:
    from volary.studies.rl.recipes import get_recipe

    return get_recipe(name)


#: ``volary rl``'s declared option checks (:mod:`volary.checks`' vocabulary), which
#: :mod:`volary.cli.main` adds to the command table when it mounts the study.
OPTIONS: dict[str, dict[str, Check]] = {
    "rl train": {
        "--task": parsed(_task),
        "--envs": counts(1_000_000, "parallel envs"),
        "--iterations": counts(10**9, "PPO iterations"),
        "--seed": SEED,
        "--device": DEVICE,
        "--out": OUT,
        "--set": SET,
        "--log-every": counts(10**9, "iterations between prints"),
        "--env": ENV,
        "--learner": one_of(("volary", "rsl_rl")),
        "--recipe": looked_up(_recipe),
        "--stop-at": real(0, 1, "success fraction; 0: no early stop", "1"),
        "--val-episodes": counts(1_000_000, "validation episodes"),
        "--val-every": counts(10**9, "iterations between validations"),
        "--val-first": counts(10**9, "iterations before the first validation", 0),
    },
    "rl eval": {
        "--policy": in_file("policy checkpoint"),
        "--task": parsed(_task),
        "--episodes": counts(10**7, "episodes"),
        "--envs": counts(1_000_000, "parallel envs"),
        "--seed": SEED,
        "--device": DEVICE,
        "--out": OUT,
        "--env": ENV,
        "--record": out_file(),
    },
    "rl dce": {
        "--frames": counts(100_000_000, "depth images"),
        "--scenes": counts(10**6, "training forests"),
        "--scene-seed": SEED,
        "--envs": counts(1_000_000, "parallel envs"),
        "--seed": SEED,
        "--out": OUT,
        "--env": ENV,
        "--set": SET,
    },
    "rl rgb-encoder": {"--out": OUT, "--seed": SEED, "--set": SET},
    "rl export": {
        "CHECKPOINT": in_file("policy checkpoint"),
        "--onnx": out_file(),
        "--header": out_file(),
        "--npz": out_file(),
        "--name": text(r"[A-Za-z_]\w{0,63}", "a C identifier"),
        "--seed": SEED,
    },
}


Task = Annotated[str, typer.Option("--task", help="Task name (volary.envs.make_env).")]
Envs = Annotated[int, typer.Option("--envs", help="Parallel envs (the batch).")]
Seed = Annotated[int, typer.Option("--seed", help="Seed of the env and every random draw.")]
Device = Annotated[str, typer.Option("--device", help="cpu or cuda.")]
Out = Annotated[Path, typer.Option("--out", help="Directory for the files this command writes.")]
_COLUMNS = ("iter", "episodes", "return", "length", "pi loss", "v loss", "KL", "samples/s")


def _check_positive(value: int, option: str) -> None:
    if value < 1:
        fail(f"{option}: expected an integer >= 1, got {value}")


EnvOpts = Annotated[
    list[str] | None,
    typer.Option(
        "--env",
        metavar="FIELD=VALUE",
        help="Task option (repeatable): a field of the task's config (PositionTaskConfig, "
        "NavigateTaskConfig), parsed and checked as --set values are, e.g. control=velocity, "
        "compile=numba, physics_hz=960, goal_range=(1,1,0.5), scene_options.density=0.1.",
    ),
]


def _env_options(task: str, options: dict[str, Any], items: list[str] | None) -> dict[str, Any]:
    """``options`` with the ``--env FIELD=VALUE`` items over them, typed by the task's config.
    A field an item sets is dropped from ``options`` first, so that a stored value the item
    replaces (a policy's encoder path that no longer exists) is never loaded."""
    if not items:
        return dict(options)
    from volary.config import parse_overrides
    from volary.envs import env_config
    from volary.errors import VolaryError

    named = {item.split("=", 1)[0].strip() for item in items}
    kept = {k: v for k, v in options.items() if k not in named}
    try:
        base = env_config(task, **_resolved(kept))
    except VolaryError as err:
        fail(f"--task {task}: {err}")
    try:
        return {**kept, **parse_overrides(base, items or [])}
    except VolaryError as err:
        fail(f"--env: {err}")


def _jsonable(options: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()}


def _resolved(options: dict[str, Any], source: str = "--env depth_encoder") -> dict[str, Any]:
    """``options`` with a ``depth_encoder`` path (what policy files store) loaded; ``source``
    names where the path came from in the error."""
    if not isinstance(options.get("depth_encoder"), str):
        return options
    from volary.errors import VolaryError
    from volary.studies.rl.dce import resolve_env_options

    try:
        return resolve_env_options(options)
    except VolaryError as err:
        fail(f"{source}: {err}")


def _moved_encoder(stored: dict[str, Any], meta: dict[str, Any], policy: Path) -> dict[str, Any]:
    """The policy's stored options, with a ``depth_encoder`` path that no longer exists
    replaced by the one recorded relative to the policy's folder, where that exists (a results
    tree moved or cloned elsewhere)."""
    enc, rel = stored.get("depth_encoder"), meta.get("depth_encoder_from_policy")
    if not isinstance(enc, str) or not isinstance(rel, str) or Path(enc).is_file():
        return stored
    here = policy.parent / rel
    return {**stored, "depth_encoder": str(here)} if here.is_file() else stored


def _make_env(
    task: str, envs: int, seed: int, device: str, options: dict[str, Any], source: str | None = None
) -> Any:
    """``source``: where a ``depth_encoder`` path came from (default: ``--env``), for errors."""
    from volary.envs import make_env
    from volary.errors import VolaryError

    opts = _resolved(options, source or "--env depth_encoder")
    try:
        return make_env(task, n_envs=envs, **{"seed": seed, "device": device, **opts})
    except VolaryError as err:
        fail(f"--task {task}: {err}")


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


class _Printer:
    """Prints a rich table of the training rows, every ``every`` iterations (header once)."""

    def __init__(self, every: int, total: int) -> None:
        self.every, self.total, self.header = every, total, True

    def __call__(self, it: int, row: dict[str, Any]) -> None:
        if (it + 1) % self.every and it + 1 != self.total:
            return
        t = Table(*_COLUMNS, show_header=self.header, box=None, pad_edge=False)
        for col in t.columns:
            col.min_width, col.justify = 10, "right"
        t.add_row(
            str(it + 1), str(row["episodes"]), _fmt(row["mean_return"], ".2f"),
            _fmt(row["mean_length"], ".1f"), _fmt(row.get("policy_loss"), ".4f"),
            _fmt(row.get("value_loss"), ".4g"), _fmt(row.get("approx_kl"), ".4f"),
            f"{row['samples_per_s']:.0f}",
        )  # fmt: skip
        console.print(t)
        self.header = False


LEARNERS = ("volary", "rsl_rl")


def _train_rsl_rl(env: Any, cfg: Any, iterations: int, printer: Any, stop: Any) -> tuple[Any, dict]:
    """(A missing rsl-rl-lib raises to_rsl_rl's MissingDependencyError: the caller's one line.)"""
    from volary.envs.adapters import to_rsl_rl
    from volary.studies.rl.rsl import train_rsl_rl

    return train_rsl_rl(to_rsl_rl(env), cfg, iterations, progress=printer, stop=stop)


VALIDATION_SEED = 1_000_003  # + the training seed: validation episodes no other command draws


def _early_stop(task: str, target: float | None, episodes: int, every: int, first: int,
                seed: int, device: str, options: dict[str, Any]) -> Any:  # fmt: skip
    """The EarlyStop of ``--stop-at``: success of the deterministic policy on ``episodes``
    episodes of a separate env (at most 256 wide) seeded ``VALIDATION_SEED + seed``."""
    if target is None:
        return None
    from volary.errors import VolaryError
    from volary.studies.rl.ppo import EarlyStop, evaluate_policy

    if not 0.0 < target <= 1.0:
        fail(f"--stop-at: expected a success rate in (0, 1], got {target}")
    _check_positive(episodes, "--val-episodes")
    _check_positive(every, "--val-every")
    _check_positive(first, "--val-first")
    val_seed = VALIDATION_SEED + seed
    env = _make_env(task, min(episodes, 256), val_seed, device, options)

    def validate(policy: Any) -> float:
        res = evaluate_policy(env, policy, episodes, deterministic=True, seed=val_seed)
        if res["success_rate"] is None:
            raise VolaryError(f"--stop-at: task {task!r} reports no success to validate on")
        return float(res["success_rate"])

    return EarlyStop(validate, target=target, every=every, first=first)


TrainTask = Annotated[
    str | None,
    typer.Option("--task", help="Task name (volary.envs.make_env); or take --recipe's."),
]
TrainEnvs = Annotated[
    int | None, typer.Option("--envs", help="Parallel envs (default 64, or --recipe's).")
]
Iterations = Annotated[
    int | None, typer.Option("--iterations", help="PPO iterations (default 100, or --recipe's).")
]
LogEvery = Annotated[int, typer.Option("--log-every", help="Print every K iterations.")]
Learner = Annotated[
    str | None,
    typer.Option(
        "--learner",
        help="volary (its own PPO, the default) or rsl_rl (rsl-rl-lib's OnPolicyRunner on "
        "the same PPOConfig; the policy is saved in volary's format either way).",
    ),
]
Recipe = Annotated[
    str | None,
    typer.Option(
        "--recipe",
        help="A named recipe (volary.studies.rl.recipes, e.g. hover-fast): its task, envs, "
        "iterations, --env and --set values; options given here override them.",
    ),
]
StopAt = Annotated[
    float | None,
    typer.Option(
        "--stop-at",
        help="Stop once the deterministic policy succeeds in this fraction of held-out "
        "validation episodes (checked every --val-every iterations; --iterations is then "
        "the most it runs); keeps the best validated policy. Default: none, or --recipe's; "
        "0: none.",
    ),
]
ValEpisodes = Annotated[
    int | None,
    typer.Option(
        "--val-episodes", help="Validation episodes for --stop-at (default 256, or --recipe's)."
    ),  # fmt: skip
]
ValEvery = Annotated[
    int | None,
    typer.Option("--val-every", help="Validate every K iterations (default 10, or --recipe's)."),
]
ValFirst = Annotated[
    int | None,
    typer.Option(
        "--val-first",
        help="First validation after this many iterations (default --val-every, or --recipe's).",
    ),
]


@dataclass(frozen=True)
class _TrainRun:
    """What ``rl train`` runs, resolved from its options over ``--recipe``'s values."""

    recipe: Any  # the Recipe, or None
    task: str
    learner: str
    envs: int
    iterations: int


def _train_run(
    recipe: str | None, task: str | None, learner: str | None, envs: int | None,
    iterations: int | None, log_every: int, device: str,
) -> _TrainRun:  # fmt: skip
    """The recipe, task, learner, env count and iterations (options override the recipe);
    exits with one line for a bad or conflicting option."""
    from volary.errors import VolaryError
    from volary.studies.rl.recipes import get_recipe

    try:
        rec = get_recipe(recipe) if recipe is not None else None
    except VolaryError as err:
        fail(str(err))
    if rec is not None and task is not None and task != rec.task:
        fail(f"--task {task}: recipe {recipe!r} trains task {rec.task!r}; drop --task or "
              "--recipe")  # fmt: skip
    task = task or (rec.task if rec else None)
    if task is None:
        fail("--task: required (or --recipe NAME)")
    learner = learner or (rec.learner if rec else "volary")
    if learner not in LEARNERS:
        fail(f"--learner: expected one of {', '.join(LEARNERS)}, got {learner!r}")
    envs = envs if envs is not None else (rec.envs if rec else 64)
    iterations = iterations if iterations is not None else (rec.iterations if rec else 100)
    for value, option in ((envs, "--envs"), (iterations, "--iterations"), (log_every,
                          "--log-every")):  # fmt: skip
        _check_positive(value, option)
    return _TrainRun(rec, task, learner, envs, iterations)


def _ppo_config(rec: Any, seed: int, set_: list[str] | None) -> Any:
    """The PPOConfig: the recipe's (or the defaults) with --seed and --set applied."""
    from volary.errors import VolaryError
    from volary.studies.rl.ppo import PPOConfig

    try:
        base = PPOConfig(**rec.ppo) if rec else PPOConfig()
        return configure(base, [("--seed", "seed", seed)], set_)
    except VolaryError as err:
        fail(str(err))


def _validation(
    rec: Any, stop_at: float | None, episodes: int | None, every: int | None, first: int | None
) -> tuple[float | None, int, int, int]:
    """(--stop-at (None: no early stop), --val-episodes, --val-every, --val-first), the
    options over the recipe's values over the defaults."""
    stop_at = stop_at if stop_at is not None else (rec.stop_at if rec else None)
    stop_at = None if stop_at == 0.0 else stop_at  # --stop-at 0: train every iteration
    every = every if every is not None else (rec.val_every if rec else 10)
    if first is None:
        first = (rec.val_first if rec else None) or every
    if episodes is None:
        episodes = rec.val_episodes if rec else 256
    return stop_at, episodes, every, first


def _fit(env: Any, cfg: Any, run: _TrainRun, printer: _Printer, stop: Any) -> tuple[Any, dict]:
    """Train with the run's learner; (policy, report) with the task and learner recorded."""
    from volary.errors import VolaryError
    from volary.studies.rl.ppo import train_ppo

    try:
        if run.learner == "rsl_rl":
            policy, report = _train_rsl_rl(env, cfg, run.iterations, printer, stop)
        else:
            policy, report = train_ppo(env, cfg, run.iterations, progress=printer, stop=stop)
    except VolaryError as err:
        fail(str(err))
    report["task"] = run.task
    report["learner"] = run.learner
    return policy, report


def _write_training(out: Path, policy: Any, cfg: Any, report: dict, meta: dict,
                    run: _TrainRun, options: dict[str, Any]) -> None:  # fmt: skip
    """policy.pt (and the recipe's policy.npz), report.json and learning_curve.png in out."""
    from volary.studies.rl.ppo import plot_learning_curve, save_policy

    out.mkdir(parents=True, exist_ok=True)
    save_policy(out / "policy.pt", policy, cfg, meta)
    if run.recipe is not None and run.recipe.npz:
        _write_npz(policy, out / "policy.npz", run.task, options)
    (out / "report.json").write_text(json.dumps(report, indent=2))
    plot_learning_curve(report, out / "learning_curve.png", title=f"PPO on {run.task}")


def _print_training(report: dict, out: Path, task: str) -> None:
    """The validation line (with --stop-at) and the summary line."""
    if "validation" in report:
        v = report["validation"]
        console.print(
            f"validation: {v['chosen_success']:.1%} at iteration {v['chosen_iteration']} "
            f"({'reached' if v['reached'] else 'did not reach'} --stop-at {v['target']:.0%}; "
            f"{len(v['rows'])} checks, {v['wall_s']:.1f} s)",
            highlight=False,
        )  # fmt: skip
    console.print(
        f"{task}: {report['samples']} samples in {report['timing']['total_wall_s']:.1f} s -> "
        f"{out / 'policy.pt'}, report.json, learning_curve.png",
        highlight=False,
    )


@rl_app.command("train")
def rl_train(
    task: TrainTask = None,
    envs: TrainEnvs = None,
    iterations: Iterations = None,
    seed: Seed = 0,
    device: Device = "cpu",
    out: Out = Path("rl_out"),
    set_: SetOption = None,
    log_every: LogEvery = 5,
    env_opt: EnvOpts = None,
    learner: Learner = None,
    recipe: Recipe = None,
    stop_at: StopAt = None,
    val_episodes: ValEpisodes = None,
    val_every: ValEvery = None,
    val_first: ValFirst = None,
) -> None:
    """Train a PPO policy; write policy.pt, report.json and learning_curve.png into --out.

    --set takes PPOConfig fields, e.g. --set lr=1e-3 --set hidden=128,128."""
    run = _train_run(recipe, task, learner, envs, iterations, log_every, device)
    rec = run.recipe
    cfg = _ppo_config(rec, seed, set_)
    options = _env_options(run.task, dict(rec.env) if rec else {}, env_opt)
    env = _make_env(run.task, run.envs, seed, device, options)
    stop_at, *val = _validation(rec, stop_at, val_episodes, val_every, val_first)
    stop = _early_stop(run.task, stop_at, *val, seed, device, options)
    policy, report = _fit(env, cfg, run, _Printer(log_every, run.iterations), stop)
    meta = {"task": run.task, "envs": run.envs, "iterations": report["iterations"],
            "seed": seed, "device": device, "stop_at": stop_at,
            "env_options": _jsonable(options), "recipe": recipe,
            "learner": run.learner}  # fmt: skip
    if isinstance(options.get("depth_encoder"), str):
        # how the policy finds its encoder when the two move together (_moved_encoder)
        meta["depth_encoder_from_policy"] = os.path.relpath(
            Path(options["depth_encoder"]).resolve(), out.resolve()
        )
    _write_training(out, policy, cfg, report, meta, run, options)
    _print_training(report, out, run.task)


@rl_app.command("eval")
def rl_eval(
    policy: Annotated[Path, typer.Option("--policy", help="policy.pt written by rl train.")],
    task: Task,
    episodes: Annotated[int, typer.Option("--episodes", help="Episodes to average.")] = 100,
    envs: Envs = 16,
    seed: Seed = 0,
    device: Device = "cpu",
    stochastic: Annotated[
        bool, typer.Option("--stochastic", help="Sample actions instead of the mean.")
    ] = False,
    out: Out = Path("rl_eval"),
    env_opt: EnvOpts = None,
    record: Annotated[
        Path | None,
        typer.Option(
            "--record",
            help="Also write env 0's first episode as a .npz recording for `volary view`.",
        ),
    ] = None,
) -> None:
    """Evaluate a policy on a task (with the task options it was trained with, then any --env
    overrides); write eval.json into --out."""
    from volary.errors import VolaryError
    from volary.studies.rl.ppo import evaluate_policy, load_policy

    _check_positive(episodes, "--episodes")
    _check_positive(envs, "--envs")
    if not policy.is_file():
        fail(f"--policy: no such file {str(policy)!r}")
    try:
        net, _, meta = load_policy(policy, device)
    except VolaryError as err:
        fail(f"--policy: {err}")
    stored = {k: tuple(v) if isinstance(v, list) else v
              for k, v in (meta.get("env_options") or {}).items()}  # fmt: skip
    stored = _moved_encoder(stored, meta, policy)
    options = _env_options(task, stored, env_opt)
    own = "depth_encoder" in stored and options.get("depth_encoder") == stored["depth_encoder"]
    source = "--policy: its depth_encoder (another: --env depth_encoder=PATH)" if own else None
    env = _make_env(task, envs, seed, device, options, source)
    if record is not None and record.suffix != ".npz":
        fail(f"--record: expected a .npz path, got {str(record)!r}")
    tracer = EpisodeTracer(env) if record is not None else None
    try:
        res = evaluate_policy(tracer or env, net, episodes, deterministic=not stochastic,
                              seed=seed)  # fmt: skip
    except VolaryError as err:
        fail(str(err))
    if tracer is not None and record is not None:
        rec = tracer.recording(f"{task}: env 0's first episode ({policy.name})")
        console.print(f"-> {rec.save(record)} (volary view {record})", highlight=False,
                      markup=False)  # fmt: skip
    res.update(task=task, policy=str(policy), trained_on=meta.get("task"), seed=seed,
               env_options=_jsonable(options))  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval.json").write_text(json.dumps(res, indent=2))
    t = Table("task", "episodes", "mean return", "std return", "mean length", "success")
    t.add_row(
        task, str(res["episodes"]), f"{res['mean_return']:.2f}", f"{res['std_return']:.2f}",
        f"{res['mean_length']:.1f}", _fmt(res["success_rate"], ".2%"),
    )  # fmt: skip
    console.print(t)
    if res["metrics"]:
        m = Table("episode metric", "mean", "median", "episodes with it")
        for name, v in res["metrics"].items():
            m.add_row(name, _fmt(v["mean"], ".4f"), _fmt(v["median"], ".4f"), str(v["episodes"]))
        console.print(m)
    console.print(f"-> {out / 'eval.json'}", highlight=False, markup=False)


@rl_app.command("dce")
def rl_dce(
    frames: Annotated[int, typer.Option("--frames", help="Depth images to collect.")] = 32768,
    scenes: Annotated[
        int, typer.Option("--scenes", help="Training forests (navigate's scene seeds).")
    ] = 64,
    scene_seed: Annotated[int, typer.Option("--scene-seed", help="First forest seed.")] = 0,
    envs: Envs = 256,
    seed: Seed = 0,
    out: Out = Path("out/rl/dce"),
    env_opt: EnvOpts = None,
    set_: SetOption = None,
) -> None:
    """Train a deep collision encoder (volary.studies.rl.dce) on navigate's depth camera.

    Flies --envs navigate envs along the goal vector with noise in --scenes forests from
    --scene-seed, collects --frames depth images, trains a VAE whose latent reconstructs
    their collision images (--set fields of DCEConfig: latent, width, beta, epochs, batch,
    lr, val_fraction, max_px, seed). Writes encoder.pt, report.json and dce.png into --out;
    use it with `volary rl train --task navigate --env depth_encoder=OUT/encoder.pt`."""
    import torch

    from volary.errors import VolaryError
    from volary.studies.rl.dce import DCEConfig, collect_depth, save_encoder, train_dce

    for value, option in ((frames, "--frames"), (scenes, "--scenes"), (envs, "--envs")):
        _check_positive(value, option)
    try:
        cfg = configure(DCEConfig(), [("--seed", "seed", seed)], set_)
    except VolaryError as err:
        fail(str(err))
    options = _env_options("navigate", {}, env_opt)
    if "depth_encoder" in options:
        fail("--env depth_encoder: the encoder is what this command trains")
    torch.manual_seed(seed)
    console.print(f"collecting {frames} depth images in {scenes} forests ...", highlight=False)
    try:
        depth, info = collect_depth(frames, scenes, scene_seed, envs, seed, env_options=options)
        vae, report = train_dce(depth, info, cfg, progress=_dce_printer(cfg.epochs))
    except VolaryError as err:
        fail(str(err))
    out.mkdir(parents=True, exist_ok=True)
    report.update(info=info, env_options=_jsonable(options))
    save_encoder(out / "encoder.pt", vae, info, cfg, meta=report)
    (out / "report.json").write_text(json.dumps(report, indent=2))
    _plot_dce(vae, depth, info, cfg, report, out / "dce.png")
    console.print(f"-> {out / 'encoder.pt'}, report.json, dce.png ({report['wall_s']:.0f} s)",
                  highlight=False, markup=False)  # fmt: skip


def _dce_printer(epochs: int) -> Any:
    def show(epoch: int, row: dict[str, float]) -> None:
        console.print(f"epoch {epoch + 1}/{epochs}: reconstruction {row['train_recon']:.2f} "
                      f"(validation {row['val_recon']:.2f}), KL {row['train_kl']:.2f}",
                      highlight=False)  # fmt: skip

    return show


def _image_figure(rows: list[tuple[str, list[Any], dict]], curves: dict[str, list[float]],
                  title: str, path: Path) -> None:  # fmt: skip
    """Rows of six images (name, images, imshow options) above the curves of a training run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(rows) + 1, 6, figsize=(13, 7.5))
    for i, (name, images, kw) in enumerate(rows):
        for j, img in enumerate(images):
            axes[i, j].imshow(img, **kw)
            axes[i, j].set_xticks([]), axes[i, j].set_yticks([])
        axes[i, 0].set_ylabel(name)
    for ax in axes[-1]:
        ax.remove()
    ax = fig.add_subplot(len(rows) + 1, 1, len(rows) + 1)
    for label, values in curves.items():
        ax.plot(range(1, len(values) + 1), values, label=label)
    ax.set_xlabel("epoch")
    ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot_dce(vae: Any, depth: Any, info: dict, cfg: Any, report: dict, path: Path) -> None:
    """Depth, collision target and reconstruction of six images; the loss curves."""
    import torch

    from volary.studies.rl.dce import collision_targets

    idx = torch.linspace(0, depth.shape[0] - 1, 6).long()
    with torch.no_grad():
        rec = vae.decode(vae.encode(depth[idx])[0])
    tgt = collision_targets(depth[idx], info, cfg.max_px)
    kw = {"vmin": 0, "vmax": 1, "cmap": "viridis"}
    rows = [("depth", [d.numpy() for d in depth[idx]], kw),
            ("collision image", [t.numpy() for t in tgt], kw),
            ("reconstruction", [r.numpy() for r in rec], kw)]  # fmt: skip
    h = report["history"]
    curves = {"train reconstruction": h["train_recon"],
              "validation reconstruction (after the epoch)": h["val_recon"],
              "KL (nats)": h["train_kl"]}  # fmt: skip
    title = f"deep collision encoder: {report['frames']} images, latent {cfg.latent}"
    _image_figure(rows, curves, title, path)


@rl_app.command("rgb-encoder")
def rl_rgb_encoder(
    out: Out = Path("out/rl/rgb-encoder"),
    seed: Seed = 0,
    set_: SetOption = None,
) -> None:
    """Train the learned_rgb planner's RGB depth encoder (volary.studies.rl.rgb_depth).

    Renders RGB and depth at random free poses in the training scenes (forest and urban,
    generator seeds 1000 and up: not the benchmark's configurations), trains a small CNN to
    predict the learned policy's min-pooled depth grid from RGB, holding out whole scenes for
    validation. --set fields of RgbDepthConfig (scenarios, scenes, scene_seed,
    frames_per_scene, epochs, batch, lr, over_weight, channels, ...). Writes encoder.npz
    (plain arrays: fly it with --algo learned_rgb and the planner option
    encoder=OUT/encoder.npz), report.json and rgb_encoder.png into --out."""
    import time

    import torch

    from volary.errors import VolaryError
    from volary.studies.rl.rgb_depth import RgbDepthConfig, collect, export, train

    try:
        cfg = configure(RgbDepthConfig(), [("--seed", "seed", seed)], set_)
    except VolaryError as err:
        fail(str(err))
    torch.manual_seed(seed)
    n = len(cfg.scenarios) * cfg.scenes
    console.print(f"rendering {n * cfg.frames_per_scene} RGB + depth frames in {n} scenes ...",
                  highlight=False)  # fmt: skip
    t0 = time.perf_counter()

    def scene_done(k: int, total: int) -> None:
        if k % max(1, total // 8) == 0 or k == total:
            console.print(f"  scene {k}/{total} ({time.perf_counter() - t0:.0f} s)",
                          highlight=False)  # fmt: skip

    def epoch_done(epoch: int, row: dict[str, float]) -> None:
        console.print(f"epoch {epoch + 1}/{cfg.epochs}: loss {row['train_loss']:.4f}, "
                      f"unseen scenes: MAE {row['val_mae_m']:.2f} m, within 3 m MAE "
                      f"{row['val_near_mae_m']:.2f} m, >1 m too far "
                      f"{row['val_near_too_far_1m']:.1%}", highlight=False)  # fmt: skip

    try:
        rgb, target, info = collect(cfg, progress=scene_done)
        collect_s = time.perf_counter() - t0
        ids = info.pop("scene_ids")
        net, report = train(rgb, target, cfg, ids, progress=epoch_done)
    except VolaryError as err:
        fail(str(err))
    out.mkdir(parents=True, exist_ok=True)
    report.update(info=info, collect_s=collect_s)
    export(net, out / "encoder.npz", info, report)
    (out / "report.json").write_text(json.dumps(report, indent=2))
    _plot_rgb_encoder(net, rgb, target, ids, report, out / "rgb_encoder.png")
    console.print(f"-> {out / 'encoder.npz'}, report.json, rgb_encoder.png (render "
                  f"{collect_s:.0f} s, train {report['wall_s']:.0f} s)",
                  highlight=False, markup=False)  # fmt: skip


def _plot_rgb_encoder(net: Any, rgb: Any, target: Any, ids: Any, report: dict, path: Path) -> None:
    """Six validation frames: RGB, the true pooled depth, the prediction; the learning curve."""
    import torch

    from volary.studies.rl.rgb_depth import as_input

    grid = tuple(report["config"]["grid"])
    val = torch.nonzero(torch.isin(ids, ids.unique()[-1:])).flatten()  # any one scene's frames
    idx = val[torch.linspace(0, len(val) - 1, 6).long()]
    with torch.no_grad():
        pred = net(as_input(rgb[idx]))
    kw = {"vmin": 0, "vmax": 1, "cmap": "viridis"}
    rows = [("RGB", [f.numpy() for f in rgb[idx]], {}),
            ("depth grid", [target[i].view(grid).numpy() for i in idx], kw),
            ("predicted", [p.numpy() for p in pred], kw)]  # fmt: skip
    h = report["history"]
    curves = {"unseen scenes: MAE (m)": h["val_mae_m"],
              "unseen scenes, truth within 3 m: MAE (m)": h["val_near_mae_m"]}  # fmt: skip
    title = (f"RGB depth encoder: {report['frames']} frames, "
             f"{report['validation_scenes']} scenes held out")  # fmt: skip
    _image_figure(rows, curves, title, path)


PARITY_OBSERVATIONS = 1000  # observations of the ONNX parity check printed by rl export


def _write_npz(policy: Any, path: Path, task: str, env_options: dict[str, Any]) -> None:
    """policy.npz: the deterministic policy as plain arrays; for navigate with the task's
    deployment layout (what the learned planner needs to rebuild its observation)."""
    from volary.studies.rl.export import mlp_npz

    meta: dict[str, Any] = {"task": task}
    if task == "navigate":
        from volary.envs.navigate import NavigateTaskConfig, deployment_layout

        fields = NavigateTaskConfig.__dataclass_fields__
        opts = {k: v for k, v in env_options.items() if k in fields}
        meta = deployment_layout(NavigateTaskConfig(**opts))
    mlp_npz(policy, path, meta=meta)
    console.print(f"-> {path} (plain arrays + deployment layout)", highlight=False, markup=False)


@rl_app.command("export")
def rl_export(
    checkpoint: Annotated[Path, typer.Argument(help="policy.pt written by rl train.")],
    onnx: Annotated[
        Path | None, typer.Option("--onnx", help="Write the deterministic policy as ONNX here.")
    ] = None,
    header: Annotated[
        Path | None, typer.Option("--header", help="Write a C99 header of the MLP here.")
    ] = None,
    npz: Annotated[
        Path | None,
        typer.Option("--npz", help="Write plain arrays (numpy, no pickle) + the task's layout."),
    ] = None,
    name: Annotated[str, typer.Option("--name", help="C prefix in the header.")] = "policy",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the parity observations.")] = 0,
) -> None:
    """Export a policy's deterministic action for deployment: ONNX and/or a C header.

    The action is clamp(mu(o), -1, 1), as rl eval acts. After --onnx, prints the largest
    difference between torch and onnxruntime on 1,000 observations drawn from the policy's
    observation statistics. ONNX needs the export extra (onnx, onnxruntime, onnxscript)."""
    from volary.errors import VolaryError
    from volary.studies.rl.export import c_header, export_onnx, onnx_parity, parity_observations
    from volary.studies.rl.ppo import load_policy

    if onnx is None and header is None and npz is None:
        fail("expected --onnx PATH, --header PATH and/or --npz PATH")
    if not checkpoint.is_file():
        fail(f"CHECKPOINT: no such file {str(checkpoint)!r}")
    try:
        net, _, ckpt_meta = load_policy(checkpoint, "cpu")
    except VolaryError as err:
        fail(f"CHECKPOINT: {err}")
    if npz is not None:
        try:
            _write_npz(net, npz, str(ckpt_meta.get("task", "")),
                       dict(ckpt_meta.get("env_options") or {}))  # fmt: skip
        except VolaryError as err:
            fail(f"--npz: {err}")
    if onnx is not None:
        try:
            export_onnx(net, onnx, net.obs_dim)
            obs = parity_observations(net, PARITY_OBSERVATIONS, seed)
            diff = onnx_parity(net, onnx, obs)
        except VolaryError as err:
            fail(f"--onnx: {err}")
        console.print(f"-> {onnx} (ONNX); max |torch - onnxruntime| on {len(obs)} observations: "
                      f"{diff:.3g}", highlight=False, markup=False)  # fmt: skip
    if header is not None:
        try:
            c_header(net, header, name=name)
        except VolaryError as err:
            fail(f"--header: {err}")
        console.print(f"-> {header} (C99, {name}_forward)", highlight=False, markup=False)


class EpisodeTracer:
    """A vector env that records env 0's pose before every step until its first episode ends
    (the poses of :class:`volary.view.Track`); everything else goes to the env as it is."""

    def __init__(self, env: Any) -> None:
        self.env, self.done = env, False
        self.t: list[float] = []
        self.pos: list[Any] = []
        self.quat: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def step(self, actions: Any) -> Any:
        if not self.done:
            st = self.env.world.state
            self.t.append(float(st.time[0]))
            self.pos.append(st.pos[0].detach().cpu().double().numpy())
            self.quat.append(st.quat[0].detach().cpu().double().numpy())
        out = self.env.step(actions)
        self.done = self.done or bool(out[4]["done"][0])
        return out

    def recording(self, title: str) -> Any:
        """The recorded episode in env 0's scene (an open box around it when there is none)."""
        import numpy as np

        from volary.view import Track, recording_from_spec
        from volary.worlds import SceneSpec

        pos, t = np.array(self.pos), np.array(self.t) - self.t[0]
        specs = self.env.world.specs
        if specs is not None:
            spec = specs[0]
        else:
            lo, hi = pos.min(0) - 2.0, pos.max(0) + 2.0
            spec = SceneSpec("open", (lo[0], lo[1], 0.0), (hi[0], hi[1], max(hi[2], 1.0)))
        radius = float(self.env.world.sim.params.radius[0])
        track = Track("env 0", t, pos, np.array(self.quat), radius)
        return recording_from_spec(spec, [track], title)


__all__ = [
    "LEARNERS",
    "OPTIONS",
    "PARITY_OBSERVATIONS",
    "VALIDATION_SEED",
    "EpisodeTracer",
    "rl_app",
    "rl_dce",
    "rl_eval",
    "rl_export",
    "rl_rgb_encoder",
    "rl_train",
]
