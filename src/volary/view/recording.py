"""What the viewer shows: a :class:`Recording` of one scene, the vehicles' tracks through it and
the sensor frames taken on the way, as plain numpy arrays (world frame, z up, SI units).

Recordings come from a FLYINGTRUST benchmark trial
(:func:`volary.studies.flyingtrust.recording.trial_recording`: the stored ~5 Hz track, the
scene regenerated from its scenario type and configuration), an AlphaPilot race
(:func:`race_recording`), any rollout of a World (:func:`episode_recording`: RL or SOUS VIDE
evaluation episodes, tracking runs), and save to / load from ``.npz`` without pickles.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from volary.deprecation import forward_names
from volary.errors import ConfigError, FileFormatError, VolaryError
from volary.inputs import LIMITS, Finite, NonNegative, Strict, Text, Vec3, regular_file, validated
from volary.worlds import SceneSpec

NPZ_VERSION = 1
MOVED_NAMES = {"trial_recording": "volary.studies.flyingtrust.recording"}
__getattr__ = forward_names(__name__, MOVED_NAMES)


@dataclass(frozen=True)
class Track:
    """One vehicle's flight: times (K,) s, positions (K, 3) m, attitudes (K, 4) [w, x, y, z]
    (None: level), the radius of its collision sphere (m) and, when known, its planned path."""

    name: str
    t: np.ndarray
    pos: np.ndarray
    quat: np.ndarray | None = None
    radius: float = 0.15
    planned: np.ndarray | None = None  # (P, 3) m, the reference or planned path
    note: str = ""  # e.g. the trial's outcome

    def __post_init__(self) -> None:
        t, pos = np.asarray(self.t, float), np.asarray(self.pos, float)
        if t.ndim != 1 or len(t) < 1 or pos.shape != (len(t), 3):
            raise ConfigError(
                f"track {self.name!r}: expected t (K,) and pos (K, 3) with K >= 1, "
                f"got {t.shape} and {pos.shape}"
            )
        if np.any(np.diff(t) < 0):
            raise ConfigError(f"track {self.name!r}: t: expected non-decreasing times")
        object.__setattr__(self, "t", t)
        object.__setattr__(self, "pos", pos)
        if self.quat is not None:
            q = np.asarray(self.quat, float)
            if q.shape != (len(t), 4):
                raise ConfigError(
                    f"track {self.name!r}: quat: expected ({len(t)}, 4), got {q.shape}"
                )
            object.__setattr__(self, "quat", q)

    def pose_at(self, time: float) -> tuple[np.ndarray, np.ndarray]:
        """Position (3,) and attitude (4,) at ``time`` s: linear in position, the nearest
        earlier sample's attitude; held before the first and after the last sample."""
        pos = np.array([np.interp(time, self.t, self.pos[:, i]) for i in range(3)])
        if self.quat is None:
            return pos, np.array([1.0, 0.0, 0.0, 0.0])
        k = int(np.clip(np.searchsorted(self.t, time, side="right") - 1, 0, len(self.t) - 1))
        return pos, self.quat[k]


@dataclass(frozen=True)
class Frame:
    """A sensor frame at time ``t`` s: an image (H, W, 3) uint8 or points (N, 3) m (world)."""

    t: float
    name: str
    image: np.ndarray | None = None
    points: np.ndarray | None = None


@dataclass
class Recording:
    """A scene, tracks and frames; ``spec`` (not saved) lets the viewer render sensor frames
    from any pose; ``scene_ref`` ("scenario:config" or "alphapilot") rebuilds it on load."""

    title: str
    vertices: np.ndarray  # (V, 3) m, obstacles
    triangles: np.ndarray  # (T, 3) int
    bounds: tuple[tuple[float, ...], tuple[float, ...]]
    tracks: list[Track]
    gate_vertices: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    gate_triangles: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))
    start: tuple[float, ...] | None = None
    goal: tuple[float, ...] | None = None
    frames: list[Frame] = field(default_factory=list)
    scene_ref: str = ""
    spec: SceneSpec | None = None

    @property
    def duration(self) -> float:
        """Last sample time over all tracks (s)."""
        return max((float(tr.t[-1]) for tr in self.tracks), default=0.0)

    def frames_at(self, time: float) -> dict[str, Frame]:
        """Per frame name, the latest frame taken at or before ``time``."""
        out: dict[str, Frame] = {}
        for f in sorted(self.frames, key=lambda f: f.t):
            if f.t <= time + 1e-9 or f.name not in out:
                out[f.name] = f
        return out

    # ---- files --------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the recording as ``.npz`` (arrays and a JSON header; no pickles)."""
        path = Path(path)
        if path.suffix != ".npz":
            raise ConfigError(f"path: expected a .npz file, got {str(path)!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {
            "vertices": self.vertices,
            "triangles": self.triangles,
            "gate_vertices": self.gate_vertices,
            "gate_triangles": self.gate_triangles,
        }
        head: dict[str, Any] = {
            "version": NPZ_VERSION,
            "title": self.title,
            "bounds": [list(self.bounds[0]), list(self.bounds[1])],
            "start": self.start,
            "goal": self.goal,
            "scene_ref": self.scene_ref,
            "tracks": [],
            "frames": [],
        }
        for i, tr in enumerate(self.tracks):
            head["tracks"].append({"name": tr.name, "radius": tr.radius, "note": tr.note})
            arrays[f"track{i}_t"], arrays[f"track{i}_pos"] = tr.t, tr.pos
            if tr.quat is not None:
                arrays[f"track{i}_quat"] = tr.quat
            if tr.planned is not None:
                arrays[f"track{i}_planned"] = tr.planned
        for i, f in enumerate(self.frames):
            head["frames"].append({"t": f.t, "name": f.name})
            if f.image is not None:
                arrays[f"frame{i}_image"] = f.image
            if f.points is not None:
                arrays[f"frame{i}_points"] = f.points
        arrays["header"] = np.frombuffer(json.dumps(head).encode(), np.uint8)
        np.savez_compressed(path, **arrays)  # type: ignore[arg-type]
        return path


class _TrackHead(Strict):
    name: Text
    radius: NonNegative
    note: Text = ""


class _FrameHead(Strict):
    t: Finite
    name: Text


class _Header(Strict):
    """The JSON header :meth:`Recording.save` writes."""

    version: Literal[1]
    title: Text
    bounds: tuple[Vec3, Vec3]
    start: Vec3 | None
    goal: Vec3 | None
    scene_ref: Annotated[str, Field(strict=True, pattern=r"^(|alphapilot|[a-z0-9_]+:\d{1,9})$")]
    tracks: list[_TrackHead]
    frames: list[_FrameHead]


_NAME = re.compile(r"(header|vertices|triangles|gate_vertices|gate_triangles|"
                   r"track\d+_(t|pos|quat|planned)|frame\d+_(image|points))")  # fmt: skip
_HEADER_BYTES = int(LIMITS["text_file"].hi)


def load_recording(path: str | Path) -> Recording:
    """Read a recording written by :meth:`Recording.save` (``np.load(allow_pickle=False)``).
    The file is checked before any array is read: a regular file, a ``.npz`` of known array
    names whose declared shapes and dtypes are those :meth:`Recording.save` writes and whose
    bytes are within ``LIMITS["array_bytes"]``, a JSON header of the declared fields; then the
    numbers (finite, in range, triangles naming existing vertices). ``FileFormatError`` in one
    line naming the file and the array or field otherwise."""
    p = regular_file(path, "recording")
    src = str(p)
    if not zipfile.is_zipfile(p):  # else numpy reads it as a pickle and suggests loading one
        raise FileFormatError(f"{src}: not a volary recording (.npz): not a zip archive")
    try:
        with np.load(p, allow_pickle=False) as z:
            shapes = _declared(z, src)
            head = _header(z, shapes, src)
            _check_shapes(shapes, head, src)
            a = {k: z[k] for k in z.files if k != "header"}
    except FileFormatError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise FileFormatError(f"{src}: not a volary recording (.npz): {_one(e)}") from None
    _check_values(a, src)
    try:
        return _recording(head, a)
    except VolaryError as e:
        raise FileFormatError(f"{src}: {_one(e)}") from None


def _one(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return (lines[0] if lines else type(e).__name__)[:200]


def _declared(z: Any, src: str) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Every array's (shape, dtype) from its ``.npy`` header (nothing else is read); unknown
    names, object or structured dtypes and more bytes than ``LIMITS["array_bytes"]`` refused."""
    out, total = {}, 0
    for name in z.files:
        if not _NAME.fullmatch(name):
            raise FileFormatError(f"{src}: unknown array {name!r} (not written by Recording.save)")
        with z.zip.open(f"{name}.npy") as fp:
            version = np.lib.format.read_magic(fp)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(fp)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(fp)
            else:
                raise FileFormatError(f"{src}: {name}: unsupported .npy version {version}")
        if dtype.kind not in "biuf" or dtype.fields is not None or dtype.subdtype is not None:
            raise FileFormatError(f"{src}: {name}: expected numbers, got dtype {dtype}")
        out[name] = (tuple(shape), dtype)
        total += math.prod(shape) * dtype.itemsize
    if total > LIMITS["array_bytes"].hi:
        raise FileFormatError(
            f"{src}: the arrays take {total} bytes; expected at most "
            f"{int(LIMITS['array_bytes'].hi)} bytes ({LIMITS['array_bytes'].quantity})"
        )
    return out


def _header(z: Any, shapes: dict[str, Any], src: str) -> _Header:
    if "header" not in shapes:
        raise FileFormatError(f"{src}: no array 'header' (not written by Recording.save)")
    shape, dtype = shapes["header"]
    if dtype != np.uint8 or len(shape) != 1 or shape[0] > _HEADER_BYTES:
        raise FileFormatError(
            f"{src}: header: expected JSON text of at most {_HEADER_BYTES} bytes (uint8), "
            f"got {dtype} of shape {shape}"
        )
    try:
        doc = json.loads(bytes(z["header"]).decode())
    except (ValueError, RecursionError) as e:
        raise FileFormatError(f"{src}: header: expected JSON text ({_one(e)})") from None
    return validated(_Header, doc, f"{src}: header")


def _want(head: _Header, shapes: dict[str, Any]) -> dict[str, tuple[tuple[int | None, ...], str]]:
    """The arrays a header calls for: shape (None: any length) and dtype kinds."""
    v = (None, 3)
    want: dict[str, tuple[tuple[int | None, ...], str]] = {
        "vertices": (v, "iuf"), "triangles": (v, "iu"),
        "gate_vertices": (v, "iuf"), "gate_triangles": (v, "iu"),
    }  # fmt: skip
    for i in range(len(head.tracks)):
        t_shape = shapes.get(f"track{i}_t", ((0,), None))[0]
        k = t_shape[0] if len(t_shape) == 1 else 0
        want |= {f"track{i}_t": ((k,), "iuf"), f"track{i}_pos": ((k, 3), "iuf"),
                 f"track{i}_quat": ((k, 4), "iuf"), f"track{i}_planned": (v, "iuf")}  # fmt: skip
    for i in range(len(head.frames)):
        want |= {f"frame{i}_image": ((None, None, 3), "u"), f"frame{i}_points": (v, "iuf")}
    return want


_OPTIONAL = re.compile(r"track\d+_(quat|planned)|frame\d+_(image|points)")


def _check_shapes(shapes: dict[str, Any], head: _Header, src: str) -> None:
    want = _want(head, shapes)
    for name, (shape, dtype) in shapes.items():
        if name == "header":
            continue
        if name not in want:
            raise FileFormatError(
                f"{src}: array {name!r} belongs to no track or frame of the header"
            )
        w, kinds = want[name]
        fits = len(shape) == len(w) and all(
            a is None or a == b for a, b in zip(w, shape, strict=True)
        )
        if not fits or dtype.kind not in kinds or (kinds == "u" and dtype != np.uint8):
            shown = tuple("N" if d is None else d for d in w)
            raise FileFormatError(
                f"{src}: {name}: expected shape {shown} of {'uint8' if kinds == 'u' else 'numbers'}"
                f", got {shape} of {dtype}"
            )
    for name in want:
        if name not in shapes and not _OPTIONAL.fullmatch(name):
            raise FileFormatError(f"{src}: no array {name!r}")
    for i in range(len(head.tracks)):
        if shapes[f"track{i}_t"][0][0] < 1:
            raise FileFormatError(f"{src}: track{i}_t: expected at least one sample")


def _check_values(a: dict[str, np.ndarray], src: str) -> None:
    """Finite numbers, world coordinates in range, triangles naming existing vertices, times
    non-decreasing."""
    lim = LIMITS["coordinate"]
    for name, x in a.items():
        if x.dtype.kind == "f" and not np.isfinite(x).all():
            raise FileFormatError(f"{src}: {name}: expected finite numbers")
        if name.endswith(("vertices", "_pos", "_planned", "_points")) and x.size:
            if np.abs(x).max() > lim.hi:
                raise FileFormatError(f"{src}: {name}: expected {lim.describe()}")
        if name.endswith("_t") and np.any(np.diff(x) < 0):
            raise FileFormatError(f"{src}: {name}: expected non-decreasing times")
    for tri, ver in (("triangles", "vertices"), ("gate_triangles", "gate_vertices")):
        t = a[tri]
        if t.size and (t.min() < 0 or t.max() >= len(a[ver])):
            raise FileFormatError(
                f"{src}: {tri}: expected vertex indices in [0, {len(a[ver])}), "
                f"got {t.min()} to {t.max()}"
            )


def _recording(head: _Header, a: dict[str, np.ndarray]) -> Recording:
    tracks = [
        Track(
            h.name,
            a[f"track{i}_t"],
            a[f"track{i}_pos"],
            a.get(f"track{i}_quat"),
            float(h.radius),
            a.get(f"track{i}_planned"),
            h.note,
        )  # fmt: skip
        for i, h in enumerate(head.tracks)
    ]
    frames = [
        Frame(float(h.t), h.name, a.get(f"frame{i}_image"), a.get(f"frame{i}_points"))
        for i, h in enumerate(head.frames)
    ]
    ref = head.scene_ref
    return Recording(
        title=head.title,
        vertices=a["vertices"],
        triangles=a["triangles"].astype(np.int64),
        bounds=(tuple(head.bounds[0]), tuple(head.bounds[1])),
        tracks=tracks,
        gate_vertices=a["gate_vertices"],
        gate_triangles=a["gate_triangles"].astype(np.int64),
        start=_opt_tuple(head.start),
        goal=_opt_tuple(head.goal),
        frames=frames,
        scene_ref=ref,
        spec=scene_from_ref(ref) if ref else None,
    )


def _opt_tuple(v: Any) -> tuple[float, ...] | None:
    return None if v is None else tuple(float(x) for x in v)


# ---- scenes -----------------------------------------------------------------------------------
def scene_from_ref(ref: str) -> SceneSpec:
    """``"forest:3"`` -> that scenario configuration; ``"alphapilot"`` -> the nominal course."""
    from volary.worlds import make_scenario

    if ref == "alphapilot":
        from volary.worlds.tracks import alphapilot_2019

        return alphapilot_2019()
    name, _, config = ref.partition(":")
    if not config.lstrip("-").isdigit():
        raise ConfigError(f"scene_ref: expected 'scenario:config' or 'alphapilot', got {ref!r}")
    return make_scenario(name, int(config))


def recording_from_spec(
    spec: SceneSpec, tracks: Sequence[Track], title: str, scene_ref: str = ""
) -> Recording:
    """A recording of ``tracks`` in ``spec``'s scene (obstacles and gate frames tessellated)."""
    from volary.worlds.io import scene_mesh

    obstacles = scene_mesh(SceneSpec(spec.name, spec.bounds_min, spec.bounds_max, spec.obstacles))
    gates = scene_mesh(SceneSpec(spec.name, spec.bounds_min, spec.bounds_max, (), spec.gates))
    return Recording(
        title=title,
        vertices=obstacles.vertices,
        triangles=obstacles.triangles,
        bounds=(tuple(spec.bounds_min), tuple(spec.bounds_max)),
        tracks=list(tracks),
        gate_vertices=gates.vertices,
        gate_triangles=gates.triangles,
        start=tuple(spec.start),
        goal=tuple(spec.goal) if not spec.gates else None,
        scene_ref=scene_ref,
        spec=spec,
    )


# ---- sources ----------------------------------------------------------------------------------
def episode_recording(
    spec: SceneSpec,
    episode: Any,
    *,
    names: Sequence[str] | None = None,
    radius: float | Sequence[float] = 0.15,
    dt: float,
    title: str = "episode",
    scene_ref: str = "",
) -> Recording:
    """A recording of a :func:`volary.sim.rollout` episode recorded with ``pos`` (and ``quat``);
    ``dt``: the World's control period (s), to time its ``record_steps``."""
    recs = episode.records
    if "pos" not in recs:
        raise ConfigError("episode: expected a rollout recorded with record=('pos', 'quat')")
    pos = recs["pos"].detach().cpu().double().numpy()  # (K, B, 3)
    quat = recs["quat"].detach().cpu().double().numpy() if "quat" in recs else None
    t = np.asarray(episode.record_steps, float) * dt
    b = pos.shape[1]
    names = list(names) if names is not None else [f"vehicle {i}" for i in range(b)]
    radii = [float(radius)] * b if isinstance(radius, int | float) else [float(r) for r in radius]
    if len(names) != b or len(radii) != b:
        raise ConfigError(f"names/radius: expected {b} entries (one per vehicle)")
    tracks = [
        Track(names[i], t, pos[:, i], None if quat is None else quat[:, i], radii[i])
        for i in range(b)
    ]
    return recording_from_spec(spec, tracks, title, scene_ref)


def race_recording(result: Any, courses: Sequence[SceneSpec] | None = None) -> Recording:
    """The first course of a :class:`volary.bench.gate_race.RaceResult` with its flown path."""
    from volary.worlds.tracks import alphapilot_2019

    spec = alphapilot_2019() if courses is None else courses[0]
    path = result.path[:, 0].detach().cpu().double().numpy()
    t = result.path_time.detach().cpu().double().numpy()
    keep = np.isfinite(path).all(axis=1)
    outcome = "finished" if bool(result.finished[0]) else "did not finish"
    time = float(result.time[0])
    note = f"{outcome}" + ("" if math.isnan(time) else f" in {time:.2f} s")
    from volary.bench.gate_race import RACE_PLATFORM
    from volary.platforms import get

    radius = float(get(RACE_PLATFORM).radius)
    tr = Track("racer", t[keep], path[keep], None, radius, None, note)
    ref = "alphapilot" if courses is None else ""
    return recording_from_spec(spec, [tr], f"{result.courses[0]}: {note}", ref)
