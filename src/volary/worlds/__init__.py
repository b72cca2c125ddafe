"""Layer 2: scenes, obstacles, gates, scenario generators, collision queries, scene file I/O."""

from volary.worlds.collision import CollisionMonitor, Events, collision_events
from volary.worlds.custom import scene_from_file
from volary.worlds.fields import HeightField, VoxelGrid
from volary.worlds.gates import GateTracker
from volary.worlds.grid import find_path, is_solvable, occupancy_grid
from volary.worlds.io import MeshScene, PointCloud, export_scene, load_mesh, load_points
from volary.worlds.primitives import Box, Cylinder, Gate, Mesh, Plane, Scene, SceneSpec, Sphere
from volary.worlds.scenarios import (
    FIXED_SEEDS,
    SCENARIOS,
    fixed_configurations,
    fixed_seeds,
    make_scenario,
)
from volary.worlds.sdf import SceneDistance, scene_sdf
from volary.worlds.tracks import (
    alphapilot_2019,
    alphapilot_2019_courses,
    boundary_predictor_course,
    perturb_course,
    random_gate_course,
    unperturbed,
)

__all__ = [
    "Box",
    "CollisionMonitor",
    "Cylinder",
    "Events",
    "FIXED_SEEDS",
    "Gate",
    "GateTracker",
    "HeightField",
    "Mesh",
    "MeshScene",
    "Plane",
    "PointCloud",
    "SCENARIOS",
    "Scene",
    "SceneDistance",
    "SceneSpec",
    "Sphere",
    "VoxelGrid",
    "alphapilot_2019",
    "alphapilot_2019_courses",
    "boundary_predictor_course",
    "collision_events",
    "export_scene",
    "find_path",
    "fixed_configurations",
    "fixed_seeds",
    "is_solvable",
    "load_mesh",
    "load_points",
    "make_scenario",
    "occupancy_grid",
    "perturb_course",
    "random_gate_course",
    "scene_from_file",
    "scene_sdf",
    "unperturbed",
]
