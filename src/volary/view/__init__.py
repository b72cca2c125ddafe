"""Browser viewer (layer 5): recordings of trials, races and rollouts, and live Worlds, drawn by
viser in a web page (``volary view``; DESIGN.md in this folder)."""

from volary.view.recording import (
    Frame,
    Recording,
    Track,
    episode_recording,
    load_recording,
    race_recording,
    recording_from_spec,
    trial_recording,
)
from volary.view.server import Viewer

__all__ = [
    "Frame",
    "Recording",
    "Track",
    "Viewer",
    "episode_recording",
    "load_recording",
    "race_recording",
    "recording_from_spec",
    "trial_recording",
]
