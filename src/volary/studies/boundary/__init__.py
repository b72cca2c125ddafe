"""The BoundaryPredictor study (paper 002): predict the speed through the next gate and the time
to reach it from a three-gate window, imitating cost-minimized trajectory sampling. The Table II
grid (``grid``), Algorithm 1 (``sampling``, ``flight``, ``dataset``), the network (``model``),
its training (``train``), its deployment on courses (``deploy``) and the ``volary bp`` commands
(``cli``); see README.md and DESIGN.md beside this file. Submodules are imported on use.
"""

__all__: list[str] = []  # the package hands on no names: import its modules
