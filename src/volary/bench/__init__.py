"""Layer 5 benchmark machinery the studies share: tracking acceptance over the catalogue, the
rules of a race through gates (``gate_race``), one-thread runs (``threads``), the navigation
benchmark (``nav``). The AlphaPilot race is the study :mod:`volary.studies.alphapilot`.

Submodules are imported on use (``volary.bench.gate_race``, ``volary.bench.tracking``) so
importing volary stays light.
"""
