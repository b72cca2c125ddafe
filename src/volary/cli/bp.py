"""``volary bp``: BoundaryPredictor sampling, training and deployment."""

from __future__ import annotations

import typer

bp_app = typer.Typer(
    no_args_is_help=True, help="BoundaryPredictor: sample the dataset, train, fly courses."
)
