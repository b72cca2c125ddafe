"""crazyflow (utiasDSL, JAX): first-principles quadrotor, rotor-speed commands, RK4."""

from __future__ import annotations

INFO = {
    "package": "crazyflow",
    "step": "Sim.step(1): jitted JAX pipeline = clip rotor-speed command, RK4 of the "
    "first-principles model (rigid body, quadratic thrust/torque curves, first-order "
    "rotor dynamics, linear drag matrix, gyroscopic term), floor clip, step counter; "
    "cf21B_500 drone, 1 drone per world, float32, freq 500 Hz, block_until_ready",
    "threads": "XLA CPU defaults",
}


def setup(n: int, seed: int):
    import jax
    import jax.numpy as jnp
    from crazyflow.sim import Sim

    sim = Sim(
        n_worlds=n,
        n_drones=1,
        dynamics="first_principles",
        control="rotor_vel",
        integrator="rk4",
        freq=500,
        device="cpu",
        rng_key=seed,
    )
    sim.reset()
    hover = float(_hover_rpm(sim))
    sim.rotor_vel_control(jnp.full((n, 1, 4), hover, dtype=jnp.float32))

    def step_fn() -> None:
        sim.step(1)
        jax.block_until_ready(sim.data)

    leaves = jax.tree_util.tree_leaves((sim.data.states, sim.data.params))
    step_fn.bytes_per_env = sum(getattr(x, "nbytes", 0) for x in leaves) / n
    return step_fn


def _hover_rpm(sim) -> float:
    """A hover-ish rotor speed; the exact value does not change the cost of a step."""
    try:
        import numpy as np

        p = sim.data.params
        coef = np.asarray(p.rpm2thrust).reshape(-1)[-3:]
        weight = float(np.asarray(p.mass).reshape(-1)[0]) * 9.81 / 4
        a, b, c = float(coef[2]), float(coef[1]), float(coef[0]) - weight
        return (-b + (b * b - 4 * a * c) ** 0.5) / (2 * a)
    except Exception:  # noqa: BLE001 - any parameter layout change: use a plausible value
        return 15000.0
