"""Export (``volary.studies.rl.export``): ONNX parity with torch through onnxruntime, the C header
compiled with gcc and compared with torch, the errors, and ``volary rl export``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from volary.cli.main import app
from volary.errors import ConfigError, MissingDependencyError
from volary.studies.rl.export import (
    c_header,
    deterministic_actor,
    export_onnx,
    onnx_parity,
    onnx_session,
    parity_observations,
)
from volary.studies.rl.ppo import ActorCritic, PPOConfig, save_policy

OBS_DIM, ACT_DIM = 7, 3
TOL = 1e-5  # the acceptance: ONNX parity < 1e-5 on 1,000 observations
needs_onnx = pytest.mark.skipif(
    any(find_spec(m) is None for m in ("onnx", "onnxruntime", "onnxscript")),
    reason="needs volary[export] (onnx, onnxruntime, onnxscript)",
)


def _policy(seed: int = 0, normalize: bool = True, clip: float | None = 10.0) -> ActorCritic:
    """A PPO policy as volary builds it, with observation statistics and an output layer scaled
    so that part of the actions reach the [-1, 1] clamp (a fresh one acts near 0); ``clip``:
    the normalizer's (None: not clipped, as rsl_rl's learner trains)."""
    cfg = PPOConfig(hidden=(64, 64), seed=seed, normalize_obs=normalize, obs_clip=clip)
    policy = ActorCritic(OBS_DIM, ACT_DIM, cfg)
    gen = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        policy.obs_norm.mean.copy_(3.0 * torch.randn(OBS_DIM, generator=gen, dtype=torch.float64))
        policy.obs_norm.var.copy_(0.05 + 4.0 * torch.rand(OBS_DIM, generator=gen).double())
        policy.obs_norm.count.fill_(5000.0)
        policy.actor[-1].weight.mul_(200.0)
        for lin in policy.actor[::2]:  # volary initializes biases to zero
            lin.bias.copy_(0.3 * torch.randn(lin.bias.shape, generator=gen))
    return policy.eval()


def _observations(policy: ActorCritic, n: int) -> torch.Tensor:
    """``n`` observations from the policy's statistics, a tenth of them far out (past the
    normalizer's +-10 std clip)."""
    obs = parity_observations(policy, n, seed=3)
    obs[: n // 10] *= 40.0
    return obs


def _mlp() -> nn.Sequential:
    torch.manual_seed(5)
    return nn.Sequential(
        nn.Linear(OBS_DIM, 32), nn.ReLU(), nn.Linear(32, 32), nn.ELU(alpha=0.7),
        nn.Linear(32, 16), nn.Tanh(), nn.Identity(), nn.Linear(16, ACT_DIM),
    ).eval()  # fmt: skip


def test_deterministic_actor_is_what_volary_runs():
    policy = _policy()
    obs = _observations(policy, 1000)
    with torch.no_grad():
        got = deterministic_actor(policy)(obs)
    assert torch.equal(got, policy.act(obs, deterministic=True))
    clipped = (got.abs() == 1.0).float().mean()
    assert 0.05 < clipped < 0.95, clipped  # the clamp is exercised, not saturated
    assert (policy.obs_norm(obs).abs() == policy.obs_norm.clip).any()  # so is the obs clip
    mlp = _mlp()
    assert deterministic_actor(mlp) is mlp


# ---- ONNX ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, tuple[nn.Module, Path]]:
    root = tmp_path_factory.mktemp("onnx")
    if any(find_spec(m) is None for m in ("onnx", "onnxruntime", "onnxscript")):
        pytest.skip("needs volary[export]")
    policy, mlp, unclipped = _policy(), _mlp(), _policy(clip=None)
    return {
        "ppo": (policy, export_onnx(policy, root / "ppo.onnx", OBS_DIM)),
        "ppo-no-clip": (unclipped, export_onnx(unclipped, root / "ppo-no-clip.onnx", OBS_DIM)),
        "mlp": (mlp, export_onnx(mlp, root / "mlp.onnx", OBS_DIM)),
    }


@needs_onnx
@pytest.mark.parametrize("which", ["ppo", "ppo-no-clip", "mlp"])
def test_onnx_parity_on_1000_observations(exported, which):
    module, path = exported[which]
    obs = _observations(_policy(), 1000)
    diff = onnx_parity(module, path, obs)
    print(f"ONNX parity ({which}, 1000 observations): {diff:.3g}")
    assert diff < TOL


@needs_onnx
@pytest.mark.parametrize("which", ["ppo", "mlp"])
def test_onnx_batch_is_dynamic_and_named(exported, which):
    module, path = exported[which]
    sess = onnx_session(path)
    (inp,), (out,) = sess.get_inputs(), sess.get_outputs()
    assert (inp.name, out.name) == ("obs", "action")
    assert isinstance(inp.shape[0], str) and inp.shape[1] == OBS_DIM
    obs = _observations(_policy(), 1000)
    for n in (1, 1000):
        got = sess.run(None, {"obs": obs[:n].numpy()})[0]
        with torch.no_grad():
            ref = deterministic_actor(module)(obs[:n]).numpy()
        assert got.shape == (n, ACT_DIM)
        np.testing.assert_allclose(got, ref, rtol=0, atol=TOL)


@needs_onnx
def test_onnx_parity_sees_a_different_policy(exported):
    _, path = exported["ppo"]
    assert onnx_parity(_policy(seed=1), path, _observations(_policy(), 200)) > 1e-2


# ---- C header ------------------------------------------------------------------------------------
MAIN_C = """#include <stdio.h>
#include "{name}.h"
int main(void)
{{
    float obs[{upper}_OBS_DIM], act[{upper}_ACT_DIM];
    for (;;) {{
        for (int i = 0; i < {upper}_OBS_DIM; ++i)
            if (scanf("%a", &obs[i]) != 1) return 0;
        {name}_forward(obs, act);
        for (int i = 0; i < {upper}_ACT_DIM; ++i) printf("%a ", (double)act[i]);
        printf("\\n");
    }}
}}
"""


def _run_c(header: Path, name: str, obs: torch.Tensor) -> np.ndarray:
    """Compile a program around the header (warnings are errors) and run it on ``obs``; hex
    floats both ways, so the I/O is exact."""
    src, exe = header.parent / "main.c", header.parent / "main"
    src.write_text(MAIN_C.format(name=name, upper=name.upper()))
    flags = ["-std=c99", "-O2", "-Wall", "-Wextra", "-pedantic", "-Werror"]
    subprocess.run(["gcc", *flags, "-o", str(exe), str(src), "-lm"], check=True, cwd=header.parent)
    text = "\n".join(" ".join(float(v).hex() for v in row) for row in obs.tolist())
    out = subprocess.run([str(exe)], input=text, capture_output=True, text=True, check=True)
    return np.array([[float.fromhex(v) for v in line.split()] for line in out.stdout.splitlines()])


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("which", ["ppo", "ppo-no-norm", "ppo-no-clip", "mlp"])
def test_c_header_matches_torch(tmp_path, which):
    module = {"ppo": _policy, "ppo-no-norm": lambda: _policy(normalize=False),
              "ppo-no-clip": lambda: _policy(clip=None), "mlp": _mlp}[which]()  # fmt: skip
    name = "pi" if which == "mlp" else "policy"
    header = c_header(module, tmp_path / f"{name}.h", name=name)
    obs = _observations(_policy(), 200)
    got = _run_c(header, name, obs)
    with torch.no_grad():
        ref = deterministic_actor(module)(obs).numpy()
    assert got.shape == (200, ACT_DIM)
    diff = float(np.max(np.abs(got - ref)))
    print(f"C header parity ({which}, 200 observations): {diff:.3g}")
    assert diff < TOL


def test_c_header_layout(tmp_path):
    text = c_header(_policy(), tmp_path / "policy.h").read_text()
    for part in (
        "static const float policy_W0[448]", "static const float policy_b2[3]",
        "static const float policy_obs_mean[7]", "static const float policy_obs_std[7]",
        "Linear(7, 64)", "Linear(64, 64)", "Linear(64, 3)", "RunningNorm(7, clip 10)",
        "clamp [-1, 1]", "static inline void policy_forward(const float *obs, float *action)",
        "#define POLICY_OBS_DIM 7", "#define POLICY_ACT_DIM 3",
    ):  # fmt: skip
        assert part in text, part
    assert "malloc" not in text and "#include <math.h>" in text
    assert "-10.0f" in text  # the +-10 std clamp
    unclipped = c_header(_policy(clip=None), tmp_path / "unclipped.h").read_text()
    assert "RunningNorm(7, not clipped)" in unclipped and "-10.0f" not in unclipped


# ---- errors --------------------------------------------------------------------------------------
def test_c_header_names_an_unsupported_layer(tmp_path):
    net = nn.Sequential(nn.Linear(4, 8), nn.Conv1d(1, 1, 3), nn.Linear(8, 2))
    with pytest.raises(ConfigError, match="Conv1d"):
        c_header(net, tmp_path / "x.h")
    with pytest.raises(ConfigError, match="GELU"):
        c_header(nn.Sequential(nn.Linear(4, 8), nn.GELU()), tmp_path / "x.h")
    with pytest.raises(ConfigError, match="name"):
        c_header(_mlp(), tmp_path / "x.h", name="1policy")
    assert not (tmp_path / "x.h").exists()


@pytest.mark.parametrize("obs_dim", [0, -3, True, 2.0])
def test_export_onnx_names_a_bad_obs_dim(tmp_path, obs_dim):
    with pytest.raises(ConfigError, match="obs_dim"):
        export_onnx(_mlp(), tmp_path / "x.onnx", obs_dim)


def test_export_onnx_argument_errors(tmp_path):
    with pytest.raises(ConfigError, match="obs_dim: the policy takes 7"):
        export_onnx(_policy(), tmp_path / "x.onnx", 5)
    with pytest.raises(ConfigError, match="obs_dim"):  # the MLP's first layer takes 7
        export_onnx(_mlp(), tmp_path / "x.onnx", 5)
    with pytest.raises(ConfigError, match="path: directory"):
        export_onnx(_mlp(), tmp_path / "missing" / "x.onnx", OBS_DIM)
    with pytest.raises(ConfigError, match="obs: expected"):
        onnx_parity(_mlp(), tmp_path / "x.onnx", torch.zeros(OBS_DIM))


def test_missing_onnx_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    with pytest.raises(MissingDependencyError, match=re.escape("volary[export]")):
        export_onnx(_mlp(), tmp_path / "x.onnx", OBS_DIM)


# ---- CLI -----------------------------------------------------------------------------------------
@needs_onnx
def test_cli_export_writes_onnx_and_header(tmp_path):
    ck = save_policy(tmp_path / "policy.pt", _policy(), PPOConfig(hidden=(64, 64)))
    onnx, header = tmp_path / "p.onnx", tmp_path / "p.h"
    r = CliRunner().invoke(
        app, ["rl", "export", str(ck), "--onnx", str(onnx), "--header", str(header)]
    )
    assert r.exit_code == 0, r.output
    found = re.search(r"on 1000 observations: (\S+)", r.output)
    assert found is not None and float(found.group(1)) < TOL, r.output
    assert onnx.stat().st_size > 0 and "policy_forward" in header.read_text()


def test_cli_export_npz_carries_the_navigate_layout(tmp_path):
    """--npz: plain arrays the numpy runtime evaluates as torch does, with the layout of the
    checkpoint's navigate task (what the learned planner rebuilds its observation from)."""
    from volary.studies.flyingtrust.planners.learned import NumpyMLP
    from volary.studies.rl.export import deterministic_actor

    pol = _policy()
    meta = {"task": "navigate", "env_options": {"action_repeat": 6, "max_speed": 3.0}}
    ck = save_policy(tmp_path / "policy.pt", pol, PPOConfig(hidden=(64, 64)), meta)
    r = CliRunner().invoke(app, ["rl", "export", str(ck), "--npz", str(tmp_path / "p.npz")])
    assert r.exit_code == 0, r.output
    net = NumpyMLP(tmp_path / "p.npz")
    assert net.meta["decision_hz"] == 10.0 and net.meta["max_speed"] == 3.0
    obs = torch.randn(300, OBS_DIM, generator=torch.Generator().manual_seed(1)) * 3
    want = deterministic_actor(pol)(obs).detach().numpy()
    assert np.abs(net(obs.numpy()) - want).max() < TOL


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "--onnx PATH, --header PATH and/or --npz PATH"),
        (["--header", "x.h"], "CHECKPOINT: "),
    ],
)
def test_cli_export_errors_exit_2(tmp_path, args, message):
    ck = tmp_path / "none.pt"
    if not args:  # the checkpoint is checked (a regular file) before the outputs are asked for
        ck.touch()
    r = CliRunner().invoke(app, ["rl", "export", str(ck), *args])
    assert r.exit_code == 2 and message in r.output, r.output
