#!/usr/bin/env bash
# The GPU checks and figures of volary in one go (issue: GPU throughput), for a machine with a
# CUDA GPU and a python3 that has torch (CUDA build) and warp-lang:
#
#   bash benchmarks/gpu/suite.sh OUT_DIR [STAGE ...]     # stages: tests physics depth loop
#
# tests: the gpu-marked tests; physics: benchmarks/physics.py (the Warp kernel at 1 and 4 M envs,
# the eager step at 1 M beside it); depth: benchmarks/sensors.py (64x64 depth, Warp and torch
# casters); loop: benchmarks/env_loop.py (the hover env with a policy in the loop; eager beside
# it at 1 M envs). JSON and logs go under OUT_DIR.
set -u
out=${1:?usage: suite.sh OUT_DIR [STAGE ...]}
shift
stages=${*:-tests physics depth loop}
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
  timeout 240 $py -m pytest -q -m gpu -o addopts="-ra" -p no:cacheprovider \
    tests/test_warp_step.py tests/test_raycast.py tests/test_env_sync.py 2>&1 \
    | tee "$out/gpu-tests.log" | tail -15
fi
if has physics; then
  step "physics"
  timeout 400 $py benchmarks/physics.py --device cuda --out "$out/warp" --case-timeout 100 \
    --impls volary-warp,volary-warp-x8,volary-warp-x32 --ns 1048576,4194304 2>&1 | tail -12
  timeout 120 $py benchmarks/physics.py --device cuda --out "$out/eager" --case-timeout 100 \
    --impls volary-eager --ns 1048576 2>&1 | tail -6
fi
if has depth; then
  step "depth 64x64"
  timeout 200 $py benchmarks/sensors.py --device cuda --backends warp torch --cameras 64x64 \
    --envs 2048 8192 --out "$out/sensors-cuda.json" 2>&1 | tee "$out/sensors-cuda.log" | tail -8
fi
if has loop; then
  step "env loop"
  timeout 200 $py benchmarks/env_loop.py --device cuda --ns 1048576 --variants eager,warp \
    --out "$out/env_loop-cuda.json" 2>&1 | tail -8
  timeout 200 $py benchmarks/env_loop.py --device cuda --ns 4194304 --variants warp \
    --out "$out/env_loop-cuda-4m.json" 2>&1 | tail -8
fi
step "done"
