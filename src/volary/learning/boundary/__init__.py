"""BoundaryPredictor (paper 002): predict the speed through the next gate and the time to reach
it from a three-gate window, imitating cost-minimized trajectory sampling. See
``volary/learning/DESIGN.md``."""
