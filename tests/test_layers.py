"""DESIGN.md's layer rule: a module imports only from its own layer or below; nothing imports
``volary.cli``; a study (layer 6) imports layers 0-5 and never another study; the core imports
no study except the marked shims of moved modules (``MOVED_TO``), which warn and re-export, and
nothing in the repository imports a shim; no import circle among volary's modules; importing
volary loads no optional backend."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "volary"
LAYER = {
    "math": 0,
    "errors": 0,
    "types": 0,
    "device": 0,
    "registry": 0,
    "config": 0,
    "inputs": 0,
    "cpu": 0,
    "numba_cache": 0,  # numba kernel caches kept in step with their sources
    "deprecation": 0,
    "options": 0,  # --set and configure, for the core's and the studies' commands
    "checks": 0,  # the option-check vocabulary of the core's and the studies' command tables
    "dynamics": 1,
    "platforms": 2,
    "worlds": 2,
    "sysid": 2,  # flight logs, fitting, open-loop prediction (issue 61)
    "control": 3,
    "sensors": 3,
    "planning": 3,
    "sim": 4,
    "envs": 4,
    "learning": 5,
    "bench": 5,
    "serve": 5,
    "client": 5,
    "ros2": 5,  # bridges (DESIGN.md layer 5)
    "ros1": 5,
    "fc": 5,  # firmware in the loop (issue 58)
    "view": 5,
    "studies": 6,  # one reproduced paper each (volary.studies.<study>)
    "cli": 7,
}


def _subpackage(path: Path) -> str | None:
    rel = path.relative_to(SRC).parts
    if len(rel) == 1:
        return None if rel[0] == "__init__.py" else rel[0].removesuffix(".py")
    return rel[0]


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
    return [m for m in out if m == "volary" or m.startswith("volary.")]


FILES = sorted(p for p in SRC.rglob("*.py") if _subpackage(p) is not None)


def _moved_to(path: Path) -> str | None:
    """A shim's ``MOVED_TO = "volary...."`` (the module it re-exports), else None."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["MOVED_TO"]:
            return ast.literal_eval(node.value)
    return None


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _study(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "studies" else None


SHIMS = {_module(p): m for p in FILES if (m := _moved_to(p)) is not None}


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_module_imports_only_its_layer_or_below(path):
    own = _subpackage(path)
    assert own in LAYER, f"{own} is not a layer of DESIGN.md"
    shim_of = _moved_to(path)
    for mod in _imports(path):
        parts = mod.split(".")
        if len(parts) < 2:
            continue
        target = parts[1]
        assert target != "cli" or own == "cli", f"{path.name} imports volary.cli"
        if mod == shim_of or (shim_of and mod == shim_of.rsplit(".", 1)[0]):
            continue  # a marked shim imports the module it re-exports
        assert LAYER[target] <= LAYER[own], (
            f"{path.relative_to(SRC)} (layer {LAYER[own]}) imports {mod} (layer {LAYER[target]})"
        )
        mine, theirs = _study(_module(path)), _study(mod)
        assert theirs is None or mine in (None, theirs), (
            f"{path.relative_to(SRC)} (study {mine}) imports another study: {mod}"
        )


def test_only_marked_shims_re_export_studies():
    """The core reaches a study only through a shim marked ``MOVED_TO``, and the mark names a
    study module that exists."""
    assert SHIMS, "no shims found: the AlphaPilot study's old paths are gone?"
    for old, new in SHIMS.items():
        assert _study(new) is not None, f"{old}: MOVED_TO {new!r} is not a study module"
        where = SRC.parent / new.replace(".", "/")
        assert where.with_suffix(".py").is_file() or _is_package(new), f"{old}: no {new}"


def _is_package(module: str) -> bool:
    return (SRC.parent / module.replace(".", "/") / "__init__.py").is_file()


def _package_modules(package: str) -> set[str]:
    return {p.stem for p in (SRC.parent / package.replace(".", "/")).glob("*.py")} - {"__init__"}


def _repo_python_files() -> list[Path]:
    dirs = [SRC, ROOT / "tests", ROOT / "benchmarks", ROOT / "experiments", ROOT / "docs"]
    return sorted(p for d in dirs if d.is_dir() for p in d.rglob("*.py"))


def _imported(text: str) -> set[str]:
    """Every volary module a source imports, ``from volary.bench import race`` as
    ``volary.bench.race`` too."""
    out = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m.startswith("volary.")}


def test_nothing_in_the_repository_imports_a_shim():
    """Internal code, tests, benchmarks and experiments use the new paths; the shims are for
    users' code only (this test module imports them on purpose)."""
    used = []
    for path in _repo_python_files():
        text = path.read_text()
        if path == Path(__file__).resolve() or "MOVED_TO" in text:
            continue
        if not any(old.rsplit(".", 1)[1] in text for old in SHIMS):  # cheap: no shim's name
            continue
        for mod in sorted(_imported(text)):
            used += [f"{path.relative_to(ROOT)} imports {mod}" for old in SHIMS if mod == old]
    assert used == [], "\n".join(used)


def _moved_names(path: Path) -> dict[str, str]:
    """A core module's ``MOVED_NAMES = {"name": "volary.studies...."}`` (single names that moved
    to a study while the module stayed), else {}."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == [
            "MOVED_NAMES"
        ]:
            return dict(ast.literal_eval(node.value))
    return {}


MOVED_NAMES = {_module(p): d for p in FILES if (d := _moved_names(p))}


@pytest.mark.parametrize("old", sorted(MOVED_NAMES))
def test_a_moved_name_warns_and_re_exports_the_study_s(old):
    """A name forwarded by a core module (``MOVED_NAMES``) is the study module's own, read with
    a DeprecationWarning naming the new path, and is not part of the core module's API."""
    module = importlib.import_module(old)
    for name, new in MOVED_NAMES[old].items():
        assert _study(new) is not None, f"{old}.{name}: {new!r} is not a study module"
        assert name not in getattr(module, "__all__", ()) and name not in vars(module)
        with pytest.warns(DeprecationWarning, match=f"moved to {new}.{name}"):
            assert getattr(module, name) is getattr(importlib.import_module(new), name)


def test_the_runner_s_names_that_left_with_flyingtrust_still_import():
    """User code that imported ``check_algo_names`` / ``stored_suite`` from the core runner
    before the FLYINGTRUST move keeps working for one release (the study's functions)."""
    from volary.studies.flyingtrust import run

    with pytest.warns(DeprecationWarning, match="moved to volary.studies.flyingtrust.run"):
        from volary.bench.nav.runner import check_algo_names, stored_suite
    assert (check_algo_names, stored_suite) == (run.check_algo_names, run.stored_suite)


def test_nothing_in_the_repository_imports_a_moved_name():
    """Like the shims: internal code, tests, benchmarks and experiments import a forwarded name
    from the study, not from the core module it left."""
    old_paths = {f"{mod}.{name}" for mod, names in MOVED_NAMES.items() for name in names}
    used = []
    for path in _repo_python_files():
        text = path.read_text()
        if path == Path(__file__).resolve() or not any(
            p.rsplit(".", 1)[1] in text for p in old_paths
        ):
            continue
        used += [f"{path.relative_to(ROOT)} imports {m}" for m in _imported(text) & old_paths]
    assert used == [], "\n".join(used)


@pytest.mark.parametrize("old", sorted(SHIMS))
def test_a_shim_warns_and_re_exports_the_new_module(old):
    shim, new = importlib.import_module(old), importlib.import_module(SHIMS[old])
    if _is_package(SHIMS[old]) and not getattr(new, "__all__", True):
        return  # a package that hands on no names: its modules' shims are checked one by one
    names = list(new.__all__) if hasattr(new, "__all__") else [n for n in vars(new) if n[0] != "_"]
    assert set(shim.__all__) == set(names) and names
    for name in names:
        with pytest.warns(DeprecationWarning, match=f"moved to {SHIMS[old]}.{name}"):
            assert getattr(shim, name) is getattr(new, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError):
            shim.no_such_name  # noqa: B018


@pytest.mark.parametrize("old", sorted(o for o, n in SHIMS.items() if _is_package(n)))
def test_a_moved_package_keeps_a_shim_for_each_of_its_modules(old):
    """``import volary.learning.sousvide.net`` still works after the package moved: every module
    of the new package has a shim at the old path that re-exports it (the study's command
    module ``cli`` came from ``volary.cli`` and has its shim there)."""
    new = SHIMS[old]
    missing = sorted(
        f"{old}.{m}"
        for m in _package_modules(new) - {"cli"}
        if SHIMS.get(f"{old}.{m}") != f"{new}.{m}"
    )
    assert _package_modules(new) and missing == [], f"no shim re-exporting {new}: {missing}"


def test_import_has_no_heavy_side_effects():
    code = (
        "import sys, volary; heavy = {'warp', 'gsplat', 'casadi', 'dask', 'matplotlib', "
        "'typer', 'torch'} & set(sys.modules); print(sorted(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _loop_steps(path: Path) -> list[str]:
    """``X.step(...)`` calls inside a for/while loop whose receiver is a simulator or a world
    (its name ends in ``sim``, ``simulator`` or ``world``)."""
    found = []
    for loop in ast.walk(ast.parse(path.read_text())):
        if not isinstance(loop, ast.For | ast.While | ast.AsyncFor):
            continue
        for node in ast.walk(loop):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr != "step":
                continue
            receiver = ast.unparse(node.func.value).split(".")[-1].lower()
            if receiver.endswith(("sim", "simulator", "world")):
                found.append(f"{path.relative_to(SRC)}:{node.lineno} {ast.unparse(node.func)}")
    return found


def test_only_volary_sim_steps_a_simulator_in_a_loop():
    """Issue 16: every closed loop goes through volary.sim.rollout; nothing outside volary.sim
    steps a Simulator (or a World) in a loop of its own."""
    outside = [p for p in FILES if _subpackage(p) != "sim"]
    loops = sorted({hit for p in outside for hit in _loop_steps(p)})
    assert loops == [], "closed loops outside volary.sim:\n" + "\n".join(loops)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in SRC.rglob("*.py")}
TYPE_CHECKING = ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The modules an import statement names: ``a.b`` for ``import a.b`` and ``from a.b import
    c``, and ``a.b.c`` too when that is a module (relative imports resolved)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        pkg = module.split(".") if is_package else module.split(".")[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)]
        base = ".".join([*pkg, base] if base else pkg)
    return [base, *(f"{base}.{a.name}" for a in node.names)]


def import_graph() -> nx.DiGraph:
    """Modules under src/volary (a package is its ``__init__``), an edge a -> b for every
    import of b anywhere in a (functions included: they are where circles used to hide); an
    edge made only by ``if TYPE_CHECKING:`` imports is marked ``type_only``. Importing a
    package's child imports the package too at runtime, but that is not an edge: the child
    does not depend on what the package's ``__init__`` holds."""
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for name, path in MODULES.items():
        typed: set[int] = set()  # ids of the imports inside ``if TYPE_CHECKING:`` blocks
        for node in ast.walk(ast.parse(path.read_text())):  # breadth first: an If before its body
            if isinstance(node, ast.If) and ast.unparse(node.test) in TYPE_CHECKING:
                typed.update(id(n) for stmt in node.body for n in ast.walk(stmt))
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(node, name, path.name == "__init__.py"):
                if target not in MODULES or target == name:
                    continue
                type_only = id(node) in typed and graph.get_edge_data(name, target, {}).get(
                    "type_only", True
                )
                graph.add_edge(name, target, type_only=type_only)
    return graph


def test_no_import_circle():
    """Issue "A core and its studies": no import circle among volary's modules, counting
    imports inside functions and ``if TYPE_CHECKING:`` imports (a circle of annotations is a
    circle of design too: the lower module names the class that uses it; it takes a protocol
    instead, as ``volary.sim.fused.LoopHost``). The failure lists each circle's modules."""
    graph = import_graph()
    circles = [set(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    found = sorted(sorted(c) for c in circles)
    assert found == [], f"{len(found)} import circle(s):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


_COMPILED = ("jit", "njit", "kernel")  # numba and Warp decorators: a compiled kernel


def _compiled(fn: ast.FunctionDef) -> bool:
    """A compiled kernel, or a factory that builds one (its nested kernels are its body)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names = [ast.unparse(d) for d in node.decorator_list]
            if any(k in name for name in names for k in _COMPILED):
                return True
    return False


def test_no_function_over_100_lines_outside_compiled_kernels():
    """Issue "A core and its studies": no function over 100 lines (signature to last line)
    outside numba/Warp kernels and the Warp factories that build them. The failure lists each
    function with its length."""
    long = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > 100 and not _compiled(node):
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}: {n} lines")
    assert long == [], "\n".join(long)
