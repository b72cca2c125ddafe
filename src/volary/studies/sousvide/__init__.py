"""The SOUS VIDE study (paper 000): expert data from the MPC flying through a splat scene
(Algorithm 1: ``scene``, ``generate``), SV-Net with rapid motor adaptation (Sec. V: ``net``,
``policy``), its training (``train``), its evaluation (Sec. VI: ``evaluate``) and the ``volary
sousvide`` commands (``cli``); see README.md and DESIGN.md beside this file.

``history`` (eq. 3) and ``dataset`` (the HDF5 layout) are the contract between the data
generator, the trainer and the deployed policy. Submodules are imported on use.
"""

__all__: list[str] = []  # the package hands on no names: import its modules
