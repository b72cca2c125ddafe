"""Peer simulators measured beside volary by ``benchmarks/physics.py``.

Each module exposes ``INFO`` (what one step includes) and ``setup(n, seed) -> step_fn``; calling
``step_fn()`` advances all ``n`` envs by one physics step and returns only when the work is done
(JAX: ``block_until_ready``). ``step_fn.bytes_per_env`` is state + parameter bytes / n when the
peer exposes its arrays, else None.
"""
