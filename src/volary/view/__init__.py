"""Browser viewer (layer 5): recordings of trials, races and rollouts, and live Worlds, drawn by
viser in a web page (``volary view``; DESIGN.md in this folder)."""

from volary.deprecation import forward_names
from volary.view.recording import (
    Frame,
    Recording,
    Track,
    episode_recording,
    load_recording,
    race_recording,
    recording_from_spec,
)
from volary.view.server import Viewer

MOVED_NAMES = {"trial_recording": "volary.studies.flyingtrust.recording"}
__getattr__ = forward_names(__name__, MOVED_NAMES)

__all__ = [
    "Frame",
    "Recording",
    "Track",
    "Viewer",
    "episode_recording",
    "load_recording",
    "race_recording",
    "recording_from_spec",
]
