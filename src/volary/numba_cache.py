"""numba's on-disk kernel cache, kept in step with the sources its kernels were built from.

numba drops a cached kernel when the file that defines it changes, but not when a function it
calls from another file does (numba's documentation, "Cache invalidation"). So after an edit of
``dynamics/aero.py`` or ``dynamics/numba_kernels.py`` alone, the closed loop of
``sim/fused_kernels.py`` would load its old machine code, the old physics inlined, and fly it
without a word (seen while adding the rotor aerodynamics: the fused loop ignored them).

A module whose cached kernels call into other files calls :func:`guard` before any kernel runs:
it digests the module's source and those of every file it depends on (transitively, through
their own ``NUMBA_SOURCES``) and, when the digest differs from the one stored beside the cache,
removes the module's cache entries, so numba compiles afresh and stores the new digest. Where
``__pycache__`` is read-only numba caches elsewhere and nothing is removed (an install rewrites
every file, which numba does notice).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType


def guard(module_file: str, *deps: ModuleType) -> tuple[str, ...]:
    """Remove ``module_file``'s numba cache entries if it or any of ``deps`` (modules, with
    their own ``NUMBA_SOURCES`` when they have them) changed since they were written; returns
    the files its kernels depend on, for the module's ``NUMBA_SOURCES``."""
    files = [str(module_file)]
    for m in deps:
        for f in getattr(m, "NUMBA_SOURCES", (m.__file__,)):
            if f not in files:
                files.append(f)
    digest = hashlib.sha256()
    for f in files:
        digest.update(Path(f).read_bytes())
    src = Path(module_file)
    cache = src.parent / "__pycache__"
    stamp = cache / f"{src.stem}.numba-sources"
    try:
        if stamp.read_text() == digest.hexdigest():
            return tuple(files)
    except OSError:  # no digest yet
        pass
    try:
        for old in cache.glob(f"{src.stem}.*.nb[ic]"):
            old.unlink()
        cache.mkdir(exist_ok=True)
        stamp.write_text(digest.hexdigest())
    except OSError:  # a read-only install: numba's user-wide cache, rewritten on install
        pass
    return tuple(files)
