"""The browser viewer: a :class:`Viewer` serves a :class:`~volary.view.recording.Recording`
(or a live World) over viser's web client, on localhost unless told otherwise.

Scene: obstacles grey, gate frames orange, start green, goal blue; each vehicle a translucent
sphere of its collider radius with its body axes (x red, y green, z blue), its flown path in
its colour and its planned/reference path thin and grey. A time slider (and a play toggle)
moves the vehicles; the sensor panel shows the recorded frames at that time, or a depth frame
rendered from the vehicle's pose when the recording has its scene (``depth_camera``).
"""

from __future__ import annotations

import math
import threading
import time as _time
from typing import Any

import numpy as np

from volary.errors import ConfigError
from volary.view.recording import Recording, Track

TRACK_COLORS = ((230, 0, 230), (0, 150, 255), (255, 120, 0), (0, 180, 90), (150, 90, 255))
OBSTACLE_COLOR = (150, 150, 150)
GATE_COLOR = (255, 140, 0)
PLAYBACK_HZ = 20.0


def _viser() -> Any:
    try:
        import viser
    except ImportError as e:  # pragma: no cover - viser is a dependency of volary[view]/dev
        raise ConfigError(
            "the viewer needs viser: pip install 'volary[view]' (or viser>=1.0)"
        ) from e
    return viser


def heading_quat(track: Track, time: float) -> np.ndarray:
    """A level attitude [w, x, y, z] facing the track's direction of travel at ``time`` (for
    tracks stored without attitude)."""
    dt = 0.25
    a, _ = track.pose_at(time - dt)
    b, _ = track.pose_at(time + dt)
    d = b - a
    yaw = math.atan2(d[1], d[0]) if np.hypot(d[0], d[1]) > 1e-6 else 0.0
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def depth_colors(depth: np.ndarray, max_range: float) -> np.ndarray:
    """(H, W) m -> (H, W, 3) uint8: turbo colour map from 0 to ``max_range``; grey where NaN."""
    from matplotlib import colormaps

    d = np.asarray(depth, float)
    rgb = colormaps["turbo"](np.clip(np.nan_to_num(d, nan=0.0) / max_range, 0.0, 1.0))[..., :3]
    rgb[~np.isfinite(d)] = 0.5
    return (rgb * 255).astype(np.uint8)


class Viewer:
    """A viser server showing one recording at a time (``show``) or a live World (``live``).

    >>> v = Viewer(port=8080); v.show(episode_recording(spec, episode, dt=dt)); v.wait()
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 8080, *, verbose: bool = False):
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port < 65536:
            raise ConfigError(f"port: expected an int in [0, 65535], got {port!r}")
        viser = _viser()
        self.server = viser.ViserServer(host=host, port=port, verbose=verbose)
        self.server.scene.set_up_direction("+z")
        self.recording: Recording | None = None
        self.time = 0.0
        self.vehicle_pose: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        """Per track name, the (position, attitude) drawn now (what the slider last set)."""
        self._nodes: dict[str, Any] = {}
        self._gui: list[Any] = []
        self._camera: Any = None
        self._image: Any = None  # the sensor panel, when the recording has frames or a scene
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._player: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The page to open in a browser."""
        return f"http://{self.server.get_host()}:{self.server.get_port()}/"

    def wait(self) -> None:  # pragma: no cover - interactive
        """Serve until Ctrl-C."""
        self.server.sleep_forever()

    def close(self) -> None:
        """Stop playback and the server."""
        self._stop.set()
        self.server.stop()

    # ---- recordings ---------------------------------------------------------------------------
    def show(self, rec: Recording, *, depth_camera: str | None = "d455") -> None:
        """Draw ``rec`` (replacing what was shown) with a time slider at t = 0."""
        if not isinstance(rec, Recording):
            raise ConfigError(f"rec: expected a Recording, got {type(rec).__name__}")
        self._clear()
        self.recording = rec
        self._camera = _DepthRender(rec, depth_camera) if rec.spec and depth_camera else None
        self._draw_scene(rec)
        for i, tr in enumerate(rec.tracks):
            self._draw_track(i, tr)
        self._add_gui(rec)
        self._look_at_scene(rec)
        self.set_time(0.0)

    def set_time(self, t: float) -> None:
        """Move every vehicle (and the sensor panel) to time ``t`` s of the recording."""
        rec = self.recording
        if rec is None:
            raise ConfigError("set_time: show a recording first")
        with self._lock:
            self.time = float(min(max(t, 0.0), rec.duration))
            for tr in rec.tracks:
                pos, quat = tr.pose_at(self.time)
                if tr.quat is None:
                    quat = heading_quat(tr, self.time)
                self.vehicle_pose[tr.name] = (pos, quat)
                node = self._nodes[f"vehicle:{tr.name}"]
                node.position, node.wxyz = pos, quat
            self._update_frames(rec)

    def _clear(self) -> None:
        self._stop.set()
        if self._player is not None:
            self._player.join(timeout=2.0)
        self._stop.clear()
        self.server.scene.reset()
        for g in self._gui:
            g.remove()
        self._nodes.clear()
        self._gui.clear()
        self.vehicle_pose.clear()

    def _draw_scene(self, rec: Recording) -> None:
        scene = self.server.scene
        meshes = (("obstacles", rec.vertices, rec.triangles, OBSTACLE_COLOR),
                  ("gates", rec.gate_vertices, rec.gate_triangles, GATE_COLOR))  # fmt: skip
        for name, verts, tris, color in meshes:
            if len(tris):
                scene.add_mesh_simple(f"/scene/{name}", verts.astype(np.float32),
                                      tris.astype(np.uint32), color=color)  # fmt: skip
        lo, hi = np.asarray(rec.bounds[0], float), np.asarray(rec.bounds[1], float)
        size = hi - lo
        scene.add_grid(
            "/scene/ground",
            width=float(size[0]),
            height=float(size[1]),
            position=((lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, 0.0),
            cell_size=1.0,
            section_size=10.0,
        )
        for name, p, c in (("start", rec.start, (0, 200, 0)), ("goal", rec.goal, (0, 90, 255))):
            if p is not None:
                scene.add_icosphere(
                    f"/scene/{name}", radius=0.3, color=c, position=tuple(p), opacity=0.6
                )

    def _draw_track(self, i: int, tr: Track) -> None:
        scene, color = self.server.scene, TRACK_COLORS[i % len(TRACK_COLORS)]
        if len(tr.t) >= 2:
            scene.add_spline_catmull_rom(
                f"/tracks/{i}/flown", tr.pos, color=color, thickness=0.06, thickness_units="world"
            )
        if tr.planned is not None and len(tr.planned) >= 2:
            seg = np.stack([tr.planned[:-1], tr.planned[1:]], axis=1)
            scene.add_line_segments(
                f"/tracks/{i}/planned",
                seg,
                colors=(90, 90, 110),
                thickness=1.5,
                thickness_units="screen",
            )
        body = scene.add_frame(
            f"/vehicles/{i}", axes_length=2 * tr.radius, axes_radius=0.1 * tr.radius
        )
        scene.add_icosphere(f"/vehicles/{i}/collider", radius=tr.radius, color=color, opacity=0.45)
        scene.add_label(f"/vehicles/{i}/name", tr.name, position=(0.0, 0.0, 2 * tr.radius))
        self._nodes[f"vehicle:{tr.name}"] = body

    def _add_gui(self, rec: Recording) -> None:
        gui = self.server.gui
        notes = "".join(f"\n- **{t.name}**: {t.note}" for t in rec.tracks if t.note)
        self._gui.append(gui.add_markdown(f"**{rec.title}**{notes}"))
        end = max(rec.duration, 1e-3)
        step = max(round(end / 500, 3), 0.001)
        slider = gui.add_slider("time [s]", 0.0, end, step, 0.0)
        slider.on_update(lambda _: self.set_time(float(slider.value)))
        play = gui.add_checkbox("play", False)
        play.on_update(lambda _: self._play(slider) if play.value else self._stop.set())
        self._gui += [slider, play]
        self._image = None
        if rec.frames or self._camera is not None:
            blank = np.full((48, 64, 3), 128, np.uint8)
            self._image = gui.add_image(blank, label="sensor")
            self._gui.append(self._image)

    def _play(self, slider: Any) -> None:
        self._stop.clear()

        def run() -> None:
            t0, start = _time.perf_counter(), float(slider.value)
            while not self._stop.is_set():
                t = start + (_time.perf_counter() - t0)
                if self.recording is None or t > self.recording.duration:
                    break
                slider.value = round(t / slider.step) * slider.step
                _time.sleep(1.0 / PLAYBACK_HZ)

        self._player = threading.Thread(target=run, daemon=True)
        self._player.start()

    def _update_frames(self, rec: Recording) -> None:
        if self._image is None:
            return
        frames = rec.frames_at(self.time)
        images = [f for f in frames.values() if f.image is not None]
        for f in frames.values():
            if f.points is not None:
                self.server.scene.add_point_cloud(
                    f"/frames/{f.name}",
                    f.points.astype(np.float32),
                    colors=(0, 200, 200),
                    point_size=0.05,
                )
        if images:
            self._image.image = images[0].image
        elif self._camera is not None and rec.tracks:
            pos, quat = self.vehicle_pose[rec.tracks[0].name]
            self._image.image = self._camera.render(pos, quat)

    def _look_at_scene(self, rec: Recording) -> None:
        lo, hi = np.asarray(rec.bounds[0], float), np.asarray(rec.bounds[1], float)
        centre = (lo + hi) / 2
        extent = float(np.linalg.norm(hi[:2] - lo[:2]))
        cam = self.server.initial_camera
        cam.look_at = tuple(centre)
        cam.position = (centre[0], lo[1] - 0.35 * extent, 0.6 * extent)

    # ---- live ---------------------------------------------------------------------------------
    def live(self, world: Any, *, env: int = 0, trail: int = 2000) -> _Live:
        """Show env ``env`` of a :class:`volary.sim.World`; call the returned handle's
        ``update()`` as the World steps (it redraws at most ``PLAYBACK_HZ`` times a second)."""
        from volary.view.recording import recording_from_spec

        if world.specs is None:
            raise ConfigError("world: the live viewer needs a World built from SceneSpecs")
        if not 0 <= env < world.n:
            raise ConfigError(f"env: expected 0 <= env < {world.n}, got {env}")
        spec = world.specs[env]
        vehicles = list(range(env * world.m, (env + 1) * world.m))
        state = world.state
        radius = world.sim.params.radius.detach().cpu().double().numpy()
        tracks = [
            Track(
                f"vehicle {b}",
                np.zeros(1),
                state.pos[b : b + 1].detach().cpu().double().numpy(),
                state.quat[b : b + 1].detach().cpu().double().numpy(),
                float(radius[b]),
            )
            for b in vehicles
        ]
        self.show(recording_from_spec(spec, tracks, f"live: env {env}"), depth_camera=None)
        return _Live(self, world, vehicles, trail)


class _Live:
    """Handle of a live view: ``update()`` after World steps."""

    def __init__(self, viewer: Viewer, world: Any, vehicles: list[int], trail: int) -> None:
        self.viewer, self.world, self.vehicles, self.trail = viewer, world, vehicles, trail
        self.paths: dict[int, list[np.ndarray]] = {b: [] for b in vehicles}
        self._last = -math.inf

    def update(self) -> bool:
        """Redraw the vehicles and their trails if 1/PLAYBACK_HZ s passed; True if it did."""
        now = _time.perf_counter()
        if now - self._last < 1.0 / PLAYBACK_HZ:
            return False
        self._last = now
        st = self.world.state
        pos = st.pos.detach().cpu().double().numpy()
        quat = st.quat.detach().cpu().double().numpy()
        v = self.viewer
        for i, b in enumerate(self.vehicles):
            name = f"vehicle {b}"
            node = v._nodes[f"vehicle:{name}"]
            node.position, node.wxyz = pos[b], quat[b]
            v.vehicle_pose[name] = (pos[b], quat[b])
            path = self.paths[b]
            path.append(pos[b])
            del path[: max(0, len(path) - self.trail)]
            if len(path) >= 2:
                color = TRACK_COLORS[i % len(TRACK_COLORS)]
                v.server.scene.add_spline_catmull_rom(
                    f"/tracks/{i}/flown", np.array(path), color=color, thickness=0.06
                )
        return True


class _DepthRender:
    """A depth camera on the recording's scene, rendering single frames from a body pose."""

    def __init__(self, rec: Recording, preset: str) -> None:
        if rec.spec is None:
            raise ConfigError("depth_camera: the recording has no scene to render")
        self.spec, self.preset = rec.spec, preset
        self._cam: Any = None

    def render(self, pos: np.ndarray, quat: np.ndarray) -> np.ndarray:
        import torch

        from volary.sensors import DepthCamera
        from volary.sensors.raycast.registry import make_raycaster

        if self._cam is None:
            caster = make_raycaster([self.spec], 1, dtype=torch.float64)
            self._cam = DepthCamera(self.preset, caster)
        r = self._cam(torch.tensor(pos[None]), torch.tensor(quat[None]))
        d = torch.where(r.valid[0], r.depth[0], float("nan")).numpy()
        return depth_colors(d, float(self._cam.config.max_range))
