"""Layer 5 learning: datasets, expert data generation, networks and trainers.

``volary.learning.boundary``: BoundaryPredictor (paper 002): the Table II grid, the
cost-minimizing sampling procedure, the dataset, the network, its training and deployment.
See ``DESIGN.md`` beside this file.
"""
