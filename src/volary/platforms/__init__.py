"""Layer 2: airframe layouts, the platform catalogue and kinodynamic indicators.

Importing reads no file: the catalogue TOML files are parsed once, on the first lookup.
"""

from volary.platforms.catalogue import entry, get, names, params, table1
from volary.platforms.indicators import Indicators, indicators
from volary.platforms.layouts import LAYOUTS, layout
from volary.platforms.schema import CATEGORIES, load_file

__all__ = [
    "LAYOUTS",
    "layout",
    "get",
    "names",
    "table1",
    "params",
    "entry",
    "Indicators",
    "indicators",
    "CATEGORIES",
    "load_file",
]
