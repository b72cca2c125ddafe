"""volary.numba_cache.guard: a module's cached numba kernels go when a file they call changes."""

from __future__ import annotations

import types

from volary.numba_cache import guard


def test_cache_entries_go_when_a_dependency_changes_and_stay_otherwise(tmp_path):
    dep, mod = tmp_path / "dep.py", tmp_path / "mod.py"
    dep.write_text("X = 1\n")
    mod.write_text("Y = 2\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    entry = cache / "mod.kernel-10.py311.nbi"
    other = cache / "dep.kernel-3.py311.nbi"
    dep_mod = types.SimpleNamespace(__file__=str(dep))
    assert guard(str(mod), dep_mod) == (str(mod), str(dep))  # first time: no digest yet
    entry.write_text("index")
    other.write_text("index")
    guard(str(mod), dep_mod)  # nothing changed: kept
    assert entry.exists()
    dep.write_text("X = 3\n")  # the dependency changed: mod's entries go, dep's own stay
    guard(str(mod), dep_mod)
    assert not entry.exists() and other.exists()
    entry.write_text("index")
    nested = types.SimpleNamespace(__file__=str(mod), NUMBA_SOURCES=(str(mod), str(dep)))
    top = tmp_path / "top.py"
    top.write_text("Z = 0\n")
    assert guard(str(top), nested) == (str(top), str(mod), str(dep))  # transitive sources
