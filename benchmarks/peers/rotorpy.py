"""rotorpy BatchedMultirotor (PyTorch, torchdiffeq): motor-speed commands, fixed-step RK4."""

from __future__ import annotations

INFO = {
    "package": "rotorpy",
    "step": "BatchedMultirotor.step(state, cmd_motor_speeds, 1/960): clip command, one fixed-step "
    "torchdiffeq RK4 step of rigid body + first-order motor lag + rotor drag/aero "
    "(aero=True), quaternion renormalization, motor-speed noise draw; crazyflie "
    "parameters, float64 (rotorpy requires double), torch threads = 2",
    "threads": "torch.set_num_threads(2)",
}


def setup(n: int, seed: int):
    import torch
    from rotorpy.vehicles.crazyflie_params import quad_params
    from rotorpy.vehicles.multirotor import BatchedMultirotor, BatchedMultirotorParams

    torch.set_num_threads(2)
    torch.manual_seed(seed)  # rotorpy draws its motor noise from torch's global generator
    dev = torch.device("cpu")
    params = BatchedMultirotorParams([quad_params] * n, n, dev)
    d = torch.float64
    state = {
        "x": torch.zeros(n, 3, dtype=d),
        "v": torch.zeros(n, 3, dtype=d),
        "q": torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=d).repeat(n, 1),
        "w": torch.zeros(n, 3, dtype=d),
        "wind": torch.zeros(n, 3, dtype=d),
        "rotor_speeds": torch.full((n, 4), 1788.53, dtype=d),
    }
    quad = BatchedMultirotor(
        params, n, state, dev, control_abstraction="cmd_motor_speeds", aero=True, integrator="rk4"
    )
    control = {"cmd_motor_speeds": torch.full((n, 4), 1788.53, dtype=d)}
    holder = [state]

    def step_fn() -> None:
        holder[0] = quad.step(holder[0], control, 1.0 / 960.0)

    tensors = list(state.values()) + [v for v in vars(params).values() if torch.is_tensor(v)]
    step_fn.bytes_per_env = sum(t.numel() * t.element_size() for t in tensors) / n
    return step_fn
