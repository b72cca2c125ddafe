"""Reproduced papers, one study each (layer 6): a study imports layers 0-5 only, never another."""
