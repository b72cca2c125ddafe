"""Layer 5 benchmarks: tracking acceptance over the catalogue and the AlphaPilot 2019 race.

Submodules are imported on use (``volary.bench.race``, ``volary.bench.tracking``) so importing
volary stays light.
"""
