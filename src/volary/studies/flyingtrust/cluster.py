"""Submit a run's work units to a dask.distributed cluster (optional extra ``cluster``).

The driver (the process that called ``run_suite``) keeps writing the database, exactly as with
the local pool: ``client.submit(call_unit, fn, unit)`` per unit, rows stored as units finish
(``as_completed``). Addresses: ``tcp://host:port`` (an existing scheduler) or ``local:N`` (a
``LocalCluster`` of N single-threaded worker processes on this machine). A unit whose workers
keep dying (dask gives up after its ``allowed-failures``) is stored as cause ``"error"``.
dask is imported only here, only when used.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from volary.errors import ConfigError, MissingDependencyError
from volary.studies.flyingtrust.schema import WorkUnit
from volary.studies.flyingtrust.units import Event, UnitFn, call_unit, error_rows, unit_rows


def parse_address(address: str) -> tuple[str, int | str]:
    """("local", N) or ("remote", address); anything else is a ConfigError."""
    if not isinstance(address, str) or not address:
        raise ConfigError(f"cluster: expected 'tcp://host:port' or 'local:N', got {address!r}")
    if address.startswith("local:"):
        n = address.removeprefix("local:")
        if not n.isdigit() or int(n) < 1:
            raise ConfigError(f"cluster: expected local:N with N >= 1 workers, got {address!r}")
        return "local", int(n)
    if "://" not in address:
        raise ConfigError(f"cluster: expected 'tcp://host:port' or 'local:N', got {address!r}")
    return "remote", address


def _client(address: str) -> tuple[Any, Any]:
    """(Client, LocalCluster or None)."""
    kind, where = parse_address(address)
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise MissingDependencyError("dask.distributed", "cluster") from None
    if kind == "local":
        cluster = LocalCluster(
            n_workers=int(where), processes=True, threads_per_worker=1, dashboard_address=None
        )
        return Client(cluster), cluster
    try:
        return Client(str(where), timeout=30), None
    except OSError as e:
        raise ConfigError(f"cluster: cannot reach the dask scheduler at {where}: {e}") from None


def dask_events(todo: list[tuple[int, WorkUnit]], fn: UnitFn, address: str) -> Iterator[Event]:
    """(unit index, rows) as the cluster finishes units."""
    from dask.distributed import as_completed

    client, cluster = _client(address)
    try:
        futures = {
            client.submit(call_unit, fn, u, pure=False, key=f"volary-unit-{i}-{time.time_ns()}"): (
                i,
                u,
                time.perf_counter(),
            )
            for i, u in todo
        }
        for fut in as_completed(futures):
            i, u, t0 = futures[fut]
            wall = time.perf_counter() - t0
            try:
                outcome = fut.result()
            except Exception as e:  # KilledWorker, lost connection, ...
                yield i, error_rows(u, f"the cluster could not run this work unit: {e!r}", wall)
                continue
            yield i, unit_rows(u, outcome, wall)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
