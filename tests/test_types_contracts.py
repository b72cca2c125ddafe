"""The protocols of volary.types have real implementations: every controller a user can pick by
name (each control mode, the two MPC controllers) is a ``Controller`` that takes an
(N, setpoint_size) setpoint and resets per env, and every registered policy (the sensors-only
contestants, the SV-Net policy of each variant, the RL actor-critic) is a ``Policy``."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from volary.control import CONTROL_MODES, make_controller
from volary.control.mpc import BatchedMpcController, MpcConfig, NmpcController
from volary.control.references import figure_eight
from volary.dynamics import MultirotorState, VehicleParams
from volary.platforms import get
from volary.studies.alphapilot.interface import CONTESTANTS, make_contestant
from volary.studies.rl.ppo import ActorCritic, PPOConfig
from volary.studies.sousvide.net import VARIANTS, ArchConfig, NetConfig, SVNet
from volary.studies.sousvide.policy import SVPolicy
from volary.types import Controller, Policy

N = 2
HAS_CASADI = importlib.util.find_spec("casadi") is not None


def _params() -> VehicleParams:
    return VehicleParams.from_airframes([get("crazyflie")], N)


@pytest.mark.parametrize("mode", CONTROL_MODES)
def test_every_control_mode_builds_a_controller(mode):
    params = _params()
    ctrl = make_controller(mode, params)
    assert isinstance(ctrl, Controller)
    assert ctrl.mode == mode
    state = MultirotorState.create(N, params.n_rotors, pos=torch.tensor([[0.0, 0.0, 1.0]] * N))
    cmd = ctrl(state, torch.zeros(N, ctrl.setpoint_size), 1.0 / 240.0)
    assert cmd.shape[0] == N and torch.isfinite(cmd).all()
    ctrl.reset(torch.tensor([True, False]))
    ctrl.reset()


@pytest.mark.parametrize(
    "cls",
    [
        pytest.param(NmpcController, marks=pytest.mark.skipif(not HAS_CASADI, reason="casadi")),
        BatchedMpcController,
    ],
)
def test_the_mpc_controllers_are_controllers(cls):
    ctrl = cls(_params(), figure_eight(3.0, 2.0), MpcConfig(max_iter=1))
    assert isinstance(ctrl, Controller)


def test_an_object_without_reset_is_not_a_controller():
    class Half:
        mode, setpoint_size = "position", 4

        def __call__(self, state, setpoint, dt):
            return setpoint

    assert not isinstance(Half(), Controller)
    assert not isinstance(object(), Policy)


@pytest.mark.parametrize("name", CONTESTANTS.names())
def test_every_registered_contestant_is_a_policy(name):
    assert isinstance(make_contestant(name), Policy)


@pytest.mark.parametrize("variant", VARIANTS.names())
def test_the_sv_net_policy_of_every_variant_is_a_policy(variant):
    arch = ArchConfig(cnn_width=0.25, image_features=16, feature_hidden=(16,), features=8,
                      history_hidden=(16, 12), command_hidden=(16,))  # fmt: skip
    net = SVNet(NetConfig(variant, 3, 32, 32, arch), torch.Generator().manual_seed(0))
    assert isinstance(SVPolicy(net), Policy)


def test_the_rl_actor_critic_is_a_policy():
    assert isinstance(ActorCritic(8, 4, PPOConfig()), Policy)
