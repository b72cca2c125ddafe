"""Layer 5 learning: what the studies share: checkpoints, checked HDF5 reading and the PPO
trainer (the RL study's encoders, layers and export are in ``volary.studies.rl``).

SOUS VIDE and BoundaryPredictor are studies: ``volary.studies.sousvide`` and
``volary.studies.boundary`` (``volary.learning.sousvide`` and ``volary.learning.boundary`` are
their deprecated old paths). See ``DESIGN.md`` beside this file.
"""
