"""Layer 5 learning: what the studies share: checkpoints, checked HDF5 reading, network layers,
the deep collision encoder, trainers, export.

SOUS VIDE and BoundaryPredictor are studies: ``volary.studies.sousvide`` and
``volary.studies.boundary`` (``volary.learning.sousvide`` and ``volary.learning.boundary`` are
their deprecated old paths). See ``DESIGN.md`` beside this file.
"""
