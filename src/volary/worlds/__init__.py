"""Layer 2: scenes, obstacles, gates, scenario generators, collision queries, scene file I/O."""

from volary.worlds.primitives import Box, Cylinder, Gate, Plane, Scene, SceneSpec, Sphere

__all__ = ["Box", "Cylinder", "Gate", "Plane", "Scene", "SceneSpec", "Sphere"]
