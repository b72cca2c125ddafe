"""Layer 5 learning: what the studies share: checkpoints and checked HDF5 reading (the PPO
trainer, encoders, layers and export are the RL study's, ``volary.studies.rl``).

SOUS VIDE and BoundaryPredictor are studies: ``volary.studies.sousvide`` and
``volary.studies.boundary`` (``volary.learning.sousvide`` and ``volary.learning.boundary`` are
their deprecated old paths). See ``DESIGN.md`` beside this file.
"""
