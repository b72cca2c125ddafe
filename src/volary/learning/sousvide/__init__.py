"""SOUS VIDE (paper 000): expert data from the MPC flying through a splat scene (Algorithm 1),
SV-Net with rapid motor adaptation (Sec. V), its training and its evaluation (Sec. VI).

``history`` (eq. 3) and ``dataset`` (the HDF5 layout) are the contract between the data
generator, the trainer and the deployed policy. See ``DESIGN.md`` beside this file.
"""
