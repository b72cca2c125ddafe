"""Build the ROS 2 message packages that have no pip wheel: ``tf2_msgs`` and ``mavros_msgs``.

What: ``python -m volary.ros2.msgs build [--prefix DIR]`` turns the ``.msg`` files under
``definitions/<pkg>/msg/`` (``tf2_msgs/TFMessage``, ``mavros_msgs/AttitudeTarget``) into Python
packages that rclpy can publish and subscribe, so ``from tf2_msgs.msg import TFMessage`` and
``from mavros_msgs.msg import AttitudeTarget`` work in the interpreter that ran the build.

Why: the ROS 2 pip wheels (``ros-jazzy-rclpy``, ``ros-jazzy-geometry-msgs``...) cover the common
interfaces but not tf2_msgs (/tf, /tf_static) nor mavros_msgs (mavros' attitude setpoints). They
do bring the rosidl generators, so this module runs the same steps as CMake's
``rosidl_generate_interfaces`` (msg -> idl, type hash, C structs, the C, introspection-C and
Fast-DDS-C type supports, the Python bindings) by calling the generators' Python functions, and
compiles the output with the host gcc/g++: no system ROS, CMake, colcon or ament, no network.

Wire compatibility: the type names (``tf2_msgs/msg/TFMessage``...) and field lists are those of
upstream, so the RIHS01 type hash that DDS discovery compares is upstream's too, and a real ROS 2
install (rviz, tf2, mavros) talks to these types.

Layout: ``<prefix>/<pkg>/`` holds the generated Python modules, the extension module
``<pkg>_s__rosidl_typesupport_c`` and the package's five shared libraries, which find each other
through an RPATH of ``$ORIGIN`` and the ROS wheels' libraries through an RPATH to ``<env>/lib``.
The default prefix is the interpreter's site-packages, so nothing needs to be put on sys.path;
with ``--prefix DIR`` add DIR to PYTHONPATH. The type-support dispatcher loads the Fast-DDS and
introspection libraries by bare name (dlopen), so they are linked in as dependencies of the
dispatcher library and are already loaded when it asks: no LD_LIBRARY_PATH entry is needed.

Idempotent: each package directory carries a stamp with a fingerprint of its inputs (the .msg
files, this module, the Python ABI, the version of every installed ``ros-*`` wheel); a build whose
stamp matches returns at once, without importing rosidl. A lock file in the prefix serializes
concurrent builds; a package folder that has no stamp (say, a real tf2_msgs) is never replaced
unless ``force``. Each build imports its messages and round-trips them through the RMW serializer
in a fresh interpreter before installing them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import importlib.metadata
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from volary.errors import VolaryError

DEFINITIONS = Path(__file__).resolve().with_name("definitions")
STAMP_NAME = ".volary_ros2_msgs.json"
LOCK_NAME = ".volary_ros2_msgs.lock"
WORK_PREFIX = ".volary_ros2_msgs-build-"

# The generator wheels' Python modules, in the order the pipeline uses them.
GENERATOR_MODULES = (
    "rosidl_adapter",
    "rosidl_parser",
    "rosidl_pycommon",
    "rosidl_generator_type_description",
    "rosidl_generator_c",
    "rosidl_typesupport_introspection_c",
    "rosidl_typesupport_fastrtps_c",
    "rosidl_typesupport_c",
    "rosidl_generator_py",
)
# Runtime libraries the generated code links against, all in <env>/lib.
RUNTIME_LIBRARIES = (
    "librcutils.so",
    "librosidl_runtime_c.so",
    "librosidl_typesupport_c.so",
    "librosidl_typesupport_introspection_c.so",
    "librosidl_typesupport_fastrtps_c.so",
    "librosidl_typesupport_fastrtps_cpp.so",
    "libfastcdr.so",
)
# The C type supports the dispatcher (rosidl_typesupport_c) chooses between at run time.
TYPESUPPORTS = ("rosidl_typesupport_fastrtps_c", "rosidl_typesupport_introspection_c")
# What rclpy users install; the rosidl generator wheels come with them as dependencies.
TOP_WHEELS = ("rclpy", "std-msgs", "geometry-msgs", "rmw-fastrtps-cpp")


class MsgBuildError(VolaryError, RuntimeError):
    """The message packages could not be built; the message says what is missing or failed."""


@dataclass(frozen=True)
class RosEnv:
    """Where the ROS 2 wheels of the running interpreter put their files, and the compilers."""

    root: Path  # the environment's data prefix (sys.prefix in a venv): lib/, include/, share/
    site_packages: Path
    python_include: Path
    numpy_include: Path
    ext_suffix: str
    cc: str
    cxx: str

    @property
    def lib(self) -> Path:
        return self.root / "lib"

    @property
    def include(self) -> Path:
        return self.root / "include"

    @property
    def share(self) -> Path:
        return self.root / "share"


@dataclass(frozen=True)
class MsgPackage:
    """One interface package to build: its name and its .msg files."""

    name: str
    msg_files: tuple[Path, ...]

    @property
    def source_dir(self) -> Path:
        return DEFINITIONS / self.name


@dataclass(frozen=True)
class Library:
    """One shared object to compile and link into the package directory."""

    name: str
    sources: tuple[Path, ...]
    defines: tuple[str, ...] = ()
    links: tuple[str, ...] = ()  # file names, searched in the package directory and <env>/lib
    preload: tuple[str, ...] = ()  # linked even though no symbol of theirs is used
    uses_python: bool = False  # Python's C API symbols stay undefined until the interpreter

    @property
    def is_cxx(self) -> bool:
        return any(src.suffix == ".cpp" for src in self.sources)


@dataclass(frozen=True)
class BuildResult:
    """What ``build`` did for one package."""

    package: str
    path: Path
    rebuilt: bool
    seconds: float


# ---------------------------------------------------------------------------------------------
# Public API


def default_prefix() -> Path:
    """The interpreter's site-packages: packages installed there import with no path setup."""
    return Path(sysconfig.get_paths()["platlib"])


def packages() -> list[MsgPackage]:
    """The interface packages under ``definitions/``, each with its sorted .msg files."""
    found = []
    for pkg_dir in sorted(p for p in DEFINITIONS.iterdir() if p.is_dir()):
        msgs = tuple(sorted((pkg_dir / "msg").glob("*.msg")))
        if msgs:
            found.append(MsgPackage(pkg_dir.name, msgs))
    return found


def build(
    prefix: Path | None = None,
    *,
    force: bool = False,
    jobs: int | None = None,
    verbose: bool = False,
    log: Callable[[str], None] = print,
) -> list[BuildResult]:
    """Generate, compile and install every package under ``definitions/`` into ``prefix``.

    A package whose stamp matches its inputs is left alone unless ``force``. Raises
    MsgBuildError with an actionable message when a wheel, a compiler or a header is missing.
    """
    prefix = (prefix or default_prefix()).resolve()
    results, todo = _survey(prefix, force)
    if todo:
        _ensure_writable(prefix)
        with _locked(prefix):
            results, todo = _survey(prefix, force)  # another process may have built meanwhile
            for pkg, _ in todo:
                _check_not_foreign(prefix / pkg.name, force)
            env = find_ros_env() if todo else None
            for pkg, fingerprint in todo:
                assert env is not None
                workers = jobs or os.cpu_count() or 1
                results.append(_build_package(env, prefix, pkg, fingerprint, workers, verbose))
    for result in results:
        log(_describe(result))
    return results


def _survey(prefix: Path, force: bool) -> tuple[list[BuildResult], list[tuple[MsgPackage, str]]]:
    """Split the packages into those up to date in ``prefix`` and those to (re)build."""
    environment = _environment_fingerprint()
    done, todo = [], []
    for pkg in packages():
        fingerprint = _fingerprint(pkg, environment)
        current = None if force else _up_to_date(prefix, pkg, fingerprint)
        if current is None:
            todo.append((pkg, fingerprint))
        else:
            done.append(current)
    return done, todo


def clean(prefix: Path | None = None, *, log: Callable[[str], None] = print) -> list[Path]:
    """Remove the packages this module installed in ``prefix`` (and leftover build folders)."""
    prefix = (prefix or default_prefix()).resolve()
    removed = [
        prefix / pkg.name for pkg in packages() if (prefix / pkg.name / STAMP_NAME).is_file()
    ]
    removed += [p for p in prefix.glob(WORK_PREFIX + "*") if p.is_dir()]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
        log(f"removed {path}")
    (prefix / LOCK_NAME).unlink(missing_ok=True)
    return removed


def find_ros_env() -> RosEnv:
    """Locate the ROS 2 wheels, headers and compilers, or say exactly what to install."""
    _require_modules()
    root = Path(sysconfig.get_paths()["data"])
    missing = [name for name in RUNTIME_LIBRARIES if not (root / "lib" / name).is_file()]
    if missing:
        raise MsgBuildError(f"{missing} are not in {root / 'lib'}: {pip_hint()}")
    return RosEnv(
        root=root,
        site_packages=default_prefix(),
        python_include=_python_include(),
        numpy_include=_numpy_include(),
        ext_suffix=sysconfig.get_config_var("EXT_SUFFIX") or ".so",
        cc=_compiler("CC", "gcc", "gcc"),
        cxx=_compiler("CXX", "g++", "g++"),
    )


# ---------------------------------------------------------------------------------------------
# Environment checks


def pip_hint() -> str:
    """The pip command that installs what this module needs, for the ROS distro present."""
    wheels = " ".join(f"ros-{_distro()}-{name}" for name in TOP_WHEELS)
    return f"install the ROS 2 wheels: `{sys.executable} -m pip install {wheels}`"


def _distro() -> str:
    """The ROS distro of the installed ``ros-<distro>-rclpy`` wheel; jazzy when there is none."""
    for name, _ in _ros_wheels():
        parts = name.split("-")
        if len(parts) == 3 and parts[2] == "rclpy":
            return parts[1]
    return "jazzy"


def _require_modules() -> None:
    missing = []
    for module in (*GENERATOR_MODULES, "rclpy"):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise MsgBuildError(f"cannot import {', '.join(missing)}; {pip_hint()}")


def _python_include() -> Path:
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file():
        raise MsgBuildError(
            f"Python.h not found in {include}: install the Python development headers "
            f"(Debian/Ubuntu: `apt-get install python3-dev` for the system Python)"
        )
    return include


def _numpy_include() -> Path:
    try:
        import numpy
    except ImportError as exc:
        raise MsgBuildError(f"numpy is not installed; {pip_hint()}") from exc
    return Path(numpy.get_include())


def _compiler(env_var: str, default: str, apt_package: str) -> str:
    name = os.environ.get(env_var) or default
    found = shutil.which(name)
    if found is None:
        raise MsgBuildError(
            f"C/C++ compiler {name!r} not found: `apt-get install {apt_package}` "
            f"(both gcc and g++ are needed: the Fast-DDS type support is C++)"
        )
    return found


def _ensure_writable(prefix: Path) -> None:
    try:
        prefix.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MsgBuildError(f"cannot create the prefix {prefix}: {exc}") from exc
    if not os.access(prefix, os.W_OK):
        raise MsgBuildError(
            f"{prefix} is not writable; pass --prefix DIR and add DIR to PYTHONPATH"
        )


def _check_not_foreign(target: Path, force: bool) -> None:
    if target.exists() and not (target / STAMP_NAME).is_file() and not force:
        raise MsgBuildError(
            f"{target} exists and was not built by volary.ros2.msgs (a real ROS package?); "
            "remove it, or pass --force to replace it"
        )


@contextlib.contextmanager
def _locked(prefix: Path) -> Iterator[None]:
    with open(prefix / LOCK_NAME, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ---------------------------------------------------------------------------------------------
# Fingerprint and stamp


def _environment_fingerprint() -> str:
    """This module, the Python ABI and every installed ROS wheel's version (no rosidl import)."""
    items = [
        hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
        sys.version,
        sysconfig.get_config_var("EXT_SUFFIX") or "",
        sysconfig.get_paths()["data"],
        *sorted(f"{name}=={version}" for name, version in _ros_wheels()),
    ]
    return hashlib.sha256("\n".join(items).encode()).hexdigest()


def _ros_wheels() -> Iterator[tuple[str, str]]:
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("ros-"):
            yield name, dist.version


def _fingerprint(pkg: MsgPackage, environment: str) -> str:
    digest = hashlib.sha256(f"{environment}\n{pkg.name}\n".encode())
    for msg in pkg.msg_files:
        digest.update(msg.name.encode() + b"\0" + msg.read_bytes() + b"\0")
    return digest.hexdigest()


def _up_to_date(prefix: Path, pkg: MsgPackage, fingerprint: str) -> BuildResult | None:
    target = prefix / pkg.name
    try:
        stamp = json.loads((target / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None
    if stamp.get("fingerprint") != fingerprint:
        return None
    if not all((target / name).is_file() for name in stamp.get("files", [])):
        return None
    return BuildResult(pkg.name, target, rebuilt=False, seconds=0.0)


def _write_stamp(stage: Path, fingerprint: str) -> None:
    files = sorted(str(p.relative_to(stage)) for p in stage.rglob("*") if p.is_file())
    stamp = {"fingerprint": fingerprint, "built_by": __name__, "files": files}
    (stage / STAMP_NAME).write_text(json.dumps(stamp, indent=1) + "\n")


def _describe(result: BuildResult) -> str:
    if result.rebuilt:
        return f"{result.package}: built in {result.seconds:.1f} s -> {result.path}"
    return f"{result.package}: up to date ({result.path})"


# ---------------------------------------------------------------------------------------------
# One package: generate, compile, install


def _build_package(
    env: RosEnv, prefix: Path, pkg: MsgPackage, fingerprint: str, jobs: int, verbose: bool
) -> BuildResult:
    start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix=WORK_PREFIX, dir=prefix))
    try:
        direct = _dependencies(pkg)
        _check_dependencies(env, direct)
        with _quiet(not verbose):
            deps = _generate(env, pkg, direct, work)
        _check_dependencies(env, deps)
        stage = work / "stage" / pkg.name
        _stage_python(work, pkg, stage)
        _compile_and_link(env, _plan(env, pkg, deps, work), work, stage, jobs, verbose)
        _smoke_test(stage, pkg)
        _write_stamp(stage, fingerprint)
        _install(stage, prefix / pkg.name, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return BuildResult(pkg.name, prefix / pkg.name, True, time.perf_counter() - start)


def _dependencies(pkg: MsgPackage) -> tuple[str, ...]:
    """The interface packages the .msg files name directly (e.g. geometry_msgs, std_msgs)."""
    from rosidl_adapter.parser import parse_message_string

    deps: set[str] = set()
    for msg in pkg.msg_files:
        spec = parse_message_string(pkg.name, msg.stem, msg.read_text(encoding="utf-8"))
        deps.update(f.type.pkg_name for f in spec.fields if f.type.pkg_name)
    deps.discard(pkg.name)
    return tuple(sorted(deps))


def _check_dependencies(env: RosEnv, deps: Sequence[str]) -> None:
    for dep in deps:
        needed = [env.share / dep / "msg", env.include / dep]
        needed += [env.lib / f"lib{dep}__{kind}.so" for kind in _LIBRARY_KINDS]
        absent = [str(p) for p in needed if not p.exists()]
        if absent:
            wheel = f"ros-{_distro()}-{dep.replace('_', '-')}"
            raise MsgBuildError(f"{dep} is not installed (no {absent[0]}): `pip install {wheel}`")


_LIBRARY_KINDS = (
    "rosidl_generator_c",
    "rosidl_typesupport_c",
    "rosidl_typesupport_introspection_c",
    "rosidl_typesupport_fastrtps_c",
    "rosidl_generator_py",
)


@contextlib.contextmanager
def _quiet(enabled: bool) -> Iterator[None]:
    """Swallow the generators' chatter ("Reading input file ...") unless verbose."""
    if not enabled:
        yield
        return
    with contextlib.redirect_stdout(io.StringIO()):
        yield


# ---------------------------------------------------------------------------------------------
# Code generation (the steps of CMake's rosidl_generate_interfaces, called directly)


def _generate(env: RosEnv, pkg: MsgPackage, deps: Sequence[str], work: Path) -> tuple[str, ...]:
    """Run the generators into ``work``; return every package the messages refer to, nested
    ones included (the generated C code calls into all of them)."""
    idl_root = _msg_to_idl(pkg, work / "idl" / pkg.name)
    idl_tuples = [f"{idl_root}:msg/{msg.stem}.idl" for msg in pkg.msg_files]
    descriptions = _type_descriptions(env, pkg, deps, idl_tuples, work / "type_description")
    common = {
        "package_name": pkg.name,
        "idl_tuples": idl_tuples,
        "target_dependencies": [],
        "type_description_tuples": descriptions,
        "ros_interface_files": [str(msg) for msg in pkg.msg_files],
    }
    _run_generators(env, pkg, common, work)
    return _referenced_packages(pkg, [Path(t.split(":", 1)[1]) for t in descriptions])


def _referenced_packages(pkg: MsgPackage, description_files: Sequence[Path]) -> tuple[str, ...]:
    found: set[str] = set()
    for path in description_files:
        description = json.loads(path.read_text())["type_description_msg"]
        found.update(
            t["type_name"].split("/")[0] for t in description["referenced_type_descriptions"]
        )
    found.discard(pkg.name)
    return tuple(sorted(found))


def _msg_to_idl(pkg: MsgPackage, out_root: Path) -> Path:
    from rosidl_adapter.msg import convert_msg_to_idl

    (out_root / "msg").mkdir(parents=True, exist_ok=True)
    for msg in pkg.msg_files:
        rel = Path("msg") / msg.name
        convert_msg_to_idl(pkg.source_dir, pkg.name, rel, out_root / "msg")
    return out_root


def _type_descriptions(
    env: RosEnv, pkg: MsgPackage, deps: Sequence[str], idl_tuples: list[str], out: Path
) -> list[str]:
    """Write the RIHS01 type-description JSON of each message; return generator tuples."""
    from rosidl_generator_type_description import generate_type_hash

    args = {
        "package_name": pkg.name,
        "output_dir": str(out / pkg.name),
        "idl_tuples": idl_tuples,
        "include_paths": [f"{dep}:{env.share / dep}" for dep in deps],
    }
    generated = [Path(p) for p in generate_type_hash(_arguments_file(args, out))]
    return [f"msg/{json_file.stem}.idl:{json_file}" for json_file in generated]


def _run_generators(env: RosEnv, pkg: MsgPackage, common: dict[str, Any], work: Path) -> None:
    import rosidl_generator_c
    import rosidl_generator_py
    import rosidl_typesupport_c
    import rosidl_typesupport_introspection_c
    from rosidl_typesupport_fastrtps_c import generate_typesupport_fastrtps_c as fastrtps_c

    steps: dict[str, Callable[[str], object]] = {
        "rosidl_generator_c": rosidl_generator_c.generate_c,
        "rosidl_typesupport_introspection_c": rosidl_typesupport_introspection_c.generate_c,
        "rosidl_typesupport_fastrtps_c": fastrtps_c,
        "rosidl_typesupport_c": lambda a: rosidl_typesupport_c.generate_c(a, list(TYPESUPPORTS)),
        "rosidl_generator_py": lambda a: rosidl_generator_py.generate_py(a, _PY_TYPESUPPORTS),
    }
    assert tuple(steps) == _GENERATORS
    for generator, generate in steps.items():
        out = work / generator / pkg.name
        args = {**common, "output_dir": str(out), "template_dir": str(_templates(env, generator))}
        generate(_arguments_file(args, work))
        _write_visibility_header(env, pkg, generator, out)


_GENERATORS = (
    "rosidl_generator_c",
    "rosidl_typesupport_introspection_c",
    "rosidl_typesupport_fastrtps_c",
    "rosidl_typesupport_c",
    "rosidl_generator_py",
)
# rclpy imports only <pkg>_s__rosidl_typesupport_c; the dispatcher picks Fast-DDS or introspection.
_PY_TYPESUPPORTS = ["rosidl_typesupport_c"]


def _templates(env: RosEnv, generator: str) -> Path:
    path = env.share / generator / "resource"
    if not path.is_dir():
        raise MsgBuildError(f"the templates of {generator} are missing ({path}); {pip_hint()}")
    return path


def _write_visibility_header(env: RosEnv, pkg: MsgPackage, generator: str, out: Path) -> None:
    """Expand ``<generator>__visibility_control.h.in`` as CMake's configure_file would."""
    template = _templates(env, generator) / f"{generator}__visibility_control.h.in"
    if not template.is_file():
        return
    text = template.read_text().replace("@PROJECT_NAME@", pkg.name)
    text = text.replace("@PROJECT_NAME_UPPER@", pkg.name.upper())
    (out / "msg").mkdir(parents=True, exist_ok=True)
    (out / "msg" / template.name.removesuffix(".in")).write_text(text)


def _arguments_file(args: dict[str, Any], folder: Path) -> str:
    """Write a generator arguments file, as CMake's rosidl_write_generator_arguments does."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(suffix=".json", prefix="args-", dir=folder)
    with os.fdopen(fd, "w") as handle:
        json.dump(args, handle)
    return name


def _stage_python(work: Path, pkg: MsgPackage, stage: Path) -> None:
    """Copy the generated Python modules into the package folder being assembled."""
    py_out = work / "rosidl_generator_py" / pkg.name
    (stage / "msg").mkdir(parents=True)
    (stage / "__init__.py").write_text(
        f'"""ROS 2 interface package {pkg.name}, built by {__name__}."""\n'
    )
    for module in sorted((py_out / "msg").glob("*.py")):
        shutil.copy2(module, stage / "msg" / module.name)


# ---------------------------------------------------------------------------------------------
# Compilation


def _plan(env: RosEnv, pkg: MsgPackage, deps: Sequence[str], work: Path) -> list[Library]:
    """The package's shared objects in link order, mirroring the upstream CMake targets."""
    name = pkg.name

    def own(kind: str) -> str:
        return f"lib{name}__{kind}.so"

    def of_deps(kind: str) -> tuple[str, ...]:
        return tuple(f"lib{dep}__{kind}.so" for dep in deps)

    def sources(generator: str, pattern: str) -> tuple[Path, ...]:
        return tuple(sorted((work / generator / name).glob(pattern)))

    base = ("librosidl_runtime_c.so", "librcutils.so")
    return [
        Library(
            own("rosidl_generator_c"),
            sources("rosidl_generator_c", "msg/detail/*.c"),
            (f"ROSIDL_GENERATOR_C_BUILDING_DLL_{name}",),
            (*of_deps("rosidl_generator_c"), *base),
        ),
        Library(
            own("rosidl_typesupport_introspection_c"),
            sources("rosidl_typesupport_introspection_c", "msg/detail/*.c"),
            (f"ROSIDL_TYPESUPPORT_INTROSPECTION_C_BUILDING_DLL_{name}",),
            (
                own("rosidl_generator_c"),
                *of_deps("rosidl_typesupport_introspection_c"),
                *of_deps("rosidl_generator_c"),
                "librosidl_typesupport_introspection_c.so",
                *base,
            ),
        ),
        Library(
            own("rosidl_typesupport_fastrtps_c"),
            sources("rosidl_typesupport_fastrtps_c", "msg/detail/*.cpp"),
            (f"ROSIDL_TYPESUPPORT_FASTRTPS_C_BUILDING_DLL_{name}",),
            (
                own("rosidl_generator_c"),
                *of_deps("rosidl_typesupport_fastrtps_c"),
                *of_deps("rosidl_generator_c"),
                "librosidl_typesupport_fastrtps_c.so",
                "librosidl_typesupport_fastrtps_cpp.so",
                "libfastcdr.so",
                *base,
            ),
        ),
        Library(
            own("rosidl_typesupport_c"),
            sources("rosidl_typesupport_c", "msg/*.cpp"),
            (f"ROSIDL_GENERATOR_C_BUILDING_DLL_{name}",),  # sic, as upstream's CMake
            (own("rosidl_generator_c"), "librosidl_typesupport_c.so", *base),
            preload=tuple(own(ts) for ts in TYPESUPPORTS),
        ),
        Library(
            own("rosidl_generator_py"),
            sources("rosidl_generator_py", "msg/*_s.c"),
            links=(
                own("rosidl_generator_c"),
                own("rosidl_typesupport_c"),
                *of_deps("rosidl_generator_py"),
                *of_deps("rosidl_generator_c"),
                *base,
            ),
            uses_python=True,
        ),
        Library(
            f"{name}_s__rosidl_typesupport_c{env.ext_suffix}",
            sources("rosidl_generator_py", f"_{name}_s.ep.rosidl_typesupport_c.c"),
            links=(
                own("rosidl_generator_py"),
                own("rosidl_typesupport_c"),
                own("rosidl_generator_c"),
                "librosidl_typesupport_c.so",
                *base,
            ),
            uses_python=True,
        ),
    ]


def _compile_and_link(
    env: RosEnv, libraries: list[Library], work: Path, stage: Path, jobs: int, verbose: bool
) -> None:
    empty = [lib.name for lib in libraries if not lib.sources]
    if empty:
        raise MsgBuildError(f"the generators produced no sources for {empty} (see {work})")
    includes = _include_flags(env, work)
    tasks = [
        (lib, src, work / "obj" / lib.name / f"{src.name}.o")
        for lib in libraries
        for src in lib.sources
    ]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(lambda t: _compile(env, t[0], t[1], t[2], includes, verbose), tasks))
    for lib in libraries:
        objects = [obj for owner, _, obj in tasks if owner is lib]
        _link(env, lib, objects, stage, verbose)


def _include_flags(env: RosEnv, work: Path) -> list[str]:
    # Each generator wrote <work>/<generator>/<pkg>/msg/..., included as "<pkg>/msg/...".
    generated = [work / generator for generator in _GENERATORS]
    ros = [env.include] + sorted(
        p for p in env.include.iterdir() if p.is_dir() and not p.name.startswith("python")
    )
    return [f"-I{d}" for d in [*generated, *ros, env.python_include, env.numpy_include]]


def _compile(
    env: RosEnv, lib: Library, src: Path, obj: Path, includes: list[str], verbose: bool
) -> None:
    obj.parent.mkdir(parents=True, exist_ok=True)
    if src.suffix == ".cpp":
        cmd = [env.cxx, "-std=c++17"]
    else:
        cmd = [env.cc, "-std=gnu11"]
    cmd += ["-c", "-fPIC", "-O2", "-g0", *([] if verbose else ["-w"])]
    cmd += [f"-D{d}" for d in lib.defines] + includes + [str(src), "-o", str(obj)]
    _run(cmd, f"compiling {src.name} for {lib.name}", verbose)


def _link(env: RosEnv, lib: Library, objects: list[Path], stage: Path, verbose: bool) -> None:
    cmd = [env.cxx if lib.is_cxx else env.cc, "-shared", "-o", str(stage / lib.name)]
    cmd += [str(o) for o in objects]
    cmd += [f"-L{stage}", f"-L{env.lib}", f"-Wl,-rpath-link,{env.lib}", f"-Wl,-soname,{lib.name}"]
    # DT_RPATH (not RUNPATH): our own libraries come from $ORIGIN even when LD_LIBRARY_PATH
    # holds another build of them, and it also covers the wheels' libraries that ours load.
    cmd += ["-Wl,--disable-new-dtags", f"-Wl,-rpath,$ORIGIN:{env.lib}"]
    if not lib.uses_python:
        cmd.append("-Wl,-z,defs")  # a missing library is a link error here, not at import
    cmd += [f"-l:{name}" for name in lib.links]
    if lib.preload:
        cmd += ["-Wl,--push-state,--no-as-needed", *[f"-l:{n}" for n in lib.preload]]
        cmd.append("-Wl,--pop-state")
    _run(cmd, f"linking {lib.name}", verbose)


def _run(cmd: list[str], what: str, verbose: bool) -> None:
    if verbose:
        print(" ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if verbose and (proc.stdout or proc.stderr):
        print(proc.stdout + proc.stderr, end="", flush=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip()[-4000:]
        raise MsgBuildError(f"{what} failed ({cmd[0]} exit {proc.returncode}):\n{tail}")


# ---------------------------------------------------------------------------------------------
# Install and check


def _install(stage: Path, target: Path, work: Path) -> None:
    """Swap the staged package in with two renames on the same file system."""
    if target.exists() or target.is_symlink():
        target.rename(work / "replaced")
    stage.rename(target)


def _smoke_test(stage: Path, pkg: MsgPackage) -> None:
    """In a fresh interpreter, import every message and round-trip a default instance through
    the RMW's serializer: that loads the extension module, the dispatcher and (by dlopen) the
    Fast-DDS type support, so a missing library fails the build, not the user's first publish."""
    checks = "".join(
        f"from {pkg.name}.msg import {m.stem} as T\n"
        "assert deserialize_message(serialize_message(T()), T) == T(), T\n"
        for m in pkg.msg_files
    )
    code = (
        f"import {pkg.name}\nprint({pkg.name}.__file__)\n"
        "from rclpy.serialization import deserialize_message, serialize_message\n" + checks
    )
    path = [str(stage.parent), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=stage.parent
    )
    if proc.returncode != 0:
        raise MsgBuildError(f"the built {pkg.name} does not work:\n{proc.stderr.strip()[-3000:]}")
    loaded_from = Path(proc.stdout.strip().splitlines()[0]).resolve()
    if not loaded_from.is_relative_to(stage.resolve()):
        raise MsgBuildError(f"the smoke test imported {pkg.name} from {loaded_from}, not {stage}")
