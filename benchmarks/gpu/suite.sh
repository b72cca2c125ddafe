#!/usr/bin/env bash
# The GPU checks and figures of volary in one go (issue: GPU throughput), for a machine with a
# CUDA GPU and a python3 that has torch (CUDA build) and warp-lang:
#
#   bash benchmarks/gpu/suite.sh OUT_DIR [STAGE ...]     # stages: tests rl loop physics depth
#
# tests: the gpu-marked tests (gsplat's are skipped without it; its first use compiles ~90 s)
# and, beside them, the CUDA variants of the tests that take the `device` fixture; rl: the
# hover-fast recipe trained on the GPU with the Warp step (its own report.json times it);
# loop: benchmarks/env_loop.py (the hover env with a policy in the loop; eager beside it at 1 M
# envs); physics: benchmarks/physics.py (the Warp kernel at 1 M envs, 1/8/32 substeps per
# launch); depth: benchmarks/sensors.py (64x64 depth, Warp and torch casters). JSON and logs go
# under OUT_DIR. PYTHON picks the interpreter (default python3).
set -u
out=${1:?usage: suite.sh OUT_DIR [STAGE ...]}
shift
stages=${*:-tests rl loop physics depth}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore OMP_NUM_THREADS=2
py=${PYTHON:-python3}
step() { echo "== $1 ($(date +%T))"; }
has() { [[ " $stages " == *" $1 "* ]]; }
step "devices"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
$py -c "import torch, warp; warp.config.quiet = True; warp.init(); print('torch', torch.__version__, 'warp', warp.__version__, torch.cuda.get_device_name())"
if has tests; then
  step "gpu tests"
  fixture_tests="tests/test_control.py tests/test_flatness.py tests/test_gates.py
    tests/test_minsnap.py tests/test_platforms.py tests/test_rl_adapters.py tests/test_rl_ppo.py
    tests/test_sousvide_net.py tests/test_worlds_collision.py tests/test_worlds_mesh.py
    tests/test_worlds_sdf.py"
  # shellcheck disable=SC2086
  timeout 240 $py -m pytest -q -k cuda -o addopts="-ra -m 'not slow'" -p no:cacheprovider \
    -n 6 $fixture_tests > "$out/cuda-fixture-tests.log" 2>&1 &
  timeout 240 $py -m pytest -q -m gpu -o addopts="-ra" -p no:cacheprovider -n 5 --dist loadfile \
    tests/test_warp_step.py tests/test_raycast.py tests/test_env_sync.py tests/test_world_cuda.py \
    tests/test_device.py tests/test_splat_cuda.py > "$out/gpu-tests.log" 2>&1
  wait
  tail -12 "$out/gpu-tests.log"; tail -6 "$out/cuda-fixture-tests.log"
fi
if has rl; then
  step "rl: hover-fast on the GPU"
  timeout 90 $py -c 'from volary.cli.main import main; main()' rl train --recipe hover-fast \
    --device cuda --env compile=warp --out "$out/rl-hover-cuda" 2>&1 | tail -6
fi
if has loop; then
  step "env loop"
  timeout 100 $py benchmarks/env_loop.py --device cuda --ns 1048576 --variants eager,warp \
    --out "$out/env_loop-cuda.json" 2>&1 | tail -8
fi
if has physics; then
  step "physics"
  timeout 80 $py benchmarks/physics.py --device cuda --out "$out/warp" --case-timeout 60 \
    --impls volary-warp,volary-warp-x8,volary-warp-x32 --ns 1048576 2>&1 | tail -8
fi
if has depth; then
  step "depth 64x64"
  timeout 60 $py benchmarks/sensors.py --device cuda --backends warp torch --cameras 64x64 \
    --envs 8192 --out "$out/sensors-cuda.json" 2>&1 | tee "$out/sensors-cuda.log" | tail -8
fi
step "done"
