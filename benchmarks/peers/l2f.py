"""l2f (learning-to-fly, rl_tools C++ with pybind11 bindings): vectorized envs, RK4."""

from __future__ import annotations

INFO = {
    "package": "l2f",
    "step": "vector<K>.step(...): per env (OpenMP loop) action noise draw + clamp + scaling, one "
    "RK4 step of the rigid-body multirotor (polynomial thrust curves, rotor torque, "
    "random disturbance force/torque state, rotor speeds; no aerodynamic drag), "
    "post-integration (quaternion normalization, rotor clamp/first-order lag, action "
    "history); crazyflie parameters, float32. N > 8192 runs N/8192 vector8192 blocks",
    "threads": "OpenMP defaults (all cores)",
}

_MAX = 8192


def setup(n: int, seed: int):
    import numpy as np
    from l2f import vector_selector
    from l2f.interface import Device

    k = min(n, _MAX)
    if n % k or k not in vector_selector:
        raise ValueError(f"l2f: no vector size for N={n}")
    vec = vector_selector[k]
    device = Device()
    blocks = []
    for b in range(n // k):
        env, params, state, nxt, rng = (
            vec.VectorEnvironment(),
            vec.VectorParameters(),
            vec.VectorState(),
            vec.VectorState(),
            vec.VectorRng(),
        )
        vec.initialize_environment(device, env)
        vec.initialize_rng(device, rng, seed + b)
        vec.initial_parameters(device, env, params)
        vec.initial_state(device, env, params, state)
        blocks.append([env, params, state, nxt, rng])
    action = np.zeros((k, 4), dtype=np.float32)  # normalized rotor command, ~hover region

    def step_fn() -> None:
        for blk in blocks:
            env, params, state, nxt, rng = blk
            vec.step(device, env, params, state, action, nxt, rng)
            blk[2], blk[3] = nxt, state

    step_fn.bytes_per_env = None  # opaque C++ structs
    return step_fn
