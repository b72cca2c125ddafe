"""Warp kernels of the Warp caster (imported only when a WarpCaster is built: it imports warp)."""

# mypy: ignore-errors
# (Warp's kernel language is Python syntax with its own types; mypy cannot check it.)

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})  # forward-only: faster build


@wp.kernel
def cast_rays(
    mesh_of_env: wp.array(dtype=wp.uint64),  # (N,) Warp mesh id of each env
    id_offset: wp.array(dtype=wp.int32),  # (N,) start of the env's mesh in face_ids
    face_ids: wp.array(dtype=wp.int64),  # (sum T,) object id of every face of every mesh
    origins: wp.array(dtype=wp.vec3),  # (N * R,) m
    directions: wp.array(dtype=wp.vec3),  # (N * R,)
    rays_per_env: wp.int32,
    max_range: wp.float32,  # m
    distance: wp.array(dtype=wp.float32),  # (N * R,) out, inf on a miss
    object_id: wp.array(dtype=wp.int64),  # (N * R,) out, -1 on a miss
    normal: wp.array(dtype=wp.vec3),  # (N * R,) out, facing the origin, 0 on a miss
):
    tid = wp.tid()
    env = tid // rays_per_env
    o = origins[tid]
    d = directions[tid]
    distance[tid] = wp.inf
    object_id[tid] = wp.int64(-1)
    normal[tid] = wp.vec3(0.0, 0.0, 0.0)
    if mesh_of_env[env] == wp.uint64(0) or not (wp.isfinite(o) and wp.isfinite(d)):
        return
    q = wp.mesh_query_ray(mesh_of_env[env], o, d, max_range)
    if q.result:
        n = wp.normalize(q.normal)
        if wp.dot(n, d) > 0.0:
            n = -n
        distance[tid] = q.t
        object_id[tid] = face_ids[id_offset[env] + q.face]
        normal[tid] = n
