"""Layer 2: airframe layouts, the platform catalogue and kinodynamic indicators."""

from volary.platforms.layouts import LAYOUTS, layout

__all__ = ["LAYOUTS", "layout"]
