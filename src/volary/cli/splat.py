"""``volary splat`` and ``volary sousvide``: Gaussian-splat scenes and the SOUS VIDE pipeline."""

from __future__ import annotations

import typer

splat_app = typer.Typer(no_args_is_help=True, help="Gaussian-splat scenes: render, convert, synth.")
sousvide_app = typer.Typer(
    no_args_is_help=True, help="SOUS VIDE: expert data, SV-Net training, evaluation."
)
